"""Input rules and ledger arithmetic of the write path: pure functions, property-tested."""

from __future__ import annotations

import string
import uuid

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from contracts.money import MAX_AMOUNT, MAX_BALANCE
from wallet.commands import Deposit, Transfer, request_hash
from wallet.errors import InvalidRequestError, SameWalletTransferError
from wallet.posting import post
from wallet.validation import (
    parse_amount,
    parse_create_wallet,
    parse_deposit,
    parse_nonce,
    parse_transfer,
    parse_uuid,
)

NONCE_ALPHABET = string.ascii_letters + string.digits + "_-"
W1 = "0b7e5bd6-5c5b-4bd6-9b09-5d0a5f3c1a11"
W2 = "9f1c2a4e-1111-4222-8333-444455556666"


# ------------------------------------------------------------------------------------------ amounts


@given(st.integers(min_value=1, max_value=MAX_AMOUNT))
def test_every_amount_in_range_is_accepted_as_integer_and_as_digit_string(amount: int) -> None:
    # GIVEN an amount in 1..10^15  WHEN parsed as a JSON integer and as a string
    # THEN both give the same int (the same request for idempotency)
    assert parse_amount(amount) == amount
    assert parse_amount(str(amount)) == amount


@given(st.one_of(st.integers(max_value=0), st.integers(min_value=MAX_AMOUNT + 1)))
def test_amounts_outside_the_range_are_refused(amount: int) -> None:
    with pytest.raises(InvalidRequestError):
        parse_amount(amount)
    with pytest.raises(InvalidRequestError):
        parse_amount(str(amount))


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_floats_are_refused_even_when_integral(value: float) -> None:
    # GIVEN any float, including 1.0 and 1e3  THEN it is never money
    with pytest.raises(InvalidRequestError):
        parse_amount(value)


@given(st.text(max_size=20))
@example("1.5")
@example("-3")
@example("0")
@example("1e3")
@example(" 7")
@example("7 ")
@example("+7")
@example("0100")
@example("٣")  # a non-ASCII digit
@example("7\n")
def test_strings_are_accepted_only_when_canonical_digits_in_range(text: str) -> None:
    canonical = text.isascii() and text.isdigit() and not text.startswith("0") and int(text) <= MAX_AMOUNT
    if canonical:
        assert parse_amount(text) == int(text)
    else:
        with pytest.raises(InvalidRequestError):
            parse_amount(text)


@pytest.mark.parametrize("value", [True, False, None, [], {}, [1], {"amount": 1}, 1.0, 1e3])
def test_non_numbers_and_booleans_are_refused(value: object) -> None:
    with pytest.raises(InvalidRequestError):
        parse_amount(value)


# ------------------------------------------------------------------------------------------- nonces


@given(st.text(alphabet=NONCE_ALPHABET, min_size=1, max_size=64))
def test_nonces_of_the_alphabet_up_to_64_characters_are_accepted(nonce: str) -> None:
    assert parse_nonce(nonce) == nonce


@given(st.text(max_size=80))
@example("")
@example("a" * 65)
@example("a b")
@example("a#b")
@example("ab\n")
@example("é")
def test_other_nonces_are_refused(nonce: str) -> None:
    assume(not (1 <= len(nonce) <= 64 and all(c in NONCE_ALPHABET for c in nonce)))
    with pytest.raises(InvalidRequestError):
        parse_nonce(nonce)


@pytest.mark.parametrize("value", [12345, None, True, ["a"]])
def test_nonces_must_be_strings(value: object) -> None:
    with pytest.raises(InvalidRequestError):
        parse_nonce(value)


# -------------------------------------------------------------------------------------------- UUIDs


@given(st.uuids())
def test_uuids_are_normalised_to_lower_case(value: uuid.UUID) -> None:
    assert parse_uuid(str(value).upper(), "user_id") == str(value)
    assert parse_uuid(str(value), "user_id") == str(value)


@pytest.mark.parametrize(
    "value",
    ["", "not-a-uuid", W1.replace("-", ""), "{" + W1 + "}", "urn:uuid:" + W1, W1 + "\n", W1[:-1] + "g", 42],
)
def test_non_canonical_uuids_are_refused(value: object) -> None:
    with pytest.raises(InvalidRequestError, match="wallet_id"):
        parse_uuid(value, "wallet_id")


# ------------------------------------------------------------------------------------------- bodies


def test_bodies_must_be_objects_with_the_required_fields() -> None:
    with pytest.raises(InvalidRequestError, match="JSON object"):
        parse_deposit(W1, ["amount", 1])
    with pytest.raises(InvalidRequestError, match="amount is required"):
        parse_deposit(W1, {"nonce": "n"})
    with pytest.raises(InvalidRequestError, match="nonce is required"):
        parse_transfer(W1, W2, {"amount": 1})
    with pytest.raises(InvalidRequestError, match="user_id is required"):
        parse_create_wallet({})


def test_a_transfer_to_the_same_wallet_is_malformed_whatever_the_case() -> None:
    with pytest.raises(SameWalletTransferError):
        parse_transfer(W1, W1.upper(), {"amount": 1, "nonce": "n"})


# ---------------------------------------------------------------------------------- request identity


@given(
    st.integers(min_value=1, max_value=MAX_AMOUNT), st.text(alphabet=NONCE_ALPHABET, min_size=1, max_size=64)
)
def test_string_and_integer_amounts_make_the_same_request(amount: int, nonce: str) -> None:
    as_text = parse_transfer(W1, W2, {"amount": str(amount), "nonce": nonce})
    as_int = parse_transfer(W1.upper(), W2, {"amount": amount, "nonce": nonce})
    assert request_hash(as_text) == request_hash(as_int)


def test_every_parameter_is_part_of_the_request_identity() -> None:
    base = Transfer(W1, W2, 100, "n")
    variants = [
        Transfer(W1, W2, 101, "n"),
        Transfer(W1, "9f1c2a4e-1111-4222-8333-444455556667", 100, "n"),
        Transfer(W1, W2, 100, "m"),
        Deposit(W1, 100, "n"),
    ]
    assert len({request_hash(base), *(request_hash(v) for v in variants)}) == 5


# ---------------------------------------------------------------------------------------- posting


def test_a_transfer_is_a_debit_of_the_payer_then_a_credit_of_the_payee() -> None:
    posting = post(Transfer(W1, W2, 200, "n"), now_ms=1_500, hot_ttl_seconds=60, txn_id="t", request_hash="h")
    assert [(leg.wallet_id, leg.direction, leg.delta, leg.counterparty) for leg in posting.legs] == [
        (W1, "debit", -200, W2),
        (W2, "credit", 200, W1),
    ]
    # the payer needs the amount; the payee room for it under the ceiling
    assert posting.legs[0].balance_floor == 200
    assert posting.legs[1].balance_ceiling == MAX_BALANCE - 200
    assert (posting.created_at, posting.expires_at) == (1_500, 1 + 60)


def test_a_deposit_is_one_credit_without_counterparty() -> None:
    posting = post(Deposit(W1, 7, "n"), now_ms=0, hot_ttl_seconds=1, txn_id="t", request_hash="h")
    assert [(leg.wallet_id, leg.direction, leg.delta, leg.counterparty) for leg in posting.legs] == [
        (W1, "credit", 7, None)
    ]
    assert not posting.legs[0].is_debit
