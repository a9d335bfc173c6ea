"""Issue 35's points 1-4 and 6, each as the history that made the answer false, now true.

Each test scripts the failure on :class:`support.fault_world.FaultWorld` (DynamoDB Local for the
rest) and checks what the client is told against what DynamoDB holds afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from support.fault_world import FaultWorld, FaultyDynamoDB
from support.store_calls import create_wallets

from contracts.settings import Settings
from wallet.commands import Deposit, Transfer
from wallet.dynamodb import DynamoDBClient, DynamoDBError, DynamoDBTransportError
from wallet.dynamodb_calls import RetryPolicy
from wallet.errors import InsufficientFundsError, OutcomeUnknownError
from wallet.receipts import Receipt
from wallet.service import create_service
from wallet.store import WalletStore

pytestmark = pytest.mark.stack

QUICK = RetryPolicy(conflict_attempts=10, transient_attempts=3, base_delay=0.005, max_delay=0.1)


def _world(settings: Settings, **plan: list[str | None]) -> FaultWorld:
    world = FaultWorld(random.Random(7), settings.idempotency_table, {}, enabled=False)
    world.plan.update(plan)
    return world


@contextlib.asynccontextmanager
async def _servers(
    settings: Settings, world: FaultWorld, count: int = 1, retry: RetryPolicy = QUICK
) -> AsyncIterator[list[httpx.AsyncClient]]:
    stores = [
        WalletStore(settings, dynamodb=FaultyDynamoDB(DynamoDBClient(settings.region), world), retry=retry)  # type: ignore[arg-type]
        for _ in range(count)
    ]
    clients = [
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_service(settings, store=s)), base_url="http://w"
        )
        for s in stores
    ]
    try:
        yield clients
    finally:
        await world.settle()
        for client in clients:
            await client.aclose()
        for store in stores:
            store.client.close()


async def _wallet(api: httpx.AsyncClient, funds: int = 0, headers: dict[str, str] | None = None) -> str:
    created = await api.post("/api/v1/wallets/", json={"user_id": str(uuid.uuid4())}, headers=headers)
    wallet_id = str(created.json()["id"])
    if funds:
        assert (
            await api.put(f"/api/v1/wallets/{wallet_id}/deposit/", json={"amount": funds, "nonce": "f"})
        ).status_code == 204
    return wallet_id


async def _balance(api: httpx.AsyncClient, wallet_id: str, headers: dict[str, str] | None = None) -> int:
    return int((await api.get(f"/api/v1/wallets/{wallet_id}/balance", headers=headers)).json()["balance"])


def _error(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"] if response.status_code >= 400 else ""


def test_point_1_a_transaction_still_in_progress_is_waited_for_not_called_unknown(settings: Settings) -> None:
    # GIVEN a deposit whose first attempt's answer is lost and which commits 0.3 s later, its
    # retries answered TransactionInProgressException meanwhile
    async def scenario() -> tuple[httpx.Response, int, dict[str, Any]]:
        world = _world(settings)
        async with _servers(settings, world) as (api,):
            wallet_id = await _wallet(api)
            world.late_seconds = (0.3, 0.3)
            world.plan["TransactWriteItems"] = ["late"]
            response = await api.put(
                f"/api/v1/wallets/{wallet_id}/deposit/", json={"amount": 100, "nonce": "n"}
            )
            return response, await _balance(api, wallet_id), dict(world.injected)

    response, balance, injected = asyncio.run(scenario())
    # THEN the store asks again with the same token until it is decided: one 204, applied once
    assert response.status_code == 204
    assert balance == 100
    assert injected["in_progress"] >= 1


def test_point_1_an_unknown_outcome_is_never_answered_not_committed_while_it_may_still_commit(
    settings: Settings,
) -> None:
    # GIVEN a deposit still committing when its call's deadline ran out (503 outcome_unknown)
    async def scenario() -> list[Any]:
        world = _world(settings)
        async with _servers(settings, world, retry=RetryPolicy(deadline=0.3, in_progress_attempts=10)) as (
            api,
        ):
            wallet_id = await _wallet(api)
            world.late_seconds = (1.0, 1.0)
            world.plan["TransactWriteItems"] = ["late"]
            first = await api.put(f"/api/v1/wallets/{wallet_id}/deposit/", json={"amount": 100, "nonce": "n"})
            lookup = f"/api/v1/wallets/{wallet_id}/transactions/n"
            while_committing = await api.get(lookup)
            await world.settle()
            after = await api.get(lookup)
            return [first, while_committing, after, await _balance(api, wallet_id)]

    first, while_committing, after, balance = asyncio.run(scenario())
    assert _error(first) == (503, "outcome_unknown")
    assert "Never send it with a new nonce" in first.json()["detail"]
    # THEN the lookup says "not decided yet" (the void record's put met the transaction), never 404
    assert _error(while_committing) == (409, "outcome_pending")
    assert int(while_committing.headers["Retry-After"]) >= 1
    # AND once it committed, the lookup answers it, with the transaction id the 503 named
    assert after.status_code == 200
    assert after.json()["transaction_id"] == first.headers["Transaction-Id"]
    assert balance == 100


@pytest.mark.parametrize("then", ["throttle", "expired"])
def test_point_2_a_lost_answer_then_a_refusal_is_unknown_never_nothing_written(
    settings: Settings, then: str
) -> None:
    # GIVEN a deposit whose first attempt committed with its answer lost, every later attempt
    # throttled (or refused: expired credentials)
    async def scenario() -> list[Any]:
        world = _world(settings)
        async with _servers(settings, world) as (api,):
            wallet_id = await _wallet(api)
            world.plan["TransactWriteItems"] = ["lost", *[then] * 12]
            first = await api.put(f"/api/v1/wallets/{wallet_id}/deposit/", json={"amount": 100, "nonce": "n"})
            world.plan.clear()
            lookup = await api.get(f"/api/v1/wallets/{wallet_id}/transactions/n")
            return [first, lookup, await _balance(api, wallet_id)]

    first, lookup, balance = asyncio.run(scenario())
    # THEN the answer is 503 outcome_unknown (not 429 "nothing was written", not 500), naming the
    # transaction that committed
    assert _error(first) == (503, "outcome_unknown")
    assert balance == 100
    assert lookup.status_code == 200
    assert lookup.json()["transaction_id"] == first.headers["Transaction-Id"]


def test_point_3_a_conflict_on_the_requests_own_nonce_is_never_a_refusal(settings: Settings) -> None:
    # GIVEN a transfer of all the payer's money committing (late) on one server
    async def scenario() -> list[Any]:
        world = _world(settings)
        async with _servers(settings, world, count=2) as (first, second):
            payer, payee = await _wallet(first, 100), await _wallet(first)
            world.late_seconds = (0.5, 0.5)
            world.plan["TransactWriteItems"] = ["late"]
            body = {"amount": 100, "nonce": "pay"}
            path = f"/api/v1/wallets/{payer}/transfer/{payee}/"
            original = asyncio.ensure_future(first.put(path, json=body))
            while not world.in_flight:
                await asyncio.sleep(0.001)
            # WHEN its retry reaches the other server while it commits (the payer's condition
            # fails, the request's own nonce items report TransactionConflict)
            retry = await second.put(path, json=body)
            return [await original, retry, dict(world.injected), await _balance(second, payer)]

    original, retry, injected, balance = asyncio.run(scenario())
    assert injected["record_conflict"] >= 1
    # THEN the retry is not refused for funds: it waited and replays the original's movement
    assert _error(retry) != (409, "insufficient_funds")
    assert retry.status_code in (204, 429)
    if retry.status_code == 204:
        assert retry.headers["Transaction-Id"] == original.headers["Transaction-Id"]
    assert original.status_code == 204
    assert balance == 0


class _GroupScript:
    """Holds the first movement write until released; loses every answer of the second group round."""

    def __init__(self, client: DynamoDBClient) -> None:
        self.client = client
        self.release = asyncio.Event()
        self.writes = 0
        self.lost_tokens: set[str] = set()
        self.rounds: list[int] = []

    def close(self) -> None:
        self.client.close()

    async def call(
        self, operation: str, payload: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        if operation != "TransactWriteItems" or "ClientRequestToken" not in payload:
            return await self.client.call(operation, payload, timeout=timeout)
        token = payload["ClientRequestToken"]
        if token in self.lost_tokens:
            raise DynamoDBTransportError("the answer was lost")
        self.writes += 1
        if self.writes == 1:
            await self.release.wait()
        puts = sum(1 for item in payload["TransactItems"] if "Put" in item) // 2
        self.rounds.append(puts)
        if len(self.rounds) == 3:  # the group's second round: it commits, every answer is lost
            self.lost_tokens.add(token)
            with contextlib.suppress(DynamoDBError):
                await self.client.call(operation, payload, timeout=timeout)
            raise DynamoDBTransportError("the answer was lost")
        return await self.client.call(operation, payload, timeout=timeout)


def test_point_4_a_group_answer_decided_in_an_earlier_round_stays_decided(settings: Settings) -> None:
    # GIVEN a process writing one transaction at a time, whose queue forms a group of a replay
    # (a nonce another process already executed), a transfer and a deposit
    one_at_a_time = settings.replace(writes_in_flight=1)

    async def scenario() -> tuple[list[Any], Receipt, _GroupScript]:
        other = WalletStore(one_at_a_time, retry=QUICK)
        a, b, c = await create_wallets(other, 3)
        await other.execute(Deposit(a, 100, "fund"))
        earlier = await other.execute(Deposit(b, 7, "used"))
        script = _GroupScript(DynamoDBClient(settings.region))
        store = WalletStore(one_at_a_time, dynamodb=script, retry=QUICK)  # type: ignore[arg-type]
        blocker = asyncio.ensure_future(store.execute(Deposit(c, 1, "block")))
        while script.writes < 1:
            await asyncio.sleep(0.001)
        group = [
            asyncio.ensure_future(store.execute(Deposit(b, 7, "used"))),
            asyncio.ensure_future(store.execute(Transfer(a, b, 10, "t1"))),
            asyncio.ensure_future(store.execute(Deposit(c, 5, "d1"))),
        ]
        for _ in range(20):
            await asyncio.sleep(0)
        script.release.set()
        await blocker
        results = list(await asyncio.gather(*group, return_exceptions=True))
        other.client.close()
        return results, earlier, script

    (replay, transfer, deposit), earlier, script = asyncio.run(scenario())
    # the group went as one (3 requests), then without the replay (2), and that round's answer was lost
    assert script.rounds[1:3] == [3, 2]
    # THEN the replay read from the first round's reasons is still a replay of the first execution
    assert isinstance(replay, Receipt)
    assert replay.replayed
    assert replay.txn_id == earlier.txn_id
    # AND the two still in the lost round are unknown, each naming its own transaction id
    assert isinstance(transfer, OutcomeUnknownError)
    assert isinstance(deposit, OutcomeUnknownError)
    assert transfer.transaction_id != deposit.transaction_id
    assert earlier.txn_id not in (transfer.transaction_id, deposit.transaction_id)


def test_point_4_the_unknown_outcome_names_the_transaction_a_retry_replays(settings: Settings) -> None:
    async def scenario() -> tuple[OutcomeUnknownError, Receipt]:
        world = _world(settings)
        store = WalletStore(
            settings, dynamodb=FaultyDynamoDB(DynamoDBClient(settings.region), world), retry=QUICK
        )  # type: ignore[arg-type]
        (wallet_id,) = await create_wallets(store, 1)
        world.plan["TransactWriteItems"] = ["lost", "lost", "lost"]
        try:
            await store.execute(Deposit(wallet_id, 3, "n"))
        except OutcomeUnknownError as unknown:
            retried = await store.execute(Deposit(wallet_id, 3, "n"))
            store.client.close()
            return unknown, retried
        raise AssertionError("expected an unknown outcome")

    unknown, retried = asyncio.run(scenario())
    assert retried.replayed
    assert retried.txn_id == unknown.transaction_id


def test_point_6_a_nonce_belongs_to_its_caller(settings: Settings) -> None:
    lattice = settings.replace(trust_front="lattice")
    alice, bob = "arn:aws:iam::123456789012:role/alice", "arn:aws:iam::123456789012:role/bob"

    def caller(principal: str) -> dict[str, str]:
        return {"x-amzn-lattice-identity": f"Principal={principal}; SessionName=s; Type=AWSIAM"}

    async def scenario() -> list[Any]:
        world = _world(lattice)
        async with _servers(lattice, world) as (api,):
            wallet_id = await _wallet(api, headers=caller(alice))
            path = f"/api/v1/wallets/{wallet_id}/deposit/"
            body = {"amount": 25, "nonce": "n"}
            first = await api.put(path, json=body, headers=caller(alice))
            # WHEN another caller sends the same deposit with the same nonce
            stolen = await api.put(path, json=body, headers=caller(bob))
            lookup = f"/api/v1/wallets/{wallet_id}/transactions/n"
            return [
                first,
                stolen,
                await api.get(lookup, headers=caller(bob)),
                await api.get(lookup, headers=caller(alice)),
                await _balance(api, wallet_id, caller(alice)),
            ]

    first, stolen, bobs_lookup, alices_lookup, balance = asyncio.run(scenario())
    assert first.status_code == 204
    # THEN it is the other caller's own request (nonces are per caller), never answered with the
    # first caller's movement
    assert stolen.status_code == 204
    assert "Idempotent-Replayed" not in stolen.headers
    assert stolen.headers["Transaction-Id"] != first.headers["Transaction-Id"]
    # AND each lookup answers its own caller's request, showing nobody else's identity
    assert bobs_lookup.json()["initiated_by"] == bob
    assert alice not in bobs_lookup.text
    assert alices_lookup.json()["initiated_by"] == alice
    assert balance == 50


def test_declines_cost_one_plain_put_not_a_transaction(settings: Settings) -> None:
    # the capacity model counts a refusal's record as one conditional PutItem (docs/capacity.md)
    calls: list[str] = []

    class Counting:
        def __init__(self, client: DynamoDBClient) -> None:
            self.client = client

        def close(self) -> None:
            self.client.close()

        async def call(
            self, operation: str, payload: dict[str, Any], *, timeout: float | None = None
        ) -> dict[str, Any]:
            calls.append(operation)
            return await self.client.call(operation, payload, timeout=timeout)

    async def scenario() -> None:
        store = WalletStore(settings, dynamodb=Counting(DynamoDBClient(settings.region)), retry=QUICK)  # type: ignore[arg-type]
        a, b = await create_wallets(store, 2)
        calls.clear()
        with pytest.raises(InsufficientFundsError):
            await store.execute(Transfer(a, b, 5, "n"))
        store.client.close()

    asyncio.run(scenario())
    assert calls == ["TransactWriteItems", "PutItem"]
