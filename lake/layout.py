"""Where lake objects live in S3: ``s3://{bucket}/{prefix}/{table}/dt=YYYY-MM-DD/{name}.parquet``.

Object names are derived from what wrote them, never random, so a retried write replaces its own
object instead of adding a copy (ARCHITECTURE.md, "The lake").
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Final

from lake.schemas import PARTITION_COLUMN, TABLES

_UNSAFE_LABEL_CHARACTERS: Final = re.compile(r"[^A-Za-z0-9._-]")
PARQUET_SUFFIX: Final = ".parquet"


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


def landing_object_name(event_source_arn: str, first_sequence_number: str) -> str:
    """``{stream_label}-{first_sequence_number}.parquet``: one name per batch, stable on retry."""
    return f"{stream_label(event_source_arn)}-{first_sequence_number}{PARQUET_SUFFIX}"


def landing_key(
    lake_prefix: str, table: str, day: dt.date, event_source_arn: str, first_sequence_number: str
) -> str:
    """The full key of a batch's landing object for one table and UTC day."""
    return partition_prefix(lake_prefix, table, day) + landing_object_name(
        event_source_arn, first_sequence_number
    )


def partition_day(key: str) -> dt.date | None:
    """The ``dt`` of an object key, or None when the key is not inside a partition."""
    match = re.search(rf"/{PARTITION_COLUMN}=(\d{{4}}-\d{{2}}-\d{{2}})/", key)
    return dt.date.fromisoformat(match.group(1)) if match else None
