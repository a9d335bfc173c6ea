"""`walletlake consume` as an operator runs it, pointed at a test's own resources."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from contracts.settings import Settings


def settings_env(settings: Settings) -> dict[str, str]:
    return {
        "WALLETLAKE_TABLE": settings.table,
        "WALLETLAKE_IDEMPOTENCY_TABLE": settings.idempotency_table,
        "WALLETLAKE_OWNERS_TABLE": settings.owners_table,
        "WALLETLAKE_BUCKET": settings.bucket,
        "WALLETLAKE_LAKE_PREFIX": settings.lake_prefix,
        "WALLETLAKE_CHECKPOINT_TABLE": settings.checkpoint_table,
    }


def consume(settings: Settings, *args: str) -> dict[str, Any]:
    """`walletlake consume --json`, as an operator runs it; returns its summary."""
    done = subprocess.run(
        [sys.executable, "-m", "walletlake.cli", "consume", "--json", *args],
        env={**os.environ, **settings_env(settings)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
