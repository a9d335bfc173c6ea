"""The committer's transaction builds the table's metadata once per staged change (pyiceberg's
rebuilds and deep-copies it at every read), and reads exactly what pyiceberg's would."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.table import Transaction
from support.sql_lake import NAMESPACE, column, commit_wallet_batches, record, sql_catalog

from lake.committer import commit_table
from lake.iceberg_tables import identifier as table_identifier
from lake.iceberg_transaction import StagedMetadataTransaction


def test_metadata_is_built_once_per_staged_change_and_equals_pyicebergs(tmp_path: Path) -> None:
    # GIVEN a table with a few commits
    catalog = sql_catalog(tmp_path)
    table_id = commit_wallet_batches(catalog, tmp_path, 3)
    table = catalog.load_table(table_id)
    transaction = StagedMetadataTransaction(table)

    # WHEN its metadata is read twice with nothing staged between THEN it is built once
    first = transaction.table_metadata
    assert transaction.table_metadata is first
    assert first.model_dump(exclude={"last_updated_ms"}) == (
        Transaction(table).table_metadata.model_dump(exclude={"last_updated_ms"})
    )

    # WHEN an update is staged THEN the next read sees it, as pyiceberg's transaction would
    transaction.set_properties({"walletlake.test": "1"})
    staged = transaction.table_metadata
    assert staged is not first
    assert staged.properties["walletlake.test"] == "1"
    assert "walletlake.test" not in first.properties
    assert transaction.table_metadata is staged


def test_the_committer_commits_through_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the committer's commits counted through the transaction it uses
    import lake.iceberg_transaction

    built: list[int] = []
    build = Transaction.table_metadata.fget  # type: ignore[attr-defined]

    def counted(self: Transaction) -> object:
        built.append(1)
        return build(self)

    monkeypatch.setattr(lake.iceberg_transaction.Transaction, "table_metadata", property(counted))
    catalog = sql_catalog(tmp_path)
    table_id = table_identifier(NAMESPACE, "wallets")
    # WHEN batches are committed
    for index in range(2):
        listed = [record(tmp_path, wallets=[f"w{index}", f"v{index}"])]
        commit_table(catalog, table_id, listed, live_sources={r.source for r in listed})
    # THEN every row is in the table once, and each append built its metadata a few times, not
    # once per read (pyiceberg reads it about 17 times an append)
    assert sorted(column(catalog, "wallets", "wallet_id")) == ["v0", "v1", "w0", "w1"]  # type: ignore[type-var]
    assert 0 < len(built) <= 2 * 6  # 3 an append here; 37 for the two through pyiceberg's own
