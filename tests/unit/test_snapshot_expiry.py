"""The committer expires old snapshots itself: tags, branch heads and the last few of main stay,
and no committed row or position moves."""

from __future__ import annotations

import time
from pathlib import Path

from support.sql_lake import NAMESPACE, column, record, sql_catalog

from lake.committer import commit_table, read_progress
from lake.iceberg_tables import SNAPSHOT_RETENTION_HOURS
from lake.iceberg_tables import identifier as table_identifier
from lake.snapshot_expiry import expirable, expire_snapshots


def test_old_snapshots_expire_but_tagged_recent_and_rows_stay(tmp_path: Path) -> None:
    # GIVEN a table with 14 commits, the 3rd tagged (an audit's `reconciled-` tag)
    catalog = sql_catalog(tmp_path)
    table_id = table_identifier(NAMESPACE, "wallets")
    for index in range(14):
        listed = [record(tmp_path, wallets=[f"w{index}"])]
        commit_table(catalog, table_id, listed, live_sources={r.source for r in listed})
    table = catalog.load_table(table_id)
    history = [snapshot.snapshot_id for snapshot in table.snapshots()]
    assert len(history) == 14
    with table.manage_snapshots() as manage:
        manage.create_tag(history[2], "reconciled-2026-03-01")
    table = catalog.load_table(table_id)
    progress = read_progress(table)

    # WHEN expiry runs with every snapshot past retention (the clock hours later)
    later = time.time() + (SNAPSHOT_RETENTION_HOURS + 1) * 3600
    expired = expire_snapshots(table, later)

    # THEN all but the tagged one and the last 10 of main are gone
    table = catalog.load_table(table_id)
    kept = {snapshot.snapshot_id for snapshot in table.snapshots()}
    assert kept == {history[2], *history[-10:]}
    assert expired == 14 - len(kept)
    # AND every row is still there, the tagged snapshot still readable, the progress unchanged
    assert sorted(column(catalog, "wallets", "wallet_id")) == sorted(f"w{i}" for i in range(14))  # type: ignore[type-var]
    tagged = table.scan(snapshot_id=history[2]).to_arrow()
    assert tagged.num_rows == 3
    assert read_progress(table) == progress
    # AND a second run finds nothing to expire
    assert expirable(table.metadata, later) == []
    assert expire_snapshots(table, later) == 0


def test_snapshots_within_retention_are_kept(tmp_path: Path) -> None:
    catalog = sql_catalog(tmp_path)
    table_id = table_identifier(NAMESPACE, "wallets")
    for index in range(12):
        listed = [record(tmp_path, wallets=[f"w{index}"])]
        commit_table(catalog, table_id, listed, live_sources={r.source for r in listed})
    table = catalog.load_table(table_id)
    assert expirable(table.metadata, time.time()) == []
