"""``walletlake snapshot``: every wallet's balance and version from DynamoDB into the lake."""

from __future__ import annotations

import argparse
import json
from typing import Any

from contracts.settings import DEFAULT_SNAPSHOT_SEGMENTS, Settings
from lake.read_budget import DEFAULT_MAX_READ_UNITS_PER_SECOND


def register(subparsers: Any) -> None:
    """Add the sub-command's parser."""
    parser = subparsers.add_parser(
        "snapshot",
        help="parallel, rate-limited scan of the wallet items into balance_snapshots/dt=<today>/",
        description=(
            "Scans the table in --segments parallel segments, keeping wallet items only, and writes "
            "their balance, version and updated_at with the snapshot time. Reads are eventually "
            "consistent and paced to --max-read-units per second (all segments together), so the "
            "write path keeps its capacity."
        ),
    )
    parser.add_argument(
        "--segments", type=int, default=DEFAULT_SNAPSHOT_SEGMENTS, help="parallel scan segments"
    )
    parser.add_argument(
        "--max-read-units",
        type=float,
        default=DEFAULT_MAX_READ_UNITS_PER_SECOND,
        help="read capacity units per second for the whole scan (0: unpaced)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from lake.snapshots import take_snapshot

    report = take_snapshot(
        Settings.from_env(), segments=args.segments, max_read_units_per_second=args.max_read_units or None
    )
    if args.json:
        print(json.dumps(report.to_dict()))
        return 0
    summary = report.to_dict()
    print(
        f"snapshot {summary['snapshot_at']}: {report.wallets:,} wallets in {report.segments} segments, "
        f"{report.read_units:,.1f} read units in {report.seconds:.1f} s "
        f"(paced {report.throttled_seconds:.1f} s)"
    )
    for key in report.keys:
        print(f"  {key}")
    return 0
