"""The lake: table schemas, S3 layout, Parquet encoding, and (later) compaction and snapshots."""

from contracts.lake_layout import (
    landing_key,
    partition_day,
    partition_prefix,
    stream_label,
    table_location,
    table_prefix,
)
from contracts.lake_tables import PARTITION_COLUMN, TABLES

__all__ = [
    "PARTITION_COLUMN",
    "TABLES",
    "landing_key",
    "partition_day",
    "partition_prefix",
    "stream_label",
    "table_location",
    "table_prefix",
]
