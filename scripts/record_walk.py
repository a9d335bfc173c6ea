"""The modules a stream record passes through, in order, from ``stream_processor.batch`` on.

Decodes one small batch (a wallet INSERT, a deposit's MODIFY, a transfer's two MODIFYs, a user
claim, a TTL REMOVE, a record that is quarantined) with a profiler hook that notes every Python
function called in the pipeline's packages, and prints the walk: the modules in call order, a
module's consecutive calls counted as one stay. ``re-entered`` lists the modules the walk comes
back to after leaving (a climb back up or a loop between two modules).

Run: ``.venv/bin/python scripts/record_walk.py`` (``--json`` for the figures alone).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stream_processor.decoder import decode_records  # noqa: E402

_PACKAGES = ("stream_processor", "contracts")
_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/wallets/stream/2026-11-22T00:00:00.000"


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _wallet(
    wallet_id: str, balance: int, version: int, entry: dict[str, Any] | None = None
) -> dict[str, Any]:
    image = {
        "pk": _s(f"{wallet_id}#wallet"),
        "entity": _s("wallet"),
        "wallet_id": _s(wallet_id),
        "user_id": _s(f"user-{wallet_id}"),
        "balance": _n(balance),
        "version": _n(version),
        "created_at": _n(1_000),
        "updated_at": _n(1_000 + version),
    }
    return image | (entry or {})


def _entry(
    txn_id: str, txn_type: str, direction: str, amount: int, counterparty: str | None
) -> dict[str, Any]:
    entry = {
        "entry_txn_id": _s(txn_id),
        "entry_type": _s(txn_type),
        "entry_direction": _s(direction),
        "entry_amount": _n(amount),
        "entry_nonce": _s(f"n-{txn_id}"),
        "entry_initiated_by": _s("arn:aws:sts::1:assumed-role/payments/a"),
    }
    if counterparty is not None:
        entry["entry_counterparty_wallet_id"] = _s(counterparty)
    return entry


def _record(
    event: str, sequence: int, new: dict[str, Any] | None, old: dict[str, Any] | None
) -> dict[str, Any]:
    change: dict[str, Any] = {"SequenceNumber": str(sequence), "ApproximateCreationDateTime": 1_700_000_000}
    if new is not None:
        change["NewImage"] = new
    if old is not None:
        change["OldImage"] = old
    record: dict[str, Any] = {"eventName": event, "eventSourceARN": _ARN, "dynamodb": change}
    if event == "REMOVE":
        record["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    return record


def sample_batch() -> list[dict[str, Any]]:
    """One record of each kind the stream carries, and one the decoder quarantines."""
    deposit = _entry("t1", "deposit", "credit", 10, None)
    debit = _entry("t2", "transfer", "debit", 4, "b")
    credit = _entry("t2", "transfer", "credit", 4, "a")
    transaction = {"pk": _s("a_n_c#transaction"), "entity": _s("transaction"), "txn_id": _s("t1")}
    return [
        _record("INSERT", 1, _wallet("a", 0, 0), None),
        _record("INSERT", 2, {"pk": _s("user-a#user"), "entity": _s("user"), "wallet_id": _s("a")}, None),
        _record("MODIFY", 3, _wallet("a", 10, 1, deposit), _wallet("a", 0, 0)),
        _record("MODIFY", 4, _wallet("a", 6, 2, debit), _wallet("a", 10, 1, deposit)),
        _record("MODIFY", 5, _wallet("b", 4, 1, credit), _wallet("b", 0, 0)),
        _record("REMOVE", 6, None, transaction),
        _record("MODIFY", 7, _wallet("a", 99, 3, deposit), _wallet("a", 6, 2, debit)),  # does not add up
    ]


def walk(records: list[dict[str, Any]]) -> list[str]:
    """The pipeline modules called while ``records`` are decoded, consecutive calls of one as one stay."""
    stays: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if module.split(".")[0] in _PACKAGES and (not stays or stays[-1] != module):
            stays.append(module)

    stays.append("stream_processor.batch")  # process_batch calls decode_records, where the walk starts
    sys.setprofile(profile)
    try:
        decode_records(records, ingested_at_ms=1_700_000_000_000)
    finally:
        sys.setprofile(None)
    stays.append("stream_processor.batch")  # the decoded batch goes back to be landed
    return stays


def figures(stays: list[str]) -> dict[str, Any]:
    """Stays, modules, how often each is entered, and which are entered again after being left."""
    entered = Counter(stays[1:-1])
    return {
        "walk": stays,
        "stays": len(stays) - 2,
        "modules": len(entered),
        "entered": dict(entered),
        "re-entered": sorted(module for module, count in entered.items() if count > 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    result = figures(walk(sample_batch()))
    if parser.parse_args().json:
        print(json.dumps(result, indent=2))
        return
    print(" → ".join(result["walk"]))
    print(
        f"{result['stays']} stays in {result['modules']} modules;"
        f" entered more than once: {result['re-entered']}"
    )


if __name__ == "__main__":
    main()
