"""Balance hints on DynamoDB Local: a likely refusal is written alone, and a wrong hint corrects itself.

A debit beyond the payer's balance cancels the whole group commit it rides in, costing every other
request of the group a second round trip (:mod:`wallet.commit_queue`). A store that knows a
wallet's balance (it created the wallet, committed its movements, or read it from a cancellation's
``ALL_OLD``) writes such a request in a transaction of its own (:mod:`wallet.balance_hints`).
Another server's writes make the hint wrong either way; these tests drive that with two stores on
one table, over HTTP, and check the answers, the transactions sent, and the ledger.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from support.dynamodb_faults import ScriptedDynamoDB
from support.store_calls import create_wallets, settled
from support.wallet_table import assert_chains

from contracts import api_metrics as metrics
from contracts.settings import Settings
from contracts.wallets_table import Attr
from wallet.commands import Deposit, Transfer
from wallet.dynamodb import DynamoDBClient, DynamoDBTransportError
from wallet.errors import InsufficientFundsError, OutcomeUnknownError
from wallet.store import RetryPolicy, WalletStore

pytestmark = pytest.mark.stack


def _store(settings: Settings) -> tuple[WalletStore, ScriptedDynamoDB]:
    """A store with one transaction in flight at most, so requests behind it form a group."""
    client = ScriptedDynamoDB(DynamoDBClient(settings.region))
    return WalletStore(settings.replace(writes_in_flight=1), dynamodb=cast(DynamoDBClient, client)), client


def test_a_debit_beyond_the_hinted_balance_is_written_alone_and_cancels_no_group(settings: Settings) -> None:
    store, client = _store(settings)

    async def scenario() -> tuple[list[str], list[Any]]:
        # GIVEN wallets this store created and funded: it knows their balances
        a, b, c, d, e = await create_wallets(store, 5)
        await store.execute(Deposit(a, 10, "fund-a"))
        await store.execute(Deposit(c, 10, "fund-c"))
        # WHEN, behind a transaction in flight, a group forms with a debit beyond a's 10 in it
        return [a, b, c, d, e], await settled(
            store.execute(Deposit(e, 1, "first")),
            store.execute(Transfer(c, d, 3, "t1")),
            store.execute(Transfer(a, b, 1_000, "beyond")),
            store.execute(Deposit(d, 1, "d1")),
            store.execute(Transfer(d, c, 2, "t2")),
            store.execute(Transfer(a, b, 1, "later")),
        )

    wallets, outcomes = asyncio.run(scenario())

    # THEN the debit is refused (409) and every other request applied
    assert outcomes[:2] == ["applied", "applied"]
    assert isinstance(outcomes[2], InsufficientFundsError)
    assert outcomes[3:] == ["applied"] * 3
    # AND the group left without it, and was written once: the refusal cost it nothing; the debit
    # went alone, and the request behind it on the same wallets after it
    assert client.writes[-4:] == [["first"], ["t1", "d1", "t2"], ["beyond"], ["later"]]
    counts = store.telemetry.snapshot()
    assert counts[metrics.HINTED_SINGLES] == 1
    assert (counts[metrics.GROUP_SPLITS], counts[metrics.GROUP_REFUSALS], counts[metrics.RETRIES]) == (
        0,
        0,
        0,
    )
    # AND the ledger is serial execution's
    table = assert_chains(settings, wallets)
    a, b, c, d, e = wallets
    assert {w: table.wallets[w][Attr.BALANCE] for w in wallets} == {a: 9, b: 1, c: 9, d: 2, e: 1}


def test_a_hint_too_low_costs_one_request_written_alone_then_the_wallet_is_forgotten(
    settings: Settings,
) -> None:
    store, client = _store(settings)
    other_server = WalletStore(settings)

    async def scenario() -> tuple[list[str], list[Any]]:
        # GIVEN a wallet this store created (hint 0) that another server funded
        a, b, c = await create_wallets(store, 3)
        await other_server.execute(Deposit(a, 50, "fund"))
        first = await settled(
            store.execute(Deposit(c, 1, "first")),
            store.execute(Transfer(a, b, 20, "t1")),
            store.execute(Deposit(b, 1, "d1")),
        )
        # (then, with the hint gone, two debits of a wait behind a transaction in flight)
        second = await settled(
            store.execute(Deposit(c, 1, "second")),
            store.execute(Transfer(a, b, 1, "t2")),
            store.execute(Transfer(a, b, 1, "t3")),
        )
        return [a, b, c], first + second

    wallets, outcomes = asyncio.run(scenario())

    # THEN every request applied: a hint never answers a request
    assert outcomes == ["applied"] * 6
    # AND the debit the hint called short went alone (d1, on b, waited behind it), committed, and
    # so proved the hint wrong: a's next debits join a group again
    assert client.writes[-5:] == [["first"], ["t1"], ["d1"], ["second"], ["t2", "t3"]]
    counts = store.telemetry.snapshot()
    assert (counts[metrics.HINTED_SINGLES], counts[metrics.HINT_MISSES]) == (1, 1)
    table = assert_chains(settings, wallets)
    a, b, c = wallets
    assert {w: table.wallets[w][Attr.BALANCE] for w in wallets} == {a: 28, b: 23, c: 2}


def test_a_hint_too_high_is_set_right_by_the_cancellation_it_meets(settings: Settings) -> None:
    store, client = _store(settings)
    other_server = WalletStore(settings)

    async def scenario() -> tuple[list[str], list[Any]]:
        # GIVEN a wallet this store funded with 100 (hint 100) that another server then drew 95 from
        a, b, c = await create_wallets(store, 3)
        await store.execute(Deposit(a, 100, "fund"))
        await other_server.execute(Transfer(a, b, 95, "elsewhere"))
        # WHEN a debit of 50 joins a group (the hint says it fits)
        first = await settled(
            store.execute(Deposit(c, 1, "first")),
            store.execute(Transfer(a, b, 50, "t1")),
            store.execute(Deposit(c, 1, "d1")),
        )
        # AND later another debit of 50 arrives behind a transaction in flight
        second = await settled(
            store.execute(Deposit(c, 1, "second")),
            store.execute(Deposit(c, 1, "d2")),
            store.execute(Transfer(a, b, 50, "t2")),
        )
        return [a, b, c], first + second

    wallets, outcomes = asyncio.run(scenario())

    # THEN both debits are refused, everything else applied
    assert [outcomes[index] for index in (0, 2, 3, 4)] == ["applied"] * 4
    assert isinstance(outcomes[1], InsufficientFundsError)
    assert isinstance(outcomes[5], InsufficientFundsError)
    # AND the first, in a group, was decided from the group's reasons (one extra round trip for
    # d1), which taught the store a's balance (5): the second went alone, cancelling nothing
    assert client.writes[-6:] == [["first"], ["t1", "d1"], ["d1"], ["second"], ["d2"], ["t2"]]
    counts = store.telemetry.snapshot()
    assert (counts[metrics.GROUP_REFUSALS], counts[metrics.HINTED_SINGLES]) == (1, 1)
    table = assert_chains(settings, wallets)
    a, b, c = wallets
    assert {w: table.wallets[w][Attr.BALANCE] for w in wallets} == {a: 5, b: 95, c: 4}


class _AnswerLost(ScriptedDynamoDB):
    """Commits the chosen nonce's writes on DynamoDB Local, then loses every answer of them."""

    def __init__(self, client: DynamoDBClient, nonce: str) -> None:
        super().__init__(client)
        self.nonce = nonce

    async def call(
        self, operation: str, payload: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        answer = await super().call(operation, payload, timeout=timeout)
        if self.writes and self.writes[-1] == [self.nonce] and operation == "TransactWriteItems":
            raise DynamoDBTransportError("connection reset after the request was sent", sent=True)
        return answer


def test_a_write_of_unknown_outcome_leaves_its_wallets_without_a_hint(settings: Settings) -> None:
    client = _AnswerLost(DynamoDBClient(settings.region), "lost")
    store = WalletStore(
        settings.replace(writes_in_flight=1),
        dynamodb=cast(DynamoDBClient, client),
        retry=RetryPolicy(base_delay=0.001, max_delay=0.002),
    )

    async def scenario() -> list[Any]:
        # GIVEN wallets this store created (hints 0), and a deposit whose answers are all lost
        a, b, c = await create_wallets(store, 3)
        lost = await settled(store.execute(Deposit(a, 100, "lost")))
        # WHEN a debit of a arrives in a group behind a transaction in flight
        later = await settled(
            store.execute(Deposit(c, 1, "first")),
            store.execute(Transfer(a, b, 60, "t1")),
            store.execute(Deposit(b, 1, "d1")),
        )
        return lost + later

    outcomes = asyncio.run(scenario())

    # THEN the deposit's outcome was unknown to the store (it did commit: the debit applies)
    assert isinstance(outcomes[0], OutcomeUnknownError)
    assert outcomes[1:] == ["applied"] * 3
    # AND a's hint was dropped, not kept at 0: the debit joined the group instead of going alone
    assert client.writes[-2:] == [["first"], ["t1", "d1"]]
    assert store.telemetry.snapshot()[metrics.HINTED_SINGLES] == 0
