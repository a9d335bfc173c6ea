"""What a client is told about one movement: its receipt, and how an idempotency record holds it.

Pure. A receipt is the outcome of one request (deposit or transfer) as its first execution
decided it: the transaction id made then, what moved and when. The write path answers it in the
``Transaction-Id`` header of every 204 (``Idempotent-Replayed: true`` on a replay) and in full on
``GET /api/v1/wallets/{wallet_id}/transactions/{nonce}``; the idempotency record
(``{wallet_id}_{nonce}_{caller}`` in its own table,
:data:`contracts.idempotency_table.IDEMPOTENCY_ATTRIBUTES`) keeps it for the idempotency window,
so a replay answers the same whether or not the hot transaction item still exists.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any, Final

from contracts.timestamps import utc_text
from contracts.wallets_table import Attr

#: The header naming the transaction of every answered write (and of an unknown outcome).
TRANSACTION_ID_HEADER: Final = "Transaction-Id"
#: The header of a replay: the first outcome answered again, nothing moved (Stripe's spelling).
REPLAYED_HEADER: Final = "Idempotent-Replayed"


@dataclasses.dataclass(frozen=True, slots=True)
class Receipt:
    """One request's outcome.

    Attributes
    ----------
    txn_id:
        The transaction id made when the request first executed (unique forever, unlike the nonce).
    type:
        ``deposit`` or ``transfer``.
    wallet_id, nonce:
        The addressed wallet and the request's nonce.
    amount:
        Micro-USD moved.
    counterparty:
        A transfer's payee; None for a deposit.
    created_at:
        Epoch milliseconds of the movement (its ledger entries' time).
    replayed:
        True when this answer repeats an earlier execution (nothing moved now).
    initiated_by:
        The verified principal that asked (:mod:`wallet.principals`); None if none was known.
    """

    txn_id: str
    type: str
    wallet_id: str
    nonce: str
    amount: int
    counterparty: str | None
    created_at: int
    replayed: bool = False
    initiated_by: str | None = None

    def headers(self) -> list[tuple[str, str]]:
        """The headers of the write's answer."""
        headers = [(TRANSACTION_ID_HEADER, self.txn_id)]
        if self.replayed:
            headers.append((REPLAYED_HEADER, "true"))
        return headers

    def document(self) -> dict[str, Any]:
        """The body of ``GET .../transactions/{nonce}`` (amount as digits, like the balance).

        Examples
        --------
        >>> Receipt("t", "deposit", "w", "n", 5, None, 0).document()["created_at"]
        '1970-01-01T00:00:00.000Z'
        """
        return {
            "transaction_id": self.txn_id,
            "type": self.type,
            "wallet_id": self.wallet_id,
            "nonce": self.nonce,
            "amount": str(self.amount),
            "counterparty_wallet_id": self.counterparty,
            "created_at": utc_text(dt.datetime.fromtimestamp(self.created_at / 1000, dt.UTC)),
            "initiated_by": self.initiated_by,
        }


def receipt_of(item: Mapping[str, Any], *, replayed: bool) -> Receipt:
    """The receipt an idempotency record (or a hot transaction item: same attributes) holds.

    ``item`` is in DynamoDB's JSON (``{"S": ...}``, ``{"N": ...}``), as ``ALL_OLD`` and GetItem
    return it.
    """
    counterparty = item.get(Attr.TO_WALLET_ID)
    initiated_by = item.get(Attr.INITIATED_BY)
    return Receipt(
        txn_id=item[Attr.TXN_ID]["S"],
        type=item[Attr.TYPE]["S"],
        wallet_id=item[Attr.WALLET_ID]["S"],
        nonce=item[Attr.NONCE]["S"],
        amount=int(item[Attr.AMOUNT]["N"]),
        counterparty=counterparty["S"] if counterparty else None,
        created_at=int(item[Attr.CREATED_AT]["N"]),
        replayed=replayed,
        initiated_by=initiated_by["S"] if initiated_by else None,
    )


def alive(item: Mapping[str, Any], now_s: int) -> bool:
    """True while ``item``'s ``expires_at`` (epoch seconds) is after ``now_s``.

    A record past its window that TTL has not deleted yet is as good as gone: the nonce is
    forgotten on time (the write's condition ``expires_at <= :now`` says the same).
    """
    expires = item.get(Attr.EXPIRES_AT)
    return expires is None or int(expires["N"]) > now_s
