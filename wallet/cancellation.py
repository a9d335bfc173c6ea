"""What a cancelled movement means, read from DynamoDB's cancellation reasons alone.

Pure. A movement's TransactWriteItems lists its wallet updates (one per leg, in
:attr:`wallet.posting.Posting.legs` order), then the transaction item, then the idempotency
record. When DynamoDB cancels it, ``CancellationReasons`` holds one entry per item, in that
order: ``Code`` ``None`` for an item whose condition held, ``ConditionalCheckFailed`` with the
item as it was (``ReturnValuesOnConditionCheckFailure=ALL_OLD``; no ``Item`` when there was
none), or a service reason (``TransactionConflict``, ``ThrottlingError``...). DynamoDB
evaluates every item's condition and reports each, so one answer tells every case apart without
a read, in docs/architecture.md's precedence:

1. a wallet with no item: 404 ``wallet_not_found`` (the addressed wallet first);
2. the idempotency record (or, for a request written before records existed, the transaction
   item) exists within its window: the nonce was used (a replay if its ``request_hash`` matches);
3. a debit's balance below the amount, or a credit above the ceiling: 409;
4. DynamoDB throttled: 429;
5. another transaction held an item (``TransactionConflict``): retry after a jittered pause. A
   conflict on the request's own nonce items ranks above funds (after a used nonce): another
   attempt of the same request may be committing, so it is never read as a refusal;
6. a wallet's ``updated_at`` not before the posting's time (another server's clock ahead, or
   another entry in the same millisecond): retry at once, stamped a millisecond after it.

A group commit (several postings in one transaction, :mod:`wallet.commit_queue`) is read by
:func:`read_group_cancellation`: which requests the reasons name (a used nonce, a refusal on a
wallet, a wallet stamped ahead), so only those leave the group and the rest are written again
together at once.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import Any, Final

from contracts.money import MAX_BALANCE
from contracts.wallets_table import Attr
from wallet.posting import Posting, wallet_writes

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
    not_before_ms:
        For :attr:`Cause.CLOCK_BEHIND`: one millisecond after the latest ``updated_at`` among the
        wallets not behind the posting's time; the retry is stamped no earlier.
    codes:
        Every item's reason code, for logs.
    """

    cause: Cause
    wallet_id: str | None = None
    transaction_item: Mapping[str, Any] | None = None
    not_before_ms: int | None = None
    codes: tuple[str, ...] = ()


def cancellation_reasons(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``CancellationReasons`` of a cancelled transaction's error body ([] when it has none)."""
    reasons = body.get("CancellationReasons")
    return reasons if isinstance(reasons, list) else []


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
    if len(reasons) != len(legs) + 2:
        return Cancellation(Cause.UNEXPLAINED, codes=codes)
    wallet_reasons, nonce_reasons = reasons[: len(legs)], reasons[len(legs) :]
    failed = [(leg, reason) for leg, reason in zip(legs, wallet_reasons, strict=True) if _failed(reason)]
    for leg, reason in failed:
        if not reason.get("Item"):
            return Cancellation(Cause.WALLET_NOT_FOUND, wallet_id=leg.wallet_id, codes=codes)
    # the idempotency record first: it outlives the transaction item and holds the same outcome
    for reason in reversed(nonce_reasons):
        if _failed(reason):
            return Cancellation(Cause.NONCE_USED, transaction_item=reason.get("Item"), codes=codes)
    # another transaction holds the request's own nonce: perhaps another attempt of this very
    # request, committing. Never a refusal (its money condition may be failing because of that
    # attempt's own debit): pause and write again, and the nonce's record then answers.
    if any(reason.get("Code") == TRANSACTION_CONFLICT for reason in nonce_reasons):
        return Cancellation(Cause.CONFLICT, codes=codes)
    for leg, reason in failed:
        balance = _number(reason["Item"], Attr.BALANCE)
        if leg.is_debit and (balance is None or balance < leg.balance_floor):
            return Cancellation(Cause.INSUFFICIENT_FUNDS, wallet_id=leg.wallet_id, codes=codes)
        if not leg.is_debit and (balance is None or balance > leg.balance_ceiling):
            return Cancellation(Cause.BALANCE_LIMIT, wallet_id=leg.wallet_id, codes=codes)
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


@dataclasses.dataclass(frozen=True, slots=True)
class GroupCancellation:
    """A cancelled group commit, read: which of its postings the reasons name, and how.

    Attributes
    ----------
    records:
        Posting index -> the existing idempotency record (or transaction item) of its nonce: the
        request is answered from it (a replay, or 409 ``idempotency_key_reused``), never written.
    refused:
        Posting index -> its refusal, decided by the reasons alone as a transaction of its own
        would have been: a wallet it touches did not exist (:attr:`Cause.WALLET_NOT_FOUND`), or,
        with its nonce unused and its wallets there, its payer held less than the amount
        (:attr:`Cause.INSUFFICIENT_FUNDS`). The request is answered so, never written.
    alone:
        Postings refused by a wallet's condition only in the group's order (funds spent by an
        earlier leg of the group, the ceiling): each is written alone, where its refusal is its
        own (:func:`read_cancellation`).
    not_before_ms:
        Posting index -> the earliest stamp its next write may carry (a wallet stamped ahead).
    conflicted:
        Some item was held by another transaction: the rest go again after a jittered pause.
    """

    records: dict[int, Mapping[str, Any]]
    alone: frozenset[int]
    not_before_ms: dict[int, int]
    conflicted: bool
    refused: dict[int, tuple[Cause, str]] = dataclasses.field(default_factory=dict)

    @property
    def named(self) -> set[int]:
        """Every posting that leaves the group."""
        return {*self.records, *self.refused, *self.alone}


def read_group_cancellation(
    postings: Sequence[Posting], reasons: Sequence[Mapping[str, Any]]
) -> GroupCancellation | None:
    """Who a group commit's ``CancellationReasons`` name; None when they explain nothing usable.

    The transaction lists one update per wallet (:func:`wallet.posting.wallet_writes` order), the
    transaction items, then the idempotency records, each in posting order. A failed wallet
    condition returns the wallet as it was (``ALL_OLD``), so its legs are walked in commit order
    from that balance: the legs that would take it below zero (or above the ceiling) name their
    postings, the others stay. A used nonce names its posting with the record. A wallet stamped at
    or after the group's first leg on it names nobody but moves the next stamps past it. Throttling,
    an unknown reason or reasons that do not match the transaction give None: the caller splits.

    Examples
    --------
    >>> from wallet.commands import Deposit
    >>> from wallet.posting import post
    >>> group = [post(Deposit(w, 5, "n"), now_ms=1_000, hot_ttl_seconds=60, txn_id="t", request_hash="h")
    ...          for w in ("a", "b")]
    >>> held, failed = {"Code": "None"}, {"Code": "ConditionalCheckFailed", "Item": {"pk": {"S": "x"}}}
    >>> read_group_cancellation(group, [held, held, held, held, held, failed]).records
    {1: {'pk': {'S': 'x'}}}
    """
    writes = wallet_writes(postings)
    count = len(postings)
    if len(reasons) != len(writes) + 2 * count:
        return None
    codes = {str(reason.get("Code", CONDITION_HELD)) for reason in reasons}
    if not codes <= {CONDITION_HELD, CONDITION_FAILED, TRANSACTION_CONFLICT}:
        return None
    index_of = {id(posting): index for index, posting in enumerate(postings)}
    records: dict[int, Mapping[str, Any]] = {}
    txn_reasons, record_reasons = reasons[len(writes) : len(writes) + count], reasons[len(writes) + count :]
    for index in range(count):
        for reason in (record_reasons[index], txn_reasons[index]):
            if _failed(reason) and index not in records:
                records[index] = reason.get("Item") or {}
    wallet_reasons = dict(zip((write.wallet_id for write in writes), reasons[: len(writes)], strict=True))
    refused = _refused(postings, wallet_reasons, txn_reasons, record_reasons, records)
    alone: set[int] = set()
    not_before: dict[int, int] = {}
    for write, reason in zip(writes, reasons[: len(writes)], strict=True):
        if not _failed(reason):
            continue
        touching = [index_of[id(posting)] for posting, _ in write.legs]
        item = reason.get("Item")
        balance = _number(item, Attr.BALANCE) if item else None
        if balance is None:  # no wallet (refused above) or no balance: each finds out alone
            alone.update(index for index in touching if index not in records and index not in refused)
            continue
        for posting, leg in write.legs:
            index = index_of[id(posting)]
            if index in records or index in alone or index in refused:
                continue
            after = balance + leg.delta
            if after < 0 or after > MAX_BALANCE:
                alone.add(index)
            else:
                balance = after
        updated_at = _number(item, Attr.UPDATED_AT) if item else None
        if updated_at is not None and updated_at >= write.legs[0][0].created_at:
            for index in touching:
                not_before[index] = max(not_before.get(index, 0), updated_at + 1)
    conflicted = TRANSACTION_CONFLICT in codes
    if not (records or refused or alone or not_before):
        return None
    return GroupCancellation(records, frozenset(alone), not_before, conflicted, refused)


def observed_balances(postings: Sequence[Posting], reasons: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Each wallet's balance as a cancellation's ``ALL_OLD`` items state it (its failed conditions).

    For :mod:`wallet.balance_hints`: the balance DynamoDB evaluated, before any of the cancelled
    transaction's legs. Reasons that do not match the transaction's items state nothing.

    Examples
    --------
    >>> from wallet.commands import Transfer
    >>> from wallet.posting import post
    >>> p = post(Transfer("a", "b", 9, "n"), now_ms=1, hot_ttl_seconds=1, txn_id="t", request_hash="h")
    >>> failed = {"Code": "ConditionalCheckFailed", "Item": {"balance": {"N": "4"}}}
    >>> observed_balances([p], [failed, {"Code": "None"}, {"Code": "None"}, {"Code": "None"}])
    {'a': 4}
    """
    writes = wallet_writes(postings)
    if len(reasons) != len(writes) + 2 * len(postings):
        return {}
    observed: dict[str, int] = {}
    for write, reason in zip(writes, reasons, strict=False):
        item = reason.get("Item") if _failed(reason) else None
        if item and (balance := _number(item, Attr.BALANCE)) is not None:
            observed[write.wallet_id] = balance
    return observed


def _refused(
    postings: Sequence[Posting],
    wallet_reasons: Mapping[str, Mapping[str, Any]],
    txn_reasons: Sequence[Mapping[str, Any]],
    record_reasons: Sequence[Mapping[str, Any]],
    records: Mapping[int, Mapping[str, Any]],
) -> dict[int, tuple[Cause, str]]:
    """The postings of a cancelled group whose refusal the reasons decide on their own.

    Each reason is the item as DynamoDB evaluated it when it cancelled the transaction, so a
    refusal read from them is the answer the posting would have had as a transaction of its own
    at that moment, in docs/architecture.md's precedence: a missing wallet first; then, only when
    both nonce items' conditions were evaluated and held (the nonce unused) and every wallet of
    the posting is known to exist, a payer whose balance is below the amount. A shortfall that
    depends on the group's other legs (each debit fits, not all of them) is not decided here.
    """
    refused: dict[int, tuple[Cause, str]] = {}
    for index, posting in enumerate(postings):
        if index in records:
            continue
        leg_reasons = [(leg, wallet_reasons[leg.wallet_id]) for leg in posting.legs]
        missing = [leg.wallet_id for leg, reason in leg_reasons if _failed(reason) and not reason.get("Item")]
        if missing:
            refused[index] = (Cause.WALLET_NOT_FOUND, missing[0])
            continue
        nonce_unused = all(
            reasons[index].get("Code", CONDITION_HELD) == CONDITION_HELD
            for reasons in (txn_reasons, record_reasons)
        )
        wallets_known = all(
            reason.get("Code", CONDITION_HELD) == CONDITION_HELD or _failed(reason)
            for _, reason in leg_reasons
        )
        if not (nonce_unused and wallets_known):
            continue
        for leg, reason in leg_reasons:
            balance = _number(reason.get("Item") or {}, Attr.BALANCE) if _failed(reason) else None
            if leg.is_debit and balance is not None and balance + leg.delta < 0:
                refused[index] = (Cause.INSUFFICIENT_FUNDS, leg.wallet_id)
                break
    return refused


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
