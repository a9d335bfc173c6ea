"""One entry of a wallet's history, as the API answers it and as both its sources give it.

Shared by the hot side (:mod:`wallet.history_seam`, DynamoDB's records) and the lake side
(:mod:`lake.ledger_history`, the Iceberg ledger), which must not import each other.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any


@dataclasses.dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One ledger entry of a wallet, as the history answers it."""

    version: int
    created_at_ms: int
    txn_id: str
    nonce: str
    txn_type: str
    direction: str
    amount: int
    delta: int
    counterparty: str | None
    balance_after: int
    initiated_by: str | None

    def document(self) -> dict[str, Any]:
        """The entry's JSON: money as strings of micro-USD digits, as everywhere in the API."""
        return {
            "version": self.version,
            "time": _iso(self.created_at_ms),
            "transaction_id": self.txn_id,
            "nonce": self.nonce,
            "type": self.txn_type,
            "direction": self.direction,
            "amount": str(self.amount),
            "counterparty_wallet_id": self.counterparty,
            "balance_after": str(self.balance_after),
            "initiated_by": self.initiated_by,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class Boundary:
    """The lake's newest entry of the wallet: its version (0: none), time and balance after."""

    version: int = 0
    created_at_ms: int = 0
    balance_after: int = 0


def _iso(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
