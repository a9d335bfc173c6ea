"""The ledger arithmetic of one request: what each touched wallet is told to add, and when.

Pure. A movement is written without reading the wallets first: each wallet item gets an atomic
``ADD`` of its delta to ``balance`` and of 1 to ``version``, guarded by conditions DynamoDB checks
at commit (funds on a debit, the balance ceiling on a credit, time on both), and the item records
the ledger entry it just applied (``entry_*`` attributes). So the wallet's own stream record
(NEW_AND_OLD_IMAGES) states the entry whole: its version and balance after are the item's, exactly
as DynamoDB committed them, and nothing the server computed can disagree with them.

This module says what the legs of a movement are and what each one's conditions allow; the store
(:mod:`wallet.store`) turns them into one TransactWriteItems and :mod:`wallet.cancellation` reads a
refusal back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from contracts.idempotency_table import TTL_MARGIN_SECONDS
from contracts.money import MAX_BALANCE
from contracts.movement_types import ADDRESSED, TARGET, Party, movement_type
from contracts.wallets_table import DIRECTION_DEBIT
from wallet.commands import Movement


@dataclasses.dataclass(frozen=True, slots=True)
class Leg:
    """One wallet's side of a movement: the ledger entry its item records.

    ``delta`` is signed (negative on a debit). A debit needs ``balance >= -delta`` at commit; a
    credit needs ``balance <= MAX_BALANCE - delta`` (:attr:`balance_floor`, :attr:`balance_ceiling`).
    """

    wallet_id: str
    direction: str
    delta: int
    counterparty: str | None

    @property
    def is_debit(self) -> bool:
        """True for the payer's leg of a transfer."""
        return self.direction == DIRECTION_DEBIT

    @property
    def balance_floor(self) -> int:
        """Lowest balance the wallet may hold before a debit (the amount), for its condition."""
        return -self.delta

    @property
    def balance_ceiling(self) -> int:
        """Highest balance the wallet may hold before a credit, so it stays within the limit."""
        return MAX_BALANCE - self.delta


@dataclasses.dataclass(frozen=True, slots=True)
class Posting:
    """Everything one TransactWriteItems writes for a deposit or a transfer.

    ``legs`` are in the order the transaction lists the wallets: the addressed wallet first (a
    deposit's credit, a transfer's debit), then a transfer's payee. ``created_at`` is the time of
    every leg; each wallet's condition ``updated_at < created_at`` makes time strictly increase
    with version on that wallet.
    """

    command: Movement
    txn_id: str
    request_hash: str
    created_at: int
    expires_at: int
    legs: tuple[Leg, ...]
    #: Epoch seconds the request can be replayed until (the record's ``window_ends_at``): the
    #: idempotency window after ``created_at``, rounded up, so never less than the window.
    remembered_until: int = 0

    @property
    def record_expires_at(self) -> int:
        """The idempotency record's TTL: its window and a margin no clock or TTL delay can eat."""
        return self.remembered_until + TTL_MARGIN_SECONDS


def legs_of(command: Movement) -> tuple[Leg, ...]:
    """The legs its movement type lists (:mod:`contracts.movement_types`), on the request's wallets.

    A deposit is one credit; a transfer a debit of the payer and a credit of the payee.

    Examples
    --------
    >>> from wallet.commands import Transfer
    >>> [(leg.wallet_id, leg.delta) for leg in legs_of(Transfer("a", "b", 5, "n"))]
    [('a', -5), ('b', 5)]
    """
    kind = movement_type(command.txn_type)
    addressed, target, amount = command.wallet_id, command.to_wallet_id, command.amount
    if target is None:
        if kind.has_target:
            raise ValueError("this movement type names a target wallet; the request has none")
        target = addressed  # never read: no leg of such a type names the target
    parties: dict[Party | None, str | None] = {ADDRESSED: addressed, TARGET: target, None: None}
    legs = []
    for spec in kind.legs:
        legs.append(
            Leg(
                addressed if spec.wallet == ADDRESSED else target,
                spec.direction,
                spec.sign * amount,
                parties[spec.counterparty],
            )
        )
    return tuple(legs)


def post(
    command: Movement,
    *,
    now_ms: int,
    hot_ttl_seconds: int,
    txn_id: str,
    request_hash: str,
    idempotency_window_seconds: int | None = None,
    legs: tuple[Leg, ...] | None = None,
) -> Posting:
    """The posting of ``command`` stamped at ``now_ms``; money rules are DynamoDB's conditions.

    ``now_ms`` is the server's clock, raised by the store past a wallet's ``updated_at`` when a
    refusal showed that wallet stamped at or after it (a server whose clock lags another's, or
    two entries in one millisecond). ``idempotency_window_seconds`` defaults to the hot TTL;
    ``legs`` are ``legs_of(command)``, given when the caller has them already.
    """
    window = hot_ttl_seconds if idempotency_window_seconds is None else idempotency_window_seconds
    return Posting(
        command=command,
        txn_id=txn_id,
        request_hash=request_hash,
        created_at=now_ms,
        expires_at=now_ms // 1000 + hot_ttl_seconds,
        legs=legs_of(command) if legs is None else legs,
        remembered_until=-(-now_ms // 1000) + window,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class WalletWrite:
    """What one TransactWriteItems does to one wallet item: its legs, in commit order.

    One posting gives each of its wallets one leg. A group commit (:mod:`wallet.commit_queue`)
    writes several postings in one transaction, and a wallet they share gets one update carrying
    all its legs: ``ADD`` of their sum and of their count to ``version``. The conditions must then
    hold for every leg in turn, which is a bound on the balance before the first one:
    :attr:`floor` (no prefix of the legs takes the balance below zero) and :attr:`ceiling` (none
    takes it above ``MAX_BALANCE``). For one leg they are that leg's own floor and ceiling.
    """

    wallet_id: str
    legs: tuple[tuple[Posting, Leg], ...]

    @property
    def delta(self) -> int:
        """The sum of the legs' deltas: what ``balance`` gains."""
        return sum(leg.delta for _, leg in self.legs)

    @property
    def floor(self) -> int | None:
        """Lowest balance before the first leg keeping every prefix at or above 0; None without a debit."""
        if not any(leg.is_debit for _, leg in self.legs):
            return None
        return max(-prefix for prefix in self._prefixes())

    @property
    def ceiling(self) -> int | None:
        """Highest balance before the first leg keeping every prefix within the limit; None without credit."""
        if all(leg.is_debit for _, leg in self.legs):
            return None
        return MAX_BALANCE - max(self._prefixes())

    def _prefixes(self) -> list[int]:
        total, prefixes = 0, []
        for _, leg in self.legs:
            total += leg.delta
            prefixes.append(total)
        return prefixes


def wallet_writes(postings: Sequence[Posting]) -> list[WalletWrite]:
    """Each touched wallet's legs across ``postings`` (in posting order), wallets by first appearance.

    For one posting this is its legs, one wallet each, in :attr:`Posting.legs` order.

    Examples
    --------
    >>> from wallet.commands import Transfer
    >>> p = [post(t, now_ms=1, hot_ttl_seconds=1, txn_id="t", request_hash="h")
    ...      for t in (Transfer("a", "b", 5, "n1"), Transfer("b", "c", 3, "n2"))]
    >>> [(w.wallet_id, w.delta, w.floor, w.ceiling is None) for w in wallet_writes(p)]
    [('a', -5, 5, True), ('b', 2, -2, False), ('c', 3, None, False)]
    """
    legs: dict[str, list[tuple[Posting, Leg]]] = {}
    for posting in postings:
        for leg in posting.legs:
            legs.setdefault(leg.wallet_id, []).append((posting, leg))
    return [WalletWrite(wallet_id, tuple(entries)) for wallet_id, entries in legs.items()]
