"""Group commits on DynamoDB Local: requests waiting on a busy process leave as one transaction.

The store keeps ``writes_in_flight`` TransactWriteItems in flight; requests arriving meanwhile are
written together in the next one (:mod:`wallet.commit_queue`), each wallet they share updated once
with all its entries. These tests drive one store with concurrent requests against DynamoDB Local
over HTTP and check what a client and the lake see: every request gets the answer it would have got
alone, and the table's stream gives every entry exactly once, versions 1..N, created_at strictly
increasing, balances exact.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.store_calls import create_wallets, settled
from support.wallet_table import assert_chains

from contracts import api_metrics as metrics
from contracts.settings import Settings
from contracts.wallets_table import Attr
from wallet.commands import Deposit, Transfer
from wallet.errors import IdempotencyKeyReusedError, InsufficientFundsError, WalletNotFoundError
from wallet.store import WalletStore

pytestmark = pytest.mark.stack


def test_requests_waiting_on_a_busy_process_commit_as_one_transaction(settings: Settings) -> None:
    store = WalletStore(settings.replace(writes_in_flight=1))

    async def scenario() -> tuple[list[str], list[Any]]:
        a, b, c = await create_wallets(store, 3)
        await store.execute(Deposit(a, 100, "fund"))
        # GIVEN one transaction in flight (the first request) and nine more arriving meanwhile,
        # most of them on the same wallets
        outcomes = await settled(
            store.execute(Deposit(c, 1, "first")),
            store.execute(Transfer(a, b, 30, "t1")),
            store.execute(Transfer(b, c, 20, "t2")),
            store.execute(Transfer(a, c, 30, "t3")),
            store.execute(Deposit(b, 7, "d1")),
            store.execute(Transfer(c, a, 40, "t4")),
            store.execute(Transfer(b, a, 17, "t5")),
            store.execute(Deposit(a, 3, "d2")),
            store.execute(Transfer(a, b, 1, "t6")),
            store.execute(Deposit(c, 2, "d3")),
        )
        return [a, b, c], outcomes

    wallets, outcomes = asyncio.run(scenario())

    # THEN every request applied, the nine in one transaction
    assert outcomes == ["applied"] * 10
    counts = store.telemetry.snapshot()
    assert (
        counts[metrics.GROUP_COMMITS],
        counts[metrics.GROUPED_REQUESTS],
        counts[metrics.GROUP_SPLITS],
    ) == (
        1,
        9,
        0,
    )
    # AND the wallets hold what serial execution gives: a 100-30-30+40+17+3-1 = 99,
    # b 30-20+7-17+1 = 1, c 1+20+30-40+2 = 13
    table = assert_chains(settings, wallets)
    a, b, c = wallets
    assert {w: table.wallets[w][Attr.BALANCE] for w in wallets} == {a: 99, b: 1, c: 13}
    assert {w: table.wallets[w][Attr.VERSION] for w in wallets} == {a: 7, b: 5, c: 5}

    # AND per wallet the group's entries were stamped one after another, in arrival order (time
    # follows version on each wallet, so this is also the order of their versions)
    def stamped(wallet_id: str) -> list[str]:
        touching = [
            t for t in table.transactions if wallet_id in (t[Attr.WALLET_ID], t.get(Attr.TO_WALLET_ID))
        ]
        return [t[Attr.NONCE] for t in sorted(touching, key=lambda t: t[Attr.CREATED_AT])]

    assert stamped(a) == ["fund", "t1", "t3", "t4", "t5", "d2", "t6"]
    assert stamped(b) == ["t1", "t2", "d1", "t5", "t6"]
    assert stamped(c) == ["first", "t2", "t3", "t4", "d3"]


def test_a_cancelled_group_answers_each_request_as_it_would_be_answered_alone(settings: Settings) -> None:
    store = WalletStore(settings.replace(writes_in_flight=1))

    async def scenario() -> tuple[list[str], list[Any]]:
        a, b, c = await create_wallets(store, 3)
        await store.execute(Deposit(a, 10, "fund"))
        await store.execute(Deposit(b, 5, "used"))
        # GIVEN one transaction in flight and, waiting behind it, a group in which one transfer
        # overdraws, one wallet does not exist, one nonce is replayed and one reused
        return [a, b, c], await settled(
            store.execute(Deposit(c, 1, "first")),
            store.execute(Transfer(a, b, 6, "t1")),
            store.execute(Transfer(a, b, 6, "t2")),
            store.execute(Deposit("no-such-wallet", 1, "x")),
            store.execute(Deposit(b, 5, "used")),
            store.execute(Deposit(b, 6, "used")),
            store.execute(Transfer(b, c, 2, "t3")),
        )

    wallets, outcomes = asyncio.run(scenario())

    # THEN each request got the answer it gets alone
    assert outcomes[:2] == ["applied", "applied"]
    assert isinstance(outcomes[2], InsufficientFundsError)
    assert isinstance(outcomes[3], WalletNotFoundError)
    assert outcomes[4] == "replayed"
    assert isinstance(outcomes[5], IdempotencyKeyReusedError)
    assert outcomes[6] == "applied"
    # (no group was split: each cancellation named the requests it refused, which left their
    # group; the replay was answered from this server's memory of the nonce and the reused
    # nonce from the nonce's record)
    counts = store.telemetry.snapshot()
    assert counts[metrics.GROUP_SPLITS] == 0
    # AND only the applied requests moved money, each entry once in the lake
    table = assert_chains(settings, wallets)
    a, b, c = wallets
    assert {w: table.wallets[w][Attr.BALANCE] for w in wallets} == {a: 4, b: 9, c: 3}
    assert sorted(txn[Attr.NONCE] for txn in table.transactions) == sorted(
        ["fund", "used", "first", "t1", "t3"]
    )
