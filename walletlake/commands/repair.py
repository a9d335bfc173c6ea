"""``walletlake repair``: a day's ledger holding copies of an entry, back to one copy each."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import Any

from contracts.settings import Settings

_DESCRIPTION = """\
Reconciliation's `duplicate` finding (an entry_id more than once in a day) repaired in one atomic
commit of the ledger table: every copied entry keeps one copy. Copies that agree keep the stream's
(not an export's), first ingested; copies that disagree keep the one whose balance the wallet's
chain agrees with (the previous version's balance plus its delta, and the next one's minus that
one's); where the chain cannot tell, nothing is changed and the entry is named: replay its range
(walletlake replay --stream-range or --export). A commit meanwhile makes it read and decide again.
Then reconcile the day: walletlake reconcile --date D. Exits 1 when refused.
"""


def register(subparsers: Any) -> None:
    """Add the sub-command's parser."""
    parser = subparsers.add_parser(
        "repair",
        help="keep one copy of every entry a day's ledger holds twice (reconciliation's duplicate)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--date", required=True, type=dt.date.fromisoformat, metavar="YYYY-MM-DD")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from lake.entry_repair import repair_day
    from lake.iceberg_catalog import open_catalog
    from lake.iceberg_tables import identifier

    settings = Settings.from_env()
    if settings.lake_format != "iceberg":
        raise ValueError(
            "walletlake repair works on the Iceberg lake; the plain lake's compaction drops copies"
        )
    report = repair_day(open_catalog(settings), identifier(settings.glue_database, "ledger"), args.date)
    values = report.as_dict()
    if args.json:
        print(json.dumps(values, sort_keys=True))
    elif report.copied_entries:
        print(
            f"repair of {values['day']}: {report.copied_entries} entries held more than once, "
            f"{report.rows_removed} copies removed in snapshot {report.snapshot_id}\n"
            f"next: walletlake reconcile --date {values['day']}"
        )
    else:
        print(f"repair of {values['day']}: no entry is held more than once; nothing changed")
    return 0
