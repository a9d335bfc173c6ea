"""Exactly once into the Iceberg lake: the consumer and the committer killed anywhere, then rerun.

The stream is real (DynamoDB Local's stream of a table the write path's transactions wrote); the
consumer lands batches as Iceberg data files plus landing records; the committer appends them. A
crash is injected at each point that matters, the work is rerun, and the lake must then hold every
ledger entry once, versions 1..N per wallet, running sums equal to ``balance_after``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

import boto3
import pyarrow as pa
import pytest
from support.consume_cli import settings_env
from support.stream_records import TableWriter, assert_exact_ledger

import lake.iceberg_landing
from contracts.settings import Settings
from lake.committer import COMMIT_ID_PROPERTY, PROGRESS_PROPERTY, commit_landed, read_progress
from lake.iceberg_catalog import load_table, open_catalog
from lake.landing_log import log_prefix
from lake.objects import list_keys
from lake.writer import LandingWriteError
from stream_processor.consumer import drain

pytestmark = pytest.mark.stack


class InjectedCrashError(Exception):
    """Stands for the process dying at a chosen point."""


@pytest.fixture
def iceberg(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings(lake_format="iceberg")


def commit(settings: Settings) -> Any:
    """A cycle as ``walletlake consume`` runs it: batches without rows for a table commit at once."""
    client = boto3.client("s3", region_name=settings.region)
    return commit_landed(settings, client, open_catalog(settings), empty_after_seconds=0)


def scan(settings: Settings, table: str) -> pa.Table:
    return load_table(settings, table, open_catalog(settings)).scan().to_arrow()


def test_drained_stream_is_committed_once_with_its_shard_positions(iceberg: Settings) -> None:
    # GIVEN 4 wallets, 8 deposits and 20 transfers written, drained in batches of 9
    writer = TableWriter(iceberg.table)
    writer.workload(wallets=4, deposits=8, transfers=20)
    summary = drain(iceberg, batch_size=9)

    # WHEN the committer runs twice
    first = commit(iceberg)
    second = commit(iceberg)

    # THEN the first commit took every batch, in one snapshot per table, and the second nothing
    ledger_commit = next(table for table in first.tables if table.table == "ledger")
    assert ledger_commit.batches == summary.batches
    assert ledger_commit.rows == 8 + 2 * 20
    assert all(table.batches == 0 for table in second.tables)
    # AND the lake is exact
    assert_exact_ledger(scan(iceberg, "ledger"), writer.model.entries)
    assert sorted(scan(iceberg, "wallets").column("wallet_id").to_pylist()) == sorted(writer.model.wallets)
    # AND the table's property records the shard's last committed sequence number, the snapshot's
    # summary only the commit's constant-size identity
    table = load_table(iceberg, "ledger", open_catalog(iceberg))
    progress = read_progress(table)
    assert len(progress) == 1
    (last, _when) = next(iter(progress.values()))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    assert snapshot.summary is not None
    assert PROGRESS_PROPERTY not in snapshot.summary.additional_properties
    assert len(snapshot.summary[COMMIT_ID_PROPERTY]) == 32
    assert max(int(s) for s in scan(iceberg, "ledger").column("stream_sequence").to_pylist()) <= last


@pytest.mark.parametrize("stage", ["before_write", "after_write", "after_checkpoint"])
def test_consumer_crash_anywhere_then_rerun_with_other_batches(iceberg: Settings, stage: str) -> None:
    # GIVEN a consumer that dies at `stage` of its third batch, after a commit of the first two
    writer = TableWriter(iceberg.table)
    writer.workload(wallets=4, deposits=8, transfers=20)
    seen: list[str] = []

    def crash_on_third_batch(point: str) -> None:
        seen.append(point)
        if point == "before_write" and seen.count(point) == 3:
            commit(iceberg)
        if point == stage and seen.count(stage) == 3:
            raise InjectedCrashError(stage)

    with pytest.raises(InjectedCrashError):
        drain(iceberg, batch_size=7, fault_hook=crash_on_third_batch)

    # WHEN a new consumer drains with a different batch size (its batches straddle the landed ones)
    drain(iceberg, batch_size=5)
    commit(iceberg)

    # THEN every entry is in the lake once
    assert_exact_ledger(scan(iceberg, "ledger"), writer.model.entries)
    assert sorted(scan(iceberg, "wallets").column("wallet_id").to_pylist()) == sorted(writer.model.wallets)


def test_consumer_dying_between_its_files_and_its_record_leaves_only_orphans(
    iceberg: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a consumer whose second landing record cannot be written (its data files are)
    writer = TableWriter(iceberg.table)
    writer.workload(wallets=3, deposits=6, transfers=10)
    real_put = lake.iceberg_landing.put_record
    calls: list[int] = []

    def failing_put(*args: Any, **kwargs: Any) -> bool:
        calls.append(1)
        if len(calls) == 2:
            raise InjectedCrashError("landing record")
        return real_put(*args, **kwargs)

    monkeypatch.setattr(lake.iceberg_landing, "put_record", failing_put)
    with pytest.raises(LandingWriteError, match="landing record"):
        drain(iceberg, batch_size=6)
    # (the files the failed batch wrote are removed, best effort, so no committer ever needs them)
    commit(iceberg)
    monkeypatch.setattr(lake.iceberg_landing, "put_record", real_put)

    # WHEN the consumer runs again and the committer after it
    drain(iceberg, batch_size=6)
    commit(iceberg)

    # THEN the lake is exact
    assert_exact_ledger(scan(iceberg, "ledger"), writer.model.entries)


_KILLER = textwrap.dedent(
    """
    import os, signal, sys
    import boto3
    import lake.committer as committer
    from pyiceberg.catalog.rest import RestCatalog
    from lake.iceberg_catalog import open_catalog
    from contracts.settings import Settings

    stage = sys.argv[1]
    real_commit = RestCatalog.commit_table

    def commit_table(self, table, requirements, updates):
        if stage == "before_commit":
            os.kill(os.getpid(), signal.SIGKILL)
        answer = real_commit(self, table, requirements, updates)
        if stage == "response_lost":
            os.kill(os.getpid(), signal.SIGKILL)
        return answer

    RestCatalog.commit_table = commit_table
    real_table = committer.commit_table

    def commit_one_table(*args, **kwargs):
        result = real_table(*args, **kwargs)
        if stage == "after_first_table":
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    committer.commit_table = commit_one_table
    settings = Settings.from_env()
    committer.commit_landed(settings, boto3.client("s3"), open_catalog(settings))
    """
)


@pytest.mark.parametrize("stage", ["before_commit", "response_lost", "after_first_table"])
def test_committer_killed_before_during_and_after_a_commit(iceberg: Settings, stage: str) -> None:
    # GIVEN landed batches, some already committed
    writer = TableWriter(iceberg.table)
    writer.workload(wallets=3, deposits=6, transfers=8)
    drain(iceberg, batch_size=8)
    commit(iceberg)
    writer.workload(wallets=2, deposits=4, transfers=12)
    drain(iceberg, batch_size=8)

    # WHEN a committer process is SIGKILLed at `stage`
    env = {**os.environ, **settings_env(iceberg), "WALLETLAKE_LAKE_FORMAT": "iceberg"}
    env["WALLETLAKE_GLUE_DATABASE"] = iceberg.glue_database
    killed = subprocess.run(
        [sys.executable, "-c", _KILLER, stage],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert killed.returncode == -9, killed.stderr

    # AND a new committer runs (twice, as the schedule would)
    commit(iceberg)
    commit(iceberg)

    # THEN every entry is committed once
    assert_exact_ledger(scan(iceberg, "ledger"), writer.model.entries)
    assert sorted(scan(iceberg, "wallets").column("wallet_id").to_pylist()) == sorted(writer.model.wallets)


def test_landing_log_is_kept_until_retention_then_tidied(iceberg: Settings) -> None:
    from lake.committer import RECORD_RETENTION_SECONDS, tidy_log

    writer = TableWriter(iceberg.table)
    writer.workload(wallets=2, deposits=2, transfers=2)
    drain(iceberg, batch_size=4)
    commit(iceberg)
    client = boto3.client("s3", region_name=iceberg.region)
    records = list_keys(client, iceberg.bucket, log_prefix(iceberg.lake_prefix))
    assert records

    catalog = open_catalog(iceberg)
    assert tidy_log(iceberg, client, catalog) == 0  # committed, but younger than the stream's retention
    later = tidy_log(iceberg, client, catalog, clock=lambda: time.time() + RECORD_RETENTION_SECONDS + 60)
    assert later == len(records)
    assert list_keys(client, iceberg.bucket, log_prefix(iceberg.lake_prefix)) == []


def test_quiet_shards_are_listed_only_by_the_periodic_full_listing(iceberg: Settings) -> None:
    from lake.committer import FULL_LISTING_EVERY_SECONDS, QUIET_AFTER_SECONDS

    # GIVEN a shard committed once, then silent for more than an hour, then one late batch
    writer = TableWriter(iceberg.table)
    writer.workload(wallets=2, deposits=2, transfers=0)
    drain(iceberg, batch_size=50)
    commit(iceberg)
    writer.workload(wallets=1, deposits=1, transfers=0, seed=8)
    drain(iceberg, batch_size=50)
    client = boto3.client("s3", region_name=iceberg.region)
    catalog = open_catalog(iceberg)
    later = time.time() + QUIET_AFTER_SECONDS + 600
    between = later - later % FULL_LISTING_EVERY_SECONDS + FULL_LISTING_EVERY_SECONDS / 2

    # WHEN a cycle that is not a full listing runs: the quiet shard is not listed, nothing commits
    quiet = commit_landed(iceberg, client, catalog, clock=lambda: between)
    assert [table.batches for table in quiet.tables] == [0, 0, 0]

    # THEN the next full listing takes the late batch, once
    full = commit_landed(iceberg, client, catalog, clock=lambda: between + FULL_LISTING_EVERY_SECONDS / 2)
    assert next(table for table in full.tables if table.table == "ledger").rows == 1
    assert_exact_ledger(scan(iceberg, "ledger"), writer.model.entries)
