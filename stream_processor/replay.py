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

Point-in-time export (``AWSDynamoDB/{export id}/data/*.json.gz``)
    The backfill for gaps beyond the stream's retention: every wallet item of a DynamoDB export
    becomes the INSERT record the stream carried for it, and every transaction item not yet expired
    at the export's time the wallet MODIFY records its entry made, numbered back from the wallet
    items (:mod:`stream_processor.export_entries`); decoded as usual and written as
    ``{table}/dt=…/{slot}-export-{export id}-{data file or "entries"}-{n}.parquet``. The rows'
    ``stream_sequence`` is ``export:{export id}``, which marks where they came from.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gzip
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

import boto3
import pyarrow as pa

from contracts.lake_layout import PARQUET_SUFFIX, partition_day, table_prefix
from contracts.lake_tables import QUARANTINE
from contracts.settings import Settings
from contracts.wallets_table import ENTITY_TRANSACTION, ENTITY_WALLET, Attr
from lake.landing_log import LandingRecord
from lake.objects import delete_keys, get_table, iter_objects, list_keys, put_table
from lake.writer import LandingObject, write_landing
from stream_processor.batch import process_batch
from stream_processor.dead_letters import ExpiredBatchError, batch_info, read_batch
from stream_processor.decoder import DecodedBatch, decode_records
from stream_processor.export_entries import NumberedEntries, number_entries
from stream_processor.export_records import (
    _entity,
    _modify_record,
    export_items,
    export_records,
    export_window,
)
from stream_processor.replay_sources import export_position, is_done

if TYPE_CHECKING:
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient
    from mypy_boto3_s3 import S3Client

_logger = logging.getLogger(__name__)

#: The lake tables a replay writes; decoding failures stay in (or go back to) quarantine instead.
REPLAYED_TABLES: Final = ("ledger", "wallets")
#: The key of a failed-invocation record that describes a DynamoDB stream batch.
#: What the Streams API answers for a position it no longer holds (trimmed, or the shard is gone).
_RECORDS_PER_EXPORT_BATCH: Final = 10_000


@dataclasses.dataclass
class ReplayReport:
    """What a replay found and did; ``as_dict`` is what ``walletlake replay --json`` prints."""

    source: str
    dry_run: bool
    sources_read: int = 0
    records: int = 0
    ledger_rows: int = 0
    wallets: int = 0
    ttl_expired: int = 0
    ignored: int = 0
    still_failing: int = 0
    expired: int = 0
    unreadable: int = 0
    files_written: int = 0
    sources_cleared: int = 0
    days: set[dt.date] = dataclasses.field(default_factory=set)
    problems: list[str] = dataclasses.field(default_factory=list)

    def add_decoded(self, decoded: DecodedBatch) -> None:
        """Count one decoded batch."""
        self.records += decoded.records
        self.ledger_rows += decoded.ledger_rows
        self.wallets += decoded.wallet_rows
        self.ttl_expired += decoded.ttl_expired
        self.ignored += decoded.ignored
        self.still_failing += decoded.quarantined

    def add_written(self, objects: Iterable[LandingObject]) -> None:
        """Count objects written and the lake days they touched (to compact and reconcile again)."""
        for written in objects:
            self.files_written += 1
            if written.table == "ledger":
                self.days.add(written.day)

    def add_landed(self, record: LandingRecord | None) -> None:
        """Count an Iceberg landing's data files and the lake days they touched."""
        for file in record.files if record is not None else ():
            self.files_written += 1
            if file.table == "ledger" and (day := partition_day(file.path)) is not None:
                self.days.add(day)

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for logs and JSON."""
        values = dataclasses.asdict(self)
        values["days"] = sorted(day.isoformat() for day in self.days)
        return values


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


# ------------------------------------------------------------------------------------------ export


def replay_export(
    settings: Settings,
    export_uri: str,
    *,
    dry_run: bool = False,
    s3: S3Client | None = None,
    clock: Callable[[], float] = time.time,
) -> ReplayReport:
    """Land every wallet and every numbered entry of a DynamoDB export (DYNAMODB_JSON): a full
    export at a point in time, or an ``INCREMENTAL_EXPORT`` of a window (``NEW_AND_OLD_IMAGES``),
    whose transactions written in the window are numbered back from its wallets' state at the
    window's end.

    ``export_uri`` is the export's folder, ``s3://{bucket}/{prefix}/AWSDynamoDB/{export id}/``.
    Wallet items (and transaction items of the compare-and-swap write path, which carried their
    entries) become the INSERT records the stream carried, one data file at a time. The entries of
    the single-write path are numbered from the whole export
    (:func:`stream_processor.export_entries.number_entries`), which holds every wallet item and
    every transaction item of the export in memory: about 1 KB per item (an 8-hour window at the
    seed's full load needs an export per few hours of the gap, or more memory).
    """
    s3 = s3 or _client("s3", settings)
    bucket, folder = _split_s3_uri(export_uri)
    folder = folder.rstrip("/")
    export_id = folder.rsplit("/", 1)[-1]
    report = ReplayReport(source="export", dry_run=dry_run)
    data_keys = [key for key, _ in iter_objects(s3, bucket, f"{folder}/data/") if key.endswith(".json.gz")]
    if not data_keys:
        raise FileNotFoundError(
            f"no data/*.json.gz under {export_uri}: is it a DYNAMODB_JSON export's folder?"
        )

    landed: tuple[list[tuple[int, int]], int] = ([], 0)
    if settings.lake_format == "iceberg" and not dry_run:
        from lake.iceberg_catalog import open_catalog
        from stream_processor.replay_sources import done_positions, table_progresses

        progresses = table_progresses(settings, open_catalog(settings))
        landed = done_positions(s3, settings, progresses, "export", export_id)

    def land(records: list[dict[str, Any]], name: str, index: int) -> None:
        for start in range(0, len(records), _RECORDS_PER_EXPORT_BATCH):
            decoded = decode_records(
                records[start : start + _RECORDS_PER_EXPORT_BATCH], ingested_at_ms=int(clock() * 1000)
            )
            report.add_decoded(decoded)
            if dry_run:
                continue
            if settings.lake_format == "iceberg":
                position = export_position(index, start // _RECORDS_PER_EXPORT_BATCH)
                if not is_done(position, *landed):
                    _land_export_chunk(s3, settings, decoded, export_id, position, report)
                continue
            objects = write_landing(
                s3,
                settings.bucket,
                settings.lake_prefix,
                {table: rows for table, rows in decoded.tables().items() if table in REPLAYED_TABLES},
                event_source_arn="export",
                first_sequence_number=f"{export_id}-{name}-{start // _RECORDS_PER_EXPORT_BATCH}",
            )
            report.add_written(objects)

    wallets: list[dict[str, Any]] = []
    transactions: list[dict[str, Any]] = []
    for index, key in enumerate(data_keys):
        report.sources_read += 1
        body = gzip.decompress(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        items = export_items(body.decode("utf-8").splitlines())
        inserted = []
        for item in items:
            if _entity(item) == ENTITY_TRANSACTION and Attr.WALLET_VERSION not in item:
                transactions.append(item)
                continue
            if _entity(item) == ENTITY_WALLET:
                wallets.append(item)
            inserted.append(item)
        land(
            list(export_records(inserted, export_id)), key.rsplit("/", 1)[-1].removesuffix(".json.gz"), index
        )
    if transactions:
        numbered = _number(s3, bucket, folder, wallets, transactions, report)
        # in time order, so each landed chunk spans a short time (the commit's identity check
        # reads the table's rows of that span only)
        images = sorted(numbered.images, key=lambda pair: int(pair[1][Attr.UPDATED_AT]["N"]))
        land([_modify_record(old, new, export_id) for old, new in images], "entries", len(data_keys))
    return report


def _number(
    s3: S3Client,
    bucket: str,
    folder: str,
    wallets: list[dict[str, Any]],
    transactions: list[dict[str, Any]],
    report: ReplayReport,
) -> NumberedEntries:
    """The export's entries numbered back from its wallets (full or incremental), counted."""
    window = export_window(s3, bucket, folder)
    if window.incremental:
        # An incremental export holds the items written in its window (as they are at its end)
        # and those deleted in it (as they were): every transaction of the window, none
        # missing, so nothing is skipped as expired; but a deletion (TTL) of an item written
        # before the window would be a leg whose neighbours are not there, so only the
        # window's own transactions are numbered.
        start_ms = (window.from_time_s or 0) * 1000
        older = [t for t in transactions if int(t[Attr.CREATED_AT]["N"]) < start_ms]
        report.ignored += len(older)
        transactions = [t for t in transactions if int(t[Attr.CREATED_AT]["N"]) >= start_ms]
        numbered = number_entries(wallets, transactions, export_time_s=0)
    else:
        numbered = number_entries(wallets, transactions, export_time_s=window.export_time_s)
    report.ignored += numbered.expired
    report.problems += numbered.problems
    report.still_failing += len(numbered.problems)
    return numbered


def _land_export_chunk(
    s3: S3Client,
    settings: Settings,
    decoded: DecodedBatch,
    export_id: str,
    position: int,
    report: ReplayReport,
) -> None:
    """The Iceberg lake: one chunk of an export landed in the export's one source
    ``export/{export id}`` at ``position`` (:func:`stream_processor.replay_sources.export_position`);
    the caller lands only positions neither landed nor committed, so a rerun lands nothing twice
    and the committer's progress holds one entry per export."""
    from lake.iceberg_landing import land_rows

    tables = {table: rows for table, rows in decoded.tables().items() if table in REPLAYED_TABLES}
    report.add_landed(
        land_rows(
            s3, settings, tables, event_source_arn="export", shard=export_id, first=position, last=position
        )
    )


def _split_s3_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        raise ValueError(f"not an s3://bucket/prefix/ URI: {uri!r}")
    bucket, _, key = uri[5:].partition("/")
    return bucket, key


def _client(service: str, settings: Settings) -> Any:
    return boto3.client(service, region_name=settings.region)  # type: ignore[call-overload]
