"""The idempotency window: a nonce replays for the window, and never executes again while its record exists.

The server's clock is the test's (a store with an injected clock): the hot TTL and the window are
crossed by moving it, not by waiting. DynamoDB Local does not run TTL, so items are deleted the way
TTL deletes them (a DeleteItem once their ``expires_at`` has passed). A record past its window that
TTL has not deleted yet still guards its nonce (409 ``nonce_expired``): only the answer depends on a
server's clock, never whether money moves (issue 35, point 5: a process 21 s ahead of the others
replays, or refuses, what they replay; it never executes it again).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import boto3
import pytest
from support.wallet_http import Api, error_of, serve

from contracts.idempotency_table import TTL_MARGIN_SECONDS, WINDOW_ENDS_AT, idempotency_key
from contracts.settings import DEFAULT_PRINCIPAL, Settings
from contracts.wallets_table import Attr, transaction_key
from wallet.store import WalletStore

pytestmark = pytest.mark.stack

HOT_TTL = 60
WINDOW = 300


class Clock:
    """Epoch milliseconds, moved by the test."""

    def __init__(self) -> None:
        self.now_ms = time.time_ns() // 1_000_000

    def __call__(self) -> int:
        return self.now_ms

    def to(self, epoch_s: int) -> None:
        assert epoch_s * 1000 >= self.now_ms, "the clock only moves forward"
        self.now_ms = epoch_s * 1000


def _delete_as_ttl_would(settings: Settings, key: str, now_s: int, table_name: str | None = None) -> None:
    table = boto3.resource("dynamodb", region_name=settings.region).Table(table_name or settings.table)
    item = table.get_item(Key={Attr.PK: key}, ConsistentRead=True)["Item"]
    assert int(item[Attr.EXPIRES_AT]) <= now_s, "TTL deletes only what has expired"
    table.delete_item(Key={Attr.PK: key})


def _receipt(api: Api, wallet_id: str, nonce: str) -> tuple[int, dict[str, object]]:
    response = api.call("GET", f"/api/v1/wallets/{wallet_id}/transactions/{nonce}")
    return response.status_code, response.json()


def test_a_nonce_is_remembered_for_the_window_across_the_hot_items_deletion_and_forgotten_on_time(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(hot_ttl_seconds=HOT_TTL, idempotency_window_seconds=WINDOW)
    clock = Clock()
    with serve(settings, WalletStore(settings, clock_ms=clock)) as api:
        # GIVEN a transfer that executed
        payer, payee = api.create(), api.create()
        api.deposit(payer, 1_000, "fund")
        first = api.transfer(payer, payee, 100, "pay")
        assert first.status_code == 204
        assert "Idempotent-Replayed" not in first.headers
        txn_id = first.headers["Transaction-Id"]
        record = api.table().records[idempotency_key(payer, "pay", DEFAULT_PRINCIPAL)]
        window_end = record[WINDOW_ENDS_AT]
        assert window_end * 1000 - record[Attr.CREATED_AT] in range(WINDOW * 1000, WINDOW * 1000 + 1000)

        # WHEN the hot window passes and TTL deletes the hot transaction item
        clock.to(window_end - WINDOW + HOT_TTL + 1)
        _delete_as_ttl_would(settings, transaction_key(payer, "pay", DEFAULT_PRINCIPAL), clock() // 1000)
        assert all(txn[Attr.NONCE] != "pay" for txn in api.table().transactions)

        # THEN the same request replays its first outcome, with the header, and moves nothing
        replay = api.transfer(payer, payee, 100, "pay")
        assert replay.status_code == 204
        assert (replay.headers["Idempotent-Replayed"], replay.headers["Transaction-Id"]) == ("true", txn_id)
        # AND the same nonce with another body is refused
        assert error_of(api.transfer(payer, payee, 101, "pay")) == (409, "idempotency_key_reused")
        # AND the outcome can be asked for
        status, body = _receipt(api, payer, "pay")
        assert status == 200
        assert {k: body[k] for k in ("transaction_id", "type", "amount", "counterparty_wallet_id")} == {
            "transaction_id": txn_id,
            "type": "transfer",
            "amount": "100",
            "counterparty_wallet_id": payee,
        }
        assert api.balance(payer).json() == {"balance": "900"}

        # WHEN the clock reaches the last second of the window  THEN still remembered
        clock.to(window_end - 1)
        assert api.transfer(payer, payee, 100, "pay").headers["Idempotent-Replayed"] == "true"

        # WHEN the window ends (the record is still in the table: TTL has not got to it)
        clock.to(window_end)
        assert idempotency_key(payer, "pay", DEFAULT_PRINCIPAL) in api.table().records
        # THEN the request is not executed again: 409 nonce_expired, nothing moves
        assert error_of(api.transfer(payer, payee, 100, "pay")) == (409, "nonce_expired")
        assert api.balance(payer).json() == {"balance": "900"}
        # AND the receipt is still what the record holds
        assert _receipt(api, payer, "pay")[1]["transaction_id"] == txn_id

        # WHEN TTL deletes the record (its TTL outlives the window by the margin)
        assert record[Attr.EXPIRES_AT] == window_end + TTL_MARGIN_SECONDS
        clock.to(record[Attr.EXPIRES_AT])
        _delete_as_ttl_would(
            settings,
            idempotency_key(payer, "pay", DEFAULT_PRINCIPAL),
            clock() // 1000,
            settings.idempotency_table,
        )
        # THEN the nonce is free: the same request is a new one
        again = api.transfer(payer, payee, 100, "pay")
        assert again.status_code == 204
        assert "Idempotent-Replayed" not in again.headers
        assert again.headers["Transaction-Id"] != txn_id
        assert api.balance(payer).json() == {"balance": "800"}
        # AND the record now remembers the new request for a new window
        assert _receipt(api, payer, "pay")[1]["transaction_id"] == again.headers["Transaction-Id"]


def test_a_process_whose_clock_is_ahead_never_executes_a_nonce_the_others_replay(
    make_settings: Callable[..., Settings],
) -> None:
    # GIVEN two servers on one table, the second's clock 21 s ahead of the first's
    settings = make_settings(hot_ttl_seconds=HOT_TTL, idempotency_window_seconds=WINDOW)
    behind, ahead = Clock(), Clock()
    with (
        serve(settings, WalletStore(settings, clock_ms=behind)) as first,
        serve(settings, WalletStore(settings, clock_ms=ahead)) as second,
    ):
        payer, payee = first.create(), first.create()
        first.deposit(payer, 1_000, "fund")
        paid = first.transfer(payer, payee, 100, "pay")
        window_end = first.table().records[idempotency_key(payer, "pay", DEFAULT_PRINCIPAL)][WINDOW_ENDS_AT]
        # WHEN a retry arrives 10 s before the window's end by the first's clock, 11 s after by the second's
        behind.to(window_end - 10)
        ahead.to(window_end + 11)
        # THEN the first replays it, the second refuses it, and neither executes it again
        replay = first.transfer(payer, payee, 100, "pay")
        assert (replay.status_code, replay.headers["Transaction-Id"]) == (204, paid.headers["Transaction-Id"])
        assert error_of(second.transfer(payer, payee, 100, "pay")) == (409, "nonce_expired")
        assert first.balance(payer).json() == {"balance": "900"}


def test_an_unknown_nonce_has_no_outcome(api_settings: Settings) -> None:
    with serve(api_settings) as api:
        wallet_id = api.create()
        assert error_of(api.call("GET", f"/api/v1/wallets/{wallet_id}/transactions/never")) == (
            404,
            "transaction_not_found",
        )


@pytest.fixture
def api_settings(settings: Settings) -> Settings:
    return settings
