"""An instant whose snapshot expired is refused, as typed, in one line: never another snapshot.

Three commits, the first tagged as a night's reconciliation, the second expired (as the
committer's expiry removes untagged snapshots past retention). pyiceberg would answer an instant
at the second with the tag (its newest surviving entry before it); ``walletlake sql --as-of`` and
``FOR TIMESTAMP AS OF`` refuse it, naming the retention and the nearest tags, and still read the
instants whose snapshot is kept.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
from collections.abc import Callable

import boto3
import pytest
from support.stream_records import TableWriter

from contracts.settings import Settings
from lake.committer import commit_landed
from lake.iceberg_catalog import load_table, open_catalog
from lake.iceberg_tables import SNAPSHOT_RETENTION_HOURS
from lake.snapshot_expiry import expire_snapshots
from stream_processor.consumer import drain

pytestmark = pytest.mark.stack


def sql(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "walletlake.cli", "sql", *args],
        env={**os.environ, **settings.to_env()},
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def instant(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def test_an_expired_instant_is_refused_in_one_line_and_a_kept_one_is_read(
    make_settings: Callable[..., Settings],
) -> None:
    # GIVEN three ledger commits of 2 deposits each, the first tagged, the second expired
    settings = make_settings(lake_format="iceberg")
    writer = TableWriter(settings.table)
    s3 = boto3.client("s3", region_name=settings.region)
    stamps = []
    for seed in range(3):
        writer.workload(wallets=1, deposits=2, transfers=0, seed=seed)
        drain(settings, batch_size=100)
        commit_landed(settings, s3, open_catalog(settings), empty_after_seconds=0)
        snapshot = load_table(settings, "ledger", open_catalog(settings)).current_snapshot()
        assert snapshot is not None
        stamps.append(snapshot.timestamp_ms)
    ledger = load_table(settings, "ledger", open_catalog(settings))
    history = [s.snapshot_id for s in ledger.snapshots()]
    with ledger.manage_snapshots() as manage:
        manage.create_tag(history[0], "reconciled-2026-11-26")
    expired = expire_snapshots(
        load_table(settings, "ledger", open_catalog(settings)),
        time.time() + (SNAPSHOT_RETENTION_HOURS + 1) * 3600,
        keep=1,
    )
    assert expired == 1

    # WHEN the expired instant is asked for, with --as-of and with FOR TIMESTAMP AS OF
    as_of = sql(settings, "SELECT count(*) AS n FROM ledger", "--as-of", instant(stamps[1]))
    moment = instant(stamps[1]).replace("T", " ").removesuffix("Z")
    clause = sql(settings, f"SELECT count(*) AS n FROM ledger FOR TIMESTAMP AS OF TIMESTAMP '{moment} UTC'")

    # THEN both are refused in one line naming the retention and the nearest tag, as bad input
    # (exit 2), before any query runs
    for done, status in ((as_of, 2), (clause, 2)):
        assert done.returncode == status, done.stdout + done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert "ledger: no snapshot is known at " in line
        assert f"snapshots are kept {SNAPSHOT_RETENTION_HOURS} hours" in line
        assert "nearest tags: reconciled-2026-11-26 (" in line
        assert "Traceback" not in done.stderr
    # AND the kept instants read exactly what was committed then
    latest = sql(
        settings, "SELECT count(*) AS n FROM ledger", "--as-of", instant(stamps[2]), "--format", "csv"
    )
    assert latest.returncode == 0, latest.stderr
    assert latest.stdout.splitlines() == ["n", str(len(writer.model.entries))]
