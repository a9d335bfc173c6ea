"""What this process last knew of each wallet's balance: a guess that sends a likely refusal alone.

A debit beyond the payer's balance cancels the whole TransactWriteItems it rides in. Alone, that
costs nobody else anything; in a group commit (:mod:`wallet.commit_queue`) it costs every other
request of the group a second round trip, which under open-loop traffic is the p99 of everyone
(``bench/open_loop.py``, overdraft mix). A request this process can tell is likely refused is
therefore written as a transaction of its own, and never joins a group.

What the process knows without reading anything:

- a wallet it created holds 0;
- a cancellation's ``ALL_OLD`` item states a wallet's balance as DynamoDB evaluated it (this
  process had nothing else in flight on that wallet: :mod:`wallet.commit_queue` sends a wallet in
  one transaction at a time);
- every movement it commits moves its wallets' balances by their deltas.

Other processes' writes make a hint drift, either way, and either way it corrects itself:

- too high: a request that will be refused rides in a group, exactly as without hints, and the
  cancellation's ``ALL_OLD`` sets the hint right;
- too low: a request that fits goes alone and commits; a commit the hint called impossible proves
  the hint wrong, so the wallet is forgotten (unknown: its requests join groups again).

A hint only routes a request; it never answers one. Every request is still decided by DynamoDB's
conditions, so a wrong hint can cost a round trip, never a wrong answer. The map is bounded
(:data:`HINTS_KEPT` wallets, least recently touched forgotten first).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from contracts.money import MAX_BALANCE
from wallet.posting import Leg

#: Wallets whose balance a process keeps a hint of: a hint with its UUID key is about 160 bytes in
#: CPython (measured with tracemalloc over 100,000 of them: 16 MB), the same bound as the store's stamps.
HINTS_KEPT: Final = 100_000


class BalanceHints:
    """This process's last known balance per wallet (see the module docstring)."""

    def __init__(self, kept: int = HINTS_KEPT) -> None:
        if kept < 1:
            raise ValueError("kept must be at least 1")
        self._kept = kept
        self._balances: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._balances)

    def get(self, wallet_id: str) -> int | None:
        """The wallet's hinted balance in micro-USD; None when this process knows nothing of it."""
        return self._balances.get(wallet_id)

    def learn(self, balances: Mapping[str, int]) -> None:
        """Balances observed now (a wallet just created, a cancellation's ``ALL_OLD``)."""
        for wallet_id, balance in balances.items():
            self._set(wallet_id, balance)

    def forget(self, wallet_ids: Iterable[str]) -> None:
        """Wallets whose balance this process can no longer tell (a write of unknown outcome)."""
        for wallet_id in wallet_ids:
            self._balances.pop(wallet_id, None)

    def committed(self, legs: Iterable[Leg]) -> int:
        """Move the known wallets by committed legs; returns how many hints the commit proved wrong.

        A leg DynamoDB committed fitted the wallet's real balance, so a hint under which it would
        not have fitted (below zero or above the ceiling afterwards) was wrong: forgotten.
        """
        wrong = 0
        for leg in legs:
            balance = self._balances.get(leg.wallet_id)
            if balance is None:
                continue
            after = balance + leg.delta
            if 0 <= after <= MAX_BALANCE:
                self._set(leg.wallet_id, after)
            else:
                del self._balances[leg.wallet_id]
                wrong += 1
        return wrong

    def likely_refused(self, legs: Iterable[Leg], pending: Mapping[str, int] | None = None) -> bool:
        """True when a hint says a leg will not fit: a debit beyond the balance, a credit past the ceiling.

        ``pending`` adds what legs written before these (the group they would join) move each
        wallet by. A wallet without a hint fits.

        Examples
        --------
        >>> from wallet.commands import Transfer
        >>> from wallet.posting import legs_of
        >>> hints = BalanceHints()
        >>> hints.learn({"a": 5})
        >>> hints.likely_refused(legs_of(Transfer("a", "b", 6, "n"))), hints.likely_refused(
        ...     legs_of(Transfer("b", "a", 6, "n")))
        (True, False)
        """
        for leg in legs:
            balance = self._balances.get(leg.wallet_id)
            if balance is None:
                continue
            balance += pending.get(leg.wallet_id, 0) if pending else 0
            if leg.is_debit and balance < leg.balance_floor:
                return True
            if not leg.is_debit and balance > leg.balance_ceiling:
                return True
        return False

    def _set(self, wallet_id: str, balance: int) -> None:
        balances = self._balances
        balances.pop(wallet_id, None)  # re-inserted last: the map is least recently touched first
        balances[wallet_id] = balance
        while len(balances) > self._kept:
            del balances[next(iter(balances))]
