"""The request path's shortcuts answer exactly what the plain definitions they replace answer.

Each shortcut (issue 44's write path back within its CPU: ``bench/request_instructions.py``) has
the plain form it stands for written here as the reference, and a property draws the inputs:
the control-character checks (a printable text skips the pattern; raw bytes are checked in one
pass), route matching by method with possessive segments, the entry writers compiled from
``ENTRY_FIELDS``, and the random UUIDs.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from typing import Any
from urllib.parse import unquote, unquote_to_bytes

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import wallets_table
from contracts.caller_permissions import CONTROL_CHARACTER, ROUTES, holds_control_character, match_route
from contracts.wallets_table import ENTRY_FIELDS, EntryField
from wallet import write_requests
from wallet.commands import Deposit, Transfer
from wallet.posting import Posting, post, wallet_writes
from wallet.random_ids import random_uuid
from wallet.routing import has_control_character

WALLETS = ("6f9619ff-8b86-d011-b42d-00cf4fc964ff", "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d", "w3")
SEGMENTS = st.sampled_from(
    [*WALLETS, "deposit", "transfer", "balance", "transactions", "by-id", "me", "", "n1", "%0A", "é", "\x85"]
)


@given(st.text())
def test_a_text_holds_a_control_character_exactly_when_the_pattern_finds_one(text: str) -> None:
    assert holds_control_character(text) is (CONTROL_CHARACTER.search(text) is not None)


@given(
    st.lists(st.sampled_from([*"/api%0a1Ff", "%", "%00", "%7F", "%7f", "%20", "\x7f", "\x1f", "é"])),
    st.booleans(),
)
def test_a_scope_holds_a_control_character_exactly_as_the_plain_definition_says(
    parts: list[str], decoded: bool
) -> None:
    raw = "".join(parts).encode()
    # the path as the server decoded it, or one a front rewrote (only the raw bytes then tell)
    path = unquote(raw.decode()) if decoded else "/api/v1/wallets/me/"
    plain = bool(CONTROL_CHARACTER.search(path)) or any(
        byte < 0x20 or byte == 0x7F for byte in unquote_to_bytes(raw)
    )
    assert has_control_character({"path": path, "raw_path": raw}) is plain


@given(
    st.sampled_from(["GET", "PUT", "POST", "DELETE"]),
    st.lists(SEGMENTS, max_size=6),
    st.booleans(),
)
def test_a_request_matches_the_first_row_of_the_table_a_plain_search_finds(
    method: str, segments: list[str], slash: bool
) -> None:
    path = "/api/v1/wallets/" + "/".join(segments) + ("/" if slash else "")
    plain = None
    if not CONTROL_CHARACTER.search(path):
        for route in ROUTES:  # the plain search: every row, a backtracking segment pattern
            pattern = re.compile(route.pattern.pattern.replace("++", "+"))
            if route.method == method and (found := pattern.fullmatch(path)) is not None:
                plain = (route, found.groupdict())
                break
    match = match_route(method, path)
    assert (None if match is None else (match.route, dict(match.parameters))) == plain


def test_a_route_is_equal_only_to_itself_and_hashes_as_itself() -> None:
    deposit = next(route for route in ROUTES if route.name == "deposit")
    copy = dataclasses.replace(deposit)
    assert deposit in frozenset(ROUTES)
    assert copy != deposit
    assert copy not in frozenset(ROUTES)


def test_random_uuids_are_canonical_version_4_and_distinct() -> None:
    made = [random_uuid() for _ in range(20_000)]
    assert len(set(made)) == len(made)
    for text in made[:2_000]:
        parsed = uuid.UUID(text)
        assert (str(parsed), parsed.version, parsed.variant) == (text, 4, uuid.RFC_4122)


def _plain_entry(posting: Posting, leg: Any) -> dict[str, Any]:
    """A leg's entry by column, as the module read it before its writers were compiled."""
    command = posting.command
    return {
        "created_at": posting.created_at,
        "txn_id": posting.txn_id,
        "txn_type": command.txn_type,
        "direction": leg.direction,
        "amount": command.amount,
        "nonce": command.nonce,
        "counterparty_wallet_id": leg.counterparty,
        "initiated_by": command.initiated_by,
    }


def _plain_entry_map(posting: Posting, leg: Any) -> dict[str, Any]:
    """An earlier entry as ``entries_before`` holds it: each present field under its key."""
    entry = _plain_entry(posting, leg)
    return {
        field.key: {field.type_tag: str(value)}
        for field in ENTRY_FIELDS
        if (value := entry[field.column]) is not None
    }


def _plain_update(table: str, write: Any) -> dict[str, Any]:
    """The wallet update as the module made it before its writers were compiled: a loop over the fields."""
    *earlier, (posting, leg) = write.legs
    entry = _plain_entry(posting, leg)
    values: dict[str, Any] = {
        ":since": {"N": str(write.legs[0][0].created_at)},
        ":delta": {"N": str(write.delta)},
        ":count": {"N": str(len(write.legs))},
    }
    sets = [", ".join(f"{f.name} = {f.value}" for f in ENTRY_FIELDS if f.required)]
    removes = []
    for field in ENTRY_FIELDS:
        if (value := entry[field.column]) is not None:
            values[field.value] = {field.type_tag: str(value)}
            if not field.required:
                sets.append(f"{field.name} = {field.value}")
        else:
            removes.append(field.name)
    if earlier:
        sets.append("#eb = :eb")
        values[":eb"] = {"L": [{"M": _plain_entry_map(p, other)} for p, other in earlier]}
    else:
        removes.append("#eb")
    conditions = ["attribute_exists(#pk)"]
    if write.floor is not None:
        conditions.append("#b >= :floor")
        values[":floor"] = {"N": str(write.floor)}
    if write.ceiling is not None:
        conditions.append("#b <= :ceiling")
        values[":ceiling"] = {"N": str(write.ceiling)}
    conditions.append("#u < :since")
    remove = f" REMOVE {', '.join(removes)}" if removes else ""
    return {
        "update": f"SET {', '.join(sets)}{remove} ADD #b :delta, #v :count",
        "condition": " AND ".join(conditions),
        "values": values,
    }


def _postings(draws: list[tuple[bool, int, int, bool]]) -> list[Posting]:
    postings = []
    for index, (is_transfer, payer, amount, named) in enumerate(draws):
        by = "arn:aws:sts::111122223333:assumed-role/payments/a" if named else None
        payee = WALLETS[(payer + 1) % len(WALLETS)]
        command = (
            Transfer(WALLETS[payer], payee, amount, f"n{index}", initiated_by=by)
            if is_transfer
            else Deposit(WALLETS[payer], amount, f"n{index}", initiated_by=by)
        )
        postings.append(
            post(command, now_ms=1_000 + index, hot_ttl_seconds=60, txn_id=f"t{index}", request_hash="h")
        )
    return postings


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(0, 2), st.integers(1, 10**12), st.booleans()),
        min_size=1,
        max_size=4,
    )
)
def test_the_compiled_entry_writers_make_the_update_the_plain_loop_makes(
    draws: list[tuple[bool, int, int, bool]],
) -> None:
    postings = _postings(draws)
    for write in wallet_writes(postings):
        update = write_requests._wallet_update("wallets", write)
        plain = _plain_update("wallets", write)
        assert update["UpdateExpression"] == plain["update"]
        assert update["ConditionExpression"] == plain["condition"]
        assert update["ExpressionAttributeValues"] == plain["values"]


def test_an_entry_field_the_write_path_has_no_value_for_refuses_to_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    extra = EntryField("bank_account", "entry_bank_account", "bank_account", "S", False, "#ba", ":ba")
    monkeypatch.setattr(write_requests, "ENTRY_FIELDS", (*wallets_table.ENTRY_FIELDS, extra))
    with pytest.raises(RuntimeError, match="bank_account"):
        write_requests._compile_entry_writers()


def test_an_entry_without_a_required_value_is_refused_not_written() -> None:
    [posting] = _postings([(True, 0, 5, False)])
    broken = dataclasses.replace(posting, txn_id=None)
    [write, _] = wallet_writes([broken])
    with pytest.raises(ValueError, match="needs its txn_id"):
        write_requests._wallet_update("wallets", write)
