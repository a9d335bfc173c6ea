"""Properties of the decoder over generated histories (hypothesis).

For any set of committed transactions — however the stream is cut into batches — the ledger rows'
deltas per wallet sum to the wallet's final balance, each wallet's versions run 1..N, and every
transfer's debit and credit cancel out. And no record, however broken, stops a batch: each one is
accounted for exactly once (ledger, wallets, ignored, TTL, or quarantine).
"""

from __future__ import annotations

import itertools
import zlib
from collections import defaultdict
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from support.stream_records import (
    LedgerModel,
    RecordFactory,
    assert_exact_ledger,
    entry_image,
    iter_chunks,
    transaction_image,
    wallet_image,
)

from stream_processor.decoder import decode_records

Operation = tuple[str, int, int, int]

operations = st.lists(
    st.tuples(
        st.sampled_from(["deposit", "transfer"]),
        st.integers(min_value=0, max_value=5),
        st.integers(min_value=0, max_value=5),
        st.integers(min_value=1, max_value=10**15),
    ),
    max_size=60,
)
#: Sizes of consecutive group commits (1: a transaction of its own).
group_sizes = st.lists(st.integers(min_value=1, max_value=8), max_size=12)


def replay(
    wallet_count: int,
    ops: list[Operation],
    *,
    deploy_at: int = 0,
    expiries: list[bool] | None = None,
    groups: list[int] | None = None,
) -> tuple[LedgerModel, list[dict[str, Any]]]:
    """The operations the write path would commit; refused ones (no funds, to itself) leave no trace.

    Operations before ``deploy_at`` are written by the compare-and-swap path; where ``expiries``
    says so, the oldest transaction item not yet expired gets its TTL REMOVE after an operation.
    After the deploy, ``groups`` cuts the operations into group commits of those sizes (the rest
    commit one by one).
    """
    model = LedgerModel(legacy=deploy_at > 0)
    records: list[dict[str, Any]] = []
    ids = []
    for index in range(wallet_count):
        wallet_id, opened = model.open_wallet(f"wallet-{index}")
        ids.append(wallet_id)
        records.extend(opened)
    expired = 0
    bounds = list(itertools.accumulate(groups or [], initial=deploy_at))
    starts = {start: end for start, end in itertools.pairwise(bounds) if end - start > 1}
    group_end = None
    for step, (kind, first, second, amount) in enumerate(ops):
        model.legacy = step < deploy_at
        if step in starts:
            model.begin_group()
            group_end = starts[step]
        payer, payee = ids[first % wallet_count], ids[second % wallet_count]
        if kind == "deposit":
            records.extend(model.deposit(payer, amount))
        elif model.can_transfer(payer, payee, amount):
            records.extend(model.transfer(payer, payee, amount))
        if group_end is not None and (step + 1 == group_end or step + 1 == len(ops)):
            records.extend(model.end_group())
            group_end = None
        if expiries and step < len(expiries) and expiries[step] and expired < len(model.transactions):
            records.append(model.records.ttl_remove(model.transactions[expired]))
            expired += 1
    return model, records


@settings(max_examples=150, deadline=None)
@given(
    wallet_count=st.integers(min_value=1, max_value=6),
    ops=operations,
    cuts=st.lists(st.integers(min_value=1, max_value=40), max_size=20),
    groups=group_sizes,
)
def test_ledger_deltas_sum_to_final_balances_however_the_stream_is_batched(
    wallet_count: int, ops: list[Operation], cuts: list[int], groups: list[int]
) -> None:
    # GIVEN a history of committed transactions (some as group commits) and the stream it
    # produced, cut into batches
    model, records = replay(wallet_count, ops, groups=groups)

    # WHEN every batch is decoded
    batches = [decode_records(chunk, ingested_at_ms=0) for chunk in iter_chunks(records, cuts)]
    rows = pa.concat_tables([batch.ledger for batch in batches]).to_pylist() if batches else []

    # THEN per wallet, deltas sum to the final balance, versions run 1..N and balances follow the deltas
    assert sum(batch.quarantined for batch in batches) == 0
    per_wallet: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        per_wallet[row["wallet_id"]].append(row)
    for wallet_id, balance in model.balances().items():
        history = sorted(per_wallet[wallet_id], key=lambda row: row["wallet_version"])
        assert sum(row["delta"] for row in history) == balance
        assert [row["wallet_version"] for row in history] == list(range(1, len(history) + 1))
        running = 0
        for row in history:
            running += row["delta"]
            assert row["balance_after"] == running >= 0
    # AND every transfer's debit and credit cancel out, for the same amount
    per_txn: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        per_txn[row["txn_id"]].append(row)
    for txn_rows in per_txn.values():
        if txn_rows[0]["txn_type"] == "transfer":
            assert sorted(row["direction"] for row in txn_rows) == ["credit", "debit"]
            assert sum(row["delta"] for row in txn_rows) == 0
            assert len({row["amount"] for row in txn_rows}) == 1
        else:
            assert [row["direction"] for row in txn_rows] == ["credit"]
    assert len(rows) == len(model.entries)


@settings(max_examples=150, deadline=None)
@given(
    wallet_count=st.integers(min_value=2, max_value=6),
    ops=operations,
    deploy_at=st.integers(min_value=0, max_value=60),
    shard_count=st.integers(min_value=1, max_value=4),
    expiries=st.lists(st.booleans(), max_size=60),
    cuts=st.lists(st.integers(min_value=1, max_value=40), max_size=20),
    groups=group_sizes,
    data=st.data(),
)
def test_any_interleaving_of_shards_gives_every_entry_exactly_once(
    wallet_count: int,
    ops: list[Operation],
    deploy_at: int,
    shard_count: int,
    expiries: list[bool],
    cuts: list[int],
    groups: list[int],
    data: st.DataObject,
) -> None:
    # GIVEN a history written first by the compare-and-swap path, then (from deploy_at) by the
    # single-write path, some of it as group commits, with TTL expiries of earlier transaction
    # items in between
    model, records = replay(wallet_count, ops, deploy_at=deploy_at, expiries=expiries, groups=groups)
    expired = sum(record["eventName"] == "REMOVE" for record in records)
    # AND the stream's shards (an item's records stay in one shard, in order), read interleaved
    shards: list[list[dict[str, Any]]] = [[] for _ in range(shard_count)]
    for record in records:
        shards[zlib.crc32(record["dynamodb"]["Keys"]["pk"]["S"].encode()) % shard_count].append(record)
    picks = data.draw(st.permutations([index for index, shard in enumerate(shards) for _ in shard]))
    cursors = [0] * shard_count
    interleaved = []
    for shard in picks:
        interleaved.append(shards[shard][cursors[shard]])
        cursors[shard] += 1

    # WHEN every batch is decoded
    batches = [decode_records(chunk, ingested_at_ms=0) for chunk in iter_chunks(interleaved, cuts)]

    # THEN the ledger holds every committed entry exactly once, versions 1..N, balances exact
    ledger = pa.concat_tables([batch.ledger for batch in batches]) if batches else None
    assert sum(batch.quarantined for batch in batches) == 0
    assert sum(batch.ttl_expired for batch in batches) == expired
    assert_exact_ledger(ledger if ledger is not None else pa.table({}), model.entries)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def damaged_records(draw: st.DrawFn) -> Any:
    """A valid record with one part replaced by arbitrary JSON, or arbitrary JSON altogether."""
    factory = RecordFactory()
    kind = draw(st.sampled_from(["entry", "group", "transaction"]))
    if kind != "transaction":
        old = wallet_image("a", "u", balance=5, version=1, created_at=1)
        entry = entry_image(draw(st.uuids()).hex, "transfer", "debit", 5, "n", counterparty="b")
        image = {**old, "balance": {"N": "0"}, "version": {"N": "2"}, **entry}
        if kind == "group":  # a group commit: a deposit of 3 first, then the debit of 8
            earlier = {
                "txn_id": {"S": draw(st.uuids()).hex},
                "type": {"S": "deposit"},
                "direction": {"S": "credit"},
                "amount": {"N": "3"},
                "nonce": {"S": "m"},
                "created_at": {"N": "2"},
            }
            image |= {
                "version": {"N": "3"},
                "entry_amount": {"N": "8"},
                "entries_before": {"L": [{"M": earlier}]},
            }
        record = factory.record(draw(st.sampled_from(["INSERT", "MODIFY", "REMOVE"])), new=image, old=old)
        return _damage(draw, record, image)
    image = transaction_image(
        txn_id=draw(st.uuids()).hex,
        txn_type=draw(st.sampled_from(["deposit", "transfer"])),
        wallet_id="a",
        amount=5,
        nonce="n",
        wallet_version=1,
        wallet_balance_after=5,
        created_at=1,
        to_wallet_id="b",
        to_wallet_version=1,
        to_wallet_balance_after=5,
    )
    record = factory.record(draw(st.sampled_from(["INSERT", "MODIFY", "REMOVE"])), new=image, old=image)
    return _damage(draw, record, image)


def _damage(draw: st.DrawFn, record: dict[str, Any], image: dict[str, Any]) -> Any:
    where = draw(st.sampled_from(["record", "top", "dynamodb", "image", "attribute"]))
    junk = draw(json_values)
    if where == "record":
        return junk
    if where == "top":
        record[draw(st.sampled_from(["eventName", "dynamodb", "userIdentity"]))] = junk
    elif where == "dynamodb":
        record["dynamodb"][draw(st.sampled_from(["NewImage", "OldImage", "SequenceNumber"]))] = junk
    else:
        name = draw(st.sampled_from(sorted(image)))
        target = record["dynamodb"]["NewImage"]
        target[name] = junk if where == "image" else {draw(st.sampled_from(["S", "N", "B"])): junk}
    return record


@settings(max_examples=300, deadline=None)
@given(st.lists(damaged_records(), min_size=1, max_size=8))
def test_no_record_stops_a_batch_and_each_is_accounted_for_once(records: list[Any]) -> None:
    # GIVEN records with their own sequence numbers (where they have a usable one)
    for index, record in enumerate(records):
        change = record.get("dynamodb") if isinstance(record, dict) else None
        if isinstance(change, dict) and isinstance(change.get("SequenceNumber"), str):
            change["SequenceNumber"] = str(10**20 + index)

    # WHEN a batch of damaged records is decoded
    batch = decode_records(records, ingested_at_ms=0)

    # THEN it never raises, and every record is exactly one of the kinds
    # (a legacy transaction INSERT gives one or two rows, a wallet MODIFY one, or one per entry of
    # a group commit; each record's rows share its sequence number)
    movements = len(set(batch.ledger["stream_sequence"].to_pylist()))
    accounted = movements + batch.wallet_rows + batch.ignored + batch.ttl_expired + batch.quarantined
    assert accounted == batch.records == len(records)
    # AND whatever reached the ledger is valid money
    for row in batch.ledger.to_pylist():
        assert 1 <= row["amount"] <= 10**15
        assert abs(row["delta"]) == row["amount"]
        assert row["balance_after"] >= 0
