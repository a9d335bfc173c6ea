"""The lake's Iceberg tables, made from the stream tables' specs (:mod:`contracts.lake_tables`).

The stream's three tables (ledger, wallets, quarantine) are Iceberg tables in one namespace (the
Glue database's name, which is also how Athena names an S3 Tables namespace). Each keeps the
columns of its Arrow schema, with the same names and nullability, plus ``dt``: the UTC day of its
time column as ``YYYY-MM-DD``, the column analysts and the ``.sql`` files filter on, so every query
keeps its meaning. Tables are partitioned by that day, as ``identity(dt)``: a ``dt`` predicate
prunes files on Athena and DuckDB, and files of the plain-Parquet lake, which carry their day only
in their key (``dt=YYYY-MM-DD/``), join the table unchanged, their ``dt`` read from the partition
value (the Iceberg spec's column projection rule for identity partitions, which Trino, pyiceberg
and DuckDB implement: Hive tables migrate to Iceberg this way). ``dt`` is optional for the same
reason: such a file has no ``dt`` column.

Timestamps are Iceberg ``timestamptz`` (microseconds, UTC). Landing files are written in
microseconds; the plain-Parquet lake's millisecond files are readable as they are (Iceberg's
Parquet readers take either unit), which is what lets ``walletlake lake migrate`` register them
without rewriting a byte.

Table properties, and why:

- ``write.delete.isolation-level=snapshot``: a compaction (an overwrite that removes files) commits
  while the committer appends; with the default ``serializable`` it would abort whenever an append
  landed in its partition meanwhile. Appends never touch the files a compaction removes, so no row
  can be lost or doubled (the test polls readers through it).
- ``commit.manifest-merge.enabled``: appends merge small manifests, so a day of 30-second commits
  does not leave thousands of manifests for every reader to open.
- ``write.parquet.compression-codec=zstd``: as the rest of the lake.
- ``history.expire.max-snapshot-age-ms`` (:data:`SNAPSHOT_RETENTION_HOURS`) and
  ``history.expire.min-snapshots-to-keep``: snapshot retention in hours, not days. A commit every
  30 s is 2,880 snapshots a day per table, each an entry of metadata.json that every commit,
  every plan and every scan reads, and that pyiceberg copies many times per commit: 2 hours
  of them keep the file under a megabyte and the committer's cycle within seconds
  (``bench/commit_metadata.py``). What audits need past that is tagged (``reconciled-{day}``:
  expiry never removes a snapshot a tag references). The committer expires them itself
  (:mod:`lake.snapshot_expiry`), the only expiry: no Glue retention optimizer is deployed
  (``walletlake_cdk.catalog`` says why).
- ``write.metadata.delete-after-commit.enabled`` and ``write.metadata.previous-versions-max``: a
  commit writes a new metadata.json; the writer deletes those older than the last
  :data:`PREVIOUS_METADATA_VERSIONS`, so the table folder does not gather one file per commit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

import pyarrow as pa

from contracts.lake_tables import PARTITION_COLUMN, STREAM_TABLES, TABLES, TIMESTAMP_US

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

    from lake.iceberg_schema_changes import TypeChange

ICEBERG_FORMAT_VERSION: Final = 2
#: Snapshots younger than this are kept (time travel, ``reconcile --replay`` of a recent run);
#: older ones expire unless a tag references them.
SNAPSHOT_RETENTION_HOURS: Final = 2
#: Snapshots kept whatever their age.
SNAPSHOTS_TO_KEEP: Final = 10
#: metadata.json files kept besides the current one.
PREVIOUS_METADATA_VERSIONS: Final = 20

#: Properties every walletlake Iceberg table is created with (see the module docstring).
TABLE_PROPERTIES: Final[Mapping[str, str]] = {
    "format-version": str(ICEBERG_FORMAT_VERSION),
    "write.format.default": "parquet",
    "write.parquet.compression-codec": "zstd",
    "write.delete.isolation-level": "snapshot",
    "write.update.isolation-level": "snapshot",
    "commit.manifest-merge.enabled": "true",
    "commit.manifest.min-count-to-merge": "50",
    "commit.retry.num-retries": "10",
    "history.expire.max-snapshot-age-ms": str(SNAPSHOT_RETENTION_HOURS * 3600 * 1000),
    "history.expire.min-snapshots-to-keep": str(SNAPSHOTS_TO_KEEP),
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": str(PREVIOUS_METADATA_VERSIONS),
}


#: The properties the CloudFormation-created tables were first deployed with: their template keeps
#: exactly these (a changed resource would be an update Glue documents nothing about); the others
#: are set at run time by :func:`update_properties`.
CREATION_PROPERTY_KEYS: Final = frozenset(
    {
        "format-version",
        "write.format.default",
        "write.parquet.compression-codec",
        "write.delete.isolation-level",
        "write.update.isolation-level",
        "commit.manifest-merge.enabled",
        "commit.manifest.min-count-to-merge",
        "commit.retry.num-retries",
    }
)


def iceberg_creation_schema(table: str) -> Schema:
    """The Iceberg schema the deployed table was created with: the contract's first
    ``created_columns`` columns and ``dt`` (:attr:`contracts.lake_tables.LakeTable.created_columns`)."""
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import assign_fresh_schema_ids

    arrow = iceberg_arrow_schema(table)
    created = STREAM_TABLES[table].created_columns
    if created is not None:
        arrow = pa.schema([*(arrow.field(i) for i in range(created)), arrow.field(PARTITION_COLUMN)])
    return assign_fresh_schema_ids(Catalog._convert_schema_if_needed(arrow))


def iceberg_arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of a table's Iceberg data files: timestamps in microseconds, ``dt`` last.

    Examples
    --------
    >>> iceberg_arrow_schema("wallets").field("created_at").type
    TimestampType(timestamp[us, tz=UTC])
    >>> iceberg_arrow_schema("wallets").names[-1]
    'dt'
    """
    fields = [
        field.with_type(TIMESTAMP_US) if pa.types.is_timestamp(field.type) else field
        for field in TABLES[table]
    ]
    return pa.schema([*fields, pa.field(PARTITION_COLUMN, pa.string(), nullable=True)])


def to_iceberg_rows(table: str, rows: pa.Table, day: str, current: Schema | None = None) -> pa.Table:
    """Rows of the lake schema as the Iceberg table's data-file rows (one UTC ``day``), with field
    ids (:func:`iceberg_file_schema`); a column of the table the rows lack is written as nulls.

    Raises
    ------
    ValueError
        The rows hold a column the table lacks (its schema must be evolved first:
        :func:`evolve_tables`), or lack a required one.
    """
    schema = iceberg_file_schema(table, current)
    unknown = sorted(set(rows.column_names) - set(schema.names))
    if unknown:
        raise ValueError(f"{table}: the table has no column {', '.join(unknown)}; evolve its schema first")
    columns = []
    for field in schema:
        if field.name == PARTITION_COLUMN:
            columns.append(pa.array([day] * rows.num_rows, field.type))
        elif field.name in rows.column_names:
            columns.append(rows.column(field.name).cast(field.type))
        elif field.nullable:
            columns.append(pa.nulls(rows.num_rows, field.type))
        else:
            raise ValueError(f"{table}: rows lack the required column {field.name}")
    return pa.Table.from_arrays(columns, schema=schema)


def iceberg_file_schema(table: str, current: Schema | None = None) -> pa.Schema:
    """The Arrow schema a data file of ``table`` is written with: every column carries its Iceberg
    field id (``PARQUET:field_id``), from the table's ``current`` schema (a column added later has
    the id the table gave it) or, without one, from :func:`iceberg_schema`.

    With field ids a reader resolves columns by id, as the Iceberg spec wants, not through the
    name mapping (some engines read NULLs for a file without ids and without a mapping).
    """
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    schema = current if current is not None else iceberg_schema(table)
    arrow = schema_to_pyarrow(schema, include_field_ids=True)
    wanted = iceberg_arrow_schema(table)
    return pa.schema(
        [
            arrow.field(name).with_type(wanted.field(name).type)
            if name in wanted.names
            else arrow.field(name)
            for name in arrow.names
        ]
    )


def identifier(namespace: str, table: str) -> tuple[str, str]:
    """The catalog identifier of a lake table."""
    if table not in STREAM_TABLES:
        raise ValueError(
            f"{table!r} is not an Iceberg table of the lake (they are {', '.join(STREAM_TABLES)})"
        )
    return (namespace, table)


def ensure_tables(catalog: Catalog, namespace: str, location_root: str | None = None) -> list[str]:
    """Create the namespace and every missing table; one line per table saying what was done.

    ``location_root`` (``s3://bucket/prefix``) places table ``t`` at ``{location_root}/t``; None
    lets the catalog choose (an S3 table bucket places tables itself). Idempotent: an existing
    table is left as it is (its columns are checked, never changed). A table the catalog lacks
    but whose metadata files are at its location (a lost catalog) is never created again: its
    line is a refusal naming ``walletlake lake register`` (:mod:`lake.iceberg_register`).
    """
    from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.table.sorting import SortField, SortOrder
    from pyiceberg.transforms import IdentityTransform

    from lake.iceberg_register import lost_table, refusal
    from lake.iceberg_schema_changes import refused_message

    with contextlib.suppress(NamespaceAlreadyExistsError):
        catalog.create_namespace(namespace)
    done: list[str] = []
    for spec in STREAM_TABLES.values():
        try:
            existing = catalog.load_table(identifier(namespace, spec.name))
        except NoSuchTableError:
            existing = None
        if existing is not None:
            changes = contract_changes(spec.name, existing.schema())
            added = evolve_table(existing)
            changed = update_properties(existing)
            promoted = [change.line() for change in changes if change.promotable]
            refused = [change.line() for change in changes if not change.promotable]
            done.append(
                f"iceberg table {namespace}.{spec.name}: exists"
                + (f"; columns added: {', '.join(added)}" if added else "")
                + (f"; types promoted: {'; '.join(promoted)}" if promoted else "")
                + (f"; properties set: {', '.join(changed)}" if changed else "")
                + (f"; REFUSED {refused_message(spec.name, refused)}" if refused else "")
            )
            continue
        lost = lost_table(catalog, namespace, spec.name, location_root)
        if lost is not None:  # an empty table here would carry on over the table's own history
            done.append(refusal(namespace, spec.name, lost))
            continue
        schema = iceberg_schema(spec.name)
        partition = PartitionSpec(
            PartitionField(
                source_id=schema.find_field(PARTITION_COLUMN).field_id,
                field_id=1000,
                transform=IdentityTransform(),
                name=PARTITION_COLUMN,
            )
        )
        order = SortOrder(
            *(
                SortField(source_id=schema.find_field(column).field_id, transform=IdentityTransform())
                for column in spec.sort_order
            )
        )
        catalog.create_table(
            identifier(namespace, spec.name),
            schema=schema,
            partition_spec=partition,
            sort_order=order,
            location=f"{location_root.rstrip('/')}/{spec.name}" if location_root else None,
            # Data files carry no Iceberg field ids (they are written by pyarrow as plain Parquet):
            # readers resolve their columns by name through the table's default name mapping.
            properties={
                **TABLE_PROPERTIES,
                "schema.name-mapping.default": schema.name_mapping.model_dump_json(),
            },
        )
        done.append(f"iceberg table {namespace}.{spec.name}: created")
    return done


def iceberg_schema(table: str) -> Schema:
    """The Iceberg schema of a new table: field ids 1..n in the Arrow schema's order, then the
    ids of nested fields (a map's key and value), as Iceberg assigns fresh ids."""
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import assign_fresh_schema_ids

    return assign_fresh_schema_ids(Catalog._convert_schema_if_needed(iceberg_arrow_schema(table)))


def missing_columns(table: Table) -> list[str]:
    """Columns the contract (:mod:`contracts.lake_tables`) has and the Iceberg table lacks."""
    names = {field.name for field in table.schema().fields}
    return [name for name in iceberg_arrow_schema(table.name()[-1]).names if name not in names]


def update_properties(table: Table) -> list[str]:
    """Set the :data:`TABLE_PROPERTIES` an older walletlake created the table without (snapshot
    retention in hours, metadata clean-up); returns the keys set. Only those keys are sent, so a
    concurrent commit's own properties (the committer's progress) are never overwritten."""
    current = table.properties
    wanted = {
        key: value
        for key, value in TABLE_PROPERTIES.items()
        if key != "format-version" and current.get(key) != value
    }
    if wanted:
        with table.transaction() as transaction:
            transaction.set_properties(wanted)
    return sorted(wanted)


def evolve_table(table: Table, attempts: int = 5) -> list[str]:
    """Add the contract's new columns to the table, by name, and apply the type promotions Iceberg
    allows (:mod:`lake.iceberg_schema_changes`); returns the columns added.

    The upgrade path of a lake written by an older walletlake: a column added to
    :mod:`contracts.lake_tables` (always nullable: old rows read it as null) is added to the table
    by ``union_by_name``, a metadata-only change with a new field id; no data file is rewritten.
    A type change Iceberg cannot promote is left out (the table keeps its type, and the committer
    holds the table: :func:`blocking_changes`), so it never fails the
    other changes. Idempotent and safe beside writers: a concurrent schema change refuses this
    commit, which is then decided again from the new schema. Provisioning runs it, and so does
    every landing process before its first write (:func:`lake.iceberg_landing.table_layouts`), so
    a column is in the table before any writer writes it.
    """
    from pyiceberg.exceptions import CommitFailedException

    added: list[str] = []
    for attempt in range(1, attempts + 1):
        missing = missing_columns(table)
        changes = contract_changes(table.name()[-1], table.schema())
        if not missing and not any(change.promotable for change in changes):
            return added
        wanted = _wanted_schema(table, {change.column for change in changes if not change.promotable})
        try:
            with table.update_schema() as update:
                update.union_by_name(wanted)
        except CommitFailedException:
            if attempt == attempts:
                raise
            table = table.refresh()
            continue
        added = missing
        table = table.refresh()
    return added


def _wanted_schema(table: Table, keep: set[str]) -> Schema:
    """The contract's schema, but with the table's own type for the columns in ``keep`` (type
    changes Iceberg refuses: union_by_name would raise on them)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    wanted = iceberg_schema(table.name()[-1])
    if not keep:
        return wanted
    current = {field.name: field.field_type for field in table.schema().fields}
    return Schema(
        *(
            NestedField(f.field_id, f.name, current[f.name], required=f.required, doc=f.doc)
            if f.name in keep
            else f
            for f in wanted.fields
        ),
        schema_id=wanted.schema_id,
    )


def contract_changes(table: str, table_schema: Schema) -> list[TypeChange]:
    """:func:`type_changes` of ``table`` against the contract's schema of it."""
    from lake.iceberg_schema_changes import type_changes

    return type_changes(table_schema, iceberg_schema(table))


def blocking_changes(table: str, table_schema: Schema) -> list[str]:
    """One line per type change the table cannot take (empty: the table can be committed to).

    Examples
    --------
    >>> blocking_changes("ledger", iceberg_schema("ledger"))
    []
    """
    return [change.line() for change in contract_changes(table, table_schema) if not change.promotable]
