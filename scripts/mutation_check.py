"""Mutation check of issue 35's fixes: remove one, run the tests that guard the answers, restore.

Each mutation takes one fix of the write path away (a text replacement in ``wallet/``) and the
answer tests run against it; a fix no test misses would be a fix nothing proves. The files are
restored from git afterwards, so run it on a clean ``wallet/``.

Usage::

    .venv/bin/python scripts/mutation_check.py              # every mutation, one after the other
    .venv/bin/python scripts/mutation_check.py lookup_without_fence

Prints, per mutation, the tests that failed (none: the fix is not proven). Takes about a minute
and a half per mutation on 2 cores.
"""

# ruff: noqa: E501  (the mutations table holds lines of code as they are written)
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = (
    "tests/stack/test_answers_under_faults.py",
    "tests/stack/test_true_answers.py",
    "tests/stack/test_wallet_idempotency.py",
    "tests/stack/test_wallet_idempotency_window.py",
    "tests/stack/test_attribution.py",
    "tests/unit/test_wallet_cancellation.py",
)

#: name -> (file, text, replacement): the fix, and the code without it.
MUTATIONS: dict[str, list[tuple[str, str, str]]] = {
    "in_progress_not_waited": [
        (
            "wallet/dynamodb_calls.py",
            "        if error.type == IN_PROGRESS:\n",
            "        if False:  # MUTATION\n",
        )
    ],
    "lookup_without_fence": [
        (
            "wallet/store.py",
            "            record = await self._fence(wallet_id, nonce, principal)\n",
            "            record = None  # MUTATION\n",
        )
    ],
    "unanswered_forgotten": [
        (
            "wallet/dynamodb_calls.py",
            "        after_unanswered = state.unanswered and operation == _WRITE\n",
            "        after_unanswered = False  # MUTATION\n",
        ),
        (
            "wallet/store.py",
            '            if job.state.unanswered:  # an earlier attempt may have committed: never "nothing written"\n',
            "            if False:  # MUTATION\n",
        ),
    ],
    "nonce_conflict_is_funds": [
        (
            "wallet/cancellation.py",
            '    if any(reason.get("Code") == TRANSACTION_CONFLICT for reason in nonce_reasons):\n',
            "    if False:  # MUTATION\n",
        ),
    ],
    "declines_forgotten": [
        (
            "wallet/store.py",
            "        decline = decline_of(refusal)\n        if decline is None:\n",
            "        decline = decline_of(refusal)\n        if True:  # MUTATION\n",
        )
    ],
    "group_failure_settles_all": [
        (
            "wallet/group_commit.py",
            "                for request in remaining:\n                    request.value.failure = failure\n",
            "                for request in requests:  # MUTATION\n                    request.value.failure = failure\n",
        )
    ],
    "window_by_clock": [
        (
            "wallet/write_requests.py",
            "    item[WINDOW_ENDS_AT] = _n(posting.remembered_until)\n    return record_put(table, item)\n",
            '    item[WINDOW_ENDS_AT] = _n(posting.remembered_until)\n    put = record_put(table, item)  # MUTATION: the window judged by this clock\n    put["ConditionExpression"] = "attribute_not_exists(#pk) OR #w <= :now"\n    put["ExpressionAttributeNames"] = {"#pk": Attr.PK, "#w": WINDOW_ENDS_AT}\n    put["ExpressionAttributeValues"] = {":now": _n(now_s)}\n    return put\n',
        )
    ],
    "nonce_without_owner": [
        (
            "wallet/commands.py",
            "    if command.initiated_by is None:\n        return legacy_request_hash(command)\n",
            "    if True:  # MUTATION\n        return legacy_request_hash(command)\n",
        ),
        (
            "wallet/outcomes.py",
            "    if _text(record, Attr.INITIATED_BY) != principal:\n",
            "    if False:  # MUTATION\n",
        ),
    ],
}


def _apply(name: str) -> list[str]:
    touched = []
    for path, old, new in MUTATIONS[name]:
        file = ROOT / path
        text = file.read_text()
        if old not in text:
            raise SystemExit(f"{name}: the fixed code is not in {path} (changed since?)")
        file.write_text(text.replace(old, new, 1))
        touched.append(path)
    return touched


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("names", nargs="*", help=f"mutations (default: all): {', '.join(MUTATIONS)}")
    args = parser.parse_args(argv)
    if unknown := set(args.names) - set(MUTATIONS):
        parser.error(f"no such mutation: {', '.join(sorted(unknown))}")
    unproven = []
    for name in args.names or list(MUTATIONS):
        touched = _apply(name)
        try:
            run = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-n", "2", *TESTS],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
        finally:
            subprocess.run(["git", "checkout", "--", *touched], cwd=ROOT, check=True)
        failed = [line.split(" ", 1)[1] for line in run.stdout.splitlines() if line.startswith("FAILED ")]
        print(f"{name}: {', '.join(failed) if failed else 'NOT CAUGHT'}")
        if not failed:
            unproven.append(name)
    return 1 if unproven else 0


if __name__ == "__main__":
    raise SystemExit(main())
