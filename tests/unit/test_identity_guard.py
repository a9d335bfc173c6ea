"""A replay appends only the rows a table does not hold, decided by each row's identity.

On pyiceberg's SQL catalog (no server): the committer's own check (:mod:`lake.identity_guard`),
whichever of a stream batch and a replay of the same entries commits first, or both at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sql_lake import NAMESPACE, column, record, sql_catalog

from lake.committer import commit_table
from lake.entry_identity import REPLAY_HORIZON_PROPERTY
from lake.iceberg_tables import identifier
from lake.landing_log import LandingRecord


def commit(catalog: object, table: str, records: list[LandingRecord]) -> object:
    return commit_table(
        catalog,  # type: ignore[arg-type]
        identifier(NAMESPACE, table),
        records,
        live_sources={r.source for r in records},
        clock=lambda: 1_000.0,
    )


def test_an_export_after_the_stream_appends_only_the_entries_the_ledger_lacks(tmp_path: Path) -> None:
    # GIVEN a ledger holding a, b and c from the stream
    catalog = sql_catalog(tmp_path)
    commit(catalog, "ledger", [record(tmp_path, entries=["a", "b", "c"])])
    # WHEN an export brings b, c and d back
    export = record(tmp_path, stream="export", shard="01772-e1", entries=["b", "c", "d"])
    result = commit(catalog, "ledger", [export])
    # THEN d alone is appended, and the two held back are counted
    assert sorted(column(catalog, "ledger", "entry_id")) == ["a", "b", "c", "d"]
    assert (result.rows, result.held_rows) == (1, 2)  # type: ignore[attr-defined]


def test_a_stream_batch_after_a_replay_of_its_entries_appends_only_the_new_ones(tmp_path: Path) -> None:
    # GIVEN a backfill that committed a and b first (the consumer was down)
    catalog = sql_catalog(tmp_path)
    commit(catalog, "ledger", [record(tmp_path, stream="export", shard="e1", entries=["a", "b"])])
    table = catalog.load_table(identifier(NAMESPACE, "ledger"))
    assert REPLAY_HORIZON_PROPERTY in table.properties
    # WHEN the consumer, catching up, lands a, b and c from the stream
    result = commit(catalog, "ledger", [record(tmp_path, entries=["a", "b", "c"])])
    # THEN c alone is appended
    assert sorted(column(catalog, "ledger", "entry_id")) == ["a", "b", "c"]
    assert (result.rows, result.held_rows) == (1, 2)  # type: ignore[attr-defined]


@pytest.mark.parametrize("first", ["stream", "export"])
def test_a_stream_batch_and_a_replay_in_one_commit_keep_each_entry_once(tmp_path: Path, first: str) -> None:
    # GIVEN a stream batch and an export chunk sharing b, neither committed
    catalog = sql_catalog(tmp_path)
    stream = record(tmp_path, entries=["a", "b"])
    export = record(tmp_path, stream="export", shard="e1", entries=["b", "c"])
    records = [stream, export] if first == "stream" else [export, stream]
    # WHEN one commit takes both, and a rerun of the export lands it again as a new chunk
    commit(catalog, "ledger", records)
    commit(catalog, "ledger", [record(tmp_path, stream="export", shard="e2", entries=["a", "b", "c"])])
    # THEN every entry is there once
    assert sorted(column(catalog, "ledger", "entry_id")) == ["a", "b", "c"]


def test_a_wallet_replayed_by_an_export_is_not_added_twice(tmp_path: Path) -> None:
    catalog = sql_catalog(tmp_path)
    commit(catalog, "wallets", [record(tmp_path, wallets=["w1", "w2"])])
    commit(catalog, "wallets", [record(tmp_path, stream="export", shard="e1", wallets=["w1", "w2", "w3"])])
    assert sorted(column(catalog, "wallets", "wallet_id")) == ["w1", "w2", "w3"]


def test_stream_batches_past_the_horizon_are_appended_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a table no replay ever committed to
    catalog = sql_catalog(tmp_path)
    import lake.identity_guard

    reads: list[str] = []
    real = lake.identity_guard.read_rows
    monkeypatch.setattr(lake.identity_guard, "read_rows", lambda t, p: reads.append(p) or real(t, p))
    # WHEN stream batches commit
    landed = record(tmp_path, entries=["a", "b"])
    commit(catalog, "ledger", [landed])
    # THEN no file was read, and the landed file is what the table holds
    table = catalog.load_table(identifier(NAMESPACE, "ledger"))
    assert reads == []
    assert [task.file.file_path for task in table.scan().plan_files()] == [landed.files[0].path]
    assert REPLAY_HORIZON_PROPERTY not in table.properties
