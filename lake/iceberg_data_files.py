"""A landed file's Iceberg description, made once when it is written and carried by its landing
record, so the commit appends it without reading its footer.

Iceberg's own writers describe a data file from the Parquet metadata they just wrote (row count,
size, per-column sizes, value, null and NaN counts, lower and upper bounds: pyiceberg's
``data_file_statistics_from_parquet_metadata``); so does the landing (:func:`describe_written`,
from the bytes in memory). The committer then builds the ``DataFile`` from the record
(:func:`data_file_of`) after a pure check that the file's field ids and types still fit the
table (:func:`fit_problem`): no GET of any footer at commit, and a file removed since it landed
(orphan removal after a long outage, a deletion by hand) is found by one HEAD and its whole batch
left out of every table, with a reason (:func:`lake.misfits.quarantine_batch`), instead of failing
every table's cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import TableMetadata

_COUNTS = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts")
_BOUNDS = ("lower_bounds", "upper_bounds")


def describe_written(body: bytes, partition: Mapping[str, str]) -> dict[str, Any] | None:
    """The description of a Parquet file, from its bytes (no I/O): what pyiceberg's writers
    compute, as JSON values (bounds in hex), with the file's own fields (``{field id: type}``,
    from its ``PARQUET:field_id``s and physical types) and its partition values. None for a file
    without field ids on every column: the commit reads such a file's footer, as before, and sets
    it aside as a misfit.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import (
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
        pyarrow_to_schema,
    )

    metadata = pq.read_metadata(pa.BufferReader(body))
    try:
        schema = pyarrow_to_schema(metadata.schema.to_arrow_schema())
    except ValueError:  # a column without a field id
        return None
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=metadata,
        stats_columns=compute_statistics_plan(schema, {}),
        parquet_column_mapping=parquet_path_to_id_mapping(schema),
    ).to_serialized_dict()
    return {
        "fields": {str(f.field_id): str(f.field_type) for f in schema.fields},
        "partition": dict(partition),
        "record_count": statistics["record_count"],
        **{name: {str(k): v for k, v in statistics[name].items()} for name in _COUNTS},
        **{name: {str(k): bytes(v).hex() for k, v in statistics[name].items()} for name in _BOUNDS},
        "split_offsets": list(statistics["split_offsets"] or []),
    }


def fit_problem(table_schema: Schema, fields: Mapping[str, str]) -> str:
    """Why a file with these ``{field id: type}`` does not fit the table, or ``""`` (pure).

    A file fits when each of its field ids is a column of the table with the same type or one the
    table's type promotes (Iceberg reads an ``int`` file into a ``long`` column), and it has every
    required column.

    Examples
    --------
    >>> from pyiceberg.schema import Schema
    >>> from pyiceberg.types import LongType, NestedField, StringType
    >>> schema = Schema(NestedField(1, "id", StringType(), required=True), NestedField(2, "n", LongType()))
    >>> fit_problem(schema, {"1": "string", "2": "int"})
    ''
    >>> fit_problem(schema, {"1": "string", "3": "string"})
    'field id 3 (string) is not a column of the table'
    >>> fit_problem(schema, {"2": "decimal(20, 6)"})
    'n: the file has decimal(20, 6), the table long'
    """
    from pydantic import TypeAdapter
    from pyiceberg.types import IcebergType

    from lake.iceberg_schema_changes import promotable

    by_id = {field.field_id: field for field in table_schema.fields}
    for id_text, type_text in fields.items():
        field = by_id.get(int(id_text))
        if field is None:
            return f"field id {id_text} ({type_text}) is not a column of the table"
        if str(field.field_type) == type_text:
            continue
        file_type = TypeAdapter(IcebergType).validate_python(type_text)
        if not promotable(file_type, field.field_type):
            return f"{field.name}: the file has {type_text}, the table {field.field_type}"
    for field in table_schema.fields:
        if field.required and str(field.field_id) not in fields:
            return f"the file lacks the required column {field.name}"
    return ""


def data_file_of(metadata: TableMetadata, path: str, size: int, description: Mapping[str, Any]) -> DataFile:
    """The ``DataFile`` a commit appends, from a landed file's description (pure: no footer read).

    Raises
    ------
    KeyError
        The description lacks a partition value of the table's spec (the spec changed since).
    """
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    spec = metadata.spec()
    partition = Record(*(description["partition"][field.name] for field in spec.fields))
    # A column the table promoted since the file was written (an int file in a long column) keeps
    # no bounds: they are encoded as the file's type, and no pruning beats a wrong one.
    current = {str(field.field_id): str(field.field_type) for field in metadata.schema().fields}
    promoted = {k for k, kind in description["fields"].items() if current.get(k, kind) != kind}
    statistics: dict[str, Any] = {
        **{name: {int(k): v for k, v in description[name].items()} for name in _COUNTS},
        **{
            name: {int(k): bytes.fromhex(v) for k, v in description[name].items() if k not in promoted}
            for name in _BOUNDS
        },
    }
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=partition,
        file_size_in_bytes=size,
        sort_order_id=None,
        spec_id=metadata.default_spec_id,
        equality_ids=None,
        key_metadata=None,
        record_count=description["record_count"],
        **statistics,
        split_offsets=list(description["split_offsets"]) or None,
    )
