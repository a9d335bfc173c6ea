"""Bring records that never reached the lake back into it, once their cause is fixed.

On the Iceberg lake (the default) the same three sources land through the landing log
(:func:`lake.iceberg_landing.land_rows`): a dead-lettered batch as a source of its own
(``{shard}~late-{first}``: its shard went on without it, so the committer's position for the shard
is already past it), less what the shard's records cover; a quarantine replay and an export chunk
as sources of their own, named by what they replay (:mod:`stream_processor.replay_sources`:
``replay/quarantine-{digest}`` written down per record before it lands, ``export/{export id}``
with a position per file and chunk), so a rerun in any state finds them landed or committed;
the committer appends each once. Recovered
quarantine rows are deleted from the quarantine table after the commit. What follows describes
the plain-Parquet lake.

Three sources, one rule: every record goes through the stream processor's own decoding
(:func:`stream_processor.decoder.decode_records`) and landing writer
(:func:`lake.writer.write_landing`), and every object written is named after what was replayed,
never at random, so replaying the same thing twice writes the same objects again instead of adding
copies. Compaction then removes any ``entry_id`` that also reached the lake another way.

Quarantine (``quarantine/dt=…/*.parquet``)
    Each row holds a whole stream record (``raw``) that the decoder refused. Replay decodes every
    row again: rows that now decode land as ``{table}/dt=…/{slot}-replay-{object}-{digest}.parquet``
    (``digest`` is a hash of the records replayed, so a later replay of other rows of the same
    object cannot overwrite this one); the quarantine object is then rewritten with only the rows
    that still fail, or deleted when none does. A crash in between repeats the same writes.

Dead-letter queue (the stream consumer's SQS on-failure destination)
    Lambda does not put the failed records there, only a description of the failed batch:
    ``DDBStreamBatchInfo`` with the stream ARN, shard id and first and last sequence numbers.
    Replay reads that range from the stream again (``AT_SEQUENCE_NUMBER``), reshapes the records
    as Lambda delivers them, and runs them as one batch through the same processing as the
    handler, so its objects carry exactly the names the failed invocation would have written. The
    message is deleted once the batch landed. A range the stream no longer holds (older than its
    24 hours) is reported as expired and its message kept: that gap needs a backfill.

Export (``AWSDynamoDB/{export id}/data/*.json.gz``)
    The backfill for gaps beyond the stream's retention: :mod:`stream_processor.export_replay`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import boto3
import pyarrow as pa

from contracts.lake_layout import PARQUET_SUFFIX, partition_day, table_prefix
from contracts.lake_tables import QUARANTINE
from contracts.settings import Settings
from lake.objects import delete_keys, get_table, list_keys, put_table
from lake.writer import write_landing
from stream_processor.batch import process_batch
from stream_processor.dead_letters import ExpiredBatchError, batch_info, read_batch
from stream_processor.decoded import DecodedBatch
from stream_processor.decoder import decode_records
from stream_processor.export_replay import replay_export
from stream_processor.replay_report import REPLAYED_TABLES, ReplayReport

if TYPE_CHECKING:
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient
    from mypy_boto3_s3 import S3Client

__all__ = ["REPLAYED_TABLES", "ReplayReport", "replay_dead_letters", "replay_export", "replay_quarantine"]

_logger = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------------ quarantine


def replay_quarantine(
    settings: Settings,
    *,
    days: Sequence[dt.date] | None = None,
    dry_run: bool = False,
    s3: S3Client | None = None,
    clock: Callable[[], float] = time.time,
) -> ReplayReport:
    """Decode every quarantined record again and land those that now decode.

    Parameters
    ----------
    days:
        Only the quarantine partitions of these days (``dt`` = the day of quarantine); all by default.
    dry_run:
        Decode and count, write and delete nothing.
    """
    s3 = s3 or _client("s3", settings)
    if settings.lake_format == "iceberg":
        return _replay_iceberg_quarantine(settings, s3, days=days, dry_run=dry_run, clock=clock)
    report = ReplayReport(source="quarantine", dry_run=dry_run)
    for key in _quarantine_keys(s3, settings, days):
        report.sources_read += 1
        rows = get_table(s3, settings.bucket, key, QUARANTINE).to_pylist()
        records, unreadable, outcomes = _decode_quarantined(rows, report, clock)
        recovered = [
            record for (_, record), decoded in zip(records, outcomes, strict=True) if decoded.quarantined == 0
        ]
        still = [
            _requarantined(row, decoded)
            for (row, _), decoded in zip(records, outcomes, strict=True)
            if decoded.quarantined
        ]
        still.extend(unreadable)
        if dry_run or not recovered:
            continue
        batch = _concat(outcomes, recovered_only=True)
        objects = write_landing(
            s3,
            settings.bucket,
            settings.lake_prefix,
            batch,
            event_source_arn="replay",
            first_sequence_number=f"{_stem(key)}-{_digest(recovered)}",
        )
        report.add_written(objects)
        if still:
            put_table(s3, settings.bucket, key, pa.Table.from_pylist(still, schema=QUARANTINE))
        else:
            delete_keys(s3, settings.bucket, [key])
            report.sources_cleared += 1
    return report


def _replay_iceberg_quarantine(
    settings: Settings,
    s3: S3Client,
    *,
    days: Sequence[dt.date] | None,
    dry_run: bool,
    clock: Callable[[], float],
) -> ReplayReport:
    """The Iceberg lake: the quarantine table's rows decoded again; what now decodes and no earlier
    run landed is landed as one replay source, written down per record before it lands
    (:mod:`stream_processor.replay_sources`), committed, and only then deleted from the
    quarantine table. A rerun in any state lands nothing twice: a record whose source is landed or
    committed is settled, whatever else the rerun recovers."""
    from pyiceberg.expressions import In, Reference
    from pyiceberg.expressions.literals import literal

    from lake.committer import commit_landed
    from lake.iceberg_catalog import open_catalog
    from lake.iceberg_landing import land_rows
    from lake.iceberg_tables import identifier
    from stream_processor import replay_sources as sources

    report = ReplayReport(source="quarantine", dry_run=dry_run)
    catalog = open_catalog(settings)
    table = catalog.load_table(identifier(settings.glue_database, "quarantine"))
    rows = table.scan().to_arrow().to_pylist() if table.current_snapshot() is not None else []
    if days is not None:
        wanted = set(days)
        rows = [row for row in rows if row["quarantined_at"].date() in wanted]
    report.sources_read = 1 if rows else 0
    records, _unreadable, outcomes = _decode_quarantined(rows, report, clock)
    recovered = {
        sources.record_identity(row["raw"]): (row, decoded)
        for (row, _), decoded in zip(records, outcomes, strict=True)
        if decoded.quarantined == 0
    }
    if dry_run or not recovered:
        return report
    assigned = sources.read_assignments(s3, settings.bucket, settings.lake_prefix)
    progresses = sources.table_progresses(settings, catalog)
    done = set()
    for source in {source for identity in recovered for source in assigned.get(identity, ())}:
        ranges, committed = sources.done_positions(s3, settings, progresses, "replay", source)
        if sources.is_done(1, ranges, committed):
            done.add(source)
    fresh, source_name = sources.assign_sources(list(recovered), assigned, done)
    if source_name is not None:
        sources.write_assignments(s3, settings.bucket, settings.lake_prefix, fresh, source_name)
        ranges, committed = sources.done_positions(s3, settings, progresses, "replay", source_name)
        if not sources.is_done(1, ranges, committed):
            batch = _concat([recovered[identity][1] for identity in fresh], recovered_only=True)
            report.add_landed(
                land_rows(s3, settings, batch, event_source_arn="replay", shard=source_name, first=1, last=1)
            )
    commit_landed(settings, s3, catalog)
    table = catalog.load_table(identifier(settings.glue_database, "quarantine"))
    table.delete(
        delete_filter=In(term=Reference("raw"), values={literal(row["raw"]) for row, _ in recovered.values()})
    )
    landed_by = {identity: {*assigned.get(identity, ())} for identity in recovered}
    for identity in fresh:
        landed_by[identity].add(str(source_name))
    sources.clear_assignments(s3, settings.bucket, settings.lake_prefix, landed_by)
    report.sources_cleared = 1
    return report


def _quarantine_keys(s3: S3Client, settings: Settings, days: Sequence[dt.date] | None) -> list[str]:
    prefix = table_prefix(settings.lake_prefix, "quarantine")
    keys = list_keys(s3, settings.bucket, prefix, PARQUET_SUFFIX)
    if days is None:
        return keys
    wanted = set(days)
    return [key for key in keys if partition_day(key) in wanted]


def _decode_quarantined(
    rows: list[dict[str, Any]], report: ReplayReport, clock: Callable[[], float]
) -> tuple[list[tuple[dict[str, Any], Any]], list[dict[str, Any]], list[DecodedBatch]]:
    """Quarantined rows decoded again, one record each, counted in ``report``: the parsed
    ``(row, record)`` pairs, the rows whose ``raw`` is not JSON, and each record's outcome."""
    records, unreadable = _parse_raw(rows)
    report.unreadable += len(unreadable)
    outcomes = [decode_records([record], ingested_at_ms=int(clock() * 1000)) for _, record in records]
    for decoded in outcomes:
        report.add_decoded(decoded)
    return records, unreadable, outcomes


def _parse_raw(rows: list[dict[str, Any]]) -> tuple[list[tuple[dict[str, Any], Any]], list[dict[str, Any]]]:
    """``(row, record)`` for rows whose ``raw`` is JSON; the others, untouched, as still failing."""
    parsed: list[tuple[dict[str, Any], Any]] = []
    unreadable: list[dict[str, Any]] = []
    for row in rows:
        try:
            parsed.append((row, json.loads(row["raw"])))
        except (TypeError, ValueError):
            unreadable.append(row)
    return parsed, unreadable


def _requarantined(row: dict[str, Any], decoded: DecodedBatch) -> dict[str, Any]:
    """The quarantine row kept, with today's reason (the decoder may say something new)."""
    reasons = decoded.quarantine.column("reason").to_pylist()
    return {**row, "reason": reasons[0] if reasons else row["reason"]}


def _concat(outcomes: Sequence[DecodedBatch], *, recovered_only: bool) -> dict[str, pa.Table]:
    """The replayed tables of several decoded batches, one table each."""
    tables: dict[str, pa.Table] = {}
    for name in REPLAYED_TABLES:
        parts = [
            getattr(decoded, name)
            for decoded in outcomes
            if not (recovered_only and decoded.quarantined) and getattr(decoded, name).num_rows
        ]
        if parts:
            tables[name] = pa.concat_tables(parts)
    return tables


def _stem(key: str) -> str:
    return key.rsplit("/", 1)[-1].removesuffix(PARQUET_SUFFIX)


def _digest(records: Sequence[Any]) -> str:
    """A short hash of the records replayed: same records, same object name."""
    text = "\n".join(json.dumps(record, sort_keys=True, default=str) for record in records)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# ------------------------------------------------------------------------------------ dead-letter queue


def replay_dead_letters(
    settings: Settings,
    queue_url: str,
    *,
    dry_run: bool = False,
    sqs: Any = None,  # an SQS client (no type stubs for SQS in the dev dependencies)
    streams: DynamoDBStreamsClient | None = None,
    s3: S3Client | None = None,
    clock: Callable[[], float] = time.time,
    max_messages: int | None = None,
) -> ReplayReport:
    """Re-read each dead-lettered batch from the stream and land it; delete the messages that landed.

    Messages that are not batch descriptions, and batches the stream no longer holds, are
    reported and left in the queue (they become visible again after the visibility timeout).
    """
    sqs = sqs or _client("sqs", settings)
    streams = streams or _client("dynamodbstreams", settings)
    report = ReplayReport(source="dlq", dry_run=dry_run)
    for message in _receive_all(sqs, queue_url, max_messages):
        report.sources_read += 1
        info = batch_info(message.get("Body", ""))
        if info is None:
            report.unreadable += 1
            report.problems.append(f"message {message.get('MessageId')}: not a DynamoDB stream batch record")
            continue
        try:
            records = read_batch(streams, info)
        except ExpiredBatchError as error:
            report.expired += 1
            report.problems.append(f"message {message.get('MessageId')}: {error}")
            continue
        if dry_run:
            report.add_decoded(decode_records(records, ingested_at_ms=int(clock() * 1000)))
            continue
        outcome = process_batch(records, settings, s3=s3, clock=clock, shard=info.shard_id, late=True)
        report.records += outcome.records
        report.ledger_rows += outcome.ledger_rows
        report.wallets += outcome.wallets
        report.ttl_expired += outcome.ttl_expired
        report.ignored += outcome.ignored
        report.still_failing += outcome.quarantined
        report.files_written += outcome.files_written
        ledger_prefix = table_prefix(settings.lake_prefix, "ledger")
        report.days.update(
            d
            for key in outcome.keys
            if (key.startswith(ledger_prefix) or "/ledger/data/" in key) and (d := partition_day(key))
        )
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        report.sources_cleared += 1
    return report


def _receive_all(sqs: Any, queue_url: str, limit: int | None) -> Iterator[dict[str, Any]]:
    """Messages until the queue answers empty; each stays invisible to others while we work on it."""
    received = 0
    while limit is None or received < limit:
        wanted = 10 if limit is None else min(10, limit - received)
        page = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=wanted, WaitTimeSeconds=1, VisibilityTimeout=300
        )
        messages = page.get("Messages", [])
        if not messages:
            return
        for message in messages:
            received += 1
            yield dict(message)


def _client(service: str, settings: Settings) -> Any:
    return boto3.client(service, region_name=settings.region)  # type: ignore[call-overload]
