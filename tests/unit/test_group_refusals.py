"""A refusal read from a cancelled group's reasons is the answer its request would have had alone.

Pure. A group of deposits and transfers over a few wallets, each wallet missing or holding a
balance, each nonce free or used, is "sent": an oracle evaluates every item's condition as
DynamoDB does for the group's TransactWriteItems (one update per wallet with the group's floor and
ceiling, then the transaction items, then the records) and answers the reasons. Whatever
:func:`wallet.cancellation.read_group_cancellation` decides on its own (``refused``) must be
exactly what :func:`wallet.cancellation.read_cancellation` says of that request written alone
against the same wallets at the same moment: the store answers it without a write of its own,
so the answer must not depend on being in a group.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from wallet.cancellation import Cause, read_cancellation, read_group_cancellation
from wallet.commands import Deposit, Movement, Transfer
from wallet.posting import Posting, WalletWrite, post, wallet_writes

NOW = 1_000_000
WALLETS = ("a", "b", "c", "x")
HELD = {"Code": "None"}
USED = {"Code": "ConditionalCheckFailed", "Item": {"request_hash": {"S": "h"}}}
CONFLICT = {"Code": "TransactionConflict"}

balances = st.one_of(st.none(), st.sampled_from([0, 5, 10, 100]))  # None: no wallet item


def _wallet_reason(write: WalletWrite, balance: int | None) -> dict[str, Any]:
    if balance is None:
        return {"Code": "ConditionalCheckFailed"}
    floor, ceiling = write.floor, write.ceiling
    if (floor is None or balance >= floor) and (ceiling is None or balance <= ceiling):
        return HELD
    item = {"balance": {"N": str(balance)}, "updated_at": {"N": str(NOW - 5)}}
    return {"Code": "ConditionalCheckFailed", "Item": item}


def _reasons(
    postings: list[Posting], state: dict[str, int | None], used: set[int], held: frozenset[int] = frozenset()
) -> list[dict[str, Any]]:
    """The group's reasons; ``held``: postings whose record another transaction held (not evaluated)."""
    reasons = [_wallet_reason(write, state[write.wallet_id]) for write in wallet_writes(postings)]
    nonce = [USED if index in used else HELD for index in range(len(postings))]
    records = [CONFLICT if index in held else reason for index, reason in enumerate(nonce)]
    return [*reasons, *nonce, *records]  # transaction items, then records


commands = st.one_of(
    st.builds(lambda w, amount: Deposit(w, amount, ""), st.sampled_from(WALLETS), st.sampled_from([1, 7])),
    st.builds(
        lambda pair, amount: Transfer(pair[0], pair[1], amount, ""),
        st.lists(st.sampled_from(WALLETS), min_size=2, max_size=2, unique=True),
        st.sampled_from([1, 6, 50, 200]),
    ),
)


@given(
    group=st.lists(commands, min_size=2, max_size=6),
    state=st.fixed_dictionaries(dict.fromkeys(WALLETS, balances)),
    used=st.sets(st.integers(0, 5)),
    held=st.frozensets(st.integers(0, 5)),
)
def test_a_refusal_decided_in_a_group_is_the_refusal_of_the_request_alone(
    group: list[Movement], state: dict[str, int | None], used: set[int], held: frozenset[int]
) -> None:
    postings = [
        post(
            dataclasses.replace(command, nonce=f"n{index}"),
            now_ms=NOW,
            hot_ttl_seconds=60,
            txn_id=f"t{index}",
            request_hash="h",
        )
        for index, command in enumerate(group)
    ]
    held = held - used
    reasons = _reasons(postings, state, used, held)
    if all(reason["Code"] == "None" for reason in reasons):
        return  # the group committed
    read = read_group_cancellation(postings, reasons)
    for index, (cause, wallet_id) in ({} if read is None else read.refused).items():
        alone = _reasons([postings[index]], state, {0} if index in used else set())
        expected = read_cancellation(postings[index], alone)
        assert (cause, wallet_id) == (expected.cause, expected.wallet_id)
        assert cause in (Cause.WALLET_NOT_FOUND, Cause.INSUFFICIENT_FUNDS)
        # a nonce whose record was not evaluated may be used: only a missing wallet precedes it
        assert index not in held or cause is Cause.WALLET_NOT_FOUND


def test_a_debit_beyond_the_balance_is_refused_in_the_group_and_one_short_only_in_its_order_goes_alone() -> (
    None
):
    # a holds 10: "beyond" asks 50 (more than a ever held), "late" asks 6 after "first" took 6
    group = [
        post(
            Transfer("a", "b", amount, nonce), now_ms=NOW, hot_ttl_seconds=60, txn_id=nonce, request_hash="h"
        )
        for amount, nonce in ((6, "first"), (6, "late"), (50, "beyond"))
    ]
    read = read_group_cancellation(group, _reasons(group, {"a": 10, "b": 0}, set()))
    assert read is not None
    assert read.refused == {2: (Cause.INSUFFICIENT_FUNDS, "a")}
    assert read.alone == frozenset({1})
    assert read.named == {1, 2}
