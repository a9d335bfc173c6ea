"""The stream decoder: every record kind, and every way a record can be wrong (pure, no stack).

The transaction images built here carry ``wallet_version`` and the balances after: they are the
records of the earlier compare-and-swap write path, which the decoder still turns into their double
entry (a stream holds 24 hours of records across a deploy). The entries of the current write path,
one per wallet MODIFY, are pinned in test_decoder_entries.py; both share the quarantine rules here.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from typing import Any

import pytest
from support.stream_records import (
    STREAM_ARN,
    LedgerModel,
    RecordFactory,
    n,
    s,
    transaction_image,
    user_image,
    wallet_image,
)

from contracts.lake_tables import LEDGER, row_of
from contracts.wallets_table import Attr
from stream_processor.decoder import CHUNK_RECORDS, RECORD_KINDS, decode_records, describe_problem
from stream_processor.lambda_records import lambda_record

INGESTED = dt.datetime(2026, 11, 22, 5, 0, tzinfo=dt.UTC)
INGESTED_MS = int(INGESTED.timestamp() * 1000)
CREATED = dt.datetime(2026, 11, 22, 4, 30, 15, 123000, tzinfo=dt.UTC)
CREATED_MS = int(CREATED.timestamp() * 1000)


def deposit(**changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "txn_id": "t-dep",
        "txn_type": "deposit",
        "wallet_id": "w-1",
        "amount": 2_500_000,
        "nonce": "n-1",
        "wallet_version": 3,
        "wallet_balance_after": 7_500_000,
        "created_at": CREATED_MS,
    }
    return transaction_image(**{**values, **changes})


def transfer(**changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "txn_id": "t-xfer",
        "txn_type": "transfer",
        "wallet_id": "w-payer",
        "amount": 1_000_000,
        "nonce": "n-2",
        "wallet_version": 8,
        "wallet_balance_after": 4_000_000,
        "created_at": CREATED_MS,
        "to_wallet_id": "w-payee",
        "to_wallet_version": 2,
        "to_wallet_balance_after": 1_500_000,
    }
    return transaction_image(**{**values, **changes})


def decode(records: list[dict[str, Any]]) -> Any:
    return decode_records(records, ingested_at_ms=INGESTED_MS)


def test_deposit_insert_becomes_one_credit_row() -> None:
    # GIVEN the INSERT of a deposit's transaction item
    record = RecordFactory().insert(deposit(), sequence="4100000000000000001")

    # WHEN it is decoded
    batch = decode([record])

    # THEN it is one credit of the addressed wallet, every column from the item
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


def test_transfer_insert_becomes_a_debit_and_a_credit() -> None:
    # GIVEN the INSERT of a transfer's transaction item
    record = RecordFactory().insert(transfer(), sequence="77")

    # WHEN it is decoded
    rows = decode([record]).ledger.to_pylist()

    # THEN the payer is debited and the payee credited, each with its own version and balance
    columns = ("entry_id", "wallet_id", "counterparty_wallet_id", "direction", "amount", "delta")
    columns += ("wallet_version", "balance_after", "stream_sequence")
    picked = [tuple(row[name] for name in columns) for row in rows]
    assert picked == [
        ("t-xfer:debit", "w-payer", "w-payee", "debit", 1_000_000, -1_000_000, 8, 4_000_000, "77"),
        ("t-xfer:credit", "w-payee", "w-payer", "credit", 1_000_000, 1_000_000, 2, 1_500_000, "77"),
    ]
    assert sum(r["delta"] for r in rows) == 0


def test_wallet_insert_becomes_a_wallets_row_and_its_changes_are_ignored() -> None:
    # GIVEN a wallet opened (user claim + wallet INSERT), then its balance changed by the
    # compare-and-swap path (a MODIFY without an entry: its transaction INSERT carries the entry)
    records = RecordFactory()
    opened = wallet_image("w-9", "u-9", created_at=CREATED_MS)
    changed = {**opened, Attr.BALANCE: n(5), Attr.VERSION: n(1)}
    batch = decode(
        [records.insert(user_image("u-9", "w-9")), records.insert(opened), records.modify(opened, changed)]
    )

    # THEN one wallets row; the claim and the MODIFY are counted as ignored; no ledger rows
    assert batch.wallets.to_pylist() == [
        {"wallet_id": "w-9", "user_id": "u-9", "created_at": CREATED, "extra_attributes": None, "owner": None}
    ]
    assert (batch.ledger_rows, batch.ignored, batch.quarantined) == (0, 2, 0)


def test_a_wallets_owner_is_its_wallets_rows_own_column_not_an_unknown_attribute() -> None:
    # GIVEN a wallet opened with an owner (issue 44), then a deposit into it
    records = RecordFactory()
    opened = {**wallet_image("w-8", "u-8", created_at=CREATED_MS), Attr.OWNER: {"S": "ann@example.com"}}
    batch = decode([records.insert(opened)])
    # THEN the wallets row names the owner in its own column, not among the unknown attributes
    (row,) = batch.wallets.to_pylist()
    assert (row["owner"], row["extra_attributes"]) == ("ann@example.com", None)


def test_ttl_remove_in_aws_shape_is_counted_never_reversed() -> None:
    # GIVEN the REMOVE that DynamoDB's TTL process emits on AWS (documented shape, built here)
    record = {
        "eventID": "c81e728d9d4c2f636f067f89cc14862c",
        "eventName": "REMOVE",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
        "dynamodb": {
            "ApproximateCreationDateTime": 1795348800,
            "Keys": {"pk": {"S": "w-1_n-1#transaction"}},
            "OldImage": deposit(),
            "SequenceNumber": "222",
            "SizeBytes": 300,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
        "eventSourceARN": STREAM_ARN,
    }

    # WHEN decoded
    batch = decode([record])

    # THEN it is a TTL expiry: counted, and nothing else
    assert (batch.ttl_expired, batch.ledger_rows, batch.quarantined, batch.ignored) == (1, 0, 0, 0)


@pytest.mark.parametrize(
    ("identity", "label"),
    [
        (None, "no userIdentity (a person or program deleted it)"),
        ({"type": "Service", "principalId": "someone.example.com"}, "another service"),
        ({"type": "User", "principalId": "dynamodb.amazonaws.com"}, "not of type Service"),
    ],
)
def test_non_ttl_remove_of_a_transaction_is_quarantined(identity: dict[str, str] | None, label: str) -> None:
    # GIVEN a REMOVE of a transaction item not made by TTL
    records = RecordFactory()
    record = records.record("REMOVE", old=deposit(), user_identity=identity)

    # WHEN decoded
    batch = decode([record])

    # THEN it is quarantined whole (never treated as a reversal)
    quarantined = batch.quarantine.to_pylist()
    assert [row["reason"] for row in quarantined] == ["REMOVE of a transaction item not made by TTL"], label
    assert json.loads(quarantined[0]["raw"]) == record
    assert quarantined[0]["stream_sequence"] == record["dynamodb"]["SequenceNumber"]
    assert quarantined[0]["quarantined_at"] == INGESTED
    assert (batch.ledger_rows, batch.ttl_expired) == (0, 0)


def test_modify_of_a_transaction_is_quarantined() -> None:
    # GIVEN someone rewrote a committed transaction's amount
    old = deposit()
    new = {**old, Attr.AMOUNT: n(1)}
    batch = decode([RecordFactory().modify(old, new)])

    # THEN it is quarantined, not applied
    assert batch.quarantine.column("reason").to_pylist() == ["unexpected MODIFY of a transaction item"]
    assert batch.ledger_rows == 0


def _without(image: dict[str, Any], name: str) -> dict[str, Any]:
    return {key: value for key, value in image.items() if key != name}


BAD_TRANSACTIONS = {
    "missing txn_id": (_without(deposit(), Attr.TXN_ID), "missing attribute txn_id"),
    "missing amount": (_without(deposit(), Attr.AMOUNT), "missing attribute amount"),
    "missing created_at": (_without(deposit(), Attr.CREATED_AT), "missing attribute created_at"),
    "amount typed S": ({**deposit(), Attr.AMOUNT: s("100")}, "attribute amount is not of type N"),
    "amount not an integer": ({**deposit(), Attr.AMOUNT: n("1.5")}, "amount is not an integer in 1..10**15"),  # type: ignore[arg-type]
    "amount zero": (deposit(amount=0), "amount is not an integer in 1..10**15"),
    "amount too large": (deposit(amount=10**15 + 1), "amount is not an integer in 1..10**15"),
    "amount beyond int64": (deposit(amount=10**30), "amount is not an integer in 1..10**15"),
    "negative balance": (
        deposit(wallet_balance_after=-1),
        "wallet_balance_after is not an integer in 0..9*10**18",
    ),
    "version zero": (deposit(wallet_version=0), "wallet_version is not an integer in 1..2**63-1"),
    "unknown type": (deposit(txn_type="refund"), "unknown transaction type"),
    "transfer without payee": (transfer(to_wallet_id=None), "transfer without to_wallet_id"),
    "transfer without payee version": (
        _without(transfer(), Attr.TO_WALLET_VERSION),
        "to_wallet_version is not an integer in 1..2**63-1",
    ),
    "transfer to itself": (transfer(to_wallet_id="w-payer"), "transfer to the same wallet"),
    "payee typed N": ({**transfer(), Attr.TO_WALLET_ID: n(5)}, "attribute to_wallet_id is not of type S"),
    "created_at before 1970": (deposit(created_at=-5), "created_at is not an integer in 0..253402300799999"),
}


def _expected_reason(template: str) -> str:
    """Reasons print bounds as numbers; the table above spells them readably."""
    return (
        template.replace("10**15", str(10**15))
        .replace("9*10**18", str(9 * 10**18))
        .replace("2**63-1", str(2**63 - 1))
    )


@pytest.mark.parametrize("case", sorted(BAD_TRANSACTIONS))
def test_malformed_transaction_is_quarantined_and_the_batch_goes_on(case: str) -> None:
    # GIVEN a batch: a good deposit, a malformed transaction item, a good transfer
    image, reason = BAD_TRANSACTIONS[case]
    records = RecordFactory()
    batch_records = [records.insert(deposit()), records.insert(image), records.insert(transfer())]

    # WHEN decoded
    batch = decode(batch_records)

    # THEN only the bad record is quarantined, with its reason and whole raw JSON
    assert batch.quarantine.column("reason").to_pylist() == [_expected_reason(reason)]
    assert json.loads(batch.quarantine.column("raw")[0].as_py()) == batch_records[1]
    assert sorted(batch.ledger.column("entry_id").to_pylist()) == [
        "t-dep:credit",
        "t-xfer:credit",
        "t-xfer:debit",
    ]


def test_a_null_sequence_number_is_quarantined_never_landed_as_a_null() -> None:
    # GIVEN a batch: a good deposit, a deposit whose SequenceNumber is null, a good transfer
    records = RecordFactory()
    nameless = records.insert({**deposit(), Attr.TXN_ID: s("t-null")})
    nameless["dynamodb"]["SequenceNumber"] = None
    batch_records = [records.insert(deposit()), nameless, records.insert(transfer())]

    # WHEN decoded
    batch = decode(batch_records)

    # THEN that record alone is quarantined with why; the ledger's not-null column holds no null
    assert batch.quarantine.column("reason").to_pylist() == ["missing SequenceNumber"]
    assert sorted(batch.ledger.column("entry_id").to_pylist()) == [
        "t-dep:credit",
        "t-xfer:credit",
        "t-xfer:debit",
    ]
    assert batch.ledger.column("stream_sequence").null_count == 0


def _record_without(path: tuple[str, ...]) -> dict[str, Any]:
    record = RecordFactory().insert(deposit())
    target = record
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return record


def _record_with_image(image: Any) -> dict[str, Any]:
    record = RecordFactory().insert(deposit())
    record["dynamodb"]["NewImage"] = image
    return record


BAD_RECORDS = {
    "not an object": (["INSERT"], "record is not an object"),
    "no eventName": (_record_without(("eventName",)), "missing eventName"),
    "no dynamodb": (_record_without(("dynamodb",)), "missing dynamodb"),
    "no SequenceNumber": (_record_without(("dynamodb", "SequenceNumber")), "missing SequenceNumber"),
    "no NewImage": (_record_without(("dynamodb", "NewImage")), "missing NewImage"),
    "no entity": (_record_without(("dynamodb", "NewImage", "entity")), "missing attribute entity"),
    "unknown entity": (
        RecordFactory().insert({**deposit(), Attr.ENTITY: s("order")}),
        "unknown entity 'order'",
    ),
    "unknown eventName": (RecordFactory().record("UPSERT", new=deposit()), "unknown eventName 'UPSERT'"),
    "wallet removed": (
        RecordFactory().user_remove(wallet_image("w", "u", created_at=1)),
        "unexpected REMOVE of a wallet item",
    ),
    "image is a list": (_record_with_image([1, 2]), "missing NewImage"),
    "wallet without user": (
        RecordFactory().insert(_without(wallet_image("w", "u", created_at=1), Attr.USER_ID)),
        "missing attribute user_id",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_malformed_record_is_quarantined_with_its_reason(case: str) -> None:
    # GIVEN a malformed record between two good ones
    bad, reason = BAD_RECORDS[case]
    records = RecordFactory()
    batch = decode([records.insert(deposit()), bad, records.insert(transfer())])

    # THEN it alone is quarantined, and the good ones still become ledger rows
    assert batch.quarantine.column("reason").to_pylist() == [reason]
    assert batch.ledger_rows == 3


def test_value_of_the_wrong_python_type_is_quarantined_not_fatal() -> None:
    # GIVEN an S attribute holding a number (not valid DynamoDB JSON; only a broken producer sends it)
    records = RecordFactory()
    broken = deposit(txn_id="t-broken")
    broken[Attr.NONCE] = {"S": 12345}
    batch = decode([records.insert(deposit()), records.insert(broken)])

    # THEN the batch still decodes; the broken record is quarantined with a precise reason
    assert batch.quarantine.column("reason").to_pylist() == ["attribute nonce is not of type S"]
    assert batch.ledger.column("entry_id").to_pylist() == ["t-dep:credit"]


def test_a_type_holding_null_is_an_unknown_type_quarantined_not_fatal() -> None:
    # GIVEN a transaction whose type is {"S": null} beside a good one (found by the property test:
    # the missing type made "is it a transfer?" unknowable, and the batch stopped)
    records = RecordFactory()
    broken = transfer(txn_id="t-broken")
    broken[Attr.TYPE] = {"S": None}
    batch = decode([records.insert(deposit()), records.insert(broken)])

    # THEN only the broken record is quarantined, as an unknown type
    assert batch.quarantine.column("reason").to_pylist() == ["unknown transaction type"]
    assert batch.ledger.column("entry_id").to_pylist() == ["t-dep:credit"]


def test_text_that_is_not_utf8_is_quarantined_not_fatal() -> None:
    # GIVEN a nonce holding a lone surrogate (JSON can carry one; UTF-8 and Parquet cannot)
    records = RecordFactory()
    broken = deposit(txn_id="t-broken")
    broken[Attr.NONCE] = {"S": "n-\ud800"}
    batch = decode([records.insert(deposit()), records.insert(broken)])

    # THEN the broken record alone is quarantined, with a reason that says why
    assert batch.quarantine.column("reason").to_pylist() == ["attribute nonce is not valid UTF-8 text"]
    assert batch.ledger.column("entry_id").to_pylist() == ["t-dep:credit"]


def test_batch_larger_than_a_chunk_keeps_every_row_in_order() -> None:
    # GIVEN more records than the decoder converts at a time, a wrong-typed one deep in a later chunk
    records = RecordFactory()
    count = 2 * CHUNK_RECORDS + 7
    batch_records = [
        records.insert(deposit(txn_id=f"t-{index}", nonce=f"n-{index}")) for index in range(count)
    ]
    broken_at = CHUNK_RECORDS + 3
    batch_records[broken_at]["dynamodb"]["NewImage"][Attr.AMOUNT] = {"N": 12}

    # WHEN decoded
    batch = decode(batch_records)

    # THEN every other record is a ledger row, in stream order, and the broken one is quarantined
    expected = [f"t-{index}" for index in range(count) if index != broken_at]
    assert batch.ledger.column("txn_id").to_pylist() == expected
    assert batch.ledger.column("stream_sequence").to_pylist() == [
        batch_records[index]["dynamodb"]["SequenceNumber"] for index in range(count) if index != broken_at
    ]
    assert batch.quarantine.column("reason").to_pylist() == ["attribute amount is not of type N"]
    assert batch.ledger.column("balance_after").to_pylist() == [7_500_000] * (count - 1)


def test_ledger_rows_follow_stream_order() -> None:
    # GIVEN deposits and transfers interleaved, with the wallet MODIFYs a real stream carries
    model = LedgerModel()
    a, opened_a = model.open_wallet("wallet-a")
    b, opened_b = model.open_wallet("wallet-b")
    records = [*opened_a, *opened_b, *model.deposit(a, 10), *model.transfer(a, b, 4), *model.deposit(b, 1)]

    # WHEN decoded
    batch = decode(records)

    # THEN rows come in stream order, a transfer's debit right before its credit
    assert [(r["wallet_id"], r["direction"], r["delta"]) for r in batch.ledger.to_pylist()] == [
        ("wallet-a", "credit", 10),
        ("wallet-a", "debit", -4),
        ("wallet-b", "credit", 4),
        ("wallet-b", "credit", 1),
    ]
    # the two user claims and the three transaction INSERTs (idempotency records) are counted
    assert (batch.wallet_rows, batch.ignored) == (2, 2 + 3)


def test_batch_identity_and_age_come_from_its_records() -> None:
    # GIVEN three records, the first stamped 90 s before ingestion
    records = RecordFactory(first_sequence=500)
    first_time = INGESTED_MS / 1000 - 90
    batch = decode(
        [
            records.insert(deposit(), approximate_time=first_time),
            records.insert(transfer()),
            records.insert(deposit(txn_id="t-3")),
        ]
    )

    # THEN the batch is named by the stream and its first sequence number, and is 90 s behind
    assert (batch.event_source_arn, batch.first_sequence_number, batch.last_sequence_number) == (
        STREAM_ARN,
        "500",
        "502",
    )
    assert batch.max_record_age_seconds() == pytest.approx(90.0)
    assert set(batch.tables()) == {"ledger"}


def test_garbage_only_batch_is_named_by_its_content() -> None:
    # GIVEN a batch in which no record carries a sequence number
    garbage: list[Any] = [{"eventName": "INSERT"}, "not a record"]

    # WHEN decoded twice
    first, second = decode(garbage), decode(copy.deepcopy(garbage))

    # THEN everything is quarantined and the batch's name is stable (a retry overwrites its object)
    assert first.quarantined == 2
    assert first.first_sequence_number == second.first_sequence_number
    assert first.first_sequence_number.startswith("content-")


def test_every_expected_kind_has_a_decoder() -> None:
    # THEN the dispatch table covers exactly the kinds docs/architecture.md expects (the five of
    # the ledger, and the write path's idempotency records, ignored)
    assert sorted(RECORD_KINDS) == [
        ("INSERT", "idempotency"),
        ("INSERT", "transaction"),
        ("INSERT", "user"),
        ("INSERT", "wallet"),
        ("MODIFY", "idempotency"),
        ("MODIFY", "wallet"),
        ("REMOVE", "idempotency"),
        ("REMOVE", "transaction"),
    ]
    assert describe_problem(RecordFactory().insert(transfer())) is None


def test_dynamodb_local_ttl_deletion_is_reshaped_as_aws_sends_it() -> None:
    # GIVEN a TTL deletion as DynamoDB Local answers GetRecords through boto3
    raw = {
        "eventID": "e1",
        "eventName": "UNKNOWN_TO_SDK_VERSION",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "ddblocal",
        "dynamodb": {
            "ApproximateCreationDateTime": dt.datetime(2026, 11, 22, 4, 15, tzinfo=dt.UTC),
            "Keys": {"pk": {"S": "w-1_n-1#transaction"}},
            "OldImage": {**deposit(), "blob": {"B": b"\x00\x01"}},
            "SequenceNumber": "000000000000000000006",
            "SizeBytes": 69,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }
    arn = "arn:aws:dynamodb:ddblocal:000000000000:table/wallets/stream/2026-11-22T04:15:24.246"

    # WHEN reshaped for the pipeline
    record = lambda_record(raw, arn)

    # THEN it is AWS's REMOVE by the DynamoDB service, with Lambda's field types, and decodes as a TTL expiry
    assert record["eventName"] == "REMOVE"
    assert record["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    assert record["dynamodb"]["ApproximateCreationDateTime"] == 1795320900
    assert record["dynamodb"]["OldImage"]["blob"] == {"B": "AAE="}
    assert record["eventSourceARN"] == arn
    assert raw["eventName"] == "UNKNOWN_TO_SDK_VERSION"  # the input is left alone
    assert decode([record]).ttl_expired == 1


def test_ordinary_local_records_are_left_as_they_are() -> None:
    # GIVEN an INSERT from DynamoDB Local
    raw = {"eventName": "INSERT", "dynamodb": {"NewImage": deposit(), "SequenceNumber": "1"}}

    # WHEN reshaped
    record = lambda_record(raw, "arn:x/stream/y")

    # THEN only the ARN is added
    assert record == {**raw, "eventSourceARN": "arn:x/stream/y"}
