"""A lake on pyiceberg's SQL catalog (SQLite) and a local folder: no server.

The SQL catalog applies a commit only if every requirement the commit sends holds, and checks
nothing else: exactly what the Iceberg REST protocol asks of a catalog (Glue's included). A test
that passes here proves the committer's own requirements are enough.
"""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from contracts.lake_tables import PARTITION_COLUMN, STREAM_TABLES, table_of
from contracts.wallets_table import TXN_DEPOSIT
from lake.iceberg_data_files import describe_written
from lake.iceberg_tables import ensure_tables, iceberg_file_schema, identifier, to_iceberg_rows
from lake.landing_log import LandedFile, LandingRecord

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog

NAMESPACE = "walletlake"
DAY = dt.date(2026, 3, 1)
_sequence = itertools.count(1)


def sql_catalog(folder: Path) -> SqlCatalog:
    """A fresh SQL catalog with the lake's stream tables under ``folder``."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(
        "test",
        uri=f"sqlite:///{folder / 'catalog.db'}",
        warehouse=f"file://{folder / 'warehouse'}",
    )
    ensure_tables(catalog, NAMESPACE, location_root=f"file://{folder / 'warehouse'}")
    return catalog


def wallet_rows(wallet_ids: list[str]) -> pa.Table:
    """Rows of the wallets table (the schema's other columns null)."""
    created = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
    return _of_schema(
        "wallets",
        {
            "wallet_id": wallet_ids,
            "user_id": [f"user-{w}" for w in wallet_ids],
            "created_at": [created] * len(wallet_ids),
        },
        len(wallet_ids),
    )


def _of_schema(table: str, values: dict[str, list[object]], rows: int) -> pa.Table:
    """``values`` as rows of the table's contract, every column not given null: a nullable column
    added to the contract breaks no test that does not use it."""
    return table_of(STREAM_TABLES[table].schema, values, rows)


def ledger_rows(entry_ids: list[str]) -> pa.Table:
    """Rows of the ledger table (one deposit credit per entry id; the schema's other columns null)."""
    created = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
    n = len(entry_ids)
    values: dict[str, list[object]] = {
        "entry_id": list(entry_ids),
        "txn_id": [e.split(":")[0] for e in entry_ids],
        "txn_type": [TXN_DEPOSIT] * n,
        "wallet_id": ["w"] * n,
        "direction": ["credit"] * n,
        "amount": [1] * n,
        "delta": [1] * n,
        "wallet_version": list(range(1, n + 1)),
        "balance_after": list(range(1, n + 1)),
        "nonce": list(entry_ids),
        "created_at": [created] * n,
        "stream_sequence": ["1"] * n,
        "ingested_at": [created] * n,
    }
    return _of_schema("ledger", values, n)


def write_file(folder: Path, table: str, rows: pa.Table) -> LandedFile:
    """One landed data file of ``table`` as the landing writes it (Iceberg field ids included),
    described for the commit as the landing describes it (no footer read at commit)."""
    data = folder / "warehouse" / table / "data" / f"dt={DAY}"
    data.mkdir(parents=True, exist_ok=True)
    path = data / f"{uuid.uuid4().hex}.parquet"
    iceberg_rows = to_iceberg_rows(table, rows, DAY.isoformat())
    pq.write_table(iceberg_rows.cast(iceberg_file_schema(table)), path)
    body = path.read_bytes()
    return LandedFile(
        table=table,
        path=f"file://{path}",
        rows=rows.num_rows,
        size=len(body),
        description=describe_written(body, {PARTITION_COLUMN: DAY.isoformat()}),
    )


def record(
    folder: Path,
    *,
    stream: str = "stream",
    shard: str = "shard-1",
    wallets: list[str] = (),  # type: ignore[assignment]
    entries: list[str] = (),  # type: ignore[assignment]
    landed_at: float = 0.0,
) -> LandingRecord:
    """A landed batch of one shard (sequence numbers increase across calls) with its files."""
    first = next(_sequence) * 10
    files = []
    if wallets:
        files.append(write_file(folder, "wallets", wallet_rows(list(wallets))))
    if entries:
        files.append(write_file(folder, "ledger", ledger_rows(list(entries))))
    return LandingRecord(
        stream=stream,
        shard=shard,
        first=first,
        last=first + 5,
        files=tuple(files),
        landed_at=landed_at,
        key=f"_landed/{stream}/{shard}/{first:0>40}-{first + 5:0>40}.json",
    )


def column(catalog: SqlCatalog, table: str, name: str) -> list[object]:
    """A column of the table's current snapshot."""
    return catalog.load_table(identifier(NAMESPACE, table)).scan().to_arrow().column(name).to_pylist()


def commit_wallet_batches(catalog: SqlCatalog, folder: Path, count: int) -> tuple[str, str]:
    """``count`` commits of the wallets table, one landed batch of one new wallet each, as the
    committer makes them; the table's identifier."""
    from lake.committer import commit_table

    table_id = identifier(NAMESPACE, "wallets")
    for index in range(count):
        listed = [record(folder, wallets=[f"w{index}"])]
        commit_table(catalog, table_id, listed, live_sources={r.source for r in listed})
    return table_id
