"""Where lake objects live in S3: ``s3://{bucket}/{prefix}/{table}/dt=YYYY-MM-DD/{name}.parquet``.

Object names are derived from what wrote them, never random, so a retried write replaces its own
object instead of adding a copy (docs/architecture.md, "The lake").

Inside a day, every landing object and every compacted file starts with its *slot*: the five
minutes of the day its rows belong to, ``hHHmMM`` (``h07m05`` holds 07:05:00.000-07:09:59.999
UTC). A compaction unit (a run of whole slots, an hour by default) then finds its inputs by
listing its slots' prefixes, whatever else the partition holds, and late rows for a closed hour
land under that hour's slots, where its unit picks them up again. Readers (Athena through Glue,
DuckDB) read every ``.parquet`` object of the partition and never look at names.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Final

from contracts.lake_tables import PARTITION_COLUMN, TABLES

_UNSAFE_LABEL_CHARACTERS: Final = re.compile(r"[^A-Za-z0-9._-]")
PARQUET_SUFFIX: Final = ".parquet"
#: Minutes of one slot: the finest compaction unit (a unit is a run of whole slots).
SLOT_MINUTES: Final = 5
SLOTS_PER_DAY: Final = 24 * 60 // SLOT_MINUTES
#: Folder of the landing log (one record per landed batch, :mod:`lake.landing_log`) under the lake
#: prefix: ``{lake_prefix}/_landed/{stream}/{shard}/{first}-{last}.json``.
LANDING_LOG_FOLDER: Final = "_landed"
#: Folder beside the log holding the committer's bookkeeping objects (the tidy's cursor).
COMMITTER_STATE_FOLDER: Final = "_committer"
#: Folder under the lake prefix of landed files that did not fit their table (one per table).
MISFITS_FOLDER: Final = "_misfits"
#: Marks a late batch's own source in the log: ``{shard}~late-{first sequence number}``.
LATE_SOURCE_MARK: Final = "~late-"
#: Folder of the Iceberg tables under the lake prefix when the catalog places them in the lake
#: bucket (Glue's Iceberg tables on AWS): ``s3://{bucket}/{lake_prefix}/iceberg/{table}``.
ICEBERG_FOLDER: Final = "iceberg"
_SLOT: Final = re.compile(r"^h([01]\d|2[0-3])m([0-5]\d)-")


def tidy_cursor_key(lake_prefix: str) -> str:
    """The object holding the landing-log key the hourly tidy stopped at (empty: start over).

    Examples
    --------
    >>> tidy_cursor_key("lake")
    'lake/_committer/tidy-cursor'
    """
    prefix = lake_prefix.strip("/")
    name = f"{COMMITTER_STATE_FOLDER}/tidy-cursor"
    return f"{prefix}/{name}" if prefix else name


def misfits_location(bucket: str, lake_prefix: str) -> str:
    """Where the committer keeps landed files that do not fit their table, a folder per table,
    each with a ``.reason.json`` (docs/operations.md, "Misfit files").

    Examples
    --------
    >>> misfits_location("lake-bucket", "lake")
    's3://lake-bucket/lake/_misfits'
    """
    prefix = lake_prefix.strip("/")
    return f"s3://{bucket}/{prefix}/{MISFITS_FOLDER}" if prefix else f"s3://{bucket}/{MISFITS_FOLDER}"


def late_shard(shard: str, first_sequence_number: str) -> str:
    """The source a late (dead-lettered, replayed) batch of ``shard`` lands as.

    Examples
    --------
    >>> late_shard("shardId-1", "100")
    'shardId-1~late-100'
    """
    return f"{shard}{LATE_SOURCE_MARK}{first_sequence_number}"


def slot_name(slot: int) -> str:
    """``hHHmMM`` of the ``slot``-th five minutes of a day (0..287).

    Examples
    --------
    >>> slot_name(0), slot_name(85), slot_name(287)
    ('h00m00', 'h07m05', 'h23m55')
    """
    if not 0 <= slot < SLOTS_PER_DAY:
        raise ValueError(f"slot {slot} is not in 0..{SLOTS_PER_DAY - 1}")
    minute = slot * SLOT_MINUTES
    return f"h{minute // 60:02d}m{minute % 60:02d}"


def slot_of_name(name: str) -> int | None:
    """The slot an object name starts with (None for a name without one, e.g. an older layout)."""
    match = _SLOT.match(name)
    if match is None:
        return None
    minute = int(match.group(1)) * 60 + int(match.group(2))
    return minute // SLOT_MINUTES if minute % SLOT_MINUTES == 0 else None


def table_prefix(lake_prefix: str, table: str) -> str:
    """Key prefix of a table, ending in ``/`` (what Glue's table location points at)."""
    if table not in TABLES:
        raise ValueError(f"unknown lake table {table!r}")
    return f"{lake_prefix.strip('/')}/{table}/" if lake_prefix.strip("/") else f"{table}/"


def partition_prefix(lake_prefix: str, table: str, day: dt.date) -> str:
    """Key prefix of one day's partition, ending in ``/``."""
    return f"{table_prefix(lake_prefix, table)}{PARTITION_COLUMN}={day.isoformat()}/"


def table_location(bucket: str, lake_prefix: str, table: str) -> str:
    """``s3://`` URI of a table, as Glue and DuckDB see it."""
    return f"s3://{bucket}/{table_prefix(lake_prefix, table)}"


def stream_label(event_source_arn: str) -> str:
    """The last part of a stream ARN, made safe for an object name.

    Examples
    --------
    >>> stream_label("arn:aws:dynamodb:us-east-1:1:table/wallets/stream/2026-11-22T04:00:00.000")
    '2026-11-22T04-00-00.000'
    """
    return _UNSAFE_LABEL_CHARACTERS.sub("-", event_source_arn.rsplit("/", 1)[-1])


def landing_object_name(event_source_arn: str, first_sequence_number: str, slot: int) -> str:
    """``{slot}-{stream_label}-{first_sequence_number}.parquet``: one name per batch and slot.

    Stable on retry: the same batch always writes the same names.
    """
    return f"{slot_name(slot)}-{stream_label(event_source_arn)}-{first_sequence_number}{PARQUET_SUFFIX}"


def landing_key(
    lake_prefix: str, table: str, day: dt.date, event_source_arn: str, first_sequence_number: str, slot: int
) -> str:
    """The full key of a batch's landing object for one table, UTC day and slot."""
    return partition_prefix(lake_prefix, table, day) + landing_object_name(
        event_source_arn, first_sequence_number, slot
    )


def partition_day(key: str) -> dt.date | None:
    """The ``dt`` of an object key, or None when the key is not inside a partition."""
    match = re.search(rf"/{PARTITION_COLUMN}=(\d{{4}}-\d{{2}}-\d{{2}})/", key)
    return dt.date.fromisoformat(match.group(1)) if match else None


def table_location_root(bucket: str, lake_prefix: str) -> str:
    """Where the lake's Iceberg tables are placed in the lake bucket (Glue's tables on AWS)."""
    prefix = lake_prefix.strip("/")
    return f"s3://{bucket}/{prefix}/{ICEBERG_FOLDER}" if prefix else f"s3://{bucket}/{ICEBERG_FOLDER}"
