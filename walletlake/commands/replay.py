"""``walletlake replay``: put quarantined, dead-lettered or exported records back into the lake."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import Any
from urllib.parse import urlsplit

from contracts.aws_endpoints import is_aws_host
from contracts.settings import Settings

_DESCRIPTION = """\
Replays records that did not reach the lake, once their cause is fixed, through the stream
processor's own decoding and landing writer. Objects are named after what is replayed, so running
a replay twice writes the same objects again and adds nothing. Pick one source:

  --quarantine      every quarantined record (quarantine/dt=.../*.parquet), or those of --date D:
                    records that now decode are landed; the quarantine object keeps only the ones
                    that still fail, and is deleted when none does.
  --dlq-url URL     the stream consumer's SQS on-failure destination. Its messages describe failed
                    batches (stream, shard, first and last sequence number), not their records:
                    each batch is read again from the stream and landed exactly as the consumer
                    would have, then its message is deleted. A batch older than the stream's 24-hour
                    retention is reported as expired and its message kept: backfill from an export.
  --export S3_URI   a DynamoDB export (DYNAMODB_JSON, full or INCREMENTAL_EXPORT), its
                    AWSDynamoDB/EXPORT_ID/ folder: every wallet and transaction item becomes the
                    rows its stream record would have. With --part K/N, only the wallets of part
                    K of N (a stable hash of the wallet id) are held in memory and landed: run
                    K = 0 .. N-1, one after another or at once, to bound each run's memory.
  --stream-range SHARD:FIRST-LAST
                    a range of the stream read again (within its 24 hours), e.g. for a chain break:
                    the table's latest stream, or --stream-arn ARN.
  --left-out        every batch the committer left out for a missing file (its note under
                    _misfits/_batches/), read again from its stream; the note is deleted once
                    the batch's rows are committed.

On the Iceberg lake, what a replay lands is appended only where the lake does not already hold
it, decided by each row's identity (a ledger entry's entry_id, a wallet's wallet_id), so replays
that overlap each other or what the stream delivered, or run twice, add every entry once. The
summary says how many rows were appended and how many the lake already held. Afterwards,
reconcile each day listed (walletlake reconcile --date D).
Exits 1 when some record could not be replayed (still failing, expired or unreadable).
"""


def register(subparsers: Any) -> None:
    """Add the sub-command's parser."""
    parser = subparsers.add_parser(
        "replay",
        help="replay quarantined, dead-lettered or exported records into the lake",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--quarantine", action="store_true", help="replay quarantined records")
    source.add_argument("--dlq-url", metavar="URL", help="replay the batches described in this SQS queue")
    source.add_argument("--export", metavar="S3_URI", help="replay a DynamoDB export's folder")
    source.add_argument(
        "--stream-range", metavar="SHARD:FIRST-LAST", help="replay this range of the table's stream"
    )
    source.add_argument(
        "--left-out", action="store_true", help="replay every batch left out for a missing file"
    )
    parser.add_argument(
        "--stream-arn", metavar="ARN", help="with --stream-range: the stream (default: the table's latest)"
    )
    parser.add_argument(
        "--part",
        metavar="K/N",
        help="with --export: only the wallets of part K of N (each part in memory alone; run every K)",
    )
    parser.add_argument(
        "--date",
        type=_date,
        action="append",
        metavar="YYYY-MM-DD",
        help="with --quarantine: only this quarantine day (repeatable)",
    )
    parser.add_argument("--max-messages", type=int, metavar="N", help="with --dlq-url: stop after N messages")
    parser.add_argument(
        "--dry-run", action="store_true", help="read and decode only; write and delete nothing"
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from stream_processor import replay  # keeps `walletlake --help` fast

    settings = Settings.from_env()
    if args.date and not args.quarantine:
        raise ValueError("--date applies to --quarantine only")
    if args.stream_arn and not args.stream_range:
        raise ValueError("--stream-arn applies to --stream-range only")
    if args.part and not args.export:
        raise ValueError("--part applies to --export only")
    notes: list[str] = []
    if args.stream_range or args.left_out:
        report, notes = _replay_range(settings, args)
    elif args.quarantine:
        report = replay.replay_quarantine(settings, days=args.date, dry_run=args.dry_run)
    elif args.dlq_url:
        report = replay.replay_dead_letters(
            settings,
            args.dlq_url,
            dry_run=args.dry_run,
            sqs=sqs_for(args.dlq_url, settings),
            max_messages=args.max_messages,
        )
    else:
        from stream_processor.export_replay import parse_part

        part = parse_part(args.part) if args.part else None
        report = replay.replay_export(settings, args.export, dry_run=args.dry_run, part=part)
    values = report.as_dict()
    values["lake_format"] = settings.lake_format
    if settings.lake_format == "iceberg" and not args.dry_run and values["files_written"]:
        # What was replayed becomes queryable now, not at the committer's next interval.
        from lake.committer import commit_now

        values["commit"] = commit_now(settings).as_dict()
    if notes and not args.dry_run:
        _clear_notes(settings, notes)
    print(json.dumps(values, sort_keys=True) if args.json else readable(values))
    return 1 if values["still_failing"] or values["expired"] or values["unreadable"] else 0


def _replay_range(settings: Settings, args: argparse.Namespace) -> tuple[Any, list[str]]:
    """``--stream-range`` or ``--left-out``: the report and the left-out notes to clear."""
    import boto3

    from stream_processor import range_replay

    if settings.lake_format != "iceberg":
        raise ValueError("--stream-range and --left-out replay into the Iceberg lake only")
    streams = boto3.client("dynamodbstreams", region_name=settings.region)
    s3 = boto3.client("s3", region_name=settings.region)
    if args.left_out:
        return range_replay.replay_left_out(settings, dry_run=args.dry_run, streams=streams, s3=s3)
    dynamodb = boto3.client("dynamodb", region_name=settings.region)
    info = range_replay.range_info(dynamodb, settings.table, args.stream_range, args.stream_arn)
    return range_replay.replay_stream_range(settings, info, dry_run=args.dry_run, streams=streams, s3=s3), []


def _clear_notes(settings: Settings, notes: list[str]) -> None:
    """Delete the notes of left-out batches whose rows the commit just took."""
    import boto3

    from lake.objects import delete_keys

    delete_keys(boto3.client("s3", region_name=settings.region), settings.bucket, notes)


def sqs_for(queue_url: str, settings: Settings) -> Any:
    """An SQS client for the queue; outside AWS, the queue URL's own host is the endpoint.

    A queue URL names the server that holds it, so ``--dlq-url http://127.0.0.1:5000/...`` on the
    embedded stack works without an ``AWS_ENDPOINT_URL_SQS``; on AWS the SDK's resolution is kept.
    """
    import boto3

    parts = urlsplit(queue_url)
    if parts.scheme and not is_aws_host(queue_url):
        return boto3.client(
            "sqs", region_name=settings.region, endpoint_url=f"{parts.scheme}://{parts.netloc}"
        )
    return boto3.client("sqs", region_name=settings.region)


def readable(values: dict[str, Any]) -> str:
    """The report as a few lines for a person, ending with the commands to run next.

    Truthful about what landed: records read are not rows added. A replay lands only records no
    earlier run landed, and its commit appends only rows the lake does not already hold (by
    ``entry_id`` / ``wallet_id``: :mod:`lake.entry_identity`); both are said.
    """
    dry = values["dry_run"]
    lines = [
        f"{values['source']}: {values['sources_read']} read, {values['records']} records "
        f"{'would be' if dry else 'were'} decoded",
        f"  ledger rows {values['ledger_rows']}, wallets {values['wallets']}, "
        f"ttl expiries {values['ttl_expired']}, ignored {values['ignored']}",
        f"  still failing {values['still_failing']}, expired {values['expired']}, "
        f"unreadable {values['unreadable']}",
    ]
    if not dry:
        landed = values["files_written"]
        lines.append(
            f"  landed {landed} files, sources cleared {values['sources_cleared']}"
            + ("" if landed else " (nothing new to land: an earlier run landed all of it)")
        )
    commit = values.get("commit")
    if commit:
        for table in commit["tables"]:
            if table["rows"] or table["held_rows"]:
                lines.append(
                    f"  {table['table']}: {table['rows']} rows appended, {table['held_rows']} already in "
                    "the lake (same identity) and not added"
                )
        if commit.get("quarantined_batches") or commit.get("misfit_files"):
            lines.append(
                f"  ! the commit left out {commit.get('quarantined_batches', 0)} batches and "
                f"{commit.get('misfit_files', 0)} misfit files (docs/operations.md, section 6)"
            )
    lines.extend(f"  ! {problem}" for problem in values["problems"])
    if values["days"] and not dry:
        lines.append("next: reconcile the days touched:")
        iceberg = values.get("lake_format", "iceberg") == "iceberg"
        lines.extend(
            f"  walletlake reconcile --date {day}"
            if iceberg
            else f"  walletlake compact --date {day} && walletlake reconcile --date {day}"
            for day in values["days"]
        )
    return "\n".join(lines)


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None
