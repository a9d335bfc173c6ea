"""Arrow schemas of every lake table: the one source for Parquet files, Glue tables and DuckDB views.

Money columns are ``int64`` micro-USD (docs/architecture.md, "Money"); timestamps are UTC. The ``dt``
partition column is not part of the file schemas: it lives in the object key
(``{table}/dt=YYYY-MM-DD/``) and Glue declares it as a projected partition key.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa

TIMESTAMP_MS: Final = pa.timestamp("ms", tz="UTC")
TIMESTAMP_US: Final = pa.timestamp("us", tz="UTC")

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
    ]
)

WALLETS: Final = pa.schema(
    [
        pa.field("wallet_id", pa.string(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("created_at", TIMESTAMP_MS, nullable=False),
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

#: Every lake table by its name in S3, in Glue and in DuckDB.
TABLES: Final[dict[str, pa.Schema]] = {
    "ledger": LEDGER,
    "wallets": WALLETS,
    "balance_snapshots": BALANCE_SNAPSHOTS,
    "daily_balances": DAILY_BALANCES,
    "reconciliation": RECONCILIATION,
    "quarantine": QUARANTINE,
}

#: What each table's rows mean; becomes the Glue table's description.
DESCRIPTIONS: Final[dict[str, str]] = {
    "ledger": "One row per wallet movement (double entry: a transfer is a debit and a credit).",
    "wallets": "One row per wallet created.",
    "balance_snapshots": "Each wallet's balance and version as read from DynamoDB at snapshot time.",
    "daily_balances": "Each wallet's reconciled closing balance and version per day.",
    "reconciliation": "Findings of the nightly reconciliation, one per wallet or global check.",
    "quarantine": "Stream records that could not be turned into lake rows, kept whole for replay.",
}

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
