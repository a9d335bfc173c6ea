"""Glue table definitions of the lake, with partition projection on ``dt``.

Partition projection lets Athena compute partitions from the query's ``dt`` predicate instead of
listing them from the catalogue, so a new day is queryable the moment its first object lands: no
crawler, no ``MSCK REPAIR``. The local stack and the CDK app both create tables from
:func:`table_input`.
"""

from __future__ import annotations

from typing import Any, Final

from lake.layout import table_location
from lake.schemas import DESCRIPTIONS, PARTITION_COLUMN, TABLES, glue_columns

PROJECTION_RANGE_START: Final = "2020-01-01"

PARQUET_SERDE: Final = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
PARQUET_INPUT_FORMAT: Final = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUTPUT_FORMAT: Final = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"


def projection_parameters(location: str) -> dict[str, str]:
    """Table parameters that declare ``dt`` as a projected date partition."""
    return {
        "classification": "parquet",
        "EXTERNAL": "TRUE",
        "parquet.compression": "ZSTD",
        "projection.enabled": "true",
        f"projection.{PARTITION_COLUMN}.type": "date",
        f"projection.{PARTITION_COLUMN}.format": "yyyy-MM-dd",
        f"projection.{PARTITION_COLUMN}.range": f"{PROJECTION_RANGE_START},NOW",
        f"projection.{PARTITION_COLUMN}.interval": "1",
        f"projection.{PARTITION_COLUMN}.interval.unit": "DAYS",
        "storage.location.template": f"{location}{PARTITION_COLUMN}=${{{PARTITION_COLUMN}}}/",
    }


def table_input(table: str, bucket: str, lake_prefix: str) -> dict[str, Any]:
    """Glue ``TableInput`` of one lake table (the shape of ``glue.create_table``)."""
    location = table_location(bucket, lake_prefix, table)
    return {
        "Name": table,
        "Description": DESCRIPTIONS[table],
        "TableType": "EXTERNAL_TABLE",
        "Parameters": projection_parameters(location),
        "PartitionKeys": [{"Name": PARTITION_COLUMN, "Type": "string"}],
        "StorageDescriptor": {
            "Columns": glue_columns(TABLES[table]),
            "Location": location,
            "InputFormat": PARQUET_INPUT_FORMAT,
            "OutputFormat": PARQUET_OUTPUT_FORMAT,
            "SerdeInfo": {"SerializationLibrary": PARQUET_SERDE, "Parameters": {"serialization.format": "1"}},
        },
    }


def all_table_inputs(bucket: str, lake_prefix: str) -> list[dict[str, Any]]:
    """``TableInput`` of every lake table."""
    return [table_input(name, bucket, lake_prefix) for name in TABLES]
