"""A wallet's lake pages read each data file once, and answer as a plain pyiceberg scan would.

On pyiceberg's SQL catalog (no server): a day of ledger files holding two wallets' entries; every
page of a walk is compared with the scan of pyiceberg itself, filtered on the same bounds, and the
files read are counted.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.expressions import And, BooleanExpression, EqualTo, LessThan, Reference
from pyiceberg.expressions.literals import literal
from pyiceberg.table import Table
from support.sql_lake import DAY, NAMESPACE, sql_catalog

from contracts.lake_tables import STREAM_TABLES, table_of
from contracts.settings import Settings
from lake.iceberg_tables import iceberg_arrow_schema, identifier, to_iceberg_rows
from lake.ledger_history import COLUMNS, LakeLedger
from lake.wallet_file_rows import WalletFileRows

FILES = 6
MINE, OTHER = "wallet-mine", "wallet-other"


def _rows(versions: dict[str, range]) -> pa.Table:
    """Ledger rows of the wallets' versions (a deposit each, its balance the running sum)."""
    created = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
    wallets = [wallet for wallet, span in versions.items() for _ in span]
    numbers = [version for span in versions.values() for version in span]
    n = len(numbers)
    values: dict[str, Any] = {
        "entry_id": [f"{w}-{v}:credit" for w, v in zip(wallets, numbers, strict=True)],
        "txn_id": [f"{w}-{v}" for w, v in zip(wallets, numbers, strict=True)],
        "txn_type": ["deposit"] * n,
        "wallet_id": wallets,
        "direction": ["credit"] * n,
        "amount": [1] * n,
        "delta": [1] * n,
        "wallet_version": numbers,
        "balance_after": numbers,
        "nonce": [f"n-{w}-{v}" for w, v in zip(wallets, numbers, strict=True)],
        "created_at": [created + dt.timedelta(seconds=v) for v in numbers],
        "stream_sequence": ["1"] * n,
        "ingested_at": [created] * n,
    }
    return table_of(STREAM_TABLES["ledger"].schema, values, n)


@pytest.fixture
def ledger(tmp_path: Path) -> Table:
    """The ledger of one day in FILES files, each holding a run of both wallets' versions."""
    catalog = sql_catalog(tmp_path)
    table = catalog.load_table(identifier(NAMESPACE, "ledger"))
    per_file = 40
    for index in range(FILES):
        span = range(index * per_file + 1, (index + 1) * per_file + 1)
        rows = to_iceberg_rows("ledger", _rows({MINE: span, OTHER: span}), DAY.isoformat())
        table.append(rows.cast(iceberg_arrow_schema("ledger")))
    return catalog.load_table(identifier(NAMESPACE, "ledger"))


def _plain(table: Table, below: int | None) -> list[int]:
    """The versions pyiceberg's own scan gives for the wallet below ``below``, newest first."""
    condition: BooleanExpression = EqualTo(term=Reference("wallet_id"), value=literal(MINE))
    if below is not None:
        condition = And(condition, LessThan(term=Reference("wallet_version"), value=literal(below)))
    rows = table.scan(row_filter=condition, selected_fields=COLUMNS).to_arrow()
    return sorted(rows.column("wallet_version").to_pylist(), reverse=True)


def _walk(lake: LakeLedger, table: Table, limit: int) -> list[list[int]]:
    pages: list[list[int]] = []
    below: int | None = None
    while True:
        page = lake.newest(MINE, limit=limit, below=below, newest_day=DAY, oldest_day=DAY, table=table)
        if not page:
            return pages
        versions = [entry.version for entry in page]
        assert versions == _plain(table, below)[:limit]
        pages.append(versions)
        below = versions[-1]


def test_a_walk_reads_each_file_once_and_every_page_is_the_plain_scans(ledger: Table) -> None:
    lake = LakeLedger(Settings(glue_database=NAMESPACE))
    pages = _walk(lake, ledger, limit=25)
    assert [v for page in pages for v in page] == list(range(FILES * 40, 0, -1))
    # the first page opened every file holding versions below its cursor (all of them), and no
    # later page opened one again
    assert lake._files.reads == FILES
    assert lake._files.hits > 0
    # a second walk opens none
    assert [v for page in _walk(lake, ledger, limit=25) for v in page] == list(range(FILES * 40, 0, -1))
    assert lake._files.reads == FILES


def test_what_is_kept_stays_within_its_bound_and_pages_are_still_the_plain_scans(ledger: Table) -> None:
    lake = LakeLedger(Settings(glue_database=NAMESPACE))
    lake._files = WalletFileRows(max_bytes=1)  # nothing fits: every page reads its files again
    for limit in (37, 80):
        assert [v for page in _walk(lake, ledger, limit) for v in page] == list(range(FILES * 40, 0, -1))
    assert lake._files._bytes == 0
    assert lake._files.hits == 0


def test_a_schema_evolved_under_a_running_api_is_read_again_not_served_from_what_was_kept(
    ledger: Table,
) -> None:
    from pyiceberg.types import StringType

    lake = LakeLedger(Settings(glue_database=NAMESPACE))
    _walk(lake, ledger, limit=100)
    assert lake._files.reads == FILES
    with ledger.update_schema() as update:
        update.add_column("note", StringType())
    evolved = ledger.refresh()
    pages = _walk(lake, evolved, limit=100)
    assert [v for page in pages for v in page] == list(range(FILES * 40, 0, -1))
    assert lake._files.reads == 2 * FILES
