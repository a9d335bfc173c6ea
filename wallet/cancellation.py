"""What a cancelled movement means, read from DynamoDB's cancellation reasons alone.

Pure. A movement's TransactWriteItems lists its wallet updates (one per leg, in
:attr:`wallet.posting.Posting.legs` order) and then the transaction item. When DynamoDB cancels it,
``CancellationReasons`` holds one entry per item, in that order: ``Code`` ``None`` for an item whose
condition held, ``ConditionalCheckFailed`` with the item as it was (``ReturnValuesOnConditionCheckFailure
=ALL_OLD``; no ``Item`` when there was none), or a service reason (``TransactionConflict``,
``ThrottlingError``...). DynamoDB evaluates every item's condition and reports each, so one answer
tells every case apart without a read, in docs/architecture.md's precedence:

1. a wallet with no item: 404 ``wallet_not_found`` (the addressed wallet first);
2. the transaction item exists: the nonce was used (a replay if its ``request_hash`` matches);
3. a debit's balance below the amount, or a credit above the ceiling: 409;
4. DynamoDB throttled: 429;
5. another transaction held an item (``TransactionConflict``): retry after a jittered pause;
6. a wallet's ``updated_at`` not before the posting's time (another server's clock ahead, or
   another entry in the same millisecond): retry at once, stamped a millisecond after it.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import Any, Final

from contracts.wallets_table import Attr
from wallet.posting import Posting

CONDITION_FAILED: Final = "ConditionalCheckFailed"
CONDITION_HELD: Final = "None"
THROTTLE_REASONS: Final = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded"})
TRANSACTION_CONFLICT: Final = "TransactionConflict"


class Cause(enum.Enum):
    """Why a movement was cancelled, in the order the store acts on them."""

    WALLET_NOT_FOUND = "wallet_not_found"
    NONCE_USED = "nonce_used"
    INSUFFICIENT_FUNDS = "insufficient_funds"
    BALANCE_LIMIT = "balance_limit"
    THROTTLED = "throttled"
    CONFLICT = "conflict"
    CLOCK_BEHIND = "clock_behind"
    UNEXPLAINED = "unexplained"


@dataclasses.dataclass(frozen=True, slots=True)
class Cancellation:
    """One cancelled movement, read.

    Attributes
    ----------
    cause:
        The first cause in precedence order.
    wallet_id:
        The wallet the cause is about (not found, funds, limit, clock).
    transaction_item:
        The existing transaction item, when the nonce was used and DynamoDB returned it.
    nonce_checked:
        True when the transaction item's own reason says its condition was evaluated (held or
        failed): a money refusal is then final without reading the nonce.
    not_before_ms:
        For :attr:`Cause.CLOCK_BEHIND`: one millisecond after the latest ``updated_at`` among the
        wallets not behind the posting's time; the retry is stamped no earlier.
    codes:
        Every item's reason code, for logs.
    """

    cause: Cause
    wallet_id: str | None = None
    transaction_item: Mapping[str, Any] | None = None
    nonce_checked: bool = False
    not_before_ms: int | None = None
    codes: tuple[str, ...] = ()


def read_cancellation(posting: Posting, reasons: Sequence[Mapping[str, Any]]) -> Cancellation:
    """The cause of ``posting``'s cancellation from its ``CancellationReasons``.

    Examples
    --------
    >>> from wallet.commands import Deposit
    >>> from wallet.posting import post
    >>> p = post(Deposit("w", 5, "n"), now_ms=1_000, hot_ttl_seconds=60, txn_id="t", request_hash="h")
    >>> read_cancellation(p, [{"Code": "ConditionalCheckFailed"}, {"Code": "None"}]).cause
    <Cause.WALLET_NOT_FOUND: 'wallet_not_found'>
    """
    legs = posting.legs
    codes = tuple(str(reason.get("Code", "")) for reason in reasons)
    if len(reasons) != len(legs) + 1:
        return Cancellation(Cause.UNEXPLAINED, codes=codes)
    wallet_reasons, txn_reason = reasons[: len(legs)], reasons[len(legs)]
    failed = [(leg, reason) for leg, reason in zip(legs, wallet_reasons, strict=True) if _failed(reason)]
    for leg, reason in failed:
        if not reason.get("Item"):
            return Cancellation(Cause.WALLET_NOT_FOUND, wallet_id=leg.wallet_id, codes=codes)
    nonce_checked = txn_reason.get("Code") in (CONDITION_HELD, CONDITION_FAILED)
    if _failed(txn_reason):
        return Cancellation(
            Cause.NONCE_USED, transaction_item=txn_reason.get("Item"), nonce_checked=True, codes=codes
        )
    for leg, reason in failed:
        balance = _number(reason["Item"], Attr.BALANCE)
        if leg.is_debit and (balance is None or balance < leg.balance_floor):
            return Cancellation(
                Cause.INSUFFICIENT_FUNDS, wallet_id=leg.wallet_id, nonce_checked=nonce_checked, codes=codes
            )
        if not leg.is_debit and (balance is None or balance > leg.balance_ceiling):
            return Cancellation(
                Cause.BALANCE_LIMIT, wallet_id=leg.wallet_id, nonce_checked=nonce_checked, codes=codes
            )
    if any(code in THROTTLE_REASONS for code in codes):
        return Cancellation(Cause.THROTTLED, codes=codes)
    if TRANSACTION_CONFLICT in codes:
        return Cancellation(Cause.CONFLICT, codes=codes)
    ahead = [
        (updated_at, leg.wallet_id)
        for leg, reason in failed
        if (updated_at := _number(reason["Item"], Attr.UPDATED_AT)) is not None
        and updated_at >= posting.created_at
    ]
    if ahead:
        latest, wallet_id = max(ahead)
        return Cancellation(Cause.CLOCK_BEHIND, wallet_id=wallet_id, not_before_ms=latest + 1, codes=codes)
    return Cancellation(Cause.UNEXPLAINED, codes=codes)


def conflict_only(reasons: Sequence[Mapping[str, Any]]) -> bool:
    """True when a transaction was cancelled only because other transactions held its items.

    Every reason that is not ``None`` is ``TransactionConflict`` (and there is at least one): no
    condition failed, nothing was throttled, so the same transaction written again later may
    commit whole. Real DynamoDB gives this when another process's transaction touches one of the
    items at the same time; DynamoDB Local serialises such transactions instead.

    Examples
    --------
    >>> conflict_only([{"Code": "None"}, {"Code": "TransactionConflict"}])
    True
    >>> conflict_only([{"Code": "TransactionConflict"}, {"Code": "ConditionalCheckFailed"}])
    False
    """
    codes = [reason.get("Code", CONDITION_HELD) for reason in reasons]
    causes = [code for code in codes if code != CONDITION_HELD]
    return bool(causes) and all(code == TRANSACTION_CONFLICT for code in causes)


def _failed(reason: Mapping[str, Any]) -> bool:
    return reason.get("Code") == CONDITION_FAILED


def _number(item: Mapping[str, Any], name: str) -> int | None:
    value = item.get(name)
    try:
        return int(value["N"]) if isinstance(value, Mapping) else None
    except (KeyError, ValueError):
        return None
