"""Balance hints alone: what a process may believe of a wallet's balance, and when it stops believing.

Pure. :class:`wallet.balance_hints.BalanceHints` only routes requests (a likely refusal is written
in a transaction of its own), so what matters is: with one writer the hint is the balance exactly
and its verdict is DynamoDB's; with other writers a wrong hint is dropped by the first commit that
contradicts it; and the map stays bounded.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contracts.money import MAX_BALANCE
from wallet.balance_hints import BalanceHints
from wallet.commands import Deposit, Transfer
from wallet.posting import Leg, legs_of


def _debit(wallet_id: str, amount: int) -> tuple[Leg, ...]:
    return legs_of(Transfer(wallet_id, "payee", amount, "n"))[:1]


def _credit(wallet_id: str, amount: int) -> tuple[Leg, ...]:
    return legs_of(Deposit(wallet_id, amount, "n"))


def test_a_wallet_without_a_hint_is_never_called_short() -> None:
    hints = BalanceHints()
    assert hints.get("a") is None
    assert hints.likely_refused(_debit("a", 10**15)) is False
    assert hints.committed(_debit("a", 5)) == 0
    assert hints.get("a") is None  # a commit teaches nothing without a starting balance


def test_a_learnt_balance_moves_with_committed_legs_and_judges_debits_and_credits() -> None:
    hints = BalanceHints()
    hints.learn({"a": 10, "b": MAX_BALANCE - 3})
    assert hints.committed([*_debit("a", 4), *_credit("b", 2)]) == 0
    assert (hints.get("a"), hints.get("b")) == (6, MAX_BALANCE - 1)
    # a debit of exactly the balance fits; one micro-dollar more does not
    assert hints.likely_refused(_debit("a", 6)) is False
    assert hints.likely_refused(_debit("a", 7)) is True
    # a credit up to the ceiling fits; past it does not
    assert hints.likely_refused(_credit("b", 1)) is False
    assert hints.likely_refused(_credit("b", 2)) is True


def test_legs_pending_before_a_request_count_first() -> None:
    hints = BalanceHints()
    hints.learn({"a": 0})
    # nothing in a alone, but the group it would join credits 30 first
    assert hints.likely_refused(_debit("a", 20)) is True
    assert hints.likely_refused(_debit("a", 20), {"a": 30}) is False
    assert hints.likely_refused(_debit("a", 31), {"a": 30}) is True


def test_a_commit_the_hint_called_impossible_proves_it_wrong_and_the_wallet_is_forgotten() -> None:
    hints = BalanceHints()
    hints.learn({"a": 5, "b": 7})
    # another process credited a: DynamoDB committed a debit of 50 the hint said a could not pay
    assert hints.committed([*_debit("a", 50), *_credit("b", 50)]) == 1
    assert hints.get("a") is None
    assert hints.get("b") == 57
    # and a credit past the hinted ceiling the same way
    hints.learn({"c": MAX_BALANCE})
    assert hints.committed(_credit("c", 1)) == 1
    assert hints.get("c") is None


def test_forget_drops_the_wallets_of_a_write_of_unknown_outcome() -> None:
    hints = BalanceHints()
    hints.learn({"a": 1, "b": 2})
    hints.forget(["a", "x"])
    assert (hints.get("a"), hints.get("b"), len(hints)) == (None, 2, 1)


def test_the_map_is_bounded_and_forgets_the_least_recently_touched_wallet() -> None:
    hints = BalanceHints(kept=2)
    hints.learn({"a": 1, "b": 2})
    hints.committed(_credit("a", 1))  # a touched after b
    hints.learn({"c": 3})
    assert (hints.get("a"), hints.get("b"), hints.get("c")) == (2, None, 3)
    assert len(hints) == 2


@given(
    start=st.integers(min_value=0, max_value=1_000),
    moves=st.lists(st.tuples(st.booleans(), st.integers(min_value=1, max_value=600)), max_size=40),
)
def test_with_one_writer_the_hint_is_the_balance_and_its_verdict_is_the_condition_s(
    start: int, moves: list[tuple[bool, int]]
) -> None:
    # GIVEN a wallet whose every write goes through this process, from a balance it learnt
    hints = BalanceHints()
    hints.learn({"a": start})
    balance = start
    for is_debit, amount in moves:
        legs = _debit("a", amount) if is_debit else _credit("a", amount)
        refused = is_debit and balance < amount  # DynamoDB's condition
        # THEN the hint calls each write short exactly when DynamoDB refuses it
        assert hints.likely_refused(legs) is refused
        if not refused:
            balance += -amount if is_debit else amount
            assert hints.committed(legs) == 0
        # AND the hint is the balance
        assert hints.get("a") == balance
