"""``walletlake compact``: rewrite landing files into few large sorted files, unit by unit."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import Any

from contracts.settings import COMPACTION_UNIT_MINUTES_CHOICES, Settings
from lake.compaction_targets import ICEBERG_TARGET_FILE_BYTES, PLAIN_TARGET_FILE_BYTES
from walletlake.days import day_argument, last_closed_day


def register(subparsers: Any) -> None:
    """Add the sub-command's parser."""
    parser = subparsers.add_parser(
        "compact",
        help="compact a UTC day (or today's closed hours) of ledger, wallets and quarantine",
        description=(
            "Merges landing files into files of at most --target-file-mb, sorted by wallet and version, "
            "with no duplicate entry, then removes the inputs. The work is split into independent units "
            "(--unit-minutes of one table each, an hour by default) run --workers at a time; units "
            "already compacted are skipped. Running it twice changes nothing; a run killed half way "
            "loses nothing and the next run finishes it. --closed-hours compacts the units of today "
            "(and yesterday) that have closed, as the hourly schedule does in AWS. On the Iceberg lake "
            "(the default) it rewrites each table's day in one atomic commit, then expires old "
            "snapshots (never a tagged one) and removes orphan files; --closed-hours means today."
        ),
    )
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--date", type=day_argument, default=None, help="the UTC day (default: yesterday)")
    target.add_argument(
        "--closed-hours", action="store_true", help="the units closed by now (today's and yesterday's)"
    )
    parser.add_argument(
        "--unit-minutes",
        type=int,
        choices=COMPACTION_UNIT_MINUTES_CHOICES,
        default=None,
        help="minutes of one unit (default $WALLETLAKE_COMPACTION_UNIT_MINUTES or 60)",
    )
    parser.add_argument("--workers", type=int, default=1, help="units compacted side by side (processes)")
    parser.add_argument(
        "--target-file-mb",
        type=int,
        default=None,
        help=f"largest output file (MB; default {PLAIN_TARGET_FILE_BYTES // 2**20}, on the Iceberg lake "
        f"{ICEBERG_TARGET_FILE_BYTES // 2**20})",
    )
    parser.add_argument(
        "--row-group-rows",
        type=int,
        default=None,
        help="rows per row group (default: sized per unit so one-wallet reads stay under 1%%)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.set_defaults(func=_run)


def _progress(summary: dict[str, Any]) -> None:
    unit = summary["unit"]
    state = (
        "already compact"
        if summary["already_compact"]
        else f"{summary['files_in']} files, {summary['rows_in']:,} rows → {summary['files_out']} files"
    )
    print(
        f"  unit {unit['table']:<10} {unit['date']} {unit['hour']:02d}:{unit['minute']:02d}"
        f"+{unit['minutes']}m: {state} ({summary['seconds']:.1f} s)",
        file=sys.stderr,
        flush=True,
    )


def _run(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise ValueError("--workers must be at least 1")
    settings = Settings.from_env()
    if settings.lake_format == "iceberg":
        day = dt.datetime.now(dt.UTC).date() if args.closed_hours else args.date or last_closed_day()
        target_bytes = args.target_file_mb * 2**20 if args.target_file_mb else ICEBERG_TARGET_FILE_BYTES
        return _maintain_iceberg(settings, day, target_file_bytes=target_bytes, as_json=args.json)
    from lake.compaction_units import closed_units, compact_day, run_units

    unit_minutes = args.unit_minutes or settings.compaction_unit_minutes
    target = args.target_file_mb * 2**20 if args.target_file_mb else PLAIN_TARGET_FILE_BYTES
    options = {"target_file_bytes": target, "row_group_rows": args.row_group_rows}
    on_unit = None if args.json else _progress
    if args.closed_hours:
        units = closed_units(settings, dt.datetime.now(dt.UTC), unit_minutes=unit_minutes)
        results = run_units(settings, units, workers=args.workers, on_done=on_unit, **options)
        rows = sum(done.rows_out for _, done in results)
        if args.json:
            print(json.dumps({"units": len(results), "rows_out": rows}))
        else:
            print(f"compacted {len(results)} closed unit(s), {rows:,} rows")
        return 0
    day = args.date or last_closed_day()
    report = compact_day(
        settings, day, unit_minutes=unit_minutes, workers=args.workers, on_unit=on_unit, **options
    )
    if args.json:
        print(json.dumps(report.to_dict()))
        return 0
    print(f"compaction of {day} ({len(report.units)} unit(s) with work, {unit_minutes}-minute units):")
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


def _maintain_iceberg(settings: Settings, day: dt.date, *, target_file_bytes: int, as_json: bool) -> int:
    """The Iceberg lake: per table, the day's atomic compaction, snapshot expiry, orphan removal."""
    from contracts.lake_tables import STREAM_TABLES
    from lake.iceberg_catalog import open_catalog
    from lake.iceberg_maintenance import maintain

    catalog = open_catalog(settings)
    reports = {
        name: maintain(settings, catalog, name, day, target_file_bytes=target_file_bytes).as_dict()
        for name in STREAM_TABLES
    }
    if as_json:
        print(json.dumps({"day": day.isoformat(), "tables": reports}))
        return 0
    print(f"maintenance of {day} (Iceberg: one atomic rewrite per table; readers never see it half done):")
    for name, report in reports.items():
        compaction, expiry, orphans = report["compaction"], report["expiry"], report["orphans"]
        done = (
            f"{compaction['files_in']} files → {compaction['files_out']}, {compaction['rows']:,} rows"
            if compaction["outcome"] == "compacted"
            else compaction["outcome"]
        )
        print(
            f"  {name:<11} {done}; {len(expiry['expired'])} snapshots expired ({expiry['kept']} kept); "
            f"{len(orphans['deleted'])} orphan files removed"
        )
    return 0
