"""One wallet update for several postings: :class:`wallet.posting.WalletWrite` and its bounds.

Pure. A group commit (:mod:`wallet.commit_queue`) writes several postings in one TransactWriteItems,
and a wallet they share gets one update: ``ADD`` of the legs' sum, guarded by one condition on the
balance before the first leg (:attr:`WalletWrite.floor`, :attr:`WalletWrite.ceiling`). That single
condition must accept exactly the balances from which the legs, applied one at a time, would each
have committed on their own, and so keep every intermediate balance within 0..MAX_BALANCE;
otherwise a group could commit an overdraft (or a balance over the limit) hidden between two legs,
or refuse a group that serial writes would have accepted. These tests prove it for one posting
(where the bounds are the leg's own) and, as a property, for random sequences of deposits and
transfers among three wallets from every boundary balance; and that :func:`wallet_writes` keeps
each wallet's legs in posting order, wallets in order of first appearance.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.money import MAX_AMOUNT, MAX_BALANCE, MIN_AMOUNT
from wallet.commands import Deposit, Movement, Transfer
from wallet.posting import Leg, Posting, WalletWrite, post, wallet_writes

WALLETS = ["a", "b", "c"]
NOW = 1_700_000_000_000

amounts = st.one_of(
    st.integers(min_value=MIN_AMOUNT, max_value=MAX_AMOUNT),
    st.sampled_from([MIN_AMOUNT, 2, 7, MAX_AMOUNT - 1, MAX_AMOUNT]),
)
deposits = st.builds(Deposit, st.sampled_from(WALLETS), amounts, st.just("n"))
transfers = st.permutations(WALLETS).flatmap(
    lambda order: st.builds(Transfer, st.just(order[0]), st.just(order[1]), amounts, st.just("n"))
)
movements = st.one_of(deposits, transfers)


def _posting(command: Movement, index: int) -> Posting:
    return post(
        command, now_ms=NOW + index, hot_ttl_seconds=3600, txn_id=f"t{index}", request_hash=f"h{index}"
    )


def _postings(commands: list[Movement]) -> list[Posting]:
    return [_posting(command, index) for index, command in enumerate(commands)]


def _accepts(write: WalletWrite, balance: int) -> bool:
    """The one condition the wallet's update carries, evaluated on the balance before it."""
    return (write.floor is None or balance >= write.floor) and (
        write.ceiling is None or balance <= write.ceiling
    )


def _stays_within_limits(legs: list[Leg], balance: int) -> bool:
    """Every balance after each leg, applied one by one, is within 0..MAX_BALANCE."""
    for leg in legs:
        balance += leg.delta
        if not 0 <= balance <= MAX_BALANCE:
            return False
    return True


def _commits_leg_by_leg(legs: list[Leg], balance: int) -> bool:
    """Each leg, written alone in turn, passes its own condition (funds on a debit, limit on a credit)."""
    for leg in legs:
        if leg.is_debit and balance < leg.balance_floor:
            return False
        if not leg.is_debit and balance > leg.balance_ceiling:
            return False
        balance += leg.delta
    return True


# ----------------------------------------------------------------------------------- one posting


@given(amount=amounts)
def test_a_deposits_write_is_its_credit_bounded_by_the_legs_own_ceiling(amount: int) -> None:
    # GIVEN one deposit
    posting = _posting(Deposit("a", amount, "n"), 0)

    # WHEN its wallet writes are formed
    writes = wallet_writes([posting])

    # THEN it is one write of its one leg, with no floor and the leg's own ceiling
    (credit,) = posting.legs
    assert writes == [WalletWrite("a", ((posting, credit),))]
    assert (writes[0].delta, writes[0].floor, writes[0].ceiling) == (amount, None, credit.balance_ceiling)
    assert credit.balance_ceiling == MAX_BALANCE - amount


@given(amount=amounts)
def test_a_transfers_writes_are_its_legs_in_order_each_with_its_own_bound(amount: int) -> None:
    # GIVEN one transfer from a to b
    posting = _posting(Transfer("a", "b", amount, "n"), 0)

    # WHEN its wallet writes are formed
    writes = wallet_writes([posting])

    # THEN the payer's debit comes first with the leg's floor, then the payee's credit with its ceiling
    debit, credit = posting.legs
    assert writes == [WalletWrite("a", ((posting, debit),)), WalletWrite("b", ((posting, credit),))]
    assert [(w.wallet_id, w.delta, w.floor, w.ceiling) for w in writes] == [
        ("a", -amount, debit.balance_floor, None),
        ("b", amount, None, credit.balance_ceiling),
    ]
    assert (debit.balance_floor, credit.balance_ceiling) == (amount, MAX_BALANCE - amount)


def test_no_postings_write_nothing() -> None:
    assert wallet_writes([]) == []


def test_a_credit_before_a_debit_lowers_the_floor_and_a_debit_before_a_credit_raises_the_ceiling() -> None:
    # GIVEN (the docstring's example, extended) a debited 5 then credited 4, b credited 5 then
    # debited 3, c credited 3, debited 4, then credited 9
    postings = _postings(
        [
            Transfer("a", "b", 5, "n1"),
            Transfer("b", "c", 3, "n2"),
            Transfer("c", "a", 4, "n3"),
            Deposit("c", 9, "n4"),
        ]
    )

    # WHEN the writes are formed
    writes = {write.wallet_id: write for write in wallet_writes(postings)}

    # THEN each bound is the tightest over the prefixes of its wallet's legs
    assert (writes["a"].delta, writes["a"].floor, writes["a"].ceiling) == (-1, 5, MAX_BALANCE + 5 - 4)
    assert (writes["b"].delta, writes["b"].floor, writes["b"].ceiling) == (2, -2, MAX_BALANCE - 5)
    assert (writes["c"].delta, writes["c"].floor, writes["c"].ceiling) == (8, 1, MAX_BALANCE - 8)


# -------------------------------------------------------------------------------------- property


def _interesting_balances(writes: list[WalletWrite]) -> list[int]:
    """0, MAX_BALANCE, and every bound and its neighbours, as balances a wallet can hold."""
    candidates = {0, 1, MAX_BALANCE - 1, MAX_BALANCE}
    for write in writes:
        for bound in (write.floor, write.ceiling):
            if bound is not None:
                candidates |= {bound - 1, bound, bound + 1}
    return sorted(b for b in candidates if 0 <= b <= MAX_BALANCE)


@settings(max_examples=300, deadline=None)
@given(commands=st.lists(movements, min_size=1, max_size=10))
def test_a_wallets_one_condition_holds_exactly_when_its_legs_one_by_one_stay_within_limits(
    commands: list[Movement],
) -> None:
    # GIVEN a sequence of deposits and transfers among three wallets, as one group commit writes them
    postings = _postings(commands)

    # WHEN each wallet's write is formed
    writes = wallet_writes(postings)

    # THEN wallets come in order of first appearance, each with its legs in posting order
    first_seen = list(dict.fromkeys(leg.wallet_id for posting in postings for leg in posting.legs))
    assert [write.wallet_id for write in writes] == first_seen
    for write in writes:
        expected = [(p, leg) for p in postings for leg in p.legs if leg.wallet_id == write.wallet_id]
        assert len(write.legs) == len(expected)
        assert all(
            got[0] is want[0] and got[1] is want[1] for got, want in zip(write.legs, expected, strict=True)
        )
        legs = [leg for _, leg in write.legs]
        # AND its delta is what the legs add up to
        assert write.delta == sum(leg.delta for leg in legs)
        # AND a floor exactly when it has a debit, a ceiling exactly when it has a credit
        assert (write.floor is None) == (not any(leg.is_debit for leg in legs))
        assert (write.ceiling is None) == all(leg.is_debit for leg in legs)
        # AND from every balance a wallet can hold, its one condition accepts exactly the balances
        # from which the legs, one by one, stay within 0..MAX_BALANCE (and each would commit alone)
        for balance in _interesting_balances(writes):
            accepted = _accepts(write, balance)
            assert accepted == _stays_within_limits(legs, balance), (write.wallet_id, balance)
            assert accepted == _commits_leg_by_leg(legs, balance), (write.wallet_id, balance)
