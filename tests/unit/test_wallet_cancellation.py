"""Reading a cancelled movement: DynamoDB's per-item reasons give docs/architecture.md's precedence.

Pure. An oracle evaluates each item's condition the way DynamoDB does for the write path's
TransactWriteItems (the wallet updates, the transaction item, then the idempotency record) over
generated wallet states, and :func:`read_cancellation` must name the cause the precedence says: a
missing wallet, then a used nonce, then money, then a wallet stamped later than the posting.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from contracts.money import MAX_BALANCE
from wallet.cancellation import Cause, read_cancellation
from wallet.commands import Deposit, Transfer
from wallet.posting import Leg, Posting, post

NOW = 1_000_000
PAYER, PAYEE = "payer", "payee"

wallet_states = st.one_of(
    st.none(),  # no item
    st.tuples(
        st.sampled_from([0, 1, 50, 99, 100, 101, MAX_BALANCE - 100, MAX_BALANCE]),
        st.sampled_from([NOW - 5, NOW, NOW + 1, NOW + 7]),
    ),
)


def _holds(leg: Leg, state: tuple[int, int] | None, now: int) -> bool:
    if state is None:
        return False
    balance, updated_at = state
    money = balance >= leg.balance_floor if leg.is_debit else balance <= leg.balance_ceiling
    return money and updated_at < now


def _reasons(
    posting: Posting, states: list[tuple[int, int] | None], nonce_used: str
) -> list[dict[str, Any]] | None:
    """What DynamoDB answers: None when every condition holds (committed), else one reason per item."""
    reasons: list[dict[str, Any]] = []
    for leg, state in zip(posting.legs, states, strict=True):
        if _holds(leg, state, posting.created_at):
            reasons.append({"Code": "None"})
        elif state is None:
            reasons.append({"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"})
        else:
            item = {
                "balance": {"N": str(state[0])},
                "updated_at": {"N": str(state[1])},
                "version": {"N": "4"},
            }
            reasons.append({"Code": "ConditionalCheckFailed", "Item": item})
    used = {"Code": "ConditionalCheckFailed", "Item": {"request_hash": {"S": "h"}}}
    # the transaction item, then the idempotency record: a request written before records existed
    # ("hot item") has only the former; one written since has both, or only the record once the
    # hot item expired
    reasons.append(used if nonce_used in ("hot item", "both") else {"Code": "None"})
    reasons.append(used if nonce_used in ("record", "both") else {"Code": "None"})
    return None if all(reason["Code"] == "None" for reason in reasons) else reasons


def _expected(posting: Posting, states: list[tuple[int, int] | None], nonce_used: str) -> tuple[Cause, Any]:
    legs = list(zip(posting.legs, states, strict=True))
    for leg, state in legs:
        if state is None:
            return Cause.WALLET_NOT_FOUND, leg.wallet_id
    if nonce_used != "free":
        return Cause.NONCE_USED, None
    for leg, state in legs:
        assert state is not None
        if leg.is_debit and state[0] < leg.balance_floor:
            return Cause.INSUFFICIENT_FUNDS, leg.wallet_id
        if not leg.is_debit and state[0] > leg.balance_ceiling:
            return Cause.BALANCE_LIMIT, leg.wallet_id
    ahead = [state[1] for _, state in legs if state is not None and state[1] >= posting.created_at]
    return Cause.CLOCK_BEHIND, max(ahead) + 1


@given(
    transfer=st.booleans(),
    amount=st.sampled_from([1, 100, 101]),
    payer=wallet_states,
    payee=wallet_states,
    nonce_used=st.sampled_from(["free", "record", "hot item", "both"]),
)
def test_every_cancellation_is_read_in_precedence_order(
    transfer: bool,
    amount: int,
    payer: tuple[int, int] | None,
    payee: tuple[int, int] | None,
    nonce_used: str,
) -> None:
    # GIVEN a movement and the wallets and nonce as DynamoDB finds them at commit
    command = Transfer(PAYER, PAYEE, amount, "n") if transfer else Deposit(PAYER, amount, "n")
    posting = post(command, now_ms=NOW, hot_ttl_seconds=60, txn_id="t", request_hash="h")
    states = [payer, payee] if transfer else [payer]
    reasons = _reasons(posting, states, nonce_used)
    if reasons is None:
        return  # every condition held: the transaction committed, nothing to read

    # WHEN the cancellation is read
    cancellation = read_cancellation(posting, reasons)

    # THEN its cause is the first in precedence, about the right wallet, with what the store needs
    cause, detail = _expected(posting, states, nonce_used)
    assert cancellation.cause is cause
    if cause in (Cause.WALLET_NOT_FOUND, Cause.INSUFFICIENT_FUNDS, Cause.BALANCE_LIMIT):
        assert cancellation.wallet_id == detail
    if cause is Cause.NONCE_USED:
        assert cancellation.transaction_item == {"request_hash": {"S": "h"}}
    if cause is Cause.CLOCK_BEHIND:
        assert cancellation.not_before_ms == detail > NOW


def _deposit() -> Posting:
    return post(Deposit(PAYER, 5, "n"), now_ms=NOW, hot_ttl_seconds=60, txn_id="t", request_hash="h")


def test_service_reasons_are_throttling_then_conflict() -> None:
    posting = _deposit()
    held = {"Code": "None"}
    throttled = [{"Code": "ThrottlingError"}, held, held]
    conflict = [{"Code": "TransactionConflict"}, held, held]
    assert read_cancellation(posting, throttled).cause is Cause.THROTTLED
    assert read_cancellation(posting, conflict).cause is Cause.CONFLICT
    transfer = post(
        Transfer(PAYER, PAYEE, 5, "n"), now_ms=NOW, hot_ttl_seconds=60, txn_id="t", request_hash="h"
    )
    assert read_cancellation(
        transfer, [{"Code": "ThrottlingError"}, {"Code": "TransactionConflict"}, held, held]
    ).cause is (Cause.THROTTLED)


def test_a_conflict_on_the_requests_own_nonce_is_never_a_refusal() -> None:
    # GIVEN a transfer whose payer's condition failed (balance 0) while another transaction holds
    # its own nonce items: that transaction may be another attempt of this very request, whose
    # debit emptied the payer (issue 35, point 3)
    posting = post(
        Transfer(PAYER, PAYEE, 100, "n"), now_ms=NOW, hot_ttl_seconds=60, txn_id="t", request_hash="h"
    )
    poor = {"Code": "ConditionalCheckFailed", "Item": {"balance": {"N": "0"}, "updated_at": {"N": "1"}}}
    held = {"Code": "None"}
    conflict = {"Code": "TransactionConflict"}
    for nonce_reasons in ([conflict, held], [held, conflict], [conflict, conflict]):
        # WHEN the cancellation is read THEN it is a conflict to wait out, not insufficient funds
        assert read_cancellation(posting, [poor, held, *nonce_reasons]).cause is Cause.CONFLICT
        # ... and a conflict on the nonce with a throttled wallet also writes again, never refuses
        throttled = {"Code": "ThrottlingError"}
        assert (
            read_cancellation(posting, [throttled, held, *nonce_reasons]).cause
            is not Cause.INSUFFICIENT_FUNDS
        )
    # a used nonce still wins over a conflict on the other nonce item (its record answers)
    used = {"Code": "ConditionalCheckFailed", "Item": {"txn_id": {"S": "x"}}}
    assert read_cancellation(posting, [poor, held, conflict, used]).cause is Cause.NONCE_USED


def test_reasons_that_do_not_match_the_transaction_are_unexplained() -> None:
    # a reason list of the wrong length, or a failure no condition explains, is never guessed at
    posting = _deposit()
    assert read_cancellation(posting, []).cause is Cause.UNEXPLAINED
    unexplained = [
        {"Code": "ConditionalCheckFailed", "Item": {"balance": {"N": "0"}, "updated_at": {"N": "0"}}}
    ]
    held = {"Code": "None"}
    assert read_cancellation(posting, [*unexplained, held, held]).cause is Cause.UNEXPLAINED
    assert read_cancellation(posting, [*unexplained, held]).cause is Cause.UNEXPLAINED  # too short
    assert read_cancellation(posting, [{"Code": "ValidationError"}, held, held]).cause is Cause.UNEXPLAINED


def test_a_money_refusal_without_the_nonces_reason_is_still_read_as_the_refusal() -> None:
    # GIVEN a funds failure whose transaction-item reason is missing (not "None")
    posting = post(
        Transfer(PAYER, PAYEE, 10, "n"), now_ms=NOW, hot_ttl_seconds=60, txn_id="t", request_hash="h"
    )
    poor = {"Code": "ConditionalCheckFailed", "Item": {"balance": {"N": "3"}, "updated_at": {"N": "0"}}}
    cancellation = read_cancellation(posting, [poor, {"Code": "None"}, {"Code": "None"}, {}])
    # THEN it is the refusal, about the payer: the store makes it final only by putting the nonce's
    # declined record, which fails if an attempt of the nonce committed meanwhile
    assert (cancellation.cause, cancellation.wallet_id) == (Cause.INSUFFICIENT_FUNDS, PAYER)
