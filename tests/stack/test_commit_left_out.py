"""``walletlake commit`` never hides a batch it left out: a landed file gone from storage takes its
whole batch out of every table (docs/operations.md, "Misfit files"), and the command says so in a
line naming the runbook's answer and exits 1; the next run, with nothing left out, exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest
from support.stream_records import TableWriter

from contracts.settings import Settings
from lake.landing_log import keys_after, list_sources, read_record
from stream_processor.consumer import drain

pytestmark = pytest.mark.stack

_BIN = str(Path(sys.executable).parent)


def walletlake(settings: Settings, *argv: str) -> subprocess.CompletedProcess[str]:
    """The command line as an operator types it, in its own process."""
    environ = {**os.environ, **settings.to_env(), "PATH": f"{_BIN}:{os.environ.get('PATH', '')}"}
    return subprocess.run(
        ["walletlake", *argv], env=environ, capture_output=True, text=True, check=False, timeout=300
    )


def test_commit_says_it_left_a_batch_out_and_exits_1(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(lake_format="iceberg")
    writer = TableWriter(settings.table)
    writer.workload(wallets=2, deposits=2, transfers=1)
    drain(settings, batch_size=100)
    # GIVEN a landed batch one of whose files is gone from storage before its commit
    s3 = boto3.client("s3", region_name=settings.region)
    (source,) = list_sources(s3, settings.bucket, settings.lake_prefix)
    (key,) = keys_after(s3, settings.bucket, settings.lake_prefix, source, None)
    record = read_record(s3, settings.bucket, key)
    bucket, _, file_key = record.files_of("ledger")[0].path.removeprefix("s3://").partition("/")
    s3.delete_object(Bucket=bucket, Key=file_key)

    # WHEN the operator commits, as typed, and again
    done = walletlake(settings, "commit")
    again = walletlake(settings, "commit")

    # THEN the left-out batch is said, in each table it had rows for, with where to look; exit 1
    assert done.returncode == 1, done.stdout + done.stderr
    left = [line for line in done.stdout.splitlines() if "LEFT OUT" in line]
    assert {line.split(":", 1)[0] for line in left} >= {"commit ledger", "commit wallets"}
    assert all("LEFT OUT 1 batch whose files are gone from storage" in line for line in left)
    assert "(1 file of this table's missing)" in next(
        line for line in left if line.startswith("commit ledger")
    )
    assert all("docs/operations.md, 'Misfit files' (a missing file)" in line for line in left)
    # AND a run that leaves nothing out exits 0
    assert again.returncode == 0, again.stdout + again.stderr
    assert "LEFT OUT" not in again.stdout
