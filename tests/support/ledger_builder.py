"""Hand-built ledgers for the query, compaction, snapshot and reconciliation tests.

:class:`Book` plays the write path in plain Python (wallet versions, balances, double entry, times
that never run backwards per wallet) and records the ledger rows the stream processor would land.
Helpers write those rows as landing files (``contracts.lake_layout.landing_key`` names, the lake's schema and
encoding) into the embedded stack's S3, and the wallets as DynamoDB items per ``contracts.wallets_table``, so
every figure a test asserts can be computed by hand.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import boto3
import pyarrow as pa

from contracts.lake_layout import landing_key, partition_prefix
from contracts.lake_tables import LEDGER, TABLES, row_of
from contracts.movement_types import ADDRESSED, TARGET, movement_type
from contracts.settings import Settings
from contracts.wallets_table import (
    ENTITY_TRANSACTION,
    ENTITY_USER,
    ENTITY_WALLET,
    TXN_DEPOSIT,
    TXN_TRANSFER,
    Attr,
    transaction_key,
    user_key,
    wallet_key,
)
from lake import objects

STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/wallets/stream/2026-11-22T00:00:00.000"
USD = 1_000_000


@dataclasses.dataclass
class WalletState:
    wallet_id: str
    user_id: str
    balance: int = 0
    version: int = 0
    created_at: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    updated_at: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@dataclasses.dataclass
class Book:
    """A tiny wallet system whose every ledger row is known."""

    wallets: dict[str, WalletState] = dataclasses.field(default_factory=dict)
    rows: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    batches: list[list[dict[str, Any]]] = dataclasses.field(default_factory=list)
    _sequence: int = 100_000_000_000_000_000_000

    def open(self, wallet_id: str, at: dt.datetime) -> WalletState:
        state = WalletState(wallet_id, f"user-{wallet_id}", created_at=at, updated_at=at)
        self.wallets[wallet_id] = state
        return state

    def deposit(self, wallet_id: str, amount: int, at: dt.datetime) -> list[dict[str, Any]]:
        return self.move(TXN_DEPOSIT, wallet_id, amount, at)

    def transfer(self, payer: str, payee: str, amount: int, at: dt.datetime) -> list[dict[str, Any]]:
        return self.move(TXN_TRANSFER, payer, amount, at, payee)

    def move(
        self, txn_type: str, wallet_id: str, amount: int, at: dt.datetime, to_wallet_id: str | None = None
    ) -> list[dict[str, Any]]:
        """A movement of any registered type: its legs as :mod:`contracts.movement_types` lists them."""
        parties = {ADDRESSED: wallet_id, TARGET: to_wallet_id}
        legs = [
            (
                str(parties[leg.wallet]),
                None if leg.counterparty is None else parties[leg.counterparty],
                leg.direction,
                amount,
            )
            for leg in movement_type(txn_type).legs
        ]
        return self._post(txn_type, legs, at)

    def _post(
        self, txn_type: str, legs: Sequence[tuple[str, str | None, str, int]], at: dt.datetime
    ) -> list[dict[str, Any]]:
        txn_id = str(uuid.UUID(int=len(self.rows) + 1))
        self._sequence += 1
        created = max([at, *(self.wallets[leg[0]].updated_at for leg in legs)])
        made = []
        for wallet_id, counterparty, direction, amount in legs:
            state = self.wallets[wallet_id]
            delta = amount if direction == "credit" else -amount
            state.balance += delta
            state.version += 1
            state.updated_at = created
            made.append(
                row_of(  # every column the row does not name is None: a new nullable column breaks nothing
                    LEDGER,
                    {
                        "entry_id": f"{txn_id}:{direction}",
                        "txn_id": txn_id,
                        "txn_type": txn_type,
                        "wallet_id": wallet_id,
                        "counterparty_wallet_id": counterparty,
                        "direction": direction,
                        "amount": amount,
                        "delta": delta,
                        "wallet_version": state.version,
                        "balance_after": state.balance,
                        "nonce": f"n{self._sequence}",
                        "created_at": created,
                        "stream_sequence": str(self._sequence),
                        "ingested_at": created + dt.timedelta(seconds=1),
                    },
                )
            )
        self.rows.extend(made)
        return made

    def rows_of(self, wallet_id: str) -> list[dict[str, Any]]:
        return [row for row in self.rows if row["wallet_id"] == wallet_id]


def ledger_table(rows: Iterable[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=LEDGER)


def s3_client(settings: Settings) -> Any:
    return boto3.client("s3", region_name=settings.region)


def write_landing(settings: Settings, rows: Sequence[dict[str, Any]], batch_rows: int = 4) -> list[str]:
    """Land rows as the stream processor would: whole transactions per batch, a file per batch and slot."""
    client = s3_client(settings)
    batches: list[list[dict[str, Any]]] = []
    for row in rows:
        same_txn = batches and batches[-1][-1]["txn_id"] == row["txn_id"]
        if not batches or (len(batches[-1]) >= batch_rows and not same_txn):
            batches.append([])
        batches[-1].append(row)
    keys = []
    for batch in batches:
        by_slot: dict[tuple[dt.date, int], list[dict[str, Any]]] = {}
        for row in batch:
            at = row["created_at"].astimezone(dt.UTC)
            by_slot.setdefault((at.date(), (at.hour * 60 + at.minute) // 5), []).append(row)
        for (day, slot), slot_rows in by_slot.items():
            first = batch[0]["stream_sequence"]
            key = landing_key(settings.lake_prefix, "ledger", day, STREAM_ARN, first, slot)
            objects.put_table(client, settings.bucket, key, ledger_table(slot_rows))
            keys.append(key)
    return keys


def write_table(
    settings: Settings, table: str, day: dt.date, name: str, rows: Sequence[dict[str, Any]]
) -> str:
    key = partition_prefix(settings.lake_prefix, table, day) + name
    objects.put_table(
        s3_client(settings), settings.bucket, key, pa.Table.from_pylist(list(rows), schema=TABLES[table])
    )
    return key


def read_partition(settings: Settings, table: str, day: dt.date) -> pa.Table:
    client = s3_client(settings)
    keys = objects.list_keys(
        client, settings.bucket, partition_prefix(settings.lake_prefix, table, day), ".parquet"
    )
    parts = [objects.get_table(client, settings.bucket, key, TABLES[table]) for key in keys]
    return pa.concat_tables(parts) if parts else TABLES[table].empty_table()


def put_wallet_items(settings: Settings, wallets: Iterable[WalletState], *, noise: bool = True) -> None:
    """Wallet items per :mod:`contracts.wallets_table`; ``noise`` adds a user claim and a transaction item."""
    client = boto3.client("dynamodb", region_name=settings.region)
    for state in wallets:
        client.put_item(
            TableName=settings.table,
            Item={
                Attr.PK: {"S": wallet_key(state.wallet_id)},
                Attr.ENTITY: {"S": ENTITY_WALLET},
                Attr.WALLET_ID: {"S": state.wallet_id},
                Attr.USER_ID: {"S": state.user_id},
                Attr.BALANCE: {"N": str(state.balance)},
                Attr.VERSION: {"N": str(state.version)},
                Attr.CREATED_AT: {"N": str(_ms(state.created_at))},
                Attr.UPDATED_AT: {"N": str(_ms(state.updated_at))},
            },
        )
        if noise:
            client.put_item(
                TableName=settings.table,
                Item={
                    Attr.PK: {"S": user_key(state.user_id)},
                    Attr.ENTITY: {"S": ENTITY_USER},
                    Attr.WALLET_ID: {"S": state.wallet_id},
                },
            )
            client.put_item(
                TableName=settings.table,
                Item={
                    Attr.PK: {"S": transaction_key(state.wallet_id, "n0", None)},
                    Attr.ENTITY: {"S": ENTITY_TRANSACTION},
                    Attr.WALLET_ID: {"S": state.wallet_id},
                    Attr.VERSION: {"N": "999"},
                    Attr.BALANCE: {"N": "999"},
                },
            )


def _ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


class SimulatedCrashError(Exception):
    """Stands in for the process dying at a chosen step."""


def day_keys(settings: Settings, day: dt.date, table: str = "ledger") -> list[str]:
    """The Parquet objects of one table's day partition, in key order."""
    prefix = partition_prefix(settings.lake_prefix, table, day)
    return objects.list_keys(s3_client(settings), settings.bucket, prefix, ".parquet")


def busy_day(start: dt.datetime, *, wallets: int, rounds: int, deposit_order_reversed: bool = False) -> Book:
    """Deposits then transfers in arrival order, one second apart: every batch touches many wallets.

    ``deposit_order_reversed`` makes arrival order differ from wallet order from the first entry on.
    """
    book = Book()
    names = [f"w{i:02d}" for i in range(wallets)]
    for name in names:
        book.open(name, start)
    clock = start
    for name in reversed(names) if deposit_order_reversed else names:
        clock += dt.timedelta(seconds=1)
        book.deposit(name, 100 * USD, clock)
    for round_ in range(rounds):
        for index, name in enumerate(names):
            clock += dt.timedelta(seconds=1)
            book.transfer(name, names[(index + round_ + 1) % wallets], (round_ + 1) * USD, clock)
    return book
