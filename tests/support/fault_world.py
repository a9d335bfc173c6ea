"""DynamoDB as the service behaves when things fail, for the fault-injection checker (issue 35).

DynamoDB Local answers every call and serialises transactions, so none of the failures that make a
payment API lie happens on its own here. :class:`FaultWorld` is one DynamoDB shared by several
server processes (in-process stores), and :class:`FaultyDynamoDB` wraps each process's own client
(:class:`wallet.dynamodb.DynamoDBClient`) to meet, on a schedule drawn from a seeded random
generator:

- ``lost``: the call reaches DynamoDB Local and commits (or is cancelled), and its answer is lost;
- ``late``: the answer is lost and the transaction commits only later (DynamoDB still processing
  it): meanwhile the same ``ClientRequestToken`` answers ``TransactionInProgressException``, and any
  other write of its idempotency record meets it as the service would, a transaction's
  ``TransactionConflict`` reason or a single write's ``TransactionConflictException``;
- ``throttle``: ``ProvisionedThroughputExceededException`` before anything is written;
- ``expired``: ``ExpiredTokenException`` (credentials that expired) before anything is written;
  both in bursts of up to five calls.

Every injection is counted in :attr:`FaultWorld.injected`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import random
from typing import Any, Final

from contracts.wallets_table import Attr
from support.dynamodb_faults import cancellation
from wallet.dynamodb import DynamoDBClient, DynamoDBError, DynamoDBTransportError

KINDS: Final = ("lost", "late", "throttle", "expired")
_CONFLICT: Final = {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
_HELD: Final = {"Code": "None"}


def _error(type_: str, status: int = 400) -> DynamoDBError:
    body = {"__type": f"com.amazonaws.dynamodb.v20120810#{type_}", "message": f"injected {type_}"}
    return DynamoDBError(status, type_, f"injected {type_}", body, request_id="INJECTED")


@dataclasses.dataclass
class FaultWorld:
    """The faults of one history: rates per call, the transactions committing late, the counts."""

    rng: random.Random
    idempotency_table: str
    rates: dict[str, float]
    late_seconds: tuple[float, float] = (0.02, 0.3)
    enabled: bool = True
    injected: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    #: idempotency record key -> the transaction holding it, committing late
    in_flight: dict[str, asyncio.Task[None]] = dataclasses.field(default_factory=dict)
    #: ClientRequestToken -> that transaction
    tokens: dict[str, asyncio.Task[None]] = dataclasses.field(default_factory=dict)
    #: Operation -> the faults its next calls meet, in order (None: none), before any drawn one
    plan: dict[str, list[str | None]] = dataclasses.field(default_factory=dict)

    #: A throttle or an expired credential comes in bursts (a hot partition, a fleet's token
    #: refresh): the calls right after one meet it too.
    _burst: list[str] = dataclasses.field(default_factory=list)

    def draw(self, operation: str) -> str | None:
        if planned := self.plan.get(operation):
            return planned.pop(0)
        if not self.enabled:
            return None
        if self._burst:
            return self._burst.pop()
        for kind in KINDS:
            if kind == "late" and operation != "TransactWriteItems":
                continue
            if self.rng.random() < self.rates.get(kind, 0.0):
                if kind in ("throttle", "expired"):
                    self._burst = [kind] * self.rng.randint(0, 4)
                return kind
        return None

    async def settle(self) -> None:
        """Wait until every late transaction has committed (or been cancelled)."""
        while self.tokens:
            await asyncio.gather(*self.tokens.values(), return_exceptions=True)


class FaultyDynamoDB:
    """One process's DynamoDB client in a :class:`FaultWorld`."""

    def __init__(self, client: DynamoDBClient, world: FaultWorld) -> None:
        self.client = client
        self.world = world

    def close(self) -> None:
        self.client.close()

    async def call(
        self, operation: str, payload: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        world = self.world
        keys = self._record_keys(operation, payload)
        token = payload.get("ClientRequestToken")
        if token is not None and token in world.tokens:
            world.injected["in_progress"] += 1
            raise _error("TransactionInProgressException")
        held = [key for key in [*keys, *self._wallet_keys(operation, payload)] if key in world.in_flight]
        if held:
            world.injected["record_conflict"] += 1
            if operation == "TransactWriteItems":
                raise cancellation(payload, self._conflict_reasons(payload, held))
            raise _error("TransactionConflictException")
        fault = world.draw(operation) if keys or operation == "GetItem" else None
        if fault is not None:
            world.injected[f"{fault}:{operation}"] += 1
        if fault == "throttle":
            raise _error("ProvisionedThroughputExceededException")
        if fault == "expired":
            raise _error("ExpiredTokenException")
        if fault == "late" and token is not None:
            keys = [*keys, *self._wallet_keys(operation, payload)]  # a transaction holds all its items
            task = asyncio.ensure_future(self._commit_late(payload, keys, token))
            world.tokens[token] = task
            for key in keys:
                world.in_flight[key] = task
            raise DynamoDBTransportError("injected: the answer was lost, the transaction commits later")
        if fault == "lost":
            with contextlib.suppress(DynamoDBError):  # ran (committed or cancelled); the answer is lost
                await self.client.call(operation, payload, timeout=timeout)
            raise DynamoDBTransportError(
                f"injected: the answer of {operation} was lost after DynamoDB ran it"
            )
        return await self.client.call(operation, payload, timeout=timeout)

    async def _commit_late(self, payload: dict[str, Any], keys: list[str], token: str) -> None:
        world = self.world
        try:
            await asyncio.sleep(world.rng.uniform(*world.late_seconds))
            try:
                await self.client.call("TransactWriteItems", payload)
                world.injected["late_committed"] += 1
            except DynamoDBError:
                world.injected["late_cancelled"] += 1
        finally:
            world.tokens.pop(token, None)
            for key in keys:
                world.in_flight.pop(key, None)

    def _record_keys(self, operation: str, payload: dict[str, Any]) -> list[str]:
        """The idempotency records a write puts (none for reads and other items)."""
        table = self.world.idempotency_table
        if operation == "PutItem":
            return [payload["Item"][Attr.PK]["S"]] if payload.get("TableName") == table else []
        if operation != "TransactWriteItems":
            return []
        return [
            item["Put"]["Item"][Attr.PK]["S"]
            for item in payload["TransactItems"]
            if "Put" in item and item["Put"]["TableName"] == table
        ]

    @staticmethod
    def _wallet_keys(operation: str, payload: dict[str, Any]) -> list[str]:
        """The wallet items a transaction updates."""
        if operation != "TransactWriteItems":
            return []
        return [item["Update"]["Key"][Attr.PK]["S"] for item in payload["TransactItems"] if "Update" in item]

    def _conflict_reasons(self, payload: dict[str, Any], held: list[str]) -> list[dict[str, Any]]:
        """The service's reasons for a write meeting a transaction in flight on its own record.

        As the issue's point 3 saw it: the other attempt's debit is committing, so the payer's
        condition fails (its balance shown as 0), and the nonce's items report the conflict.
        """
        items = payload["TransactItems"]
        reasons: list[dict[str, Any]] = []
        own_record_held = any("#" not in key for key in held)
        for item in items:
            if "Update" in item:
                update = item["Update"]
                if own_record_held and ":floor" in update.get("ExpressionAttributeValues", {}):
                    # the other attempt's debit is committing: the payer's condition fails
                    reasons.append(
                        {
                            "Code": "ConditionalCheckFailed",
                            "Item": {Attr.BALANCE: {"N": "0"}, Attr.UPDATED_AT: {"N": "0"}},
                        }
                    )
                else:
                    reasons.append(_CONFLICT if update["Key"][Attr.PK]["S"] in held else _HELD)
                continue
            request_key = item["Put"]["Item"][Attr.PK]["S"].split("#")[0]  # record, or its hot item
            reasons.append(_CONFLICT if request_key in held else _HELD)
        return reasons
