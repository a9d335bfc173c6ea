"""``walletlake repair``: a day's ledger made right again, from the lake itself or a source of truth."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import Any

from contracts.settings import Settings

_DESCRIPTION = """\
Repairs one day of the ledger table in one atomic commit (a commit meanwhile: read and decide again).

Without a source: reconciliation's `duplicate` (an entry_id more than once): every copied entry
keeps one copy. Copies that agree keep the stream's (not an export's), first ingested; copies that
disagree keep the one whose balance the wallet's chain agrees with (the previous version's balance
plus its delta, and the next one's minus that one's); where the chain cannot tell, nothing is
changed and the entry is named.

With a source of truth, for `chain_break` and `mismatch` (a row altered, an entry missing, two
entries at one version): every entry of the day the source holds is made the source's row:
altered rows replaced, copies made one, missing entries added, another entry at one of its
versions removed. The source is a range of the stream read again (--stream-range SHARD:FIRST-LAST,
within its 24 hours; --stream-arn for another than the table's latest) or an export (--export
S3_URI, --part K/N to bound its memory). Entries of the day the source does not hold are left.

Then reconcile the day: walletlake reconcile --date D. Exits 1 when refused.
"""


def register(subparsers: Any) -> None:
    """Add the sub-command's parser."""
    parser = subparsers.add_parser(
        "repair",
        help="make a day's ledger right in one commit: copies to one, or rows from the stream or an export",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--date", required=True, type=dt.date.fromisoformat, metavar="YYYY-MM-DD")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--stream-range", metavar="SHARD:FIRST-LAST", help="the source: this stream range")
    source.add_argument("--export", metavar="S3_URI", help="the source: this DynamoDB export's folder")
    parser.add_argument(
        "--stream-arn", metavar="ARN", help="with --stream-range: the stream (default: latest)"
    )
    parser.add_argument("--part", metavar="K/N", help="with --export: only the wallets of part K of N")
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
    if args.stream_arn and not args.stream_range:
        raise ValueError("--stream-arn applies to --stream-range only")
    if args.part and not args.export:
        raise ValueError("--part applies to --export only")
    truth = _truth(settings, args)
    report = repair_day(
        open_catalog(settings), identifier(settings.glue_database, "ledger"), args.date, truth
    )
    values = report.as_dict()
    if args.json:
        print(json.dumps(values, sort_keys=True))
        return 0
    day = values["day"]
    if not (report.copied_entries or report.corrected or report.added or report.removed):
        print(f"repair of {day}: nothing to repair; nothing changed")
        return 0
    parts = []
    if report.copied_entries:
        parts.append(f"{report.copied_entries} entries held more than once")
    if report.corrected:
        parts.append(f"{report.corrected} entries made the source's")
    if report.added:
        parts.append(f"{report.added} missing entries added")
    if report.removed:
        parts.append(f"{report.removed} entries at another's version removed")
    print(
        f"repair of {day}: {', '.join(parts)}; {report.rows_removed} rows fewer, in snapshot "
        f"{report.snapshot_id}\nnext: walletlake reconcile --date {day}"
    )
    return 0


def _truth(settings: Settings, args: argparse.Namespace) -> Any:
    """The source of truth's ledger rows, or None."""
    import boto3

    if args.stream_range:
        from stream_processor.range_replay import range_info, range_ledger

        dynamodb = boto3.client("dynamodb", region_name=settings.region)
        info = range_info(dynamodb, settings.table, args.stream_range, args.stream_arn)
        return range_ledger(boto3.client("dynamodbstreams", region_name=settings.region), info)
    if args.export:
        from stream_processor.export_replay import export_ledger, parse_part

        return export_ledger(settings, args.export, part=parse_part(args.part) if args.part else None)
    return None
