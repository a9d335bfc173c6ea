"""``walletlake compact`` typed as the README shows it (defaults only), on the Iceberg lake.

It once crashed before doing anything: the target file size was multiplied while unset
(``unsupported operand type(s) for *: 'NoneType' and 'int'``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest
from support.consume_cli import settings_env
from support.stream_records import TableWriter

from contracts.settings import Settings
from lake.committer import commit_now
from stream_processor.consumer import drain

pytestmark = pytest.mark.stack


def test_compact_with_defaults_only_runs_on_the_iceberg_lake(make_settings: Callable[..., Settings]) -> None:
    # GIVEN an Iceberg lake with committed rows
    iceberg = make_settings(lake_format="iceberg")
    TableWriter(iceberg.table).workload(wallets=2, deposits=2, transfers=2)
    drain(iceberg, batch_size=3)
    commit_now(iceberg)
    env = {
        **os.environ,
        **settings_env(iceberg),
        "WALLETLAKE_LAKE_FORMAT": "iceberg",
        "WALLETLAKE_GLUE_DATABASE": iceberg.glue_database,
    }

    # WHEN `walletlake compact` runs exactly as the README shows it
    done = subprocess.run(
        [sys.executable, "-m", "walletlake.cli", "compact"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    # THEN it succeeds and reports every stream table
    assert done.returncode == 0, done.stderr
    assert "maintenance of" in done.stdout
    for table in ("ledger", "wallets", "quarantine"):
        assert f"  {table}" in done.stdout
