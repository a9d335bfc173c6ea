"""The event source mapping's filter patterns: no Lambda for records that make no row, every record
the decoder would turn into a row or a quarantine entry still delivered.

The patterns are evaluated with the rules Lambda documents for event filtering (a pattern's keys
all match; a leaf matches when any of its conditions does: a value, ``anything-but`` a list of
values, ``exists`` true or false), on records as the stream carries them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.stream_records import (
    RecordFactory,
    entry_image,
    n,
    s,
    transaction_image,
    user_image,
    wallet_image,
)

from contracts.stream_filters import STREAM_FILTER_PATTERNS, filter_patterns
from contracts.wallets_table import ENTITY_IDEMPOTENCY, Attr
from stream_processor.decoder import decode_records

_ABSENT = object()


def _leaf(conditions: list[Any], value: Any) -> bool:
    primitive = isinstance(value, str | int | float | bool) or value is None
    for condition in conditions:
        if isinstance(condition, dict) and "exists" in condition:
            if condition["exists"] == (value is not _ABSENT and primitive):
                return True
        elif isinstance(condition, dict) and "anything-but" in condition:
            if value is not _ABSENT and primitive and value not in condition["anything-but"]:
                return True
        elif value is not _ABSENT and value == condition:
            return True
    return False


def matches(pattern: dict[str, Any], event: Any) -> bool:
    """Lambda's event filtering on one pattern (the subset of the syntax the patterns use)."""
    for key, wanted in pattern.items():
        value = event.get(key, _ABSENT) if isinstance(event, dict) else _ABSENT
        if isinstance(wanted, dict):
            if not matches(wanted, value if isinstance(value, dict) else {}):
                return False
        elif not _leaf(wanted, value):
            return False
    return True


def delivered(record: dict[str, Any]) -> bool:
    return any(matches(pattern, record) for pattern in STREAM_FILTER_PATTERNS)


AT = 1_795_000_000_000
RECORDS = RecordFactory()
WALLET = wallet_image("w-1", "u-1", balance=5, version=2, created_at=AT)
MOVED = {
    **WALLET,
    Attr.BALANCE: n(7),
    Attr.VERSION: n(3),
    Attr.UPDATED_AT: n(AT + 1),
    **entry_image("t", "deposit", "credit", 2, "n-1"),
}
TRANSACTION = transaction_image(
    txn_id="t", txn_type="deposit", wallet_id="w-1", amount=2, nonce="n-1", created_at=AT
)
LEGACY = {**TRANSACTION, Attr.WALLET_VERSION: n(3), Attr.WALLET_BALANCE_AFTER: n(7)}
IDEMPOTENCY = {Attr.PK: s("w-1_n-1#idempotency"), Attr.ENTITY: s(ENTITY_IDEMPOTENCY)}
UNKNOWN = {Attr.PK: s("x#gadget"), Attr.ENTITY: s("gadget")}
NO_ENTITY = {Attr.PK: s("x")}

#: (kind, record, Lambda invoked for it)
CASES = [
    ("wallet INSERT", RECORDS.insert(WALLET), True),
    ("wallet MODIFY (an entry)", RECORDS.modify(WALLET, MOVED), True),
    ("transaction INSERT", RECORDS.insert(TRANSACTION), False),
    ("transaction INSERT of the compare-and-swap path", RECORDS.insert(LEGACY), True),
    ("transaction TTL REMOVE", RECORDS.ttl_remove(TRANSACTION), False),
    ("user claim INSERT", RECORDS.insert(user_image("u-1", "w-1")), False),
    ("idempotency INSERT", RECORDS.insert(IDEMPOTENCY), False),
    ("idempotency TTL REMOVE", RECORDS.ttl_remove(IDEMPOTENCY), False),
    ("unknown entity INSERT", RECORDS.insert(UNKNOWN), True),
    ("unknown entity REMOVE", RECORDS.user_remove(UNKNOWN), True),
    ("wallet REMOVE", RECORDS.user_remove(WALLET), True),
    ("user claim REMOVE", RECORDS.user_remove(user_image("u-1", "w-1")), True),
    ("user claim MODIFY", RECORDS.modify(user_image("u-1", "w-1"), user_image("u-1", "w-2")), True),
    ("INSERT without entity", RECORDS.insert(NO_ENTITY), True),
    ("REMOVE without entity", RECORDS.user_remove(NO_ENTITY), True),
]


@pytest.mark.parametrize(("kind", "record", "invoked"), CASES, ids=[case[0] for case in CASES])
def test_each_kind_of_record_is_delivered_or_filtered_as_designed(
    kind: str, record: dict[str, Any], invoked: bool
) -> None:
    assert delivered(record) is invoked, kind


@pytest.mark.parametrize(("kind", "record", "invoked"), CASES, ids=[case[0] for case in CASES])
def test_a_filtered_record_is_one_the_decoder_would_only_have_counted(
    kind: str, record: dict[str, Any], invoked: bool
) -> None:
    # GIVEN what the decoder makes of the record
    batch = decode_records([record], ingested_at_ms=AT + 10)
    makes_something = batch.ledger_rows + batch.wallet_rows + batch.quarantined > 0
    # THEN a record that makes a row or a quarantine entry is always delivered
    if makes_something:
        assert delivered(record), kind
    # AND a filtered one was only counted (ignored, or a TTL expiry)
    if not delivered(record):
        assert batch.ignored + batch.ttl_expired == 1, kind


def test_the_patterns_fit_lambdas_limits_and_are_json_strings() -> None:
    patterns = filter_patterns()
    # THEN at most 5 filters (Lambda's default per mapping), each a JSON object on `dynamodb` only
    assert len(patterns) <= 5
    assert all(set(json.loads(pattern)) == {"dynamodb"} for pattern in patterns)
