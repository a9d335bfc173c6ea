"""The idempotency window: a nonce is remembered for the window, to the second, across TTL deletions.

The server's clock is the test's (a store with an injected clock): the hot TTL and the window are
crossed by moving it, not by waiting. DynamoDB Local does not run TTL, so the hot transaction item
is deleted the way TTL deletes it (a DeleteItem once its ``expires_at`` has passed); the
idempotency record is left in place past its window, as TTL may leave it for days, and must count
as gone all the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import boto3
import pytest
from support.wallet_http import Api, error_of, serve

from contracts.idempotency_table import idempotency_key
from contracts.settings import Settings
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


def _delete_as_ttl_would(settings: Settings, key: str, now_s: int) -> None:
    table = boto3.resource("dynamodb", region_name=settings.region).Table(settings.table)
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
        record = api.table().records[idempotency_key(payer, "pay")]
        window_end = record[Attr.EXPIRES_AT]
        assert window_end * 1000 - record[Attr.CREATED_AT] in range(WINDOW * 1000, WINDOW * 1000 + 1000)

        # WHEN the hot window passes and TTL deletes the hot transaction item
        clock.to(window_end - WINDOW + HOT_TTL + 1)
        _delete_as_ttl_would(settings, transaction_key(payer, "pay"), clock() // 1000)
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
        assert idempotency_key(payer, "pay") in api.table().records
        # THEN the nonce is forgotten on time: no outcome, and the same request is a new one
        assert _receipt(api, payer, "pay")[0] == 404
        again = api.transfer(payer, payee, 100, "pay")
        assert again.status_code == 204
        assert "Idempotent-Replayed" not in again.headers
        assert again.headers["Transaction-Id"] != txn_id
        assert api.balance(payer).json() == {"balance": "800"}
        # AND the record now remembers the new request for a new window
        assert _receipt(api, payer, "pay")[1]["transaction_id"] == again.headers["Transaction-Id"]


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
