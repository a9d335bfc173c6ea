"""Reading the wallets table (and its wallets' idempotency records) back in tests, as plain values.

The write-path tests assert on what DynamoDB Local actually holds after each request, read over
HTTP with boto3 (strongly consistent scans), so "nothing written on a refused request" is checked
against the store itself, not against the API's answer.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import boto3

from contracts.settings import Settings
from contracts.wallets_table import ENTITY_TRANSACTION, ENTITY_USER, ENTITY_WALLET, Attr
from stream_processor.consumer import drain
from support.stream_records import read_lake_table


def scan(settings: Settings, table_name: str | None = None) -> list[dict[str, Any]]:
    """Every item of the table (the wallets table unless named), numbers as ``int``."""
    table = boto3.resource("dynamodb", region_name=settings.region).Table(table_name or settings.table)
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"ConsistentRead": True}
    while True:
        page = table.scan(**kwargs)
        items += [
            {k: int(v) if isinstance(v, Decimal) else v for k, v in item.items()} for item in page["Items"]
        ]
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@dataclasses.dataclass
class TableContents:
    """The table split by entity, wallets and claims keyed by id; its wallets' idempotency records by key."""

    wallets: dict[str, dict[str, Any]]
    claims: dict[str, dict[str, Any]]
    transactions: list[dict[str, Any]]
    records: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    #: the owners table's entries, as (owner, wallet id) pairs
    owned: set[tuple[str, str]] = dataclasses.field(default_factory=set)

    @property
    def item_count(self) -> int:
        items = (self.wallets, self.claims, self.transactions, self.records, self.owned)
        return sum(len(part) for part in items)


def contents(settings: Settings) -> TableContents:
    """The table as wallets, user claims and transaction items, and the records of its wallets.

    The idempotency table may serve several wallets tables (fresh settings name one per test, but a
    stack's default one serves whatever runs on the default names), so only the records of this
    table's wallets are kept: wallet ids are UUIDs, so no other test's record can match.
    """
    items = scan(settings)
    known = (ENTITY_WALLET, ENTITY_USER, ENTITY_TRANSACTION)
    unknown = [item for item in items if item[Attr.ENTITY] not in known]
    assert not unknown, f"unexpected items: {unknown}"
    wallets = {i[Attr.WALLET_ID]: i for i in items if i[Attr.ENTITY] == ENTITY_WALLET}
    records = scan(settings, settings.idempotency_table)
    return TableContents(
        wallets=wallets,
        claims={i[Attr.PK]: i for i in items if i[Attr.ENTITY] == ENTITY_USER},
        transactions=sorted(
            (i for i in items if i[Attr.ENTITY] == ENTITY_TRANSACTION), key=lambda i: i[Attr.CREATED_AT]
        ),
        records={i[Attr.PK]: i for i in records if i[Attr.WALLET_ID] in wallets},
        owned={(i[Attr.OWNER], i[Attr.WALLET_ID]) for i in scan(settings, settings.owners_table)},
    )


def stream_ledger(settings: Settings) -> list[dict[str, Any]]:
    """The ledger the table's stream gives: drained by the consumer into the lake and read back.

    The write path no longer states versions anywhere but on the wallet items, so a test that wants
    each entry's version and balance after reads them where the lake does: the wallet MODIFYs.
    """
    drain(settings, quiet_seconds=0.2)
    return read_lake_table(settings, "ledger").to_pylist()


def ledger_of(ledger: list[dict[str, Any]], wallet_id: str) -> list[tuple[int, int, int, int]]:
    """``(version, delta, balance_after, created_at ms)`` of every entry of ``wallet_id``, by version."""
    return sorted(
        (
            row["wallet_version"],
            row["delta"],
            row["balance_after"],
            int(row["created_at"].timestamp() * 1000),
        )
        for row in ledger
        if row["wallet_id"] == wallet_id
    )


def assert_chains(settings: Settings, wallet_ids: list[str] | None = None) -> TableContents:
    """Per wallet: versions 1..N, balance_after = previous + delta, created_at strictly increasing,
    ending at the wallet item; and the entries are exactly the committed transaction items'.

    Returns the table's contents, read before the stream was drained.
    """
    table = contents(settings)
    ledger = stream_ledger(settings)
    for wallet_id in wallet_ids if wallet_ids is not None else list(table.wallets):
        wallet = table.wallets[wallet_id]
        entries = ledger_of(ledger, wallet_id)
        assert [version for version, *_ in entries] == list(range(1, wallet[Attr.VERSION] + 1)), wallet_id
        balance, previous_time = 0, -1
        for version, delta, balance_after, created_at in entries:
            balance += delta
            assert balance_after == balance, f"wallet {wallet_id} version {version}"
            assert balance >= 0
            assert created_at > previous_time, f"created_at did not increase at version {version}"
            previous_time = created_at
        assert wallet[Attr.BALANCE] == balance
        if entries:
            assert wallet[Attr.UPDATED_AT] == entries[-1][3]
        committed = {
            txn[Attr.TXN_ID]
            for txn in table.transactions
            if wallet_id in (txn[Attr.WALLET_ID], txn.get(Attr.TO_WALLET_ID))
        }
        assert {row["txn_id"] for row in ledger if row["wallet_id"] == wallet_id} == committed, wallet_id
    return table
