"""The embedded stack keeps the lake: restarts, a killed stack, and an S3 server frozen then killed.

Each test runs a stack of its own on a data dir of its own (not the session's), because it stops,
kills or freezes its servers. The lake lives in SeaweedFS under the data dir, the table and the
consumer's checkpoints in DynamoDB Local beside it, so after a restart all three still agree.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import psutil
import pytest
from support.consume_cli import consume
from support.fresh_resources import write_path_env
from support.ports import free_port_run
from support.stream_records import assert_lake_matches, poll_until, read_lake_table

from contracts.settings import LAKE_FORMAT_VARIABLE, Settings
from lake.compaction_units import compact_day
from lake.snapshots import take_snapshot
from queries import run_query
from queries.reconciliation import reconcile
from walletlake.api_server import ApiServer
from walletlake.local import EmbeddedStack, free_port, patched_environ
from walletlake.workload import WorkloadReport, run_workload

pytestmark = [pytest.mark.stack, pytest.mark.slow]


@contextlib.contextmanager
def own_stack(data_dir: Path, **ports: int) -> Iterator[EmbeddedStack]:
    """A stack on ``data_dir`` with the SDK pointed at it for the block (the session's is restored),
    its lake the tests' plain Parquet one whether or not the session's stack set it already (these
    tests read the lake's files by key: alone, they once ran on the default Iceberg lake and failed)."""
    with (
        EmbeddedStack(data_dir, **ports) as stack,
        patched_environ({**stack.environment(), LAKE_FORMAT_VARIABLE: "parquet"}),
    ):
        yield stack


def objects(settings: Settings) -> dict[str, tuple[int, str]]:
    """Every object of the lake bucket: key → (size, ETag)."""
    s3 = boto3.client("s3", region_name=settings.region)
    found: dict[str, tuple[int, str]] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=settings.bucket):
        for item in page.get("Contents", []):
            found[item["Key"]] = (item["Size"], item["ETag"])
    return found


def statement(settings: Settings, wallet_id: str, day: dt.date) -> list[dict[str, Any]]:
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
    frame = run_query(
        "wallet_statement",
        {
            "wallet_id": wallet_id,
            "start": start.isoformat(),
            "end": (start + dt.timedelta(days=1)).isoformat(),
        },
        settings,
    )
    return [{k: str(v) for k, v in row.items()} for row in frame.to_dict("records")]


def workload(settings: Settings, seed: int, wallets: int = 6, transfers: int = 30) -> WorkloadReport:
    with ApiServer(env=write_path_env(settings)) as api:
        report = run_workload(
            api.url, wallets=wallets, deposits_per_wallet=2, transfers=transfers, concurrency=4, seed=seed
        )
    assert report.unresolved == report.replay_mismatches == 0
    return report


def test_a_restart_on_the_same_data_dir_keeps_lake_table_and_checkpoints(tmp_path: Path) -> None:
    today = dt.datetime.now(dt.UTC).date()
    # GIVEN a stack whose lake was filled through the API and the consumer, compacted and reconciled
    with own_stack(tmp_path / "data") as first:
        settings = Settings.from_env()  # the stack's default names, DuckDB for SQL
        assert first.footprint is not None
        assert first.footprint.startup_seconds > 0
        assert set(first.footprint.resident_bytes) == {"DynamoDB Local", "SeaweedFS", "moto server"}
        assert all(size > 0 for size in first.footprint.resident_bytes.values())
        report = workload(settings, seed=5)
        landed = consume(settings)
        assert landed["ledger_rows"] == report.ledger_entries_expected
        compact_day(settings, today)
        take_snapshot(settings)
        verdict = reconcile(settings, today)
        assert verdict.ok
        busiest = max(report.expected_versions, key=lambda wallet: report.expected_versions[wallet])
        statement_before = statement(settings, busiest, today)
        lake_before = objects(settings)
        ledger_before = read_lake_table(settings, "ledger").to_pylist()

    # WHEN the stack stops and starts again on the same data dir
    with own_stack(tmp_path / "data") as second:
        # THEN nothing was re-provisioned or reset, and the lake is object for object the same
        assert f"s3 bucket {settings.bucket}: exists" in second.provisioned
        assert not any("reset" in line for line in second.provisioned)
        assert objects(settings) == lake_before
        assert read_lake_table(settings, "ledger").to_pylist() == ledger_before
        assert_lake_matches(read_lake_table(settings, "ledger"), report)
        # AND the consumer resumes from its checkpoints: nothing read again, nothing rewritten
        again = consume(settings)
        assert (again["ledger_rows"], again["files_written"]) == (0, 0)
        assert objects(settings) == lake_before
        # AND the reconciliation and a wallet statement give what they gave before
        after = reconcile(settings, today)
        assert after.ok
        assert after.counts == verdict.counts
        assert statement(settings, busiest, today) == statement_before


def _local_up(data_dir: Path, ports: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "walletlake.cli", "local", "up", "--data-dir", str(data_dir), *ports],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _environment_of(process: subprocess.Popen[str]) -> dict[str, str]:
    """The ``export`` lines ``local up`` prints, read until its "running" line."""
    assert process.stdout is not None
    environment: dict[str, str] = {}
    for line in process.stdout:
        if line.startswith("export "):
            key, _, value = line.removeprefix("export ").strip().partition("=")
            environment[key] = value
        if line.startswith("# running"):
            return environment
    raise AssertionError(
        f"local up ended before it was ready: {process.stderr.read() if process.stderr else ''}"
    )


def test_a_stack_killed_with_sigkill_leaves_nothing_that_blocks_the_next_start(tmp_path: Path) -> None:
    # GIVEN `walletlake local up` on fixed ports, with an object in its lake
    base = free_port_run(9)
    ports = [
        *("--dynamodb-port", str(free_port()), "--aws-port", str(free_port())),
        *("--s3-port", str(free_port()), "--seaweedfs-port-base", str(base)),
    ]
    data_dir = tmp_path / "data"
    up = _local_up(data_dir, ports)
    try:
        environment = _environment_of(up)
        children = psutil.Process(up.pid).children(recursive=True)
        assert len(children) >= 3
        with patched_environ(environment):
            boto3.client("s3").put_object(Bucket=Settings().bucket, Key="kept.txt", Body=b"still here")
        # WHEN the stack's process is killed outright (no chance to stop its servers)
        up.send_signal(signal.SIGKILL)
        up.wait(10)
        # THEN its servers follow it (they are told when their parent dies)
        _, alive = psutil.wait_procs(children, timeout=30)
        assert not alive, [child.cmdline()[:2] for child in alive]
    finally:
        if up.poll() is None:
            up.kill()
    # AND the next start on the same ports and data dir comes up, with the lake kept
    again = _local_up(data_dir, ports)
    try:
        with patched_environ(_environment_of(again)):
            body = boto3.client("s3").get_object(Bucket=Settings().bucket, Key="kept.txt")["Body"].read()
        assert body == b"still here"
    finally:
        again.send_signal(signal.SIGTERM)
        again.wait(60)
    assert again.returncode == 0
    assert again.stderr is not None
    assert "stopped" in again.stderr.read()


def test_the_s3_server_frozen_then_killed_under_consume_follow_loses_and_doubles_nothing(
    tmp_path: Path,
) -> None:
    today = dt.datetime.now(dt.UTC).date()
    with own_stack(tmp_path / "data") as stack:
        settings = Settings.from_env()
        # GIVEN a workload and `walletlake consume --follow` that has landed it
        first = workload(settings, seed=21, wallets=5, transfers=20)
        log = tmp_path / "consume.log"
        with log.open("w") as sink:
            follower = subprocess.Popen(
                [sys.executable, "-m", "walletlake.cli", "consume", "--follow", "--batch-size", "10"],
                env={**os.environ},
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        try:
            poll_until(
                lambda: len(read_lake_table(settings, "ledger")) >= first.ledger_entries_expected,
                timeout=120,
                what="the follower to land the first workload",
            )
            # WHEN the S3 server is frozen while more money moves, then killed, then started again
            weed = stack.server("SeaweedFS").process
            weed.send_signal(signal.SIGSTOP)
            second = workload(settings, seed=22, wallets=5, transfers=20)
            time.sleep(1)  # let the follower reach S3 and hang on the frozen server
            weed.send_signal(signal.SIGKILL)
            weed.wait(10)
            poll_until(
                lambda: "S3 write failed" in log.read_text(), timeout=120, what="the follower to report S3"
            )
            stack.restart_server("SeaweedFS")
            expected = first.ledger_entries_expected + second.ledger_entries_expected
            poll_until(
                lambda: len(read_lake_table(settings, "ledger")) >= expected,
                timeout=180,
                what="the follower to catch up after S3 came back",
            )
        finally:
            follower.send_signal(signal.SIGINT)
            follower.wait(60)
        # THEN the follower said what happened and that it caught up, and exited cleanly
        text = log.read_text()
        assert follower.returncode == 0, text[-3000:]
        assert "S3 write failed" in text
        assert "stays pending" in text
        assert "S3 write succeeded after" in text
        # AND after compaction every committed entry is in the lake exactly once
        compact_day(settings, today)
        ledger = read_lake_table(settings, "ledger")
        entry_ids = ledger.column("entry_id").to_pylist()
        assert len(entry_ids) == len(set(entry_ids)) == expected
        assert_lake_matches(ledger, _merged(first, second))


def _merged(first: WorkloadReport, second: WorkloadReport) -> WorkloadReport:
    """The two workloads as one report (they created distinct wallets)."""
    import dataclasses

    return dataclasses.replace(
        first,
        ledger_entries_expected=first.ledger_entries_expected + second.ledger_entries_expected,
        expected_versions={**first.expected_versions, **second.expected_versions},
        expected_balances={**first.expected_balances, **second.expected_balances},
        wallet_ids=[*first.wallet_ids, *second.wallet_ids],
    )
