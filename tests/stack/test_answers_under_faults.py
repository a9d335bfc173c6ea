"""Every answer a client gets is true, whatever fails: a fault-injection checker over drawn histories.

Two server processes (in-process ASGI apps, each with its own store, its own clock offset and its
own DynamoDB client) share one DynamoDB Local through :class:`support.fault_world.FaultWorld`, which
loses answers after DynamoDB ran the call, lets a transaction commit late (the same token then
answers ``TransactionInProgressException``, other writes of its record a conflict), throttles and
refuses with expired credentials, on a schedule Hypothesis draws. Clients follow the documented
contract exactly (:mod:`support.contract_client`) and redeliver some refused requests. The checker
then holds every final answer against the tables, with faults off and every late transaction done:

- 204 (applied or replayed) => the nonce's record is applied, with the transaction id told;
- a refusal or a definite "did not commit" => no applied record for the nonce;
- 429, 500 and 503 ``unavailable`` ("nothing was written") never name the transaction that committed;
- no answer any rule forbids here (``idempotency_key_reused``, ``nonce_expired``);
- every wallet's balance and version are exactly its applied records' legs; money is conserved;
  no balance is below zero.

The counts (histories, faults injected, answers checked) are printed (``pytest -s``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import boto3
import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from support.contract_client import Told, look_up, pay
from support.fault_world import FaultWorld, FaultyDynamoDB

from contracts.idempotency_table import OUTCOME, idempotency_key
from contracts.settings import Settings
from contracts.wallets_table import Attr, wallet_key
from wallet.dynamodb import DynamoDBClient
from wallet.dynamodb_calls import RetryPolicy
from wallet.service import create_service
from wallet.store import WalletStore

pytestmark = pytest.mark.stack

#: Quick retries (the faults come often here) and a short deadline, so unknown outcomes happen.
RETRIES = RetryPolicy(
    conflict_attempts=6,
    transient_attempts=3,
    throttle_attempts=3,
    base_delay=0.001,
    max_delay=0.01,
    deadline=1.5,
)
COUNTS: collections.Counter[str] = collections.Counter()


@pytest.fixture(scope="module", autouse=True)
def _report_counts() -> Iterator[None]:
    yield
    if COUNTS:
        print(
            "\nfault-injection checker: "
            + ", ".join(f"{name} {count}" for name, count in sorted(COUNTS.items()))
        )


@contextlib.asynccontextmanager
async def fleet(
    settings: Settings, world: FaultWorld, offsets_ms: list[int]
) -> AsyncIterator[list[httpx.AsyncClient]]:
    """One in-process server per clock offset, each with its own store and faulty DynamoDB client."""
    stores = []
    clients = []
    for offset in offsets_ms:
        store = WalletStore(
            settings,
            dynamodb=FaultyDynamoDB(DynamoDBClient(settings.region), world),  # type: ignore[arg-type]
            retry=RETRIES,
            clock_ms=lambda offset=offset: time.time_ns() // 1_000_000 + offset,
        )
        stores.append(store)
        transport = httpx.ASGITransport(app=create_service(settings, store=store))
        clients.append(httpx.AsyncClient(transport=transport, base_url="http://wallet.local", timeout=30))
    try:
        yield clients
    finally:
        for client in clients:
            await client.aclose()
        for store in stores:
            await store.drain()
            store.client.close()


async def _wallets(api: httpx.AsyncClient, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        response = await api.post("/api/v1/wallets/", json={"user_id": str(uuid.uuid4())})
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    return ids


def check(settings: Settings, wallets: list[str], tolds: list[Told]) -> int:
    """Hold every final answer against the tables; returns the number of answers checked."""
    dynamodb = boto3.client("dynamodb", region_name=settings.region)
    records: dict[str, dict[str, Any]] = {}
    for told in tolds:
        key = idempotency_key(told.wallet_id, told.nonce, settings.default_principal)
        if key not in records:
            item = dynamodb.get_item(
                TableName=settings.idempotency_table, Key={Attr.PK: {"S": key}}, ConsistentRead=True
            ).get("Item")
            records[key] = item or {}
    wrong = [t for t in tolds if t.verdict.startswith("wrong") or t.verdict == "undecided"]
    assert not wrong, [(t.nonce, t.verdict, t.answers) for t in wrong]
    applied: dict[str, dict[str, Any]] = {}
    for told in tolds:
        record = records[idempotency_key(told.wallet_id, told.nonce, settings.default_principal)]
        committed = bool(record) and record.get(OUTCOME, {"S": "applied"})["S"] == "applied"
        if committed:  # an answer that said "nothing was written" never names what was
            assert record[Attr.TXN_ID]["S"] not in told.not_written_txn_ids, (told, record)
        if told.verdict == "applied":
            assert committed, (told, record)
            assert record[Attr.TXN_ID]["S"] == told.txn_id, (told, record)
            applied[told.nonce] = record
        else:  # refused, or decided not committed
            assert not committed, (told, record)
    # every wallet is exactly its applied records' legs
    expected_balance = collections.Counter(dict.fromkeys(wallets, 0))
    expected_version = collections.Counter(dict.fromkeys(wallets, 0))
    for told in tolds:
        if told.nonce not in applied:
            continue
        expected_version[told.wallet_id] += 1
        if told.to_wallet_id is None:
            expected_balance[told.wallet_id] += told.amount
        else:
            expected_balance[told.wallet_id] -= told.amount
            expected_balance[told.to_wallet_id] += told.amount
            expected_version[told.to_wallet_id] += 1
    total = 0
    for wallet in wallets:
        item = dynamodb.get_item(
            TableName=settings.table, Key={Attr.PK: {"S": wallet_key(wallet)}}, ConsistentRead=True
        )["Item"]
        balance, version = int(item[Attr.BALANCE]["N"]), int(item[Attr.VERSION]["N"])
        assert (balance, version) == (expected_balance[wallet], expected_version[wallet]), wallet
        assert balance >= 0
        total += balance
    funded = sum(told.amount for told in tolds if told.to_wallet_id is None and told.nonce in applied)
    assert total == funded  # money conserved: only deposits create it
    return sum(len(told.answers) for told in tolds)


async def _history(
    settings: Settings,
    seed: int,
    rates: dict[str, float],
    offsets: list[int],
    late_seconds: tuple[float, float],
) -> None:
    rng = random.Random(seed)
    world = FaultWorld(random.Random(seed + 1), settings.idempotency_table, rates, late_seconds)
    world.enabled = False
    async with fleet(settings, world, offsets) as apis:
        wallets = await _wallets(apis[0], 4)
        world.enabled = True
        tolds: list[Told] = []

        async def client(index: int) -> None:
            client_rng = random.Random(seed * 31 + index)
            for _ in range(6):
                payer = client_rng.choice(wallets)
                if client_rng.random() < 0.35:
                    tolds.extend(await pay(apis, client_rng, payer, client_rng.randint(1, 60), None))
                else:
                    payee = client_rng.choice([w for w in wallets if w != payer])
                    tolds.extend(
                        await pay(
                            apis,
                            client_rng,
                            payer,
                            client_rng.randint(1, 80),
                            payee,
                            redeliver=client_rng.random() < 0.5,
                        )
                    )

        await asyncio.gather(*(client(index) for index in range(4)))
        world.enabled = False
        await world.settle()
        for told in tolds:  # a client that gave up: decided now, with faults off
            if told.verdict == "undecided":
                await look_up(apis, rng, told)
    answers = check(settings, wallets, tolds)
    COUNTS["histories"] += 1
    COUNTS["answers checked"] += answers
    COUNTS["final answers"] += len(tolds)
    COUNTS["faults injected"] += sum(world.injected.values())
    for kind, count in world.injected.items():
        COUNTS[f"fault {kind}"] += count
    COUNTS["outcome_unknown answers"] += sum(len(told.unknown_txn_ids) for told in tolds)


@given(
    seed=st.integers(0, 2**31),
    lost=st.sampled_from([0.0, 0.05, 0.15]),
    late=st.sampled_from([0.0, 0.05, 0.15]),
    throttle=st.sampled_from([0.0, 0.05, 0.2]),
    expired=st.sampled_from([0.0, 0.03]),
    offsets=st.lists(st.integers(-25_000, 25_000), min_size=2, max_size=2),
    # a late commit inside the call's deadline (the store's own retries meet it) or past it (the
    # client is told the outcome is unknown while the transaction is still committing)
    late_seconds=st.sampled_from([(0.02, 0.3), (0.5, 2.5)]),
)
@hypothesis_settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_every_answer_is_true_over_drawn_fault_histories(
    settings: Settings,
    seed: int,
    lost: float,
    late: float,
    throttle: float,
    expired: float,
    offsets: list[int],
    late_seconds: tuple[float, float],
) -> None:
    rates = {"lost": lost, "late": late, "throttle": throttle, "expired": expired}
    asyncio.run(_history(settings, seed, rates, offsets, late_seconds))
