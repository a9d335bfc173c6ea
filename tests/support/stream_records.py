"""Factories for DynamoDB Streams records and for table items, following the item contract.

- :class:`RecordFactory` builds Lambda-shaped records (AWS's documented shape, including the
  ``userIdentity`` of TTL deletions) for decoder and handler tests;
- :class:`LedgerModel` is a tiny in-memory wallet ledger that turns deposits and transfers into
  the records the write path's transactions would produce, and knows every expected balance;
- :class:`TableWriter` writes the same items into DynamoDB Local with TransactWriteItems (as the
  write path does), for consumer tests that need a real stream.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import boto3

from contracts.movement_types import ADDRESSED, TARGET, movement_type
from contracts.wallets_table import (
    ENTITY_TRANSACTION,
    ENTITY_USER,
    ENTITY_WALLET,
    TXN_DEPOSIT,
    TXN_TRANSFER,
    Attr,
    EntryKey,
    transaction_key,
    user_key,
    wallet_key,
)
from stream_processor.lambda_records import TTL_IDENTITY_PRINCIPAL, TTL_IDENTITY_TYPE
from wallet.commands import Deposit, Movement, Transfer, request_hash
from wallet.posting import post
from wallet.write_requests import transaction_request
from walletlake.workload import WorkloadReport

STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/wallets/stream/2026-11-22T04:00:00.000"
HOT_TTL_SECONDS = 8 * 3600


def s(value: str) -> dict[str, str]:
    return {"S": value}


def n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


def transaction_image(
    *,
    txn_id: str,
    txn_type: str,
    wallet_id: str,
    amount: int,
    nonce: str,
    created_at: int,
    to_wallet_id: str | None = None,
    wallet_version: int | None = None,
    wallet_balance_after: int | None = None,
    to_wallet_version: int | None = None,
    to_wallet_balance_after: int | None = None,
    ttl_seconds: int = HOT_TTL_SECONDS,
) -> dict[str, Any]:
    """A transaction item exactly as the write path stores it (docs/architecture.md).

    With ``wallet_version`` (and the other versions and balances), an item of the earlier
    compare-and-swap write path, whose INSERT carried the ledger entries.
    """
    image: dict[str, Any] = {
        Attr.PK: s(transaction_key(wallet_id, nonce, None)),
        Attr.ENTITY: s(ENTITY_TRANSACTION),
        Attr.TXN_ID: s(txn_id),
        Attr.TYPE: s(txn_type),
        Attr.WALLET_ID: s(wallet_id),
        Attr.AMOUNT: n(amount),
        Attr.NONCE: s(nonce),
        Attr.REQUEST_HASH: s("0" * 64),
        Attr.CREATED_AT: n(created_at),
        Attr.EXPIRES_AT: n(created_at // 1000 + ttl_seconds),
    }
    if to_wallet_id is not None:
        image[Attr.TO_WALLET_ID] = s(to_wallet_id)
    if wallet_version is not None:
        image[Attr.WALLET_VERSION] = n(wallet_version)
    if wallet_balance_after is not None:
        image[Attr.WALLET_BALANCE_AFTER] = n(wallet_balance_after)
    if to_wallet_version is not None:
        image[Attr.TO_WALLET_VERSION] = n(to_wallet_version)
    if to_wallet_balance_after is not None:
        image[Attr.TO_WALLET_BALANCE_AFTER] = n(to_wallet_balance_after)
    return image


def wallet_image(
    wallet_id: str,
    user_id: str,
    *,
    balance: int = 0,
    version: int = 0,
    created_at: int,
    updated_at: int | None = None,
) -> dict[str, Any]:
    return {
        Attr.PK: s(wallet_key(wallet_id)),
        Attr.ENTITY: s(ENTITY_WALLET),
        Attr.WALLET_ID: s(wallet_id),
        Attr.USER_ID: s(user_id),
        Attr.BALANCE: n(balance),
        Attr.VERSION: n(version),
        Attr.CREATED_AT: n(created_at),
        Attr.UPDATED_AT: n(updated_at if updated_at is not None else created_at),
    }


def entry_image(
    txn_id: str, txn_type: str, direction: str, amount: int, nonce: str, *, counterparty: str | None = None
) -> dict[str, Any]:
    """The ledger-entry attributes a movement sets on a wallet item (its MODIFY's NewImage)."""
    entry = {
        Attr.ENTRY_TXN_ID: s(txn_id),
        Attr.ENTRY_TYPE: s(txn_type),
        Attr.ENTRY_DIRECTION: s(direction),
        Attr.ENTRY_AMOUNT: n(amount),
        Attr.ENTRY_NONCE: s(nonce),
    }
    if counterparty is not None:
        entry[Attr.ENTRY_COUNTERPARTY] = s(counterparty)
    return entry


def user_image(user_id: str, wallet_id: str) -> dict[str, Any]:
    return {Attr.PK: s(user_key(user_id)), Attr.ENTITY: s(ENTITY_USER), Attr.WALLET_ID: s(wallet_id)}


class RecordFactory:
    """Lambda-shaped DynamoDB Streams records with increasing sequence numbers."""

    def __init__(self, *, arn: str = STREAM_ARN, first_sequence: int = 100_000_000_000_000_000_000) -> None:
        self.arn = arn
        self._sequence = itertools.count(first_sequence)

    def record(
        self,
        event_name: str,
        *,
        new: dict[str, Any] | None = None,
        old: dict[str, Any] | None = None,
        user_identity: dict[str, str] | None = None,
        approximate_time: float = 1_795_320_000,
        sequence: str | None = None,
    ) -> dict[str, Any]:
        image = new if new is not None else old or {}
        change: dict[str, Any] = {
            "ApproximateCreationDateTime": approximate_time,
            "Keys": {Attr.PK: image.get(Attr.PK, s("unknown"))},
            "SequenceNumber": sequence if sequence is not None else str(next(self._sequence)),
            "SizeBytes": 256,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        }
        if new is not None:
            change["NewImage"] = new
        if old is not None:
            change["OldImage"] = old
        record: dict[str, Any] = {
            "eventID": uuid.uuid4().hex,
            "eventName": event_name,
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1",
            "dynamodb": change,
            "eventSourceARN": self.arn,
        }
        if user_identity is not None:
            record["userIdentity"] = user_identity
        return record

    def insert(self, image: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.record("INSERT", new=image, **kwargs)

    def modify(self, old: dict[str, Any], new: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.record("MODIFY", old=old, new=new, **kwargs)

    def ttl_remove(self, image: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """A TTL deletion as AWS documents it: REMOVE, OldImage, userIdentity of the DynamoDB service."""
        identity = {"type": TTL_IDENTITY_TYPE, "principalId": TTL_IDENTITY_PRINCIPAL}
        return self.record("REMOVE", old=image, user_identity=identity, **kwargs)

    def user_remove(self, image: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """A deletion made by someone (no userIdentity): never expected of a transaction item."""
        return self.record("REMOVE", old=image, **kwargs)


def lambda_event(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Records": records}


@dataclasses.dataclass
class WalletState:
    wallet_id: str
    user_id: str
    balance: int = 0
    version: int = 0
    created_at: int = 0
    updated_at: int = 0
    image: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Entry:
    """A ledger entry the lake must hold exactly once."""

    entry_id: str
    wallet_id: str
    delta: int
    wallet_version: int
    balance_after: int


class LedgerModel:
    """The write path's rules in miniature: what each committed transaction writes, in order.

    Every method returns the stream records its TransactWriteItems would produce (a wallet MODIFY
    per leg, each carrying its ledger entry, then the transaction INSERT), and the model remembers
    each wallet's balance and version. ``legacy=True`` produces the records of the earlier
    compare-and-swap write path instead: MODIFYs without an entry, and a transaction INSERT carrying
    every touched wallet's version and balance after.
    """

    def __init__(
        self, records: RecordFactory | None = None, *, start: dt.datetime | None = None, legacy: bool = False
    ) -> None:
        self.records = records or RecordFactory()
        self.clock = ms(start or dt.datetime(2026, 11, 22, 4, 0, tzinfo=dt.UTC))
        self.legacy = legacy
        self.wallets: dict[str, WalletState] = {}
        self.entries: list[Entry] = []
        self.transactions: list[dict[str, Any]] = []
        #: While a group commit is open: each touched wallet's image before it and its entries.
        self._group: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] | None = None

    def begin_group(self) -> None:
        """Operations from here to :meth:`end_group` commit as one group (``wallet.commit_queue``)."""
        self._group = {}

    def end_group(self) -> list[dict[str, Any]]:
        """The group's wallet MODIFYs: one per wallet, its earlier entries in ``entries_before``."""
        group, self._group = self._group or {}, None
        records = []
        for wallet_id, (old, entries) in group.items():
            state = self.wallets[wallet_id]
            if len(entries) > 1:
                state.image = {**state.image, Attr.ENTRIES_BEFORE: {"L": [{"M": e} for e in entries[:-1]]}}
            records.append(self.records.modify(old, state.image))
        return records

    def tick(self, milliseconds: int = 1) -> int:
        self.clock += milliseconds
        return self.clock

    def open_wallet(self, wallet_id: str | None = None) -> tuple[str, list[dict[str, Any]]]:
        wallet_id = wallet_id or str(uuid.uuid4())
        user_id = str(uuid.uuid4())
        now = self.tick()
        state = WalletState(wallet_id, user_id, created_at=now, updated_at=now)
        state.image = wallet_image(wallet_id, user_id, created_at=now)
        self.wallets[wallet_id] = state
        return wallet_id, [
            self.records.insert(user_image(user_id, wallet_id)),
            self.records.insert(state.image),
        ]

    def _move(self, state: WalletState, delta: int, now: int, entry: dict[str, Any]) -> dict[str, Any] | None:
        """The wallet MODIFY of one leg (None inside a group: :meth:`end_group` writes it)."""
        old = state.image
        state.balance += delta
        state.version += 1
        state.updated_at = now
        replaced = (Attr.ENTRY_COUNTERPARTY, Attr.ENTRIES_BEFORE)
        state.image = {
            **{name: value for name, value in old.items() if name not in replaced},
            Attr.BALANCE: n(state.balance),
            Attr.VERSION: n(state.version),
            Attr.UPDATED_AT: n(now),
            **({} if self.legacy else entry),
        }
        if self._group is None or self.legacy:
            return self.records.modify(old, state.image)
        _, entries = self._group.setdefault(state.wallet_id, (old, []))
        entries.append(earlier_entry(entry, now))
        return None

    def move(
        self, txn_type: str, wallet_id: str, amount: int, to_wallet_id: str | None = None
    ) -> list[dict[str, Any]]:
        """A movement of any registered type: its legs as :mod:`contracts.movement_types` lists them."""
        kind = movement_type(txn_type)
        parties = {ADDRESSED: wallet_id, TARGET: to_wallet_id}
        states = [self.wallets[str(parties[leg.wallet])] for leg in kind.legs]
        now = max(self.tick(), *(state.updated_at for state in states))
        txn_id, nonce = str(uuid.uuid4()), uuid.uuid4().hex
        moves = [
            self._move(
                state,
                leg.sign * amount,
                now,
                entry_image(
                    txn_id,
                    txn_type,
                    leg.direction,
                    amount,
                    nonce,
                    counterparty=None if leg.counterparty is None else parties[leg.counterparty],
                ),
            )
            for leg, state in zip(kind.legs, states, strict=True)
        ]
        legacy = [(state.version, state.balance) if self.legacy else (None, None) for state in states]
        image = transaction_image(
            txn_id=txn_id,
            txn_type=txn_type,
            wallet_id=wallet_id,
            amount=amount,
            nonce=nonce,
            created_at=now,
            to_wallet_id=to_wallet_id if kind.has_target else None,
            wallet_version=legacy[0][0],
            wallet_balance_after=legacy[0][1],
            to_wallet_version=legacy[1][0] if len(legacy) > 1 else None,
            to_wallet_balance_after=legacy[1][1] if len(legacy) > 1 else None,
        )
        for leg, state in zip(kind.legs, states, strict=True):
            self.entries.append(
                Entry(
                    f"{txn_id}:{leg.direction}",
                    state.wallet_id,
                    leg.sign * amount,
                    state.version,
                    state.balance,
                )
            )
        self.transactions.append(image)
        return [record for record in (*moves, self.records.insert(image)) if record is not None]

    def deposit(self, wallet_id: str, amount: int) -> list[dict[str, Any]]:
        return self.move(TXN_DEPOSIT, wallet_id, amount)

    def can_transfer(self, payer: str, payee: str, amount: int) -> bool:
        return payer != payee and self.wallets[payer].balance >= amount

    def transfer(self, payer: str, payee: str, amount: int) -> list[dict[str, Any]]:
        return self.move(TXN_TRANSFER, payer, amount, payee)

    def balances(self) -> dict[str, int]:
        return {wallet_id: state.balance for wallet_id, state in self.wallets.items()}


def earlier_entry(entry: dict[str, Any], now: int) -> dict[str, Any]:
    """``entry_*`` attributes (:func:`entry_image`) as one map of ``entries_before`` (EntryKey)."""
    names = {
        Attr.ENTRY_TXN_ID: EntryKey.TXN_ID,
        Attr.ENTRY_TYPE: EntryKey.TYPE,
        Attr.ENTRY_DIRECTION: EntryKey.DIRECTION,
        Attr.ENTRY_AMOUNT: EntryKey.AMOUNT,
        Attr.ENTRY_NONCE: EntryKey.NONCE,
        Attr.ENTRY_COUNTERPARTY: EntryKey.COUNTERPARTY,
    }
    return {names[name]: value for name, value in entry.items()} | {EntryKey.CREATED_AT: n(now)}


class TableWriter:
    """Writes wallets, deposits and transfers into DynamoDB Local as the write path does.

    One TransactWriteItems per operation, built by the write path itself
    (:func:`wallet.write_requests.transaction_request`). Single-threaded, so the model's versions are the
    table's.
    """

    def __init__(self, table: str, *, region: str = "us-east-1", ttl_seconds: int = HOT_TTL_SECONDS) -> None:
        self.table = table
        self.client = boto3.client("dynamodb", region_name=region)
        self.ttl_seconds = ttl_seconds
        self.model = LedgerModel(start=dt.datetime.now(dt.UTC))

    def _put_new(self, item: dict[str, Any]) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self.table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": Attr.PK},
            }
        }

    def _write(self, command: Movement) -> None:
        """The write path's own TransactWriteItems for the model's last transaction."""
        txn = self.model.transactions[-1]
        posting = post(
            command,
            now_ms=int(txn[Attr.CREATED_AT]["N"]),
            hot_ttl_seconds=self.ttl_seconds,
            txn_id=txn[Attr.TXN_ID]["S"],
            request_hash=request_hash(command),
        )
        self.client.transact_write_items(**transaction_request(self.table, posting))

    def _now(self) -> None:
        self.model.clock = max(self.model.clock, ms(dt.datetime.now(dt.UTC)))

    def open_wallet(self) -> str:
        self._now()
        wallet_id, _ = self.model.open_wallet()
        state = self.model.wallets[wallet_id]
        self.client.transact_write_items(
            TransactItems=[
                self._put_new(user_image(state.user_id, wallet_id)),  # type: ignore[list-item]
                self._put_new(state.image),  # type: ignore[list-item]
            ]
        )
        return wallet_id

    def deposit(self, wallet_id: str, amount: int) -> None:
        self._now()
        self.model.deposit(wallet_id, amount)
        self._write(Deposit(wallet_id, amount, self.model.transactions[-1][Attr.NONCE]["S"]))

    def transfer(self, payer: str, payee: str, amount: int) -> None:
        self._now()
        self.model.transfer(payer, payee, amount)
        self._write(Transfer(payer, payee, amount, self.model.transactions[-1][Attr.NONCE]["S"]))

    def move(self, txn_type: str, wallet_id: str, amount: int, to_wallet_id: str | None = None) -> None:
        """A movement of any registered type, through the write path's own posting and request."""
        self._now()
        self.model.move(txn_type, wallet_id, amount, to_wallet_id)
        nonce = self.model.transactions[-1][Attr.NONCE]["S"]
        command: Movement = (
            Deposit(wallet_id, amount, nonce, txn_type=txn_type)
            if to_wallet_id is None
            else Transfer(wallet_id, to_wallet_id, amount, nonce, txn_type=txn_type)
        )
        self._write(command)

    def workload(self, *, wallets: int, deposits: int, transfers: int, seed: int = 7) -> None:
        """Wallets, then deposits round-robin, then transfers between pseudo-random wallets."""
        import random

        rng = random.Random(seed)
        ids = [self.open_wallet() for _ in range(wallets)]
        for index in range(deposits):
            self.deposit(ids[index % wallets], rng.randint(1, 5_000_000))
        done = 0
        while done < transfers:
            payer, payee = rng.sample(ids, 2)
            amount = rng.randint(1, 3_000_000)
            if self.model.can_transfer(payer, payee, amount):
                self.transfer(payer, payee, amount)
                done += 1

    def transaction_items(self) -> int:
        """How many transaction items the table still holds (TTL removes them)."""
        count = 0
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "Select": "COUNT",
            "FilterExpression": "#e = :t",
            "ExpressionAttributeNames": {"#e": Attr.ENTITY},
            "ExpressionAttributeValues": {":t": s(ENTITY_TRANSACTION)},
        }
        while True:
            page = self.client.scan(**kwargs)
            count += page["Count"]
            if "LastEvaluatedKey" not in page:
                return count
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def poll_until(predicate: Any, *, timeout: float, interval: float = 0.25, what: str = "condition") -> Any:
    """Call ``predicate`` until it returns something truthy, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def iter_chunks(items: list[Any], sizes: list[int]) -> Iterator[list[Any]]:
    """Split ``items`` into consecutive chunks of the given sizes (the last takes the rest)."""
    start = 0
    for size in sizes:
        if start >= len(items):
            return
        yield items[start : start + size]
        start += size
    if start < len(items):
        yield items[start:]


def lake_keys(settings: Any, table: str | None = None) -> list[str]:
    """Every object key of the lake (or of one table), in key order."""
    from contracts.lake_layout import table_prefix
    from lake.objects import list_keys

    client = boto3.client("s3", region_name=settings.region)
    prefix = table_prefix(settings.lake_prefix, table) if table else f"{settings.lake_prefix}/"
    return list_keys(client, settings.bucket, prefix)


def read_lake_table(settings: Any, table: str) -> Any:
    """Every row of one lake table, read back from S3 through the lake's own schema."""
    import pyarrow as pa

    from contracts.lake_tables import TABLES
    from lake.objects import get_table

    client = boto3.client("s3", region_name=settings.region)
    parts = [get_table(client, settings.bucket, key, TABLES[table]) for key in lake_keys(settings, table)]
    return pa.concat_tables(parts) if parts else TABLES[table].empty_table()


def assert_entries(ledger: Any, expected: list[Entry]) -> list[dict[str, Any]]:
    """Exactly the expected entries, once each, with their wallet, delta, version and balance after."""
    rows: list[dict[str, Any]] = ledger.to_pylist()
    entry_ids = [row["entry_id"] for row in rows]
    assert len(entry_ids) == len(set(entry_ids)), "duplicate entry_id in the lake"
    assert sorted(entry_ids) == sorted(entry.entry_id for entry in expected), "missing or unexpected entries"
    by_entry = {row["entry_id"]: row for row in rows}
    for entry in expected:
        row = by_entry[entry.entry_id]
        assert (row["wallet_id"], row["delta"], row["wallet_version"], row["balance_after"]) == (
            entry.wallet_id,
            entry.delta,
            entry.wallet_version,
            entry.balance_after,
        )
    return rows


def assert_exact_ledger(ledger: Any, expected: list[Entry]) -> None:
    """Invariant 2: one row per expected entry, versions 1..N per wallet, running sum == balance_after."""
    rows = assert_entries(ledger, expected)
    per_wallet: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        per_wallet.setdefault(row["wallet_id"], []).append(row)
    for wallet_id, wallet_rows in per_wallet.items():
        wallet_rows.sort(key=lambda row: row["wallet_version"])
        assert [row["wallet_version"] for row in wallet_rows] == list(range(1, len(wallet_rows) + 1)), (
            wallet_id
        )
        running = 0
        for row in wallet_rows:
            running += row["delta"]
            assert running == row["balance_after"], (wallet_id, row["wallet_version"])


def assert_lake_matches(ledger: Any, report: WorkloadReport) -> None:
    """The lake holds exactly the entries a workload committed: versions 1..N, running sums, transfers
    that cancel out, and every wallet's expected balance."""
    rows = ledger.to_pylist()
    entry_ids = [row["entry_id"] for row in rows]
    assert len(entry_ids) == len(set(entry_ids)) == report.ledger_entries_expected
    per_wallet: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        per_wallet[row["wallet_id"]].append(row)
    moved = {wallet_id: versions for wallet_id, versions in report.expected_versions.items() if versions}
    assert set(per_wallet) == set(moved)
    for wallet_id, versions in moved.items():
        history = sorted(per_wallet[wallet_id], key=lambda row: row["wallet_version"])
        assert [row["wallet_version"] for row in history] == list(range(1, versions + 1)), wallet_id
        running = 0
        for row in history:
            running += row["delta"]
            assert running == row["balance_after"], (wallet_id, row["wallet_version"])
        assert running == report.expected_balances[wallet_id]
    per_txn: dict[str, int] = defaultdict(int)
    for row in rows:
        per_txn[row["txn_id"]] += row["delta"] if row["txn_type"] == "transfer" else 0
    assert set(per_txn.values()) <= {0}, "a transfer's debit and credit must cancel out"
