"""Repeats a server answers from its memory of nonces (wallet.nonce_memory), on DynamoDB Local.

A client's repeat of a request this server is still writing, or wrote a moment ago, must answer
exactly what DynamoDB's idempotency record would (a replay of the first outcome), must never
reach DynamoDB (where its refusal by the nonce's condition would cancel a whole group commit),
and must be forgotten when the record's window ends. Everything else about the nonce (another
body, a refused first attempt) is still DynamoDB's to decide.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, cast

import pytest
from support.dynamodb_faults import ScriptedDynamoDB
from support.store_calls import create_wallets
from support.wallet_table import assert_chains

from contracts import api_metrics as metrics
from contracts.settings import Settings
from contracts.wallets_table import Attr
from wallet.commands import Deposit, Transfer
from wallet.dynamodb import DynamoDBClient
from wallet.errors import IdempotencyKeyReusedError, InsufficientFundsError, NonceExpiredError
from wallet.receipts import Receipt
from wallet.store import WalletStore

pytestmark = pytest.mark.stack


def _store(settings: Settings, clock_ms: Any = None) -> tuple[WalletStore, ScriptedDynamoDB]:
    client = ScriptedDynamoDB(DynamoDBClient(settings.region))
    extra = {"clock_ms": clock_ms} if clock_ms else {}
    return WalletStore(settings, dynamodb=cast(DynamoDBClient, client), **extra), client


async def _until(condition: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def _turns() -> None:
    """Let every ready task run until it waits (no time passes: no I/O is due)."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_repeats_of_a_request_in_flight_wait_for_it_and_replay_it_without_a_write(settings: Settings) -> None:
    store, client = _store(settings)

    async def scenario() -> tuple[list[str], list[Receipt | BaseException]]:
        a, b = await create_wallets(store, 2)
        await store.execute(Deposit(a, 100, "fund"))
        # GIVEN a transfer held in flight (its TransactWriteItems waits at a gate)
        client.gate = threading.Event()
        first = asyncio.ensure_future(store.execute(Transfer(a, b, 30, "pay")))
        await _until(lambda: client.held == 1)
        # WHEN the client repeats it four times meanwhile
        repeats = [asyncio.ensure_future(store.execute(Transfer(a, b, 30, "pay"))) for _ in range(4)]
        await _turns()
        assert not any(repeat.done() for repeat in repeats)  # they wait for the first
        client.gate.set()
        outcomes = await asyncio.gather(first, *repeats, return_exceptions=True)
        return [a, b], list(outcomes)

    (a, b), outcomes = asyncio.run(scenario())

    # THEN only the first reached DynamoDB, and the repeats answered its outcome as replays
    assert [nonces for nonces in client.writes if "pay" in nonces] == [["pay"]]
    receipts = [outcome for outcome in outcomes if isinstance(outcome, Receipt)]
    assert len(receipts) == 5
    assert [receipt.replayed for receipt in receipts] == [False, True, True, True, True]
    assert {receipt.txn_id for receipt in receipts} == {receipts[0].txn_id}
    assert store.telemetry.snapshot()[metrics.MEMORY_REPLAYS] == 4
    # AND the money moved once
    table = assert_chains(settings, [a, b])
    assert (table.wallets[a][Attr.BALANCE], table.wallets[b][Attr.BALANCE]) == (70, 30)


def test_a_repeat_after_the_answer_replays_from_memory_and_another_body_is_dynamodbs_to_refuse(
    settings: Settings,
) -> None:
    store, client = _store(settings)

    async def scenario() -> tuple[Receipt, Receipt, BaseException | Receipt, BaseException | Receipt]:
        a, b = await create_wallets(store, 2)
        await store.execute(Deposit(a, 100, "fund"))
        first = await store.execute(Transfer(a, b, 30, "pay"))
        again = await store.execute(Transfer(a, b, 30, "pay"))
        other: BaseException | Receipt
        try:
            other = await store.execute(Transfer(a, b, 31, "pay"))
        except IdempotencyKeyReusedError as refusal:
            other = refusal
        receipt = await store.outcome(a, "pay", None)
        return first, again, other, receipt

    first, again, other, receipt = asyncio.run(scenario())

    assert (again.txn_id, again.replayed, first.replayed) == (first.txn_id, True, False)
    assert receipt == again  # the GET answers the same outcome
    assert isinstance(other, IdempotencyKeyReusedError)
    # the repeat cost no write; the other body went to DynamoDB, whose record refused it
    assert [nonces for nonces in client.writes if "pay" in nonces] == [["pay"], ["pay"]]


def test_a_refused_first_attempt_answers_its_repeat_with_the_same_refusal(settings: Settings) -> None:
    store, client = _store(settings)

    async def scenario() -> list[Any]:
        a, b = await create_wallets(store, 2)
        await store.execute(Deposit(a, 10, "fund"))
        client.gate = threading.Event()
        first = asyncio.ensure_future(store.execute(Transfer(a, b, 30, "pay")))
        await _until(lambda: client.held == 1)
        repeat = asyncio.ensure_future(store.execute(Transfer(a, b, 30, "pay")))
        await _turns()
        assert not repeat.done()
        client.gate.set()
        return list(await asyncio.gather(first, repeat, return_exceptions=True))

    outcomes = asyncio.run(scenario())

    # a refusal moves nothing and is kept under the nonce: the repeat waited for it and was
    # answered the same refusal from the memory, replayed, without a second write
    assert [type(outcome) for outcome in outcomes] == [InsufficientFundsError] * 2
    assert [outcome.replayed for outcome in outcomes] == [False, True]
    assert [nonces for nonces in client.writes if "pay" in nonces] == [["pay"]]


def test_the_memory_forgets_a_nonce_when_its_window_ends(settings: Settings) -> None:
    offset_ms = [0]
    store, client = _store(settings, clock_ms=lambda: time.time_ns() // 1_000_000 + offset_ms[0])

    async def scenario() -> tuple[Receipt, Receipt, BaseException | Receipt]:
        (a,) = await create_wallets(store, 1)
        first = await store.execute(Deposit(a, 5, "pay"))
        # one second before the window's end the repeat is still a replay from memory
        window_ms = settings.idempotency_window_seconds * 1000
        offset_ms[0] = window_ms - 1_500
        within = await store.execute(Deposit(a, 5, "pay"))
        # at the window's end the memory forgets the nonce: DynamoDB's record answers, and since
        # it still exists the request is not executed again
        offset_ms[0] = window_ms + 1_000
        after: BaseException | Receipt
        try:
            after = await store.execute(Deposit(a, 5, "pay"))
        except NonceExpiredError as refusal:
            after = refusal
        return first, within, after

    first, within, after = asyncio.run(scenario())

    assert (within.txn_id, within.replayed) == (first.txn_id, True)
    assert isinstance(after, NonceExpiredError)
    assert [nonces for nonces in client.writes if "pay" in nonces] == [["pay"], ["pay"]]
