"""Reading the wallets table back in tests: every item, as plain values (ints, not Decimals).

The write-path tests assert on what DynamoDB Local actually holds after each request, read over
HTTP with boto3 (strongly consistent scans), so "nothing written on a refused request" is checked
against the store itself, not against the API's answer.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import boto3

from wallet.table import ENTITY_TRANSACTION, ENTITY_USER, ENTITY_WALLET, Attr
from walletlake.settings import Settings


def scan(settings: Settings) -> list[dict[str, Any]]:
    """Every item of the table, numbers as ``int``."""
    table = boto3.resource("dynamodb", region_name=settings.region).Table(settings.table)
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
    """The table split by entity; wallets and claims keyed by id."""

    wallets: dict[str, dict[str, Any]]
    claims: dict[str, dict[str, Any]]
    transactions: list[dict[str, Any]]

    @property
    def item_count(self) -> int:
        return len(self.wallets) + len(self.claims) + len(self.transactions)


def contents(settings: Settings) -> TableContents:
    """The table as wallets, user claims and transaction items."""
    items = scan(settings)
    unknown = [
        item for item in items if item[Attr.ENTITY] not in (ENTITY_WALLET, ENTITY_USER, ENTITY_TRANSACTION)
    ]
    assert not unknown, f"unexpected items: {unknown}"
    return TableContents(
        wallets={i[Attr.WALLET_ID]: i for i in items if i[Attr.ENTITY] == ENTITY_WALLET},
        claims={i[Attr.PK]: i for i in items if i[Attr.ENTITY] == ENTITY_USER},
        transactions=sorted(
            (i for i in items if i[Attr.ENTITY] == ENTITY_TRANSACTION), key=lambda i: i[Attr.CREATED_AT]
        ),
    )


def ledger_of(transactions: list[dict[str, Any]], wallet_id: str) -> list[tuple[int, int, int, int]]:
    """``(version, delta, balance_after, created_at)`` of every entry touching ``wallet_id``, by version."""
    entries = []
    for txn in transactions:
        amount = txn[Attr.AMOUNT]
        if txn[Attr.WALLET_ID] == wallet_id:
            delta = amount if txn[Attr.TYPE] == "deposit" else -amount
            entries.append(
                (txn[Attr.WALLET_VERSION], delta, txn[Attr.WALLET_BALANCE_AFTER], txn[Attr.CREATED_AT])
            )
        if txn.get(Attr.TO_WALLET_ID) == wallet_id:
            entries.append(
                (txn[Attr.TO_WALLET_VERSION], amount, txn[Attr.TO_WALLET_BALANCE_AFTER], txn[Attr.CREATED_AT])
            )
    return sorted(entries)


def assert_chain(contents: TableContents, wallet_id: str) -> None:
    """Versions 1..N; balance_after = previous + delta; created_at never decreasing; ends at the wallet."""
    wallet = contents.wallets[wallet_id]
    entries = ledger_of(contents.transactions, wallet_id)
    assert [version for version, *_ in entries] == list(range(1, wallet[Attr.VERSION] + 1))
    balance, previous_time = 0, 0
    for version, delta, balance_after, created_at in entries:
        balance += delta
        assert balance_after == balance, f"wallet {wallet_id} version {version}"
        assert balance >= 0
        assert created_at >= previous_time, f"created_at ran backwards at version {version}"
        previous_time = created_at
    assert wallet[Attr.BALANCE] == balance
    if entries:
        assert wallet[Attr.UPDATED_AT] == entries[-1][3]
