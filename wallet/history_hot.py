"""A wallet's recent movements from DynamoDB: its idempotency records, through their two indexes.

Every movement puts one record in its own transaction (:mod:`contracts.idempotency_table`); the
``by_wallet`` index finds the wallet's deposits and the transfers it paid, ``by_payee`` the
transfers it received, each by time. A record says the request, not the entry: the wallet's side
of it (direction, delta, counterparty) is the posting's own leg (:func:`wallet.posting.legs_of`),
so the history and the write path cannot disagree on what a movement does to a wallet: the
record's type names its legs in the registry (:mod:`contracts.movement_types`). Declined
and voided records moved nothing and are left out.

An index is eventually consistent: a movement committed a moment ago may be missing from it.
:func:`wallet.history_seam.number_hot` counts what it finds against the wallet item's version,
so a lagging index makes the page wait or be refused, never lose an entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.idempotency_table import BY_PAYEE, BY_WALLET, OUTCOME, OUTCOME_APPLIED
from contracts.wallets_table import Attr, IndexSpec
from wallet.commands import Deposit, Movement, Transfer
from wallet.dynamodb_calls import DynamoDBCalls
from wallet.history_seam import Movement as HotMovement
from wallet.posting import legs_of


async def recent_movements(
    calls: DynamoDBCalls, table: str, wallet_id: str, after_ms: int, until_ms: int
) -> list[HotMovement]:
    """The wallet's applied movements with ``after_ms < created_at <= until_ms``, both indexes read."""
    if until_ms <= after_ms:
        return []
    found: list[HotMovement] = []
    for index in (BY_WALLET, BY_PAYEE):
        for record in await _query(calls, table, index, wallet_id, after_ms + 1, until_ms):
            found.append(movement_of(record, wallet_id))
    return found


def movement_of(record: Mapping[str, Any], wallet_id: str) -> HotMovement:
    """The wallet's side of the movement a record states (its leg of the posting)."""
    command = _command(record)
    (leg,) = [leg for leg in legs_of(command) if leg.wallet_id == wallet_id]
    return HotMovement(
        txn_id=record[Attr.TXN_ID]["S"],
        created_at_ms=int(record[Attr.CREATED_AT]["N"]),
        nonce=command.nonce,
        txn_type=command.txn_type,
        direction=leg.direction,
        amount=command.amount,
        delta=leg.delta,
        counterparty=leg.counterparty,
        initiated_by=command.initiated_by,
    )


def _command(record: Mapping[str, Any]) -> Movement:
    wallet = record[Attr.WALLET_ID]["S"]
    amount = int(record[Attr.AMOUNT]["N"])
    nonce = record[Attr.NONCE]["S"]
    by = record[Attr.INITIATED_BY]["S"] if Attr.INITIATED_BY in record else None
    kind = record[Attr.TYPE]["S"]
    if Attr.TO_WALLET_ID in record:  # a movement between two wallets (a transfer, or its kin)
        return Transfer(wallet, record[Attr.TO_WALLET_ID]["S"], amount, nonce, by, kind)
    return Deposit(wallet, amount, nonce, by, kind)


async def _query(
    calls: DynamoDBCalls, table: str, index: IndexSpec, wallet_id: str, low_ms: int, high_ms: int
) -> list[dict[str, Any]]:
    payload: dict[str, Any] = {
        "TableName": table,
        "IndexName": index.name,
        "KeyConditionExpression": "#w = :w AND #c BETWEEN :lo AND :hi",
        "FilterExpression": "attribute_not_exists(#o) OR #o = :applied",
        "ExpressionAttributeNames": {
            "#w": index.partition_key.name,
            "#c": index.sort_key.name,
            "#o": OUTCOME,
        },
        "ExpressionAttributeValues": {
            ":w": {"S": wallet_id},
            ":lo": {"N": str(low_ms)},
            ":hi": {"N": str(high_ms)},
            ":applied": {"S": OUTCOME_APPLIED},
        },
    }
    items: list[dict[str, Any]] = []
    while True:
        page = await calls.call("Query", payload)
        items += page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return items
        payload["ExclusiveStartKey"] = page["LastEvaluatedKey"]
