"""Numbering an export's entries (pure): the MODIFYs rebuilt from wallet and transaction items.

A history is generated with the write path's rules (:class:`stream_records.LedgerModel`), the
export taken at a random time: every wallet item as it then stands, every transaction item not yet
expired, and any subset of the expired ones (TTL deletes in no particular order). The entries the
export numbers must be exactly the model's entries of the unexpired transactions, each with the
version and balance after DynamoDB gave it.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from support.stream_records import (
    HOT_TTL_SECONDS,
    LedgerModel,
    RecordFactory,
    assert_entries,
    assert_exact_ledger,
)

from contracts.wallets_table import Attr
from stream_processor.decoder import decode_records
from stream_processor.export_entries import number_entries

operations = st.lists(
    st.tuples(
        st.sampled_from(["deposit", "transfer"]),
        st.integers(min_value=0, max_value=4),
        st.integers(min_value=0, max_value=4),
        st.integers(min_value=1, max_value=10**9),
        st.integers(min_value=1, max_value=4 * 3_600_000),  # ms before the operation
        st.booleans(),  # commits in one group with the operation before it
    ),
    min_size=1,
    max_size=40,
)


def _decode(images: list[tuple[dict[str, Any], dict[str, Any]]]) -> pa.Table:
    factory = RecordFactory()
    return decode_records([factory.modify(old, new) for old, new in images], ingested_at_ms=0).ledger


@settings(max_examples=200, deadline=None)
@given(
    ops=operations, export_at=st.floats(min_value=0, max_value=1), kept=st.lists(st.booleans(), max_size=40)
)
def test_an_export_numbers_every_unexpired_entry_as_the_stream_did(
    ops: list[tuple[str, int, int, int, int, bool]], export_at: float, kept: list[bool]
) -> None:
    # GIVEN a history over hours, some of it in group commits, and the export of it at some
    # moment after its last commit
    model = LedgerModel()
    ids = [model.open_wallet(f"wallet-{index}")[0] for index in range(5)]
    for step, (kind, first, second, amount, pause, joins) in enumerate(ops):
        if step == 0 or not joins:
            model.end_group()
            model.tick(pause)
            model.begin_group()
        if kind == "deposit":
            model.deposit(ids[first], amount)
        elif model.can_transfer(ids[first], ids[second], amount):
            model.transfer(ids[first], ids[second], amount)
    model.end_group()
    export_time = model.clock // 1000 + int(export_at * HOT_TTL_SECONDS * 1.5)
    unexpired = [t for t in model.transactions if int(t[Attr.EXPIRES_AT]["N"]) > export_time]
    expired = [t for t in model.transactions if int(t[Attr.EXPIRES_AT]["N"]) <= export_time]
    present = unexpired + [t for index, t in enumerate(expired) if index < len(kept) and kept[index]]
    wallets = [state.image for state in model.wallets.values()]

    # WHEN its entries are numbered and decoded as the stream's MODIFYs
    numbered = number_entries(wallets, present, export_time_s=export_time)
    ledger = _decode(numbered.images)

    # THEN they are exactly the unexpired transactions' entries, versions and balances exact
    assert numbered.problems == []
    assert numbered.expired == len(present) - len(unexpired)
    txn_ids = {t[Attr.TXN_ID]["S"] for t in unexpired}
    # (each wallet's newest entries: their versions need not start at 1)
    assert_entries(ledger, [e for e in model.entries if e.entry_id.split(":")[0] in txn_ids])


def test_a_whole_history_inside_the_window_is_the_whole_ledger() -> None:
    # GIVEN an export taken right after a short history (nothing expired)
    model = LedgerModel()
    a, _ = model.open_wallet("a")
    b, _ = model.open_wallet("b")
    model.deposit(a, 100)
    model.transfer(a, b, 30)
    model.transfer(b, a, 5)
    wallets = [state.image for state in model.wallets.values()]
    numbered = number_entries(wallets, model.transactions, export_time_s=model.clock // 1000)
    # THEN the rebuilt MODIFYs are the whole ledger: versions 1..N, exact balances
    assert_exact_ledger(_decode(numbered.images), model.entries)


def test_entries_that_cannot_be_ordered_or_do_not_end_at_the_wallet_are_reported_not_guessed() -> None:
    model = LedgerModel()
    a, _ = model.open_wallet("a")
    model.deposit(a, 100)
    model.deposit(a, 50)
    wallet = model.wallets[a].image
    tied = [dict(t) for t in model.transactions]
    tied[1] = {**tied[1], Attr.CREATED_AT: tied[0][Attr.CREATED_AT]}
    stale = {**wallet, Attr.ENTRY_TXN_ID: {"S": "someone-else"}}
    export_time = model.clock // 1000
    assert number_entries([wallet], tied, export_time_s=export_time).problems == [
        "wallet a: two entries share a created_at, so their order is unknown"
    ]
    assert number_entries([stale], model.transactions, export_time_s=export_time).problems == [
        "wallet a: the newest transaction item is not the wallet item's latest entry"
    ]
    assert number_entries([], model.transactions, export_time_s=export_time).problems == [
        "wallet a: its item is not in the export"
    ]


def test_an_entry_rebuilt_from_an_export_names_who_asked_for_it_not_the_latest_caller() -> None:
    # GIVEN a treasurer's deposit, then Alice's, on one wallet; its item names Alice (the latest)
    treasurer = "arn:aws:sts::1:assumed-role/payments/treasurer"
    alice = "arn:aws:sts::1:assumed-role/app/alice"
    model = LedgerModel()
    wallet, _ = model.open_wallet("w")
    model.deposit(wallet, 3)
    model.tick(1000)
    model.deposit(wallet, 7)
    first, second = model.transactions
    first[Attr.INITIATED_BY] = {"S": treasurer}
    second[Attr.INITIATED_BY] = {"S": alice}
    image = {**model.wallets[wallet].image, Attr.ENTRY_INITIATED_BY: {"S": alice}}
    # WHEN the export's entries are numbered and decoded
    numbered = number_entries([image], model.transactions, export_time_s=model.clock // 1000)
    ledger = _decode(numbered.images)
    # THEN each entry names its own caller
    callers = dict(
        zip(
            ledger.column("wallet_version").to_pylist(),
            ledger.column("initiated_by").to_pylist(),
            strict=True,
        )
    )
    assert (numbered.problems, callers) == ([], {1: treasurer, 2: alice})
