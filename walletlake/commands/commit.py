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
"""

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
            return 0
        try:
            if stop.wait(settings.commit_interval_seconds):
                return 0
        except KeyboardInterrupt:
            return 0


def describe(report: dict[str, Any]) -> str:
    """One line per table that moved, or a line saying nothing landed."""
    moved = [table for table in report["tables"] if table["batches"]]
    if not moved:
        return "commit: nothing new landed"
    return "\n".join(
        f"commit {table['table']}: {table['batches']} batches, {table['files']} files, {table['rows']:,} rows"
        f" (snapshot {table['snapshot_id']}; {table['skipped_batches']} redelivered batches skipped)"
        for table in moved
    )
