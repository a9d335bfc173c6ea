"""``walletlake compact``: rewrite a closed day of the landing tables into few large sorted files."""

from __future__ import annotations

import argparse
import json
from typing import Any

from lake.compaction import DEFAULT_ROW_GROUP_ROWS, DEFAULT_TARGET_FILE_BYTES, compact_day
from walletlake.nightly import day_argument, yesterday
from walletlake.settings import Settings


def register(subparsers: Any) -> None:
    """Add the sub-command's parser."""
    parser = subparsers.add_parser(
        "compact",
        help="compact one UTC day of ledger, wallets and quarantine (idempotent, crash-safe)",
        description=(
            "Merges a day's landing files into files of at most --target-file-mb, sorted by wallet and "
            "version, with no duplicate entry, then removes the inputs. Running it twice changes nothing; "
            "a run killed half way loses nothing and the next run finishes it."
        ),
    )
    parser.add_argument("--date", type=day_argument, default=None, help="the UTC day (default: yesterday)")
    parser.add_argument(
        "--target-file-mb",
        type=int,
        default=DEFAULT_TARGET_FILE_BYTES // 2**20,
        help="largest output file (MB)",
    )
    parser.add_argument(
        "--row-group-rows", type=int, default=DEFAULT_ROW_GROUP_ROWS, help="rows per row group"
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    day = args.date or yesterday()
    report = compact_day(
        Settings.from_env(),
        day,
        target_file_bytes=args.target_file_mb * 2**20,
        row_group_rows=args.row_group_rows,
    )
    if args.json:
        print(json.dumps(report.to_dict()))
        return 0
    print(f"compaction of {day}:")
    for name, table in report.tables.items():
        if table.already_compact:
            state = "nothing to do" if not table.files_in else "already compact"
            print(f"  {name:<11} {state}: {table.files_in} files, {table.rows_out:,} rows")
        else:
            print(
                f"  {name:<11} {table.files_in} files, {table.rows_in:,} rows → {table.files_out} files, "
                f"{table.rows_out:,} rows ({table.duplicates_dropped:,} duplicates dropped; "
                f"{table.bytes_in:,} → {table.bytes_out:,} bytes)"
            )
    return 0
