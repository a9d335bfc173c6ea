"""`walletlake demo` on a running stack, twice: each run judges the rows it wrote and says DEMO OK.

The second run meets a lake that is not empty (the first run's day of ledger); it must say so and
check what it added, never fail for data it did not write.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from contracts.settings import Settings

pytestmark = pytest.mark.stack


def _demo(settings: Settings, output: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "walletlake.cli",
            "demo",
            "--wallets",
            "12",
            "--transfers",
            "40",
            "--concurrency",
            "4",
            "--output-dir",
            str(output),
        ],
        env={**os.environ, **settings.to_env(), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_demo_twice_on_one_running_stack_is_ok_both_times(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = make_settings(lake_format="iceberg")
    # WHEN the demo runs on the stack the exports point at
    first = _demo(settings, tmp_path / "first")
    # THEN it passes, on an empty lake, without a note about earlier data
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "DEMO OK" in first.stdout
    assert "the lake was not empty" not in first.stdout
    # AND off a terminal its progress is plain lines with counts and times, no bars
    assert "━" not in first.stdout
    assert re.search(r"^stream → lake \(consume\): [\d,]+ done in \d+\.\d s$", first.stdout, re.MULTILINE)
    # WHEN it runs again on the same stack and lake
    second = _demo(settings, tmp_path / "second")
    # THEN it passes again, saying the lake held rows already and what it checked instead
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "DEMO OK" in second.stdout
    assert "note: the lake was not empty" in second.stdout
    assert "exactly this run's" in second.stdout
    assert (tmp_path / "second" / "report.html").is_file()
