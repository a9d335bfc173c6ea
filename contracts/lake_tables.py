"""Every lake table, once: its columns, what its rows mean, its day, how it is sorted and encoded.

A :class:`LakeTable` holds all of one table's facts, and every module reads them from
:data:`LAKE_TABLES`: the writers (which column's UTC day is a row's ``dt``), compaction (what
identifies a row, the order it writes), the Parquet encoder (which columns are dictionary-encoded),
the Iceberg tables (their declared sort order), Glue, Athena and DuckDB (columns, descriptions).

Money columns are ``int64`` micro-USD (docs/architecture.md, "Money"); timestamps are UTC. The ``dt``
partition column is not part of the file schemas: it lives in the object key
(``{table}/dt=YYYY-MM-DD/``) and Glue declares it as a projected partition key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final

import pyarrow as pa

from contracts.lake_table_names import STREAM_TABLE_NAMES

TIMESTAMP_MS: Final = pa.timestamp("ms", tz="UTC")
TIMESTAMP_US: Final = pa.timestamp("us", tz="UTC")

#: Column of the ledger and wallets rows holding the item's attributes the decoder does not know
#: (a newer writer's), as JSON text ``{"name": {"S": "..."}}`` (each value as DynamoDB JSON
#: writes it), null when there is none: an attribute is never dropped before the lake has a
#: column for it (docs/architecture.md, "Stream records → ledger"). JSON text rather than a
#: ``map``: every reader (Athena's ``json_extract_scalar``, DuckDB's ``->>``, plain Parquet, the
#: compaction's hash of a row) takes a string as it is.
#:
#: Columns added to a table here later must be nullable, and be added at the END of its schema:
#: old rows read them as null, and the Iceberg tables take them by name
#: (:func:`lake.iceberg_tables.evolve_table`, docs/operations.md, "Adding a column").
EXTRA_ATTRIBUTES: Final = "extra_attributes"
#: The ledger's column naming who asked for each movement (issue 28).
INITIATED_BY: Final = "initiated_by"

#: The partition column every table is projected on (type date, format yyyy-MM-dd).
PARTITION_COLUMN: Final = "dt"

LEDGER: Final = pa.schema(
    [
        pa.field("entry_id", pa.string(), nullable=False),  # "{txn_id}:debit" / ":credit"
        pa.field("txn_id", pa.string(), nullable=False),
        pa.field("txn_type", pa.string(), nullable=False),  # deposit / transfer
        pa.field("wallet_id", pa.string(), nullable=False),
        pa.field("counterparty_wallet_id", pa.string(), nullable=True),
        pa.field("direction", pa.string(), nullable=False),  # credit / debit
        pa.field("amount", pa.int64(), nullable=False),
        pa.field("delta", pa.int64(), nullable=False),
        pa.field("wallet_version", pa.int64(), nullable=False),
        pa.field("balance_after", pa.int64(), nullable=False),
        pa.field("nonce", pa.string(), nullable=False),
        pa.field("created_at", TIMESTAMP_MS, nullable=False),
        pa.field("stream_sequence", pa.string(), nullable=False),
        pa.field("ingested_at", TIMESTAMP_MS, nullable=False),
        pa.field(EXTRA_ATTRIBUTES, pa.string(), nullable=True),
        # who asked for the movement: the caller's IAM principal as the API's trusted front verified
        # it (wallet.principals), the configured default without one; null on rows written before
        # attribution existed (added by name to the existing tables: docs/operations.md)
        pa.field(INITIATED_BY, pa.string(), nullable=True),
    ]
)

#: The wallets' column naming who owns each (issue 44).
OWNER: Final = "owner"

WALLETS: Final = pa.schema(
    [
        pa.field("wallet_id", pa.string(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("created_at", TIMESTAMP_MS, nullable=False),
        pa.field(EXTRA_ATTRIBUTES, pa.string(), nullable=True),
        # who owns the wallet (wallet.ownership): null on wallets created before owners existed
        # (added by name to the existing tables: docs/operations.md, "Adding a column")
        pa.field(OWNER, pa.string(), nullable=True),
    ]
)

BALANCE_SNAPSHOTS: Final = pa.schema(
    [
        pa.field("wallet_id", pa.string(), nullable=False),
        pa.field("balance", pa.int64(), nullable=False),
        pa.field("version", pa.int64(), nullable=False),
        pa.field("updated_at", TIMESTAMP_MS, nullable=False),
        pa.field("snapshot_at", TIMESTAMP_MS, nullable=False),
    ]
)

DAILY_BALANCES: Final = pa.schema(
    [
        pa.field("wallet_id", pa.string(), nullable=False),
        pa.field("closing_balance", pa.int64(), nullable=False),
        pa.field("closing_version", pa.int64(), nullable=False),
        pa.field("entries", pa.int64(), nullable=False),
        pa.field("net_delta", pa.int64(), nullable=False),
    ]
)

RECONCILIATION: Final = pa.schema(
    [
        pa.field("wallet_id", pa.string(), nullable=True),  # null for global checks
        pa.field("status", pa.string(), nullable=False),
        pa.field("expected", pa.int64(), nullable=True),
        pa.field("actual", pa.int64(), nullable=True),
        pa.field("detail", pa.string(), nullable=False),
        pa.field("run_at", TIMESTAMP_MS, nullable=False),
    ]
)

QUARANTINE: Final = pa.schema(
    [
        pa.field("reason", pa.string(), nullable=False),
        pa.field("raw", pa.string(), nullable=False),  # the stream record's JSON
        pa.field("stream_sequence", pa.string(), nullable=True),
        pa.field("quarantined_at", TIMESTAMP_MS, nullable=False),
    ]
)


@dataclasses.dataclass(frozen=True, slots=True)
class CompactionLayout:
    """How compaction orders one stream table's rows and recognises copies of a row.

    Rows are sorted by ``order`` then ``prefer`` (the copy kept is the first: earliest ingested);
    ``key`` identifies a row and is determined by ``order``, so the sort makes copies neighbours;
    ``volatile`` columns may differ between copies (when and where a row was ingested).
    """

    key: tuple[str, ...]
    order: tuple[str, ...]
    volatile: tuple[str, ...] = ()
    prefer: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class LakeTable:
    """One lake table.

    Attributes
    ----------
    name:
        The table's name in S3, Glue, Athena and DuckDB.
    schema:
        Its data files' columns (without ``dt``).
    description:
        What one row means; the Glue table's description.
    time_column:
        For the tables the stream writes: the timestamp whose UTC day is a row's ``dt``, whose
        row-group min/max compacted files keep (time-range queries prune on it). None for the
        tables the nightly job writes.
    compaction:
        For the stream's tables: how compaction sorts them and finds copies.
    sort_order:
        For the stream's tables: the Iceberg table's declared sort order.
    created_columns:
        For the stream's tables: how many of ``schema``'s leading columns the deployed Iceberg
        table was created with (by CloudFormation, whose resource must never change: an update
        of an ``AWS::Glue::Table``'s Iceberg input is not a schema change Glue documents).
        Columns after them are added by name at run time (``lake.iceberg_tables.evolve_table``).
        Never change it: a new column is appended to ``schema``, nothing else.
    """

    name: str
    schema: pa.Schema
    description: str
    time_column: str | None = None
    compaction: CompactionLayout | None = None
    sort_order: tuple[str, ...] = ()
    created_columns: int | None = None

    @property
    def layout(self) -> CompactionLayout:
        """The compaction layout of a stream table (a nightly table has none)."""
        if self.compaction is None:
            raise ValueError(f"{self.name!r} is not written by the stream; it has no compaction layout")
        return self.compaction

    @property
    def day_column(self) -> str:
        """The column whose UTC day is a row's ``dt`` (stream tables only)."""
        if self.time_column is None:
            raise ValueError(f"{self.name!r} is not written by the stream; it has no day column")
        return self.time_column


#: Every lake table by its name.
LAKE_TABLES: Final[Mapping[str, LakeTable]] = {
    "ledger": LakeTable(
        "ledger",
        LEDGER,
        "One row per wallet movement (double entry: a transfer is a debit and a credit).",
        time_column="created_at",
        compaction=CompactionLayout(
            key=("entry_id",),
            order=("wallet_id", "wallet_version", "entry_id"),
            volatile=("stream_sequence", "ingested_at"),
            prefer=("ingested_at", "stream_sequence"),
        ),
        sort_order=("wallet_id", "wallet_version"),
        created_columns=14,
    ),
    "wallets": LakeTable(
        "wallets",
        WALLETS,
        "One row per wallet created.",
        time_column="created_at",
        compaction=CompactionLayout(key=("wallet_id",), order=("wallet_id",)),
        sort_order=("wallet_id",),
        created_columns=3,
    ),
    "balance_snapshots": LakeTable(
        "balance_snapshots",
        BALANCE_SNAPSHOTS,
        "Each wallet's balance and version as read from DynamoDB at snapshot time.",
    ),
    "daily_balances": LakeTable(
        "daily_balances", DAILY_BALANCES, "Each wallet's reconciled closing balance and version per day."
    ),
    "reconciliation": LakeTable(
        "reconciliation",
        RECONCILIATION,
        "Findings of the nightly reconciliation, one per wallet or global check.",
    ),
    "quarantine": LakeTable(
        "quarantine",
        QUARANTINE,
        "Stream records that could not be turned into lake rows, kept whole for replay.",
        time_column="quarantined_at",
        compaction=CompactionLayout(
            key=("stream_sequence", "reason", "raw"),
            order=("stream_sequence", "reason", "raw"),
            volatile=("quarantined_at",),
            prefer=("quarantined_at",),
        ),
        sort_order=("quarantined_at",),
        created_columns=4,
    ),
}

#: Each table's columns by its name (a view of :data:`LAKE_TABLES`).
TABLES: Final[Mapping[str, pa.Schema]] = {name: table.schema for name, table in LAKE_TABLES.items()}

#: The tables the stream writes (landing files, compaction, the Iceberg tables and their committer).
STREAM_TABLES: Final[Mapping[str, LakeTable]] = {name: LAKE_TABLES[name] for name in STREAM_TABLE_NAMES}
if any((table.time_column is None) == (name in STREAM_TABLES) for name, table in LAKE_TABLES.items()):
    raise ValueError(
        f"the stream's tables, {', '.join(STREAM_TABLE_NAMES)}, must be those with a time column"
    )

#: Columns of few distinct values (types, directions, statuses, reasons): dictionary-encoded in
#: every file, which makes them a few bits per row.
DICTIONARY_COLUMNS: Final = frozenset({"txn_type", "direction", "status", "reason"})

#: The SQL type (Glue/Hive, as Athena reads it; DuckDB maps it on) of each Arrow type the lake uses.
_GLUE_TYPES: Final[dict[pa.DataType, str]] = {
    pa.string(): "string",
    pa.int64(): "bigint",
    TIMESTAMP_MS: "timestamp",
    TIMESTAMP_US: "timestamp",
}


def glue_type(arrow_type: pa.DataType) -> str:
    """The Glue/Hive type Athena reads an Arrow column as."""
    try:
        return _GLUE_TYPES[arrow_type]
    except KeyError:
        raise TypeError(f"no Glue type for Arrow type {arrow_type}") from None


def glue_columns(schema: pa.Schema) -> list[dict[str, str]]:
    """Glue ``Columns`` for a lake schema (the partition column is declared separately)."""
    return [{"Name": field.name, "Type": glue_type(field.type)} for field in schema]


def table_of(schema: pa.Schema, columns: Mapping[str, object], rows: int) -> pa.Table:
    """A table of ``schema`` from the ``columns`` given, every other column null.

    What builders of rows outside the pipeline (tests, benchmarks) use, so a nullable column added
    to a table's schema breaks none of them that does not use it.
    """
    return pa.table(
        {field.name: columns.get(field.name, pa.nulls(rows, field.type)) for field in schema}, schema=schema
    )


def row_of(schema: pa.Schema, values: Mapping[str, object]) -> dict[str, object]:
    """One row of ``schema`` as a dict from the ``values`` given, every other column None."""
    return {field.name: values.get(field.name) for field in schema}
