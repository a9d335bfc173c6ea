"""An item attribute the decoder does not know is kept with its row, never dropped.

A newer writer may put an attribute on a wallet or transaction item before the lake has a column
for it; after the stream's 24 hours and the item's TTL it would exist nowhere else. The decoder
keeps every such attribute in the row's ``extra_attributes`` (JSON text: name -> DynamoDB JSON),
and null when the item holds only what the write path writes today.
"""

from __future__ import annotations

import json
from typing import Any

from support.stream_records import RecordFactory, entry_image, n, s, transaction_image, wallet_image

from contracts.lake_tables import EXTRA_ATTRIBUTES, LAKE_TABLES
from contracts.wallets_table import Attr
from stream_processor.decoder import decode_records

OPENED = 1_795_000_000_000
AT = OPENED + 60_000
TIER = {"tier": s("gold")}
NESTED = {"limits": {"M": {"daily": n(5), "note": s("caf\u00e9 \u2615")}}, "flags": {"SS": ["a", "b"]}}


def decode(records: list[dict[str, Any]]) -> Any:
    return decode_records(records, ingested_at_ms=AT + 1)


def deposit_record(records: RecordFactory, *, old_extra: Any = None, new_extra: Any = None) -> dict[str, Any]:
    """A wallet MODIFY crediting 2.5 USD (version 2 -> 3), with extra attributes on the images."""
    old = {**wallet_image("w-1", "u-1", balance=5_000_000, version=2, created_at=OPENED), **(old_extra or {})}
    new = {
        **old,
        Attr.BALANCE: n(7_500_000),
        Attr.VERSION: n(3),
        Attr.UPDATED_AT: n(AT),
        **entry_image("t-dep", "deposit", "credit", 2_500_000, "n-1"),
        **(new_extra or {}),
    }
    return records.modify(old, new)


def extra(row: dict[str, Any]) -> Any:
    text = row[EXTRA_ATTRIBUTES]
    return None if text is None else json.loads(text)


def test_both_tables_declare_the_column_nullable_and_after_the_original_ones() -> None:
    for table in ("ledger", "wallets"):
        schema = LAKE_TABLES[table].schema
        # THEN it follows the original columns (later ones, like the ledger's initiated_by, are
        # added after it, by name) and every column from it on is nullable
        position = schema.names.index(EXTRA_ATTRIBUTES)
        assert position == LAKE_TABLES[table].created_columns
        assert all(schema.field(name).nullable for name in schema.names[position:])


def test_an_unknown_attribute_on_a_wallet_modify_is_kept_on_its_ledger_row() -> None:
    # GIVEN a movement whose NEW image carries attributes no decoder version knows (nested too)
    batch = decode([deposit_record(RecordFactory(), new_extra={**TIER, **NESTED})])

    # THEN the row is decoded as always, and carries each unknown attribute as DynamoDB JSON
    (row,) = batch.ledger.to_pylist()
    assert (row["entry_id"], row["balance_after"], batch.quarantined) == ("t-dep:credit", 7_500_000, 0)
    assert extra(row) == {**TIER, **NESTED}


def test_an_item_with_only_known_attributes_has_none() -> None:
    # GIVEN movements as today's write path writes them (pk, entity, every entry attribute)
    records = RecordFactory()
    batch = decode([deposit_record(records), deposit_record(records, old_extra=TIER)])

    # THEN the first row has no extra attributes; the second carries what its NEW image holds
    # (an attribute of the item, whichever write set it)
    assert [extra(row) for row in batch.ledger.to_pylist()] == [None, TIER]


def test_a_group_commits_rows_all_carry_the_items_extra_attributes() -> None:
    # GIVEN a MODIFY applying two entries (one in entries_before) with an unknown attribute
    old = wallet_image("w", "u", balance=10_000_000, version=4, created_at=OPENED)
    earlier = entry_image("t1", "deposit", "credit", 5_000_000, "nonce-t1")
    new = {
        **old,
        Attr.BALANCE: n(17_000_000),
        Attr.VERSION: n(6),
        Attr.UPDATED_AT: n(AT),
        **entry_image("t2", "deposit", "credit", 2_000_000, "nonce-t2"),
        Attr.ENTRIES_BEFORE: {
            "L": [
                {
                    "M": {
                        "txn_id": earlier[Attr.ENTRY_TXN_ID],
                        "type": earlier[Attr.ENTRY_TYPE],
                        "direction": earlier[Attr.ENTRY_DIRECTION],
                        "amount": earlier[Attr.ENTRY_AMOUNT],
                        "nonce": earlier[Attr.ENTRY_NONCE],
                        "created_at": n(AT - 1),
                    }
                }
            ]
        },
        **TIER,
    }
    batch = decode([RecordFactory().modify(old, new)])

    # THEN both rows carry it
    assert batch.quarantined == 0
    assert [(row["entry_id"], extra(row)) for row in batch.ledger.to_pylist()] == [
        ("t1:credit", TIER),
        ("t2:credit", TIER),
    ]


def test_an_unknown_attribute_on_a_wallet_insert_is_kept_on_its_wallets_row() -> None:
    records = RecordFactory()
    plain = wallet_image("w-8", "u-8", created_at=OPENED)
    batch = decode(
        [records.insert(plain), records.insert({**wallet_image("w-9", "u-9", created_at=OPENED), **TIER})]
    )

    assert [(row["wallet_id"], extra(row)) for row in batch.wallets.to_pylist()] == [
        ("w-8", None),
        ("w-9", TIER),
    ]


def test_an_unknown_attribute_on_a_legacy_transaction_is_kept_on_both_its_rows() -> None:
    # GIVEN a transfer item of the compare-and-swap write path, with its request hash and TTL
    # (known) and an attribute no decoder knows
    image = transaction_image(
        txn_id="t-x",
        txn_type="transfer",
        wallet_id="w-a",
        amount=1_000_000,
        nonce="n-x",
        wallet_version=8,
        wallet_balance_after=4_000_000,
        created_at=OPENED,
        to_wallet_id="w-b",
        to_wallet_version=2,
        to_wallet_balance_after=1_500_000,
    )
    image = {**image, Attr.REQUEST_HASH: s("h"), Attr.EXPIRES_AT: n(1), **TIER}
    batch = decode([RecordFactory().insert(image)])

    # THEN the debit and the credit both carry it, and nothing else
    assert [(row["direction"], extra(row)) for row in batch.ledger.to_pylist()] == [
        ("debit", TIER),
        ("credit", TIER),
    ]


def test_rows_with_and_without_extras_mixed_in_a_big_batch_keep_each_their_own() -> None:
    # GIVEN more records than one chunk of the decoder's hot loop, every third with an extra
    records = RecordFactory()
    batch_records = [
        deposit_record(records, new_extra={"n": n(index)} if index % 3 == 0 else None)
        for index in range(2_500)
    ]

    # WHEN decoded
    rows = decode(batch_records).ledger.to_pylist()

    # THEN each row carries exactly its own record's attribute
    assert [extra(row) for row in rows] == [{"n": n(i)} if i % 3 == 0 else None for i in range(2_500)]
