"""Glue table definitions of the lake, with partition projection on ``dt``.

Partition projection lets Athena compute partitions from the query's ``dt`` predicate instead of
listing them from the catalogue, so a new day is queryable the moment its first object lands: no
crawler, no ``MSCK REPAIR``. The local stack and the CDK app both create tables from
:func:`table_input`.
"""

from __future__ import annotations

from typing import Any, Final

from contracts.lake_layout import table_location
from contracts.lake_tables import LAKE_TABLES, PARTITION_COLUMN, TABLES, glue_columns

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
        "Description": LAKE_TABLES[table].description,
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


#: Glue's name for the Iceberg format version the stream's tables are created with.
ICEBERG_TABLE_VERSION: Final = "2"
#: Partition field ids start here (the Iceberg spec's convention, as pyiceberg assigns them).
_PARTITION_FIELD_ID: Final = 1000


def iceberg_table_input(table: str, location: str) -> dict[str, Any]:
    """Glue's ``IcebergTableInput`` of one stream table (the CloudFormation ``AWS::Glue::Table``
    ``OpenTableFormatInput.IcebergInput.IcebergTableInput``, in CloudFormation's property names).

    The same table :func:`lake.iceberg_tables.ensure_tables` creates through the REST catalog:
    field ids 1..n in the Arrow schema's order, ``identity(dt)`` as partition field 1000, the
    compaction sort order as the write order, and :data:`lake.iceberg_tables.TABLE_PROPERTIES` plus
    the default name mapping, **as the table was first deployed**: the columns it was created with
    (:func:`lake.iceberg_tables.iceberg_creation_schema`) and the properties of
    :data:`lake.iceberg_tables.CREATION_PROPERTY_KEYS`, so the template's resource never changes
    when the contract grows. The committer's cold start (and every landing process) adds the newer
    columns by name and sets the newer properties (``ensure_tables``).
    """
    from contracts.lake_tables import STREAM_TABLES
    from lake.iceberg_tables import CREATION_PROPERTY_KEYS, TABLE_PROPERTIES, iceberg_creation_schema

    spec = STREAM_TABLES[table]
    schema = iceberg_creation_schema(table)
    fields = [
        {
            "Id": field.field_id,
            "Name": field.name,
            "Required": field.required,
            "Type": str(field.field_type),
        }
        for field in schema.fields
    ]
    properties = {
        key: value
        for key, value in TABLE_PROPERTIES.items()
        if key in CREATION_PROPERTY_KEYS and key != "format-version"
    }
    properties["schema.name-mapping.default"] = schema.name_mapping.model_dump_json()
    return {
        "Location": location,
        "Schema": {"SchemaId": 0, "Type": "struct", "Fields": fields},
        "PartitionSpec": {
            "SpecId": 0,
            "Fields": [
                {
                    "Name": PARTITION_COLUMN,
                    "SourceId": schema.find_field(PARTITION_COLUMN).field_id,
                    "FieldId": _PARTITION_FIELD_ID,
                    "Transform": "identity",
                }
            ],
        },
        "WriteOrder": {
            "OrderId": 1,
            "Fields": [
                {
                    "SourceId": schema.find_field(column).field_id,
                    "Transform": "identity",
                    "Direction": "asc",
                    "NullOrder": "nulls-first",
                }
                for column in spec.sort_order
            ],
        },
        "Properties": properties,
    }
