"""Replay a range of the stream on purpose: a batch left out for a missing file, a chain break.

Within the stream's 24 hours the records are still there, but the landing log cannot take them
again under their shard: the shard's landing record of the range still covers it (a batch left out
is *covered and committed past*; its rows reached no table). So a range replay lands the records
as a replay source of its own, ``replay/range~{shard}~{first}`` (forgotten like a shard once
quiet: a rerun after that lands again and the commit finds every row held), and the committer
appends only the rows the tables do not already hold (:mod:`lake.entry_identity`): a range whose
rows are partly, wholly or not at all in the lake ends with each exactly once, however often it is
replayed.

``--left-out`` replays every batch the committer noted as left out
(``{lake_prefix}/_misfits/_batches/*.reason.json``: :func:`lake.misfits.quarantine_batch`), each
from the table's stream whose label the note names, and deletes the note once its rows are
committed. A range the stream no longer holds is reported as expired: backfill from an export.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from contracts.lake_layout import misfits_location, stream_label
from contracts.settings import Settings
from lake.landing_log import RANGE_SHARD_PREFIX
from stream_processor.dead_letters import BatchInfo, ExpiredBatchError, read_batch
from stream_processor.decoder import decode_records
from stream_processor.replay_report import REPLAYED_TABLES, ReplayReport

if TYPE_CHECKING:
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient
    from mypy_boto3_s3 import S3Client

_logger = logging.getLogger(__name__)

#: The replay stream a range lands in (a permanent source: :data:`lake.landing_log.PERMANENT_STREAMS`).
RANGE_STREAM: Final = "replay"
_BATCH_NOTES: Final = "_batches/"
_SEQUENCE_DIGITS: Final = 21


def range_source(shard_id: str, first: int) -> str:
    """The source a range lands as: named by the shard and the range's first record.

    >>> range_source("shardId-0001", 300)
    'range~shardId-0001~300'
    """
    return f"{RANGE_SHARD_PREFIX}{shard_id}~{first}"


def sequence_text(number: int | str) -> str:
    """A sequence number as the Streams API takes it: at least 21 digits (the landing log keeps
    them as integers; DynamoDB's own are 21 digits or more, DynamoDB Local's zero-padded).

    >>> sequence_text(55), sequence_text("111200000000012345678901")
    ('000000000000000000055', '111200000000012345678901')
    """
    return str(int(number)).zfill(_SEQUENCE_DIGITS)


def parse_range(text: str) -> tuple[str, int, int]:
    """``SHARD:FIRST-LAST`` as given to ``--stream-range``.

    >>> parse_range("shardId-00001-ab:100-250")
    ('shardId-00001-ab', 100, 250)
    """
    shard, _, span = text.rpartition(":")
    first, _, last = span.partition("-")
    if not shard or not first.isdigit() or not last.isdigit() or int(first) > int(last):
        raise ValueError(f"not SHARD:FIRST-LAST with FIRST <= LAST: {text!r}")
    return shard, int(first), int(last)


def range_info(dynamodb: Any, table: str, text: str, stream_arn: str | None = None) -> BatchInfo:
    """The range ``SHARD:FIRST-LAST`` of ``stream_arn``, or of the table's latest stream."""
    shard, first, last = parse_range(text)
    arn = stream_arn or dynamodb.describe_table(TableName=table)["Table"].get("LatestStreamArn")
    if not arn:
        raise ValueError(f"table {table} has no stream: name one with --stream-arn")
    return BatchInfo(arn, shard, sequence_text(first), sequence_text(last))


def range_ledger(
    streams: DynamoDBStreamsClient, info: BatchInfo, clock: Callable[[], float] = time.time
) -> Any:
    """The ledger rows the range's records make (the stream as the source of truth for a repair)."""
    return decode_records(read_batch(streams, info), ingested_at_ms=int(clock() * 1000)).ledger


def replay_stream_range(
    settings: Settings,
    info: BatchInfo,
    *,
    dry_run: bool = False,
    streams: DynamoDBStreamsClient,
    s3: S3Client,
    report: ReplayReport | None = None,
    clock: Callable[[], float] = time.time,
) -> ReplayReport:
    """Read ``info``'s range from the stream again and land it as a source of its own (the
    committer keeps only rows no table holds). A range already landed or committed under that
    source lands nothing; one the stream no longer holds is counted as expired."""
    from lake.iceberg_catalog import open_catalog
    from lake.iceberg_landing import land_rows
    from stream_processor.replay_sources import done_positions, is_done, table_progresses

    report = report or ReplayReport(source="stream-range", dry_run=dry_run)
    report.sources_read += 1
    first, last = int(info.start_sequence_number), int(info.end_sequence_number)
    try:
        records = read_batch(streams, info)
    except ExpiredBatchError as error:
        report.expired += 1
        report.problems.append(str(error))
        return report
    decoded = decode_records(records, ingested_at_ms=int(clock() * 1000))
    report.add_decoded(decoded)
    if dry_run or not records:
        return report
    source = range_source(info.shard_id, first)
    ranges, committed = done_positions(
        s3, settings, table_progresses(settings, open_catalog(settings)), RANGE_STREAM, source
    )
    if is_done(last, ranges, committed):
        _logger.info("range %s %d-%d: landed before as %s", info.shard_id, first, last, source)
        return report
    tables = {table: rows for table, rows in decoded.tables().items() if table in REPLAYED_TABLES}
    report.add_landed(
        land_rows(s3, settings, tables, event_source_arn=RANGE_STREAM, shard=source, first=first, last=last)
    )
    return report


def replay_left_out(
    settings: Settings,
    *,
    dry_run: bool = False,
    streams: DynamoDBStreamsClient,
    s3: S3Client,
    dynamodb_streams_of: Callable[[], list[str]] | None = None,
    clock: Callable[[], float] = time.time,
) -> tuple[ReplayReport, list[str]]:
    """Every batch noted as left out, replayed from its stream; returns the report and the notes
    to delete once the replayed rows are committed (the caller commits, then deletes)."""
    from lake.objects import iter_objects

    report = ReplayReport(source="left-out", dry_run=dry_run)
    root = misfits_location(settings.bucket, settings.lake_prefix)
    prefix = f"{root.removeprefix(f's3://{settings.bucket}/')}/{_BATCH_NOTES}"
    arns = (dynamodb_streams_of or (lambda: _table_streams(streams, settings.table)))()
    by_label = {stream_label(arn): arn for arn in arns}
    done: list[str] = []
    for key, _ in iter_objects(s3, settings.bucket, prefix):
        if not key.endswith(".reason.json"):
            continue
        note = json.loads(s3.get_object(Bucket=settings.bucket, Key=key)["Body"].read())
        label, _, shard = str(note["batch"]).partition("/")
        arn = by_label.get(label)
        if arn is None:
            report.sources_read += 1
            report.expired += 1
            report.problems.append(
                f"{key}: stream {label} is no longer the table's (disabled or past 24 hours): backfill "
                "from an export (docs/operations.md, section 4)"
            )
            continue
        info = BatchInfo(arn, shard, sequence_text(note["first"]), sequence_text(note["last"]))
        expired_before = report.expired
        replay_stream_range(
            settings, info, dry_run=dry_run, streams=streams, s3=s3, report=report, clock=clock
        )
        if report.expired == expired_before:
            done.append(key)
    return report, done


def _table_streams(streams: Any, table: str) -> list[str]:
    """Every stream ARN of the table the Streams API still lists (the current and older ones)."""
    arns: list[str] = []
    kwargs: dict[str, Any] = {"TableName": table}
    while True:
        page = streams.list_streams(**kwargs)
        arns.extend(stream["StreamArn"] for stream in page.get("Streams", []))
        if "LastEvaluatedStreamArn" not in page:
            return arns
        kwargs["ExclusiveStartStreamArn"] = page["LastEvaluatedStreamArn"]
