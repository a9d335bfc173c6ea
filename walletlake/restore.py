"""Take a restored wallets table back into service (``walletlake restore``): the I/O around
:mod:`wallet.restore_plan`.

A table restored from a backup (DynamoDB point-in-time recovery, or an on-demand backup) comes
without its stream and its TTL, and stands at the restore point while the lake may hold the writes
acknowledged after it. In order: read the table's wallets and the lake's (``current_balances``:
each wallet's latest entry), continue every wallet the lake is ahead on (its version and balance
set to the lake's, in one conditional update each, its entry attributes cleared), create again the
wallets made after the restore point, and only then turn on TTL and the stream, so that none of
these writes reaches the lake as a ledger entry. A table whose stream is already on is refused
while there is work to do (its writes would be read as entries).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import boto3
import pandas as pd

from contracts.settings import Settings
from contracts.wallets_table import ENTITY_WALLET, STREAM_VIEW_TYPE, TTL_ATTRIBUTE, Attr, wallet_key
from wallet.restore_plan import (
    AHEAD,
    CONTINUE,
    DISAGREE,
    RECREATE,
    LakeWallet,
    TableWallet,
    WalletStep,
    plan_restore,
)
from wallet.write_requests import create_wallet_request
from walletlake.refusals import RefusalError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_logger = logging.getLogger(__name__)

#: The entry attributes a continued wallet item drops: the entry they describe is the lake's now.
_ENTRY_ATTRIBUTES = (
    Attr.ENTRY_TXN_ID,
    Attr.ENTRY_TYPE,
    Attr.ENTRY_DIRECTION,
    Attr.ENTRY_AMOUNT,
    Attr.ENTRY_COUNTERPARTY,
    Attr.ENTRY_NONCE,
    Attr.ENTRY_INITIATED_BY,
    Attr.ENTRIES_BEFORE,
)


@dataclasses.dataclass(frozen=True, slots=True)
class RestoreReport:
    """What ``walletlake restore`` found and did."""

    table: str
    dry_run: bool
    wallets_in_table: int
    wallets_in_lake: int
    steps: tuple[WalletStep, ...]
    stream_enabled: bool
    ttl_enabled: bool

    @property
    def unresolved(self) -> list[WalletStep]:
        """Wallets the lake cannot decide (the table ahead of it, or a different balance)."""
        return [step for step in self.steps if step.action in (AHEAD, DISAGREE)]

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for logs and JSON."""
        values = dataclasses.asdict(self)
        values["steps"] = [dataclasses.asdict(step) for step in self.steps]
        return values


def restore_table(
    settings: Settings,
    *,
    dry_run: bool = False,
    session: boto3.Session | None = None,
    clock: Callable[[], float] = time.time,
) -> RestoreReport:
    """Continue the restored table ``settings.table`` from the lake, then turn on TTL and its stream."""
    from queries import run_query

    session = session or boto3.Session(region_name=settings.region)
    dynamodb: DynamoDBClient = session.client("dynamodb")
    description = dynamodb.describe_table(TableName=settings.table)["Table"]
    streaming = bool(description.get("StreamSpecification", {}).get("StreamEnabled"))
    held = _table_wallets(dynamodb, settings.table)
    known = _lake_wallets(run_query("current_balances", {}, settings))
    steps = plan_restore(held, known)
    work = [step for step in steps if step.action in (CONTINUE, RECREATE)]
    if work and streaming and not dry_run:
        raise RefusalError(
            f"table {settings.table} already has its stream on: continuing {len(work)} wallets from the "
            "lake would reach the lake as entries. Turn it off (aws dynamodb update-table --table-name "
            f"{settings.table} --stream-specification StreamEnabled=false), then run walletlake restore again"
        )
    if not dry_run:
        for step in work:
            _apply(dynamodb, settings.table, step, held, known)
        ttl = _enable_ttl(dynamodb, settings.table)
        stream = streaming or _enable_stream(dynamodb, settings.table)
    else:
        ttl, stream = _ttl_on(dynamodb, settings.table), streaming
    report = RestoreReport(settings.table, dry_run, len(held), len(known), tuple(steps), stream, ttl)
    _logger.info("restore %s", report.as_dict())
    return report


def _table_wallets(dynamodb: DynamoDBClient, table: str) -> dict[str, TableWallet]:
    found: dict[str, TableWallet] = {}
    kwargs: dict[str, Any] = {
        "TableName": table,
        "ConsistentRead": True,
        "FilterExpression": "#e = :w",
        "ExpressionAttributeNames": {"#e": Attr.ENTITY},
        "ExpressionAttributeValues": {":w": {"S": ENTITY_WALLET}},
    }
    while True:
        page = dynamodb.scan(**kwargs)
        for item in page["Items"]:
            wallet_id = item[Attr.WALLET_ID]["S"]
            found[wallet_id] = TableWallet(
                wallet_id,
                int(item[Attr.VERSION]["N"]),
                int(item[Attr.BALANCE]["N"]),
                int(item[Attr.UPDATED_AT]["N"]),
            )
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _lake_wallets(frame: pd.DataFrame) -> dict[str, LakeWallet]:
    def ms(value: Any) -> int | None:
        return None if value is None or pd.isna(value) else int(pd.Timestamp(value).value // 1_000_000)

    return {
        str(row["wallet_id"]): LakeWallet(
            str(row["wallet_id"]),
            str(row["user_id"]),
            ms(row["created_at"]) or 0,
            int(row["version"]),
            int(row["balance"]),
            ms(row["last_entry_at"]),
            None if row.get("owner") is None or pd.isna(row["owner"]) else str(row["owner"]),
        )
        for row in frame.to_dict("records")
    }


def _apply(
    dynamodb: DynamoDBClient,
    table: str,
    step: WalletStep,
    held: dict[str, TableWallet],
    known: dict[str, LakeWallet],
) -> None:
    if step.action == CONTINUE:
        before = held[step.wallet_id]
        dynamodb.update_item(
            TableName=table,
            Key={Attr.PK: {"S": wallet_key(step.wallet_id)}},
            UpdateExpression="SET #v = :v, #b = :b, #u = :u REMOVE "
            + ", ".join(f"#r{i}" for i in range(len(_ENTRY_ATTRIBUTES))),
            ConditionExpression="#v = :held_v AND #b = :held_b",
            ExpressionAttributeNames={
                "#v": Attr.VERSION,
                "#b": Attr.BALANCE,
                "#u": Attr.UPDATED_AT,
                **{f"#r{i}": name for i, name in enumerate(_ENTRY_ATTRIBUTES)},
            },
            ExpressionAttributeValues={
                ":v": {"N": str(step.version)},
                ":b": {"N": str(step.balance)},
                ":u": {"N": str(step.updated_at_ms)},
                ":held_v": {"N": str(before.version)},
                ":held_b": {"N": str(before.balance)},
            },
        )
        return
    dynamodb.transact_write_items(**_recreate_request(table, step, known[step.wallet_id]))


def _recreate_request(table: str, step: WalletStep, known: LakeWallet) -> dict[str, Any]:
    """The write path's own wallet creation (its owner too: who may move it), at the lake's
    version, balance and times."""
    request = create_wallet_request(table, step.wallet_id, known.user_id, known.created_at_ms, known.owner)
    wallet_put = request["TransactItems"][1]["Put"]["Item"]
    wallet_put[Attr.VERSION] = {"N": str(step.version)}
    wallet_put[Attr.BALANCE] = {"N": str(step.balance)}
    wallet_put[Attr.UPDATED_AT] = {"N": str(step.updated_at_ms)}
    return request


def _ttl_on(dynamodb: DynamoDBClient, table: str) -> bool:
    status = dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    return status.get("TimeToLiveStatus") in ("ENABLED", "ENABLING")


def _enable_ttl(dynamodb: DynamoDBClient, table: str) -> bool:
    if _ttl_on(dynamodb, table):
        return True
    dynamodb.update_time_to_live(
        TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
    )
    return True


def _enable_stream(dynamodb: DynamoDBClient, table: str) -> bool:
    dynamodb.update_table(
        TableName=table, StreamSpecification={"StreamEnabled": True, "StreamViewType": STREAM_VIEW_TYPE}
    )
    dynamodb.get_waiter("table_exists").wait(TableName=table)
    return True
