"""``walletlake commit``: the Iceberg lake's committer, once or every interval (``--follow``)."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
import time
from typing import Any

from contracts.settings import Settings

_logger = logging.getLogger(__name__)

_DESCRIPTION = """\
Append every batch the stream consumer landed since the last commit to the Iceberg tables (ledger,
wallets, quarantine): one commit per table, which also records, per stream shard, the last sequence
number committed. Rerunning it, or running it while another committer runs, never doubles or loses
a row. With --follow it commits every WALLETLAKE_COMMIT_INTERVAL_SECONDS until Ctrl-C, and deletes
landing records past the stream's retention once an hour.

What a commit leaves out is said, one line each, and makes the exit status 1: a batch left out
whole because a file of it is gone from storage, a misfit file kept aside, a table held by a type
change it cannot take (docs/operations.md, "Misfit files" and "A type change").
"""

#: Exit status of a commit that left something out (a batch, a misfit file, a held table).
EXIT_LEFT_OUT = 1

#: Seconds between two tidy-ups of the landing log under --follow.
_TIDY_EVERY_SECONDS = 3600


def register(subparsers: Any) -> None:
    """Add the sub-command's parser."""
    parser = subparsers.add_parser(
        "commit",
        help="landed batches → Iceberg commits (once, or --follow)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--follow", action="store_true", help="commit every interval until Ctrl-C")
    parser.add_argument("--json", action="store_true", help="print each cycle's report as one JSON object")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import boto3

    from lake.committer import commit_landed
    from lake.iceberg_catalog import open_catalog

    settings = Settings.from_env()
    if settings.lake_format != "iceberg":
        print(
            "walletlake commit: the lake is plain Parquet (WALLETLAKE_LAKE_FORMAT=parquet); nothing to commit"
        )
        return 2
    client = boto3.client("s3", region_name=settings.region)
    catalog = open_catalog(settings)
    stop = threading.Event()
    if args.follow:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    last_tidy = 0.0
    while True:
        tidy = args.follow and time.monotonic() - last_tidy >= _TIDY_EVERY_SECONDS
        report = commit_landed(settings, client, catalog, tidy=tidy)
        if tidy:
            last_tidy = time.monotonic()
        print(
            json.dumps(report.as_dict(), sort_keys=True) if args.json else describe(report.as_dict()),
            flush=True,
        )
        if not args.follow:
            return EXIT_LEFT_OUT if left_out(report.as_dict()) else 0
        try:
            if stop.wait(settings.commit_interval_seconds):
                return 0
        except KeyboardInterrupt:
            return 0


def describe(report: dict[str, Any]) -> str:
    """One line per table that moved (or a line saying nothing landed), then one per thing left
    out (:func:`left_out`): a summary never hides a batch that did not reach its table."""
    moved = [table for table in report["tables"] if table["batches"]]
    lines = [
        f"commit {table['table']}: {table['batches']} batches, {table['files']} files, {table['rows']:,} rows"
        f" (snapshot {table['snapshot_id']}; {table['skipped_batches']} redelivered batches skipped)"
        for table in moved
    ] or ["commit: nothing new landed"]
    return "\n".join([*lines, *left_out(report)])


def left_out(report: dict[str, Any]) -> list[str]:
    """One line per table and kind of thing the commit left out (empty: nothing), each with the
    runbook's answer.

    Examples
    --------
    >>> left_out({"tables": [{"table": "ledger", "quarantined_batches": 1, "missing_files": 1}]})[0][:60]
    'commit ledger: LEFT OUT 1 batch whose files are gone from st'
    """
    lines: list[str] = []
    for table in report["tables"]:
        name = table["table"]
        if table.get("quarantined_batches"):
            missing = table.get("missing_files", 0)
            here = f" ({_count(missing, 'file', 'files')} of this table's missing)" if missing else ""
            lines.append(
                f"commit {name}: LEFT OUT {_count(table['quarantined_batches'], 'batch', 'batches')} whose "
                f"files are gone from storage{here}: their rows are in no table; see _misfits/_batches/ and "
                "docs/operations.md, 'Misfit files' (a missing file)"
            )
        if table.get("misfit_files"):
            lines.append(
                f"commit {name}: LEFT OUT {_count(table['misfit_files'], 'misfit file', 'misfit files')} "
                f"(kept under _misfits/{name}/): `walletlake lake reland` once the table can take it"
            )
        if table.get("blocked"):
            lines.append(f"commit {name}: HELD, nothing committed: {table['blocked']}")
    return lines


def _count(number: int, one: str, many: str) -> str:
    return f"{number:,} {one if number == 1 else many}"
