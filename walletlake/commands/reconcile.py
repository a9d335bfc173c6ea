"""``walletlake reconcile``: the lake against the latest snapshot, per wallet; exit 1 unless clean."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import TYPE_CHECKING, Any, Final

from contracts.settings import Settings
from queries.reconciliation_lag import DEFAULT_MAX_LAG_SECONDS
from walletlake.days import last_closed_day, parse_day, unreconcilable_reason
from walletlake.refusals import DAY_NOT_RECONCILABLE, RefusalError

if TYPE_CHECKING:
    from queries.reconciliation_runs import ReconciliationReport

_SHOWN_FINDINGS = 20
#: The first day of the lake's partition projection: a dt bound that prunes nothing, said so.
_EPOCH_DAY: Final = "2020-01-01"


def register(subparsers: Any) -> None:
    """Add the sub-command's parser."""
    parser = subparsers.add_parser(
        "reconcile",
        help="reconcile one UTC day of the lake with the latest balance snapshot (exit 1 unless clean)",
        description=(
            "Computes the day's closing balances and versions from the day before's and the day's "
            "ledger, checks every wallet's versions, running balance and copies, compares with the "
            "latest snapshot, and writes daily_balances, reconciliation rows and a JSON summary for the "
            "day. Exits 0 when every wallet is ok or lagging, 1 otherwise."
        ),
    )
    # Parsed in the command, not by argparse: a bad date is one line, without the usage before it.
    parser.add_argument("--date", default=None, metavar="YYYY-MM-DD", help="the UTC day (default: yesterday)")
    parser.add_argument(
        "--max-lag-seconds",
        type=int,
        default=DEFAULT_MAX_LAG_SECONDS,
        help=f"delivery bound separating lagging from missing (default {DEFAULT_MAX_LAG_SECONDS})",
    )
    parser.add_argument(
        "--replay",
        action="store_true",
        help="reconcile the recorded day again as of the Iceberg snapshots its run read, write nothing, "
        "and say whether the outcome is identical (exit 1 if not)",
    )
    parser.add_argument(
        "--provisional",
        action="store_true",
        help=(
            "reconcile today, which is still open, as it stands (its closes are superseded by the "
            "night's run)"
        ),
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from queries.reconciliation import reconcile

    try:
        day = parse_day(args.date) if args.date is not None else last_closed_day()
    except ValueError as error:
        raise RefusalError(f"--date: {error}") from None
    if args.replay:
        return _replay(day, as_json=args.json)
    settings = Settings.from_env()
    reason = unreconcilable_reason(
        day, today=dt.datetime.now(dt.UTC).date(), first_day=first_day(settings), provisional=args.provisional
    )
    if reason is not None:
        raise RefusalError(reason, DAY_NOT_RECONCILABLE)
    report = reconcile(settings, day, max_lag_seconds=args.max_lag_seconds)
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print(describe(report))
    return report.exit_code


def _replay(day: Any, *, as_json: bool) -> int:
    from queries.reconciliation import ReconciliationError, replay

    try:
        replayed = replay(Settings.from_env(), day)
    except ReconciliationError as error:
        print(f"walletlake reconcile --replay: {error}")
        return 2
    if as_json:
        print(
            json.dumps(
                {
                    **replayed.report.to_dict(),
                    "identical": replayed.identical,
                    "differences": replayed.differences,
                }
            )
        )
    else:
        snapshots = ", ".join(
            f"{name} {snapshot}" for name, snapshot in sorted(replayed.report.lake_snapshots.items())
        )
        verdict = "IDENTICAL to the recorded run" if replayed.identical else "DIFFERENT from the recorded run"
        lines = [f"replay of {day} as of {snapshots}: {verdict} (run at {replayed.recorded['run_at']})"]
        lines.extend(f"  {difference}" for difference in replayed.differences)
        print("\n".join(lines))
    return 0 if replayed.identical else 1


def first_day(settings: Settings) -> dt.date | None:
    """The UTC day of the lake's first wallet or entry (None for an empty lake): no day before it
    has data. Only the partition column is read."""
    import pandas as pd

    from queries import engine_for

    engine = engine_for(settings)
    try:
        frame = engine.run(
            "SELECT min(dt) AS first_day FROM ("
            f"SELECT dt FROM wallets WHERE dt >= '{_EPOCH_DAY}' "
            f"UNION ALL SELECT dt FROM ledger WHERE dt >= '{_EPOCH_DAY}')",
            {},
        )
    finally:
        engine.close()
    value = frame["first_day"].iloc[0] if not frame.empty else None
    return None if value is None or pd.isna(value) else dt.date.fromisoformat(str(value))


def describe(report: ReconciliationReport) -> str:
    """A readable summary: verdict, counts, checks and the first findings."""
    lines = []
    for earlier in report.earlier:
        lines.append(
            f"(reconciled first) {earlier.day}: {'clean' if earlier.ok else 'FAILED'} {_counts(earlier)}"
        )
    verdict = "CLEAN" if report.ok else "FAILED"
    lines.append(f"reconciliation of {report.day}: {verdict}")
    summary = report.to_dict()
    lines.append(
        f"  {report.wallets:,} wallets, {report.ledger_rows:,} ledger rows; "
        f"snapshot {summary['snapshot_at']}; {report.seconds:.1f} s"
    )
    lines.append(f"  {_counts(report)}")
    for name, outcome in report.checks.items():
        lines.append(f"  check {name}: {outcome}")
    for finding in report.findings[:_SHOWN_FINDINGS]:
        who = finding.wallet_id or "(global)"
        lines.append(f"  {finding.status:<19} {who}: {finding.detail}")
    if len(report.findings) > _SHOWN_FINDINGS:
        lines.append(f"  ... and {len(report.findings) - _SHOWN_FINDINGS} more findings (see --json)")
    return "\n".join(lines)


def _counts(report: ReconciliationReport) -> str:
    from queries.reconciliation_rules import OK

    shown = {status: count for status, count in report.counts.items() if count or status == OK}
    return ", ".join(f"{status} {count:,}" for status, count in shown.items())
