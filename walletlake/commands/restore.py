"""``walletlake restore``: a restored wallets table continued from the lake, then put back in service."""

from __future__ import annotations

import argparse
import json
from typing import Any

from contracts.settings import Settings

_DESCRIPTION = """\
Run once on a wallets table restored from a backup (point-in-time recovery), before any client
writes to it and with its stream still off (AWS restores a table without its stream and TTL).

For every wallet the lake holds later entries of (writes acknowledged after the restore point),
sets its version and balance to the lake's latest entry, so the next write continues the lake's
versions and never reuses one; creates again the wallets made after the restore point; then turns
on TTL (expires_at) and the stream (NEW_AND_OLD_IMAGES). Prints, per wallet, the versions and the
net amount the table had lost (the lake's record of them is the history from now on). Wallets the
table is ahead of the lake on, or that disagree at one version, are reported and left as they are
(exit 1): finish the old stream or backfill first (docs/operations.md, "A restored table").
Then: walletlake snapshot && walletlake reconcile --date TODAY --provisional.
"""


def register(subparsers: Any) -> None:
    """Add the sub-command's parser."""
    parser = subparsers.add_parser(
        "restore",
        help="take a restored wallets table back into service, continued from the lake",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dry-run", action="store_true", help="plan and report; write nothing")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from walletlake.restore import restore_table

    report = restore_table(Settings.from_env(), dry_run=args.dry_run)
    if args.json:
        print(json.dumps(report.as_dict(), sort_keys=True))
    else:
        print(readable(report.as_dict()))
    return 1 if report.unresolved else 0


def readable(values: dict[str, Any]) -> str:
    """The report for a person: one line per wallet that needed a step, then the table's state."""
    verb = "would" if values["dry_run"] else "did"
    lines = [
        f"restore of {values['table']}: {values['wallets_in_table']} wallets in the table, "
        f"{values['wallets_in_lake']} in the lake"
    ]
    for step in values["steps"]:
        lost = step["lost_versions"]
        span = f"versions {lost[0]}..{lost[1]}, net {step['lost_amount']} micro-USD" if lost else "no entry"
        if step["action"] == "continue":
            lines.append(f"  {step['wallet_id']}: lost {span}; {verb} continue at version {step['version']}")
        elif step["action"] == "recreate":
            lines.append(
                f"  {step['wallet_id']}: created after the restore point ({span}); {verb} create it again"
            )
        else:
            lines.append(f"  ! {step['wallet_id']}: {step['detail']}")
    stream = "on" if values["stream_enabled"] else "off"
    lines.append(f"  stream {stream}, TTL {'on' if values['ttl_enabled'] else 'off'}")
    if not values["dry_run"]:
        lines.append("next: walletlake snapshot && walletlake reconcile --date TODAY --provisional")
    return "\n".join(lines)
