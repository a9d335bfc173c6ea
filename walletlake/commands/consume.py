"""``walletlake consume``: the table's DynamoDB stream → the Parquet lake, with per-shard checkpoints."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from contracts.settings import Settings

_DESCRIPTION = """\
Read every shard of the table's DynamoDB stream (parents before children) and land each batch in
the lake as Parquet: s3://BUCKET/PREFIX/{ledger,wallets,quarantine}/dt=YYYY-MM-DD/. A shard's
checkpoint moves only after its batch is written, so stopping the consumer at any moment and
starting it again neither loses nor doubles a ledger entry.

Without --follow it drains: closed shards to their end, open shards until they have passed every
record that existed when the drain began (at most --max-wait seconds while a writer keeps them
busy), then prints a summary. With --follow it keeps polling until Ctrl-C.

When the table's stream changed (disabled and enabled again, as after a restore), it first reads
the old stream to its end, then moves to the new one and records the switch (a log line, the
checkpoint table, the summary's "switched" line). If the old stream cannot be drained it stops
with one line and exit status 1, landing nothing of the new stream, so no record is abandoned
unseen; once the old stream's records were brought back otherwise (a backfill),
--accept-stream-switch records the switch without draining it.
"""


def register(subparsers: Any) -> None:
    """Add the sub-command's parser."""
    parser = subparsers.add_parser(
        "consume",
        help="stream → lake (drain, or --follow)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--follow", action="store_true", help="keep polling for new records until Ctrl-C")
    parser.add_argument(
        "--batch-size",
        type=_positive_int,
        default=1000,
        metavar="N",
        help="records per batch, hence per landing object (default 1000)",
    )
    parser.add_argument(
        "--max-wait",
        type=_positive_float,
        default=30.0,
        metavar="S",
        help="seconds a drain keeps reading open shards a writer keeps busy (default 30)",
    )
    parser.add_argument(
        "--accept-stream-switch",
        action="store_true",
        help="move to the table's new stream without draining the old one (after a backfill of its records)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from stream_processor.consumer import drain  # keeps `walletlake --help` fast

    settings = Settings.from_env()
    progress = _Progress(enabled=(not args.json and sys.stderr.isatty()) or args.follow)
    summary = drain(
        settings,
        batch_size=args.batch_size,
        max_wait=args.max_wait,
        follow=args.follow,
        on_progress=progress,
        accept_stream_switch=args.accept_stream_switch,
    )
    progress.done()
    values = summary.as_dict()
    if settings.lake_format == "iceberg" and not args.follow:
        # A drain ends with the commit that makes what it landed queryable (with --follow, the
        # committer runs beside it: `walletlake commit --follow`).
        from lake.committer import commit_now

        values["commit"] = commit_now(settings).as_dict()
    if args.json:
        print(json.dumps(values, sort_keys=True))
    else:
        print(_readable(values, settings))
    # Records trimmed before they reached the lake are lost from it, and a batch its commit left
    # out is in no table: an operator must act.
    from walletlake.commands.commit import left_out

    return 1 if values["trimmed_shards"] or ("commit" in values and left_out(values["commit"])) else 0


class _Progress:
    """A progress line on stderr at most once a second (long drains and --follow)."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self._last = 0.0
        self._shown = False

    def __call__(self, ledger_rows: int) -> None:
        now = time.monotonic()
        if self.enabled and now - self._last >= 1.0:
            self._last = now
            self._shown = True
            print(f"\rconsume: {ledger_rows:,} ledger rows landed…", end="", file=sys.stderr, flush=True)

    def done(self) -> None:
        if self._shown:
            print(file=sys.stderr)


def _readable(values: dict[str, Any], settings: Settings) -> str:
    lines = [
        f"stream      {values['stream_arn']}",
        f"lake        s3://{settings.bucket}/{settings.lake_prefix}/",
        f"records     {values['records']:,} in {_count(values['batches'], 'batch', 'batches')}"
        f" from {_count(values['shards'], 'shard', 'shards')}"
        f" ({values['seconds']:.1f} s, {values['records_per_second']:,} records/s)",
        f"ledger      {values['ledger_rows']:,} rows",
        f"wallets     {values['wallets']:,} rows",
        f"ttl expired {values['ttl_expired']:,} (counted, not reversals)",
        f"ignored     {values['ignored']:,} (wallet balance changes, user claims)",
        f"quarantined {values['quarantined']:,}",
        f"written     {values['files_written']:,} objects, {values['bytes_written']:,} bytes",
    ]
    if values.get("stream_switch"):
        switch = values["stream_switch"]
        lines.append(
            f"switched    from {switch['from']} ({switch['drained_records']:,} records drained first)"
            f" to {switch['to']}"
        )
    if "commit" in values:
        from walletlake.commands.commit import describe

        lines.append(describe(values["commit"]))
    if values["replayed_batches"]:
        lines.append(f"replayed    {values['replayed_batches']} interrupted batch(es), overwritten in place")
    if values["quarantined"]:
        lines.append(
            f"warning: records were quarantined; inspect s3://{settings.bucket}/{settings.lake_prefix}/quarantine/"
        )
    if values["unconfirmed_shards"]:
        lines.append(
            "warning: still receiving records after --max-wait, not confirmed drained: "
            + ", ".join(values["unconfirmed_shards"])
            + " (run consume again)"
        )
    if values["trimmed_shards"]:
        lines.append(
            "ERROR: records trimmed from the stream before they were consumed (missing from the lake): "
            + ", ".join(values["trimmed_shards"])
        )
    return "\n".join(lines)


def _count(number: int, one: str, many: str) -> str:
    return f"{number:,} {one if number == 1 else many}"


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value
