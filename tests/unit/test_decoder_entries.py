"""The ledger from wallet MODIFYs: each movement's stream record on the wallet item is one entry.

The write path ``ADD``s a movement to the wallet item and records the entry on it (``entry_*``), so
the MODIFY's NEW image states the entry with DynamoDB's own version and balance after, and its OLD
image the state it followed. These tests pin the decoding of those records and every way one can be
wrong; the transaction INSERTs of the earlier compare-and-swap path are covered by test_decoder.py.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from support.stream_records import RecordFactory, entry_image, n, s, transaction_image, wallet_image

from contracts.lake_tables import LEDGER, row_of
from contracts.wallets_table import Attr
from stream_processor.decoder import decode_records, describe_problem

INGESTED = dt.datetime(2026, 11, 22, 5, 0, tzinfo=dt.UTC)
INGESTED_MS = int(INGESTED.timestamp() * 1000)
CREATED = dt.datetime(2026, 11, 22, 4, 30, 15, 123000, tzinfo=dt.UTC)
CREATED_MS = int(CREATED.timestamp() * 1000)
OPENED_MS = CREATED_MS - 60_000


def wallet_before(wallet_id: str, *, balance: int, version: int) -> dict[str, Any]:
    return wallet_image(
        wallet_id, f"user-{wallet_id}", balance=balance, version=version, created_at=OPENED_MS
    )


def moved(old: dict[str, Any], delta: int, entry: dict[str, Any], *, at: int = CREATED_MS) -> dict[str, Any]:
    """The NEW image of ``old`` after the write path's ``ADD`` of ``delta`` with ``entry``."""
    kept = {name: value for name, value in old.items() if name != Attr.ENTRY_COUNTERPARTY}
    return {
        **kept,
        Attr.BALANCE: n(int(old[Attr.BALANCE]["N"]) + delta),
        Attr.VERSION: n(int(old[Attr.VERSION]["N"]) + 1),
        Attr.UPDATED_AT: n(at),
        **entry,
    }


def deposit_modify(records: RecordFactory | None = None, **entry: Any) -> dict[str, Any]:
    old = wallet_before("w-1", balance=5_000_000, version=2)
    values = {
        "txn_id": "t-dep",
        "txn_type": "deposit",
        "direction": "credit",
        "amount": 2_500_000,
        "nonce": "n-1",
    }
    values.update(entry)
    delta = values["amount"] if values["direction"] == "credit" else -values["amount"]
    return (records or RecordFactory()).modify(old, moved(old, delta, entry_image(**values)))


def transfer_modifies(records: RecordFactory | None = None) -> list[dict[str, Any]]:
    records = records or RecordFactory()
    payer = wallet_before("w-payer", balance=5_000_000, version=7)
    payee = wallet_before("w-payee", balance=500_000, version=1)
    debit = entry_image("t-xfer", "transfer", "debit", 1_000_000, "n-2", counterparty="w-payee")
    credit = entry_image("t-xfer", "transfer", "credit", 1_000_000, "n-2", counterparty="w-payer")
    return [
        records.modify(payer, moved(payer, -1_000_000, debit), sequence="77"),
        records.modify(payee, moved(payee, 1_000_000, credit), sequence="78"),
    ]


def decode(records: list[dict[str, Any]]) -> Any:
    return decode_records(records, ingested_at_ms=INGESTED_MS)


def test_a_deposit_modify_is_one_credit_row_with_the_items_own_version_and_balance() -> None:
    # GIVEN the MODIFY of a wallet the write path credited (version 2 -> 3, 5.0 -> 7.5 USD)
    record = deposit_modify()
    record["dynamodb"]["SequenceNumber"] = "4100000000000000001"

    # WHEN it is decoded
    batch = decode([record])

    # THEN it is one credit, every column from the images
    assert batch.ledger.to_pylist() == [
        row_of(  # a nullable column added later is null here
            LEDGER,
            {
                "entry_id": "t-dep:credit",
                "txn_id": "t-dep",
                "txn_type": "deposit",
                "wallet_id": "w-1",
                "counterparty_wallet_id": None,
                "direction": "credit",
                "amount": 2_500_000,
                "delta": 2_500_000,
                "wallet_version": 3,
                "balance_after": 7_500_000,
                "nonce": "n-1",
                "created_at": CREATED,
                "stream_sequence": "4100000000000000001",
                "ingested_at": INGESTED,
                "extra_attributes": None,
                "initiated_by": None,
            },
        )
    ]
    assert (batch.records, batch.ledger_rows, batch.quarantined, batch.ignored) == (1, 1, 0, 0)


def test_a_transfer_is_the_payers_debit_and_the_payees_credit_each_from_its_own_record() -> None:
    # GIVEN the two wallet MODIFYs of one transfer, decoded in separate batches (other shards)
    debit, credit = transfer_modifies()
    rows = [*decode([credit]).ledger.to_pylist(), *decode([debit]).ledger.to_pylist()]

    # THEN the payer is debited and the payee credited, each with its own version and balance
    columns = ("entry_id", "wallet_id", "counterparty_wallet_id", "direction", "amount", "delta")
    columns += ("wallet_version", "balance_after", "stream_sequence")
    assert sorted(tuple(row[name] for name in columns) for row in rows) == [
        ("t-xfer:credit", "w-payee", "w-payer", "credit", 1_000_000, 1_000_000, 2, 1_500_000, "78"),
        ("t-xfer:debit", "w-payer", "w-payee", "debit", 1_000_000, -1_000_000, 8, 4_000_000, "77"),
    ]


def test_the_transaction_insert_is_the_idempotency_record_and_adds_no_row() -> None:
    # GIVEN a transfer's records: both wallet MODIFYs, then the transaction INSERT and its TTL REMOVE
    records = RecordFactory()
    image = transaction_image(
        txn_id="t-xfer",
        txn_type="transfer",
        wallet_id="w-payer",
        amount=1_000_000,
        nonce="n-2",
        created_at=CREATED_MS,
        to_wallet_id="w-payee",
    )
    batch = decode([*transfer_modifies(records), records.insert(image), records.ttl_remove(image)])

    # THEN two ledger rows; the INSERT is counted as ignored and the REMOVE as a TTL expiry
    assert (batch.ledger_rows, batch.ignored, batch.ttl_expired, batch.quarantined) == (2, 1, 1, 0)
    assert describe_problem(records.insert(image)) is None


def _damaged(change: str) -> dict[str, Any]:
    record = deposit_modify()
    new, old = record["dynamodb"]["NewImage"], record["dynamodb"]["OldImage"]
    if change == "no OldImage":
        del record["dynamodb"]["OldImage"]
    elif change == "version skips one":
        new[Attr.VERSION] = n(5)
    elif change == "version repeats":
        new[Attr.VERSION] = old[Attr.VERSION]
    elif change == "balance off by one":
        new[Attr.BALANCE] = n(7_500_001)
    elif change == "negative balance":
        old[Attr.BALANCE] = n(-3_500_000)
        new[Attr.BALANCE] = n(-1_000_000)
    elif change == "debit of a deposit":
        new[Attr.ENTRY_DIRECTION] = s("debit")
    elif change == "deposit with counterparty":
        new[Attr.ENTRY_COUNTERPARTY] = s("w-2")
    elif change == "unknown direction":
        new[Attr.ENTRY_DIRECTION] = s("sideways")
    elif change == "unknown type":
        new[Attr.ENTRY_TYPE] = s("refund")
    elif change == "transfer without counterparty":
        new[Attr.ENTRY_TYPE] = s("transfer")
    elif change == "transfer to itself":
        new[Attr.ENTRY_TYPE] = s("transfer")
        new[Attr.ENTRY_COUNTERPARTY] = s("w-1")
    elif change == "amount zero":
        new[Attr.ENTRY_AMOUNT] = n(0)
    elif change == "amount typed S":
        new[Attr.ENTRY_AMOUNT] = s("2500000")
    elif change == "no nonce":
        del new[Attr.ENTRY_NONCE]
    elif change == "no version":
        del new[Attr.VERSION]
    return record


BAD_ENTRIES = {
    "no OldImage": "version does not follow the OldImage's version by one (or no OldImage)",
    "version skips one": "version does not follow the OldImage's version by one (or no OldImage)",
    "version repeats": "version does not follow the OldImage's version by one (or no OldImage)",
    "balance off by one": "balance is not the OldImage's balance plus the entry",
    "negative balance": f"balance is not an integer in 0..{9 * 10**18}",
    "debit of a deposit": "deposit entry that is not a credit without counterparty",
    "deposit with counterparty": "deposit entry that is not a credit without counterparty",
    "unknown direction": "entry_direction is not debit or credit",
    "unknown type": "unknown transaction type",
    "transfer without counterparty": "transfer entry without entry_counterparty_wallet_id",
    "transfer to itself": "transfer to the same wallet",
    "amount zero": f"entry_amount is not an integer in 1..{10**15}",
    "amount typed S": "attribute entry_amount is not of type N",
    "no nonce": "missing attribute entry_nonce",
    "no version": "missing attribute version",
}


@pytest.mark.parametrize("case", sorted(BAD_ENTRIES))
def test_a_modify_that_is_not_exactly_one_applied_entry_is_quarantined(case: str) -> None:
    # GIVEN a batch: a transfer's debit, a damaged deposit MODIFY, the transfer's credit
    records = RecordFactory()
    debit, credit = transfer_modifies(records)
    bad = _damaged(case)
    batch = decode([debit, bad, credit])

    # THEN only the damaged record is quarantined, with its reason and whole raw JSON
    assert batch.quarantine.column("reason").to_pylist() == [BAD_ENTRIES[case]]
    assert json.loads(batch.quarantine.column("raw")[0].as_py()) == bad
    assert sorted(batch.ledger.column("entry_id").to_pylist()) == ["t-xfer:credit", "t-xfer:debit"]


def test_a_modify_without_an_entry_is_the_compare_and_swap_paths_and_is_counted() -> None:
    # GIVEN a wallet MODIFY that sets balance and version only (the earlier write path's)
    old = wallet_before("w-1", balance=0, version=0)
    batch = decode([RecordFactory().modify(old, {**old, Attr.BALANCE: n(5), Attr.VERSION: n(1)})])

    # THEN it adds no row (that path's transaction INSERT carries the entry) and is counted
    assert (batch.ledger_rows, batch.ignored, batch.quarantined) == (0, 1, 0)
