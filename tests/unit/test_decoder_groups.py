"""A group commit's wallet MODIFY: several entries of one transaction on one wallet item.

When the write path's commit queue writes several requests in one TransactWriteItems, a wallet
they share gets one update: ``ADD`` of their summed delta and of their count to ``version``, its
latest entry in ``entry_*`` and the ones before in ``entries_before`` (oldest first). The decoder
turns that one record into one ledger row per entry, each following the one before by a version
and its own delta; a record that does not add up is quarantined whole, never in part.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.stream_records import RecordFactory, earlier_entry, entry_image, n, s, wallet_image

from contracts.wallets_table import Attr, EntryKey
from stream_processor.decoder import decode_records

OPENED = 1_795_000_000_000
T1, T2, T3 = OPENED + 10, OPENED + 11, OPENED + 12


def earlier(
    txn_id: str, txn_type: str, direction: str, amount: int, at: int, cp: str | None
) -> dict[str, Any]:
    """One wrapped map of ``entries_before``."""
    return {
        "M": earlier_entry(
            entry_image(txn_id, txn_type, direction, amount, f"nonce-{txn_id}", counterparty=cp), at
        )
    }


def group_record(**changes: Any) -> dict[str, Any]:
    """Wallet w at version 4 with 10 USD takes a deposit of 5, a debit of 12 and a credit of 2."""
    old = wallet_image("w", "u", balance=10_000_000, version=4, created_at=OPENED, updated_at=OPENED + 1)
    new = {
        **old,
        Attr.BALANCE: n(10_000_000 + 5_000_000 - 12_000_000 + 2_000_000),
        Attr.VERSION: n(7),
        Attr.UPDATED_AT: n(T3),
        **entry_image("t3", "transfer", "credit", 2_000_000, "nonce-t3", counterparty="x"),
        Attr.ENTRIES_BEFORE: {
            "L": [
                earlier("t1", "deposit", "credit", 5_000_000, T1, None),
                earlier("t2", "transfer", "debit", 12_000_000, T2, "y"),
            ]
        },
    }
    new.update(changes)
    return RecordFactory().modify(old, new, sequence="900")


def test_a_group_commits_modify_is_one_row_per_entry_in_order() -> None:
    batch = decode_records([group_record()], ingested_at_ms=T3 + 1)

    assert batch.quarantined == 0
    rows = [
        (
            row["entry_id"],
            row["counterparty_wallet_id"],
            row["delta"],
            row["wallet_version"],
            row["balance_after"],
            int(row["created_at"].timestamp() * 1000),
            row["nonce"],
            row["stream_sequence"],
        )
        for row in batch.ledger.to_pylist()
    ]
    assert rows == [
        ("t1:credit", None, 5_000_000, 5, 15_000_000, T1, "nonce-t1", "900"),
        ("t2:debit", "y", -12_000_000, 6, 3_000_000, T2, "nonce-t2", "900"),
        ("t3:credit", "x", 2_000_000, 7, 5_000_000, T3, "nonce-t3", "900"),
    ]


BROKEN: dict[str, tuple[dict[str, Any], str]] = {
    # NEW's version is not OLD's + the number of entries
    "a version too many": ({Attr.VERSION: n(8)}, "version does not follow"),
    # NEW's balance is not OLD's + the entries' deltas
    "a balance that does not add up": ({Attr.BALANCE: n(5_000_001)}, "balance is not"),
    # an earlier entry whose map lacks its amount
    "an entry without amount": (
        {Attr.ENTRIES_BEFORE: {"L": [{"M": {EntryKey.TXN_ID: s("t1")}}]}},
        "entries_before[0]: missing attribute type",
    ),
    # an earlier entry that is neither a debit nor a credit
    "an entry with a bad direction": (
        {
            Attr.ENTRIES_BEFORE: {
                "L": [
                    earlier("t1", "deposit", "refund", 5_000_000, T1, None),
                    earlier("t2", "transfer", "debit", 12_000_000, T2, "y"),
                ]
            }
        },
        "not debit or credit",
    ),
    # an earlier transfer entry to the wallet itself
    "a transfer to itself": (
        {
            Attr.ENTRIES_BEFORE: {
                "L": [
                    earlier("t1", "deposit", "credit", 5_000_000, T1, None),
                    earlier("t2", "transfer", "debit", 12_000_000, T2, "w"),
                ]
            }
        },
        "transfer to the same wallet",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_group_commits_modify_that_does_not_add_up_is_quarantined_whole(case: str) -> None:
    changes, reason = BROKEN[case]
    batch = decode_records([group_record(), group_record(**changes)], ingested_at_ms=T3 + 1)

    assert batch.ledger_rows == 3  # the good record's three entries, nothing of the broken one
    assert batch.quarantined == 1
    assert reason in batch.quarantine["reason"][0].as_py()


def test_a_group_commit_without_a_usable_old_image_is_quarantined() -> None:
    record = group_record()
    record["dynamodb"]["OldImage"][Attr.VERSION] = n(-1) | {"N": "four"}

    batch = decode_records([record], ingested_at_ms=T3 + 1)

    assert (batch.ledger_rows, batch.quarantined) == (0, 1)
    assert "OldImage" in batch.quarantine["reason"][0].as_py()


def test_each_entry_of_a_group_keeps_its_own_initiator_and_old_entries_have_none() -> None:
    # GIVEN a group whose first entry was asked by one role, its last by another, the middle by no one
    first = earlier("t1", "deposit", "credit", 5_000_000, T1, None)
    first["M"][EntryKey.INITIATED_BY] = s("arn:aws:sts::1:assumed-role/a/s")
    record = group_record(
        **{
            Attr.ENTRY_INITIATED_BY: s("arn:aws:sts::1:assumed-role/b/s"),
            Attr.ENTRIES_BEFORE: {"L": [first, earlier("t2", "transfer", "debit", 12_000_000, T2, "y")]},
        }
    )
    batch = decode_records([record], ingested_at_ms=T3 + 1)
    # THEN each row carries its own entry's principal (null where the entry had none), not extras
    assert batch.quarantined == 0
    assert [(row["entry_id"], row["initiated_by"]) for row in batch.ledger.to_pylist()] == [
        ("t1:credit", "arn:aws:sts::1:assumed-role/a/s"),
        ("t2:debit", None),
        ("t3:credit", "arn:aws:sts::1:assumed-role/b/s"),
    ]
    assert all(row["extra_attributes"] is None for row in batch.ledger.to_pylist())
    # AND a malformed principal quarantines the record with its reason
    bad = group_record(**{Attr.ENTRY_INITIATED_BY: n(5)})
    assert decode_records([bad], ingested_at_ms=T3 + 1).quarantined == 1
