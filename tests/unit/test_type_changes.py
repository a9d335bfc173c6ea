"""Type changes on pyiceberg's SQL catalog: promoted where Iceberg allows it, otherwise refused at
provisioning and held by the committer, never moved past."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from support.sql_lake import NAMESPACE, column, record, sql_catalog

import lake.iceberg_tables
from lake.commit_progress import read_progress
from lake.committer import commit_table
from lake.iceberg_schema_changes import promotable, type_changes
from lake.iceberg_tables import blocking_changes, ensure_tables, iceberg_schema, identifier

CONTRACT = lake.iceberg_tables.iceberg_arrow_schema


def contract_with(table: str, column_name: str, arrow_type: pa.DataType) -> pa.Schema:
    """The contract's schema of ``table`` with one column's type changed."""
    schema = CONTRACT(table)
    index = schema.get_field_index(column_name)
    return schema.set(index, schema.field(index).with_type(arrow_type))


def changed_contract(monkeypatch: pytest.MonkeyPatch, column_name: str, arrow_type: pa.DataType) -> None:
    def patched(table: str) -> pa.Schema:
        return contract_with(table, column_name, arrow_type) if table == "ledger" else CONTRACT(table)

    monkeypatch.setattr(lake.iceberg_tables, "iceberg_arrow_schema", patched)


def commit_all(catalog: object, listed: list, table: str, now: float = 10_000.0):  # type: ignore[type-arg, no-untyped-def]
    return commit_table(
        catalog,  # type: ignore[arg-type]
        identifier(NAMESPACE, table),
        listed,
        live_sources={r.source for r in listed},
        clock=lambda: now,
        empty_after_seconds=0,
    )


def test_only_the_specs_promotions_are_promotable() -> None:
    from pyiceberg.types import DecimalType, DoubleType, FloatType, IntegerType, LongType, StringType

    assert promotable(IntegerType(), LongType())
    assert promotable(FloatType(), DoubleType())
    assert promotable(DecimalType(10, 2), DecimalType(18, 2))
    assert not promotable(LongType(), IntegerType())
    assert not promotable(LongType(), DecimalType(20, 6))
    assert not promotable(DecimalType(10, 2), DecimalType(18, 3))
    assert not promotable(StringType(), LongType())
    # and the contract as it stands changes nothing of the tables it creates
    for table in ("ledger", "wallets", "quarantine"):
        assert type_changes(iceberg_schema(table), iceberg_schema(table)) == []
        assert blocking_changes(table, iceberg_schema(table)) == []


def test_int_to_long_is_promoted_by_provisioning_and_old_rows_read_as_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a ledger created and written when the contract had wallet_version as int32
    with monkeypatch.context() as old:
        changed_contract(old, "wallet_version", pa.int32())
        catalog = sql_catalog(tmp_path)
        before = [record(tmp_path, entries=["t1:credit", "t2:credit"])]
        assert commit_all(catalog, before, "ledger").rows == 2
        pending = [record(tmp_path, entries=["t4:credit"])]  # landed before, committed after
    table_id = identifier(NAMESPACE, "ledger")
    assert str(catalog.load_table(table_id).schema().find_field("wallet_version").field_type) == "int"

    # WHEN the contract's int64 is provisioned (twice), and a batch written with it commits
    done = ensure_tables(catalog, NAMESPACE)
    again = ensure_tables(catalog, NAMESPACE)
    after = [record(tmp_path, entries=["t3:credit"])]
    committed = commit_all(catalog, before + pending + after, "ledger")

    # THEN the column was promoted in place, said in one line, once; old and new rows read as long
    (line,) = [
        line
        for line in done
        if line.endswith(".ledger: exists; types promoted: wallet_version: int -> long (promotable)")
    ]
    assert line
    assert not any("promoted" in line for line in again)
    table = catalog.load_table(table_id)
    assert str(table.schema().find_field("wallet_version").field_type) == "long"
    assert (committed.rows, committed.blocked, committed.skipped_batches) == (2, "", 1)
    assert sorted(column(catalog, "ledger", "entry_id")) == [
        "t1:credit",
        "t2:credit",
        "t3:credit",
        "t4:credit",
    ]
    assert table.scan().to_arrow().schema.field("wallet_version").type == pa.int64()
    # AND the file written as int and committed after the promotion carries no wallet_version
    # bounds (encoded as int, they would be misread as long), so a filter on it reads every row
    version_id = table.schema().find_field("wallet_version").field_id
    (landed_before,) = pending[0].files
    (appended,) = [t.file for t in table.scan().plan_files() if t.file.file_path == landed_before.path]
    assert version_id not in appended.lower_bounds
    assert table.scan(row_filter="wallet_version >= 1").to_arrow().num_rows == 4


def test_a_change_iceberg_cannot_promote_is_refused_and_the_committer_holds_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN tables with committed rows, then a batch of ledger entries and wallets waiting
    catalog = sql_catalog(tmp_path)
    first = [record(tmp_path, entries=["t1:credit"])]
    commit_all(catalog, first, "ledger")
    waiting = [record(tmp_path, wallets=["w1"], entries=["t2:credit"])]
    listed = first + waiting
    ledger_id = identifier(NAMESPACE, "ledger")
    progress_before = read_progress(catalog.load_table(ledger_id))

    # WHEN the contract changes amount from int64 to a decimal, and provisioning and the committer run
    with monkeypatch.context() as changed:
        changed_contract(changed, "amount", pa.decimal128(20, 6))
        done = ensure_tables(catalog, NAMESPACE)
        held = commit_all(catalog, listed, "ledger")
        wallets = commit_all(catalog, listed, "wallets")

    # THEN provisioning refuses in one line naming the column and both types, and changes nothing
    (line,) = [line for line in done if ".ledger:" in line]
    assert (
        "REFUSED ledger: type change refused, amount: long -> decimal(20, 6) (Iceberg cannot promote it)"
        in line
    )
    assert str(catalog.load_table(ledger_id).schema().find_field("amount").field_type) == "long"
    # AND the committer holds the ledger (nothing committed, its position unmoved), not the wallets
    assert held.blocked.startswith("ledger: type change refused, amount: long -> decimal(20, 6)")
    assert (held.rows, held.batches, held.snapshot_id) == (0, 0, None)
    assert read_progress(catalog.load_table(ledger_id)) == progress_before
    assert column(catalog, "ledger", "entry_id") == ["t1:credit"]
    assert (wallets.rows, wallets.blocked) == (1, "")

    # WHEN the contract is changed back, the next cycle commits what waited, once
    resumed = commit_all(catalog, listed, "ledger")
    assert (resumed.rows, resumed.blocked) == (1, "")
    assert sorted(column(catalog, "ledger", "entry_id")) == ["t1:credit", "t2:credit"]
