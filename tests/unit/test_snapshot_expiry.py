"""The committer expires old snapshots itself: tags, branch heads and the last few of main stay,
and no committed row or position moves."""

from __future__ import annotations

import time
from pathlib import Path

from support.sql_lake import NAMESPACE, column, commit_wallet_batches, sql_catalog

from lake.committer import read_progress
from lake.iceberg_tables import SNAPSHOT_RETENTION_HOURS
from lake.snapshot_expiry import expirable, expire_snapshots


def test_old_snapshots_expire_but_tagged_recent_and_rows_stay(tmp_path: Path) -> None:
    # GIVEN a table with 14 commits, the 3rd tagged (an audit's `reconciled-` tag)
    catalog = sql_catalog(tmp_path)
    table_id = commit_wallet_batches(catalog, tmp_path, 14)
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
    table_id = commit_wallet_batches(catalog, tmp_path, 12)
    table = catalog.load_table(table_id)
    assert expirable(table.metadata, time.time()) == []


def _committed(tmp_path: Path, count: int) -> tuple[object, tuple[str, str], list[int]]:
    catalog = sql_catalog(tmp_path)
    table_id = commit_wallet_batches(catalog, tmp_path, count)
    history = [snapshot.snapshot_id for snapshot in catalog.load_table(table_id).snapshots()]
    return catalog, table_id, history


def test_two_expiries_of_the_same_snapshots_at_once_do_not_crash(tmp_path: Path) -> None:
    # GIVEN two committers that loaded the table before either expired its old snapshots
    catalog, table_id, history = _committed(tmp_path, 14)
    first, second = catalog.load_table(table_id), catalog.load_table(table_id)  # type: ignore[attr-defined]
    later = time.time() + (SNAPSHOT_RETENTION_HOURS + 1) * 3600

    # WHEN both expire them
    done = expire_snapshots(first, later)
    again = expire_snapshots(second, later)

    # THEN the first removed them and the second, finding them gone, left it to the next run
    assert (done, again) == (4, 0)
    kept = [s.snapshot_id for s in catalog.load_table(table_id).snapshots()]  # type: ignore[attr-defined]
    assert kept == history[-10:]


def test_a_tag_past_its_max_ref_age_is_removed_and_its_snapshot_then_expires(tmp_path: Path) -> None:
    from lake.snapshot_expiry import expired_tags

    # GIVEN an audit tag of 400 days on an old snapshot, and one of a year and a half on another
    catalog, table_id, history = _committed(tmp_path, 14)
    table = catalog.load_table(table_id)  # type: ignore[attr-defined]
    day_ms = 24 * 3600 * 1000
    with table.manage_snapshots() as manage:
        manage.create_tag(history[1], "reconciled-2026-03-01", max_ref_age_ms=400 * day_ms)
        manage.create_tag(history[2], "reconciled-2026-03-02", max_ref_age_ms=550 * day_ms)
    table = catalog.load_table(table_id)  # type: ignore[attr-defined]

    # WHEN expiry runs 401 days later
    later = time.time() + 401 * 86_400
    assert expired_tags(table.metadata, later) == ["reconciled-2026-03-01"]
    expire_snapshots(table, later)

    # THEN the tag past its age is gone, and so is its snapshot; the younger tag and its snapshot stay
    table = catalog.load_table(table_id)  # type: ignore[attr-defined]
    assert sorted(name for name in table.metadata.refs if name != "main") == ["reconciled-2026-03-02"]
    kept = {s.snapshot_id for s in table.snapshots()}
    assert history[1] not in kept
    assert history[2] in kept


def test_an_instant_in_an_expired_stretch_is_refused_naming_retention_and_tags(tmp_path: Path) -> None:
    import pytest

    from lake.snapshot_log import NotRetainedError, snapshot_at

    # GIVEN 14 snapshots, the 3rd tagged, and every untagged one but the last 10 expired
    catalog, table_id, history = _committed(tmp_path, 14)
    table = catalog.load_table(table_id)  # type: ignore[attr-defined]
    with table.manage_snapshots() as manage:
        manage.create_tag(history[2], "reconciled-2026-03-01")
    table = catalog.load_table(table_id)  # type: ignore[attr-defined]
    stamps = {s.snapshot_id: s.timestamp_ms for s in table.snapshots()}
    before = table.metadata
    expire_snapshots(table, time.time() + (SNAPSHOT_RETENTION_HOURS + 1) * 3600)
    after = catalog.load_table(table_id).metadata  # type: ignore[attr-defined]

    # THEN before the expiry every instant was exact; after it, an instant at a removed snapshot
    # (the 4th: pyiceberg would answer the tag, 3 rows instead of 4) is refused, as is every one
    # before it (the tag's own stretch is followed by a removed snapshot); the kept stretch is exact
    assert [snapshot_at(before, stamps[s]) for s in history] == history
    with pytest.raises(NotRetainedError) as refused:
        snapshot_at(after, stamps[history[3]], table="wallets", retention_hours=SNAPSHOT_RETENTION_HOURS)
    message = str(refused.value)
    assert message.startswith("wallets: no snapshot is known at ")
    assert f"snapshots are kept {SNAPSHOT_RETENTION_HOURS} hours" in message
    assert "nearest tags: reconciled-2026-03-01 (" in message
    assert "\n" not in message
    for instant in (stamps[history[0]] - 1, stamps[history[1]], stamps[history[2]]):
        with pytest.raises(NotRetainedError):
            snapshot_at(after, instant)
    assert [snapshot_at(after, stamps[s]) for s in history[4:]] == history[4:]
    # AND a table's first instants, before any snapshot, read as empty
    assert snapshot_at(before, stamps[history[0]] - 1) is None


def test_the_maintenance_expiry_beside_the_committers_own_decides_again_and_does_not_crash(
    tmp_path: Path,
) -> None:
    from contracts.settings import Settings
    from lake.iceberg_cleanup import expire_snapshots as maintenance_expiry

    # GIVEN 14 commits, and `walletlake compact`'s expiry that loaded the table before the
    # committer's expiry removed the same snapshots
    catalog, table_id, history = _committed(tmp_path, 14)
    stale = catalog.load_table(table_id)  # type: ignore[attr-defined]
    later = time.time() + (SNAPSHOT_RETENTION_HOURS + 1) * 3600
    assert expire_snapshots(catalog.load_table(table_id), later) == 4  # type: ignore[attr-defined]

    class FirstLoadStale:
        """The catalog, its first answer the table as loaded before the committer's expiry."""

        def __init__(self) -> None:
            self.loads = 0

        def load_table(self, identifier: object) -> object:
            self.loads += 1
            return stale if self.loads == 1 else catalog.load_table(identifier)  # type: ignore[attr-defined]

    # WHEN the maintenance expiry commits its choice made from the stale table
    result = maintenance_expiry(
        Settings(glue_database=NAMESPACE),
        FirstLoadStale(),
        "wallets",
        3600,
        10,
        clock=lambda: later,  # type: ignore[arg-type]
    )

    # THEN it decided again from the table as it is: nothing left to expire, no crash
    assert result.expired == ()
    assert [s.snapshot_id for s in catalog.load_table(table_id).snapshots()] == history[-10:]  # type: ignore[attr-defined]
