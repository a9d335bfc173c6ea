"""Time travel for audits: a night reconciled on the Iceberg lake can be replayed exactly later.

The reconciliation records the snapshot of each Iceberg table it read and tags it; after more
entries are committed, a replay reads those snapshots again and reproduces the recorded findings,
while a fresh run sees the new entries.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Callable

import boto3
import pytest
from support.consume_cli import settings_env
from support.stream_records import TableWriter

from contracts.settings import Settings
from lake.committer import commit_landed
from lake.iceberg_catalog import load_table, open_catalog
from lake.snapshots import take_snapshot
from queries import engine_for
from queries.reconciliation import ReconciliationError, reconcile, replay
from stream_processor.consumer import drain

pytestmark = pytest.mark.stack


def land_and_commit(settings: Settings) -> None:
    drain(settings, batch_size=50)
    commit_landed(settings, boto3.client("s3", region_name=settings.region), open_catalog(settings))


def test_a_reconciled_night_replays_identically_after_more_commits(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(lake_format="iceberg")
    today = dt.datetime.now(dt.UTC).date()
    writer = TableWriter(settings.table)
    writer.workload(wallets=4, deposits=8, transfers=12)
    land_and_commit(settings)
    take_snapshot(settings, max_read_units_per_second=None)

    # GIVEN the night reconciled on the lake as it is
    first = reconcile(settings, today)
    assert first.ok
    assert first.ledger_rows == 8 + 2 * 12
    ledger_snapshot = first.lake_snapshots["ledger"]
    table = load_table(settings, "ledger", open_catalog(settings))
    assert table.metadata.refs[f"reconciled-{today.isoformat()}"].snapshot_id == ledger_snapshot

    # WHEN more entries are committed after it
    writer.workload(wallets=2, deposits=5, transfers=5)
    land_and_commit(settings)
    assert (
        load_table(settings, "ledger", open_catalog(settings)).current_snapshot().snapshot_id
        != ledger_snapshot
    )

    # THEN a replay of the night reads what it read and finds exactly what it found
    replayed = replay(settings, today)
    assert replayed.identical, replayed.differences
    assert replayed.report.ledger_rows == first.ledger_rows
    assert replayed.report.findings == first.findings
    assert replayed.report.lake_snapshots == first.lake_snapshots

    # AND the Trino statement Athena runs for it reads the same rows on DuckDB
    engine = engine_for(settings)
    try:
        pinned = engine.arrow(f"SELECT count(*) AS n FROM ledger FOR VERSION AS OF {ledger_snapshot}", {})
        current = engine.arrow("SELECT count(*) AS n FROM ledger", {})
    finally:
        engine.close()
    assert pinned.column("n").to_pylist() == [first.ledger_rows]
    assert current.column("n").to_pylist() == [first.ledger_rows + 5 + 2 * 5]

    # AND the command says so (exit 0), as JSON
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "walletlake.cli",
            "reconcile",
            "--date",
            today.isoformat(),
            "--replay",
            "--json",
        ],
        env={
            **os.environ,
            **settings_env(settings),
            "WALLETLAKE_LAKE_FORMAT": "iceberg",
            "WALLETLAKE_GLUE_DATABASE": settings.glue_database,
            "WALLETLAKE_QUERY_ENGINE": "duckdb",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["identical"] is True

    # AND a fresh run of the same night, on the lake as it is now, sees the later entries
    again = reconcile(settings, today)
    assert again.ledger_rows == first.ledger_rows + 5 + 2 * 5


def test_replay_refuses_a_day_without_a_recorded_iceberg_run(settings: Settings) -> None:
    with pytest.raises(ReconciliationError, match="no recorded reconciliation"):
        replay(settings, dt.date(2026, 1, 2))


def test_a_night_is_tagged_at_planning_and_replays_identically_after_the_committers_expiry(
    make_settings: Callable[..., Settings],
) -> None:
    import time

    from lake.iceberg_tables import SNAPSHOT_RETENTION_HOURS
    from lake.snapshot_expiry import expire_snapshots
    from lake.snapshot_tags import DAY_MS, night_tag
    from queries.reconciliation_athena import plan_reconciliation

    settings = make_settings(lake_format="iceberg")
    today = dt.datetime.now(dt.UTC).date()
    writer = TableWriter(settings.table)
    writer.workload(wallets=3, deposits=6, transfers=4)
    land_and_commit(settings)
    take_snapshot(settings, max_read_units_per_second=None)
    s3 = boto3.client("s3", region_name=settings.region)

    # GIVEN the nightly job's planning step (the AWS path: before any UNLOAD or classification)
    plan = plan_reconciliation(s3, settings, today, run="exec-tags")
    pinned = {name: int(v) for name, v in plan["days"][-1]["lake_snapshots"].items() if v is not None}
    # THEN every table it pinned is tagged already, kept for the audit retention
    for name, snapshot_id in pinned.items():
        tag = load_table(settings, name, open_catalog(settings)).metadata.refs[night_tag(today, snapshot_id)]
        assert (tag.snapshot_id, tag.max_ref_age_ms) == (
            snapshot_id,
            settings.audit_tag_retention_days * DAY_MS,
        )

    # WHEN the night is reconciled, more entries commit, and the committer's expiry runs hours later
    # removing every untagged snapshot but the newest
    first = reconcile(settings, today)
    writer.workload(wallets=1, deposits=3, transfers=0, seed=11)
    land_and_commit(settings)
    later = time.time() + (SNAPSHOT_RETENTION_HOURS + 1) * 3600
    for name in ("ledger", "wallets", "quarantine"):
        expire_snapshots(load_table(settings, name, open_catalog(settings)), later, keep=1)

    # THEN the planned snapshots are still there, and a replay of the night is identical
    for name, snapshot_id in pinned.items():
        assert (
            load_table(settings, name, open_catalog(settings)).metadata.snapshot_by_id(snapshot_id)
            is not None
        )
    replayed = replay(settings, today)
    assert replayed.identical, replayed.differences
    assert replayed.report.ledger_rows == first.ledger_rows
