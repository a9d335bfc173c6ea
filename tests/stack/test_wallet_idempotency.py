"""Nonces: replays change nothing, reused keys are refused, refusals are judged afresh, time is monotonic."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.wallet_http import UNKNOWN, Api, error_of, serve
from support.wallet_table import assert_chains

from contracts.settings import Settings
from contracts.wallets_table import Attr
from wallet.store import WalletStore

pytestmark = pytest.mark.stack

HOUR_MS = 3_600_000


@pytest.fixture
def api(settings: Settings) -> Iterator[Api]:
    """The app on a free loopback port, reaching DynamoDB Local over HTTP."""
    with serve(settings) as client:
        yield client


def test_a_replayed_deposit_answers_204_and_changes_nothing(api: Api) -> None:
    # GIVEN a deposit that succeeded
    wallet_id = api.create()
    assert api.deposit(wallet_id, "500", "n1").status_code == 204
    before = api.table()
    # WHEN the same request arrives again (amount as an integer this time: the same request)
    replay = api.deposit(wallet_id, 500, "n1")
    # THEN it answers like the original and nothing moved
    assert replay.status_code == 204
    assert api.table() == before
    assert before.wallets[wallet_id][Attr.BALANCE] == 500


def test_a_nonce_reused_with_other_parameters_is_refused(api: Api) -> None:
    # GIVEN a deposit and a transfer that succeeded
    payer, payee, third = api.create(), api.create(), api.create()
    api.deposit(payer, 1_000, "d1")
    api.transfer(payer, payee, 100, "t1")
    before = api.table()
    # WHEN their nonces come back with different parameters
    assert error_of(api.deposit(payer, 999, "d1")) == (409, "idempotency_key_reused")
    assert error_of(api.transfer(payer, payee, 101, "t1")) == (409, "idempotency_key_reused")
    assert error_of(api.transfer(payer, third, 100, "t1")) == (409, "idempotency_key_reused")
    # deposits and transfers share the addressed wallet's nonces
    assert error_of(api.transfer(payer, payee, 1_000, "d1")) == (409, "idempotency_key_reused")
    assert error_of(api.deposit(payer, 100, "t1")) == (409, "idempotency_key_reused")
    # THEN nothing was written
    assert api.table() == before


def test_nonces_belong_to_the_addressed_wallet(api: Api) -> None:
    a, b = api.create(), api.create()
    assert api.deposit(a, 5, "same").status_code == 204
    assert api.deposit(b, 7, "same").status_code == 204
    assert len(api.table().transactions) == 2


def test_the_nonce_is_judged_before_funds(api: Api) -> None:
    # GIVEN a transfer that emptied the payer
    payer, payee = api.create(), api.create()
    api.deposit(payer, 300, "fund")
    assert api.transfer(payer, payee, 300, "all").status_code == 204
    before = api.table()
    # WHEN it is replayed, and when its nonce is reused for a bigger amount
    # THEN the replay answers 204 (not insufficient funds) and the reuse 409 idempotency_key_reused
    assert api.transfer(payer, payee, 300, "all").status_code == 204
    assert error_of(api.transfer(payer, payee, 301, "all")) == (409, "idempotency_key_reused")
    assert api.table() == before


def test_unknown_wallet_is_judged_before_the_nonce(api: Api) -> None:
    payer, payee = api.create(), api.create()
    api.deposit(payer, 300, "fund")
    api.transfer(payer, payee, 10, "t")
    assert error_of(api.transfer(payer, UNKNOWN, 10, "t")) == (
        404,
        "wallet_not_found",
    )


def test_a_declined_request_is_remembered_and_repeated_as_declined(api: Api) -> None:
    # GIVEN a transfer refused for insufficient funds (issue 35, point 7)
    payer, payee = api.create(), api.create()
    first = api.transfer(payer, payee, 50, "later")
    assert error_of(first) == (409, "insufficient_funds")
    assert "Idempotent-Replayed" not in first.headers
    assert api.table().transactions == []
    # WHEN the payer is funded and the same request is redelivered
    api.deposit(payer, 80, "fund")
    again = api.transfer(payer, payee, 50, "later")
    # THEN it gets the same refusal, replayed, and nothing moves
    assert error_of(again) == (409, "insufficient_funds")
    assert again.headers["Idempotent-Replayed"] == "true"
    assert api.balance(payer).json() == {"balance": "80"}
    # AND the same nonce with another body is a reused key
    assert error_of(api.transfer(payer, payee, 40, "later")) == (409, "idempotency_key_reused")
    # AND the lookup says it did not commit, in the one wording of every lookup's 404 (issue 44)
    lookup = api.call("GET", f"/api/v1/wallets/{payer}/transactions/later")
    unused = api.call("GET", f"/api/v1/wallets/{payer}/transactions/unused")
    assert error_of(lookup) == error_of(unused) == (404, "transaction_not_found")
    assert lookup.json()["detail"] == unused.json()["detail"].replace("'unused'", "'later'")
    # AND a new nonce is a new request
    assert api.transfer(payer, payee, 50, "later-2").status_code == 204
    assert api.balance(payer).json() == {"balance": "30"}
    assert api.balance(payee).json() == {"balance": "50"}


def test_a_declined_unknown_wallet_is_remembered_too(api: Api) -> None:
    wallet_id = api.create()
    assert error_of(api.transfer(wallet_id, UNKNOWN, 10, "x")) == (404, "wallet_not_found")
    repeat = api.transfer(wallet_id, UNKNOWN, 10, "x")
    assert (error_of(repeat), repeat.headers["Idempotent-Replayed"]) == ((404, "wallet_not_found"), "true")


def test_concurrent_duplicates_apply_once(api: Api) -> None:
    # GIVEN a wallet  WHEN 8 clients send the same deposit at the same time
    wallet_id = api.create()
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: api.deposit(wallet_id, 42, "dup").status_code, range(8)))
    # THEN every client gets 204 and the money moved once
    assert statuses == [204] * 8
    table = api.table()
    assert len(table.transactions) == 1
    assert (table.wallets[wallet_id][Attr.BALANCE], table.wallets[wallet_id][Attr.VERSION]) == (42, 1)


def test_transaction_items_expire_after_the_configured_hot_window(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(hot_ttl_seconds=90)
    with serve(settings) as api:
        wallet_id = api.create()
        api.deposit(wallet_id, 1, "n")
        (txn,) = api.table().transactions
        assert txn[Attr.EXPIRES_AT] == txn[Attr.CREATED_AT] // 1000 + 90


def test_created_at_never_runs_backwards_across_servers_with_skewed_clocks(settings: Settings) -> None:
    # GIVEN two API servers on one table, one clock an hour fast, the other an hour slow
    fast = WalletStore(settings, clock_ms=lambda: time.time_ns() // 1_000_000 + HOUR_MS)
    slow = WalletStore(settings, clock_ms=lambda: time.time_ns() // 1_000_000 - HOUR_MS)
    with serve(settings, fast) as fast_api, serve(settings, slow) as slow_api:
        payer, payee = fast_api.create(), slow_api.create()
        # WHEN writes to the same wallets alternate between them
        fast_api.deposit(payer, 1_000, "d1")
        slow_api.deposit(payer, 1_000, "d2")
        slow_api.transfer(payer, payee, 10, "t1")
        fast_api.transfer(payee, payer, 5, "t2")
        slow_api.deposit(payee, 1, "d3")
    # THEN per wallet, created_at never decreases as the version grows (the slow server's writes
    # were refused by the wallets' updated_at condition and written again at their time)
    table = assert_chains(settings, [payer, payee])
    by_nonce = {txn[Attr.NONCE]: txn[Attr.CREATED_AT] for txn in table.transactions}
    # the slow server's writes after the fast one's carry the fast one's time plus a millisecond
    # (per wallet, time strictly increases with version), not its own
    assert by_nonce["d2"] == by_nonce["d1"] + 1
    assert by_nonce["t1"] == by_nonce["d2"] + 1
    # the payee was last touched by the fast server, so the slow server's deposit follows it
    assert by_nonce["d3"] == by_nonce["t2"] + 1
    assert by_nonce["t2"] > by_nonce["t1"]
