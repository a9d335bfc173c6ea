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
from support.stream_records import TableWriter, settings_env

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
