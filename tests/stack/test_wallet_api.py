"""Every route of the wallet API, its success and each of its errors, over HTTP on DynamoDB Local.

Each test gets a fresh table; after every request the table itself is read back, so a refused
request is shown to have written nothing. Every answer is also checked against the OpenAPI
document the server publishes (status listed, error code in that status's enum).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from support.wallet_http import UNKNOWN, Api, error_of, serve

from contracts.idempotency_table import idempotency_key
from contracts.settings import DEFAULT_PRINCIPAL, Settings
from contracts.wallets_table import Attr, transaction_key, user_key, wallet_key

pytestmark = pytest.mark.stack


@pytest.fixture
def api(settings: Settings) -> Iterator[Api]:
    """The app on a free loopback port, reaching DynamoDB Local over HTTP."""
    with serve(settings) as client:
        yield client


# ------------------------------------------------------------------------------------ create wallet


def test_create_wallet_puts_the_wallet_and_the_user_claim(api: Api) -> None:
    # GIVEN a new user  WHEN they create a wallet
    user_id = str(uuid.uuid4())
    response = api.call("POST", "/api/v1/wallets/", {"user_id": user_id})
    # THEN 201 with a new id, and exactly the wallet item and the claim are stored
    assert response.status_code == 201
    wallet_id = response.json()["id"]
    assert str(uuid.UUID(wallet_id)) == wallet_id
    table = api.table()
    # the wallet, its user's claim, and its owner's entry (the default principal's, locally)
    assert table.item_count == 3
    assert table.owned == {("local", wallet_id)}
    wallet = table.wallets[wallet_id]
    assert wallet[Attr.PK] == wallet_key(wallet_id)
    assert (wallet[Attr.USER_ID], wallet[Attr.BALANCE], wallet[Attr.VERSION]) == (user_id, 0, 0)
    assert wallet[Attr.CREATED_AT] == wallet[Attr.UPDATED_AT] > 0
    assert table.claims[user_key(user_id)][Attr.WALLET_ID] == wallet_id


def test_the_same_user_again_gets_200_and_the_same_wallet(api: Api) -> None:
    # GIVEN a user with a wallet (user id sent upper-case the first time)
    user_id = str(uuid.uuid4())
    first = api.call("POST", "/api/v1/wallets/", {"user_id": user_id.upper()})
    # WHEN the same user asks again
    again = api.call("POST", "/api/v1/wallets/", {"user_id": user_id})
    # THEN 200 with the same id and nothing new stored
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    assert api.table().item_count == 3


MALFORMED_CREATIONS: list[tuple[Any, bytes | None]] = [
    ({"user_id": "not-a-uuid"}, None),
    ({"user_id": 42}, None),
    ({}, None),
    (None, b"{not json"),
    (None, b""),
    (None, b'["user_id"]'),
]


def test_create_wallet_refuses_malformed_input_and_stores_nothing(api: Api) -> None:
    for body, raw in MALFORMED_CREATIONS:
        response = api.call("POST", "/api/v1/wallets/", body, raw=raw)
        assert error_of(response) == (422, "validation_error"), (body, raw)
    assert api.table().item_count == 0


# ------------------------------------------------------------------------------------------ deposit


def test_deposit_credits_the_wallet_and_records_the_transaction(api: Api) -> None:
    # GIVEN a wallet
    wallet_id = api.create()
    # WHEN 1 USD is deposited
    response = api.deposit(wallet_id, "1000000", "n-1")
    # THEN 204, the balance reads back, and the table holds one numbered entry
    assert response.status_code == 204
    assert response.content == b""
    assert api.balance(wallet_id).json() == {"balance": "1000000"}
    table = api.table()
    wallet = table.wallets[wallet_id]
    (txn,) = table.transactions
    assert (wallet[Attr.BALANCE], wallet[Attr.VERSION]) == (1_000_000, 1)
    assert txn[Attr.PK] == transaction_key(wallet_id, "n-1", DEFAULT_PRINCIPAL)
    assert str(uuid.UUID(txn[Attr.TXN_ID])) == txn[Attr.TXN_ID]
    assert {k: txn[k] for k in (Attr.TYPE, Attr.WALLET_ID, Attr.AMOUNT, Attr.NONCE)} == {
        Attr.TYPE: "deposit",
        Attr.WALLET_ID: wallet_id,
        Attr.AMOUNT: 1_000_000,
        Attr.NONCE: "n-1",
    }
    # the entry is recorded on the wallet item (its stream MODIFY is the ledger row), not the txn
    assert Attr.WALLET_VERSION not in txn
    assert {k: wallet[k] for k in (Attr.ENTRY_TXN_ID, Attr.ENTRY_TYPE, Attr.ENTRY_DIRECTION)} == {
        Attr.ENTRY_TXN_ID: txn[Attr.TXN_ID],
        Attr.ENTRY_TYPE: "deposit",
        Attr.ENTRY_DIRECTION: "credit",
    }
    assert (wallet[Attr.ENTRY_AMOUNT], wallet[Attr.ENTRY_NONCE]) == (1_000_000, "n-1")
    assert Attr.ENTRY_COUNTERPARTY not in wallet
    assert Attr.TO_WALLET_ID not in txn
    assert txn[Attr.CREATED_AT] == wallet[Attr.UPDATED_AT] >= wallet[Attr.CREATED_AT]
    assert txn[Attr.EXPIRES_AT] == txn[Attr.CREATED_AT] // 1000 + api.settings.hot_ttl_seconds
    assert len(txn[Attr.REQUEST_HASH]) == 64


MALFORMED_MOVEMENTS: list[Any] = [
    {"amount": 1.5, "nonce": "n"},
    {"amount": 1.0000001, "nonce": "n"},
    {"amount": "1.5", "nonce": "n"},
    {"amount": "-3", "nonce": "n"},
    {"amount": -3, "nonce": "n"},
    {"amount": "0", "nonce": "n"},
    {"amount": 0, "nonce": "n"},
    {"amount": "1e3", "nonce": "n"},
    {"amount": 1e-3, "nonce": "n"},
    {"amount": 1e16, "nonce": "n"},
    {"amount": "5", "nonce": "n", "memo": "unknown fields are refused"},
    {"amount": "5", "nonce": "n", "Amount": "5"},
    {"amount": True, "nonce": "n"},
    {"amount": str(10**15 + 1), "nonce": "n"},
    {"amount": 10**15 + 1, "nonce": "n"},
    {"amount": None, "nonce": "n"},
    {"nonce": "n"},
    {"amount": "5"},
    {"amount": "5", "nonce": ""},
    {"amount": "5", "nonce": "a" * 65},
    {"amount": "5", "nonce": "has space"},
    {"amount": "5", "nonce": "semi;colon"},
    {"amount": "5", "nonce": 12345},
    ["amount", "nonce"],
    "5",
]


def test_malformed_amounts_and_nonces_are_refused_and_store_nothing(api: Api) -> None:
    # GIVEN two wallets, one funded
    wallet_id, other = api.create(), api.create()
    api.deposit(wallet_id, 10**12, "fund")
    before = api.table()
    for body in MALFORMED_MOVEMENTS:
        # WHEN a malformed deposit or transfer arrives  THEN 422
        response = api.call("PUT", f"/api/v1/wallets/{wallet_id}/deposit/", body)
        assert error_of(response) == (422, "validation_error"), body
        response = api.call("PUT", f"/api/v1/wallets/{wallet_id}/transfer/{other}/", body)
        assert error_of(response) == (422, "validation_error"), body
    # THEN the table is exactly as before
    assert api.table() == before


def test_a_json_number_is_read_exactly_integral_values_accepted_fractions_refused(api: Api) -> None:
    # GIVEN a wallet
    wallet_id = api.create()
    path = f"/api/v1/wallets/{wallet_id}/deposit/"
    # WHEN 100.0 arrives THEN it is 100 (JSON Schema's integer), and 1e2 is the same request again
    assert api.call("PUT", path, raw=b'{"amount": 100.0, "nonce": "n"}').status_code == 204
    assert api.call("PUT", path, raw=b'{"amount": 1e2, "nonce": "n"}').status_code == 204
    assert api.balance(wallet_id).json() == {"balance": "100"}
    # AND a number that a float would round to an integer is still refused, by its written value
    before = api.table()
    for raw in (b'{"amount": 100.0000000000000001, "nonce": "m"}', b'{"amount": 1e15000, "nonce": "m"}'):
        assert error_of(api.call("PUT", path, raw=raw)) == (422, "validation_error"), raw
    assert api.table() == before


def test_the_largest_amount_and_nonce_are_accepted(api: Api) -> None:
    wallet_id = api.create()
    assert api.deposit(wallet_id, 10**15, "N" * 64).status_code == 204
    assert api.balance(wallet_id).json() == {"balance": str(10**15)}


def test_deposit_to_an_unknown_wallet_is_404_and_a_malformed_id_422(api: Api) -> None:
    assert error_of(api.deposit(UNKNOWN, "5", "n")) == (404, "wallet_not_found")
    assert error_of(api.deposit("not-a-uuid", "5", "n")) == (422, "validation_error")
    # 422 takes precedence over 404: an unknown wallet with a malformed amount
    assert error_of(api.deposit(UNKNOWN, "1.5", "n")) == (422, "validation_error")
    assert api.table().item_count == 0


# ----------------------------------------------------------------------------------------- transfer


def test_transfer_moves_money_and_numbers_both_wallets(api: Api) -> None:
    # GIVEN a funded payer and an empty payee
    payer, payee = api.create(), api.create()
    assert api.deposit(payer, 1_000, "fund").status_code == 204
    # WHEN 400 is transferred
    response = api.transfer(payer, payee, 400, "t-1")
    # THEN 204, balances moved, both wallets numbered, one transaction item, a leg on each wallet
    assert response.status_code == 204
    assert api.balance(payer).json() == {"balance": "600"}
    assert api.balance(payee).json() == {"balance": "400"}
    table = api.table()
    assert (table.wallets[payer][Attr.VERSION], table.wallets[payee][Attr.VERSION]) == (2, 1)
    txn = next(t for t in table.transactions if t[Attr.TYPE] == "transfer")
    assert txn[Attr.PK] == transaction_key(payer, "t-1", DEFAULT_PRINCIPAL)
    assert (txn[Attr.WALLET_ID], txn[Attr.TO_WALLET_ID], txn[Attr.AMOUNT]) == (payer, payee, 400)
    # each wallet item records its own leg of the entry, pointing at the other wallet
    legs = {
        wallet_id: tuple(
            table.wallets[wallet_id][k]
            for k in (Attr.ENTRY_TXN_ID, Attr.ENTRY_DIRECTION, Attr.ENTRY_AMOUNT, Attr.ENTRY_COUNTERPARTY)
        )
        for wallet_id in (payer, payee)
    }
    assert legs == {
        payer: (txn[Attr.TXN_ID], "debit", 400, payee),
        payee: (txn[Attr.TXN_ID], "credit", 400, payer),
    }
    assert (
        table.wallets[payer][Attr.UPDATED_AT] == table.wallets[payee][Attr.UPDATED_AT] == txn[Attr.CREATED_AT]
    )


def test_transfer_of_the_whole_balance_leaves_zero(api: Api) -> None:
    payer, payee = api.create(), api.create()
    api.deposit(payer, 250, "fund")
    assert api.transfer(payer, payee, "250", "all").status_code == 204
    assert api.balance(payer).json() == {"balance": "0"}


def test_transfer_refusals_move_nothing_and_keep_only_their_refusal(api: Api) -> None:
    # GIVEN two wallets, the payer holding 100
    payer, payee = api.create(), api.create()
    api.deposit(payer, 100, "fund")
    before = api.table()
    # WHEN transfers are refused for each reason, in precedence order
    assert error_of(api.transfer(payer, payer, 5, "x")) == (422, "same_wallet_transfer")
    assert error_of(api.transfer(payer, payer.upper(), 5, "x")) == (422, "same_wallet_transfer")
    assert error_of(api.transfer(payer, "not-a-uuid", 5, "x")) == (422, "validation_error")
    assert error_of(api.transfer(payer, payee, "1.5", "x")) == (422, "validation_error")
    assert error_of(api.transfer(payer, UNKNOWN, 5, "x")) == (404, "wallet_not_found")
    assert error_of(api.transfer(UNKNOWN, payee, 5, "x")) == (404, "wallet_not_found")
    assert error_of(api.transfer(payer, UNKNOWN, 10**9, "x")) == (404, "wallet_not_found")  # 404 before 409
    assert error_of(api.transfer(payer, payee, 101, "y")) == (409, "insufficient_funds")
    # THEN no wallet, claim or transaction item changed
    after = api.table()
    assert (after.wallets, after.claims, after.transactions) == (
        before.wallets,
        before.claims,
        before.transactions,
    )
    # AND only the refusals the money rules decided are kept, as declined records (422s store nothing)
    kept = {
        key: (r["outcome"], r["refusal"]) for key, r in after.records.items() if key not in before.records
    }
    assert kept == {
        idempotency_key(payer, "x", DEFAULT_PRINCIPAL): ("declined", "wallet_not_found"),
        idempotency_key(payer, "y", DEFAULT_PRINCIPAL): ("declined", "insufficient_funds"),
    }


def test_an_unknown_target_names_the_missing_wallet(api: Api) -> None:
    payer = api.create()
    response = api.transfer(payer, UNKNOWN, 5, "x")
    assert UNKNOWN in response.json()["detail"]


# ------------------------------------------------------------------------------ balance, me, health


def test_balance_errors(api: Api) -> None:
    assert error_of(api.balance(UNKNOWN)) == (404, "wallet_not_found")
    assert error_of(api.balance("nope")) == (422, "validation_error")


def test_me_lists_the_local_callers_wallets_oldest_first_in_seed_000s_field_too(api: Api) -> None:
    # GIVEN two wallets made without a trusted front (owned by the default principal, `local`)
    first, second = api.create(), api.create()
    # THEN both spellings of `me` list them, oldest first; `wallet` is seed 000's answer
    for path in ("/api/v1/wallets/me/", "/api/v1/wallets/me"):
        assert api.call("GET", path).json() == {"wallet": first, "wallets": [first, second]}


def test_health_and_metrics(api: Api) -> None:
    # GIVEN some traffic
    wallet_id = api.create()
    api.deposit(wallet_id, 5, "a")
    api.deposit(wallet_id, 5, "a")  # replay
    api.deposit(wallet_id, 6, "a")  # reused nonce
    # THEN health is ok and the counters say what happened
    assert api.call("GET", "/healthz").json() == {"status": "ok"}
    metrics = api.call("GET", "/metrics").json()
    assert metrics["requests_succeeded"] == 3
    assert metrics["requests_failed"] == 1
    assert metrics["idempotent_replays"] == 1
    assert metrics["errors_by_code"] == {"idempotency_key_reused": 1}
    assert metrics["responses_by_status"] == {"201": 1, "204": 2, "409": 1}


def test_unknown_routes_answer_json_errors(api: Api) -> None:
    response = api.http.get("/api/v1/nothing")
    assert error_of(response) == (404, "not_found")
    response = api.http.delete("/api/v1/wallets/")
    assert error_of(response) == (405, "method_not_allowed")


def test_a_method_the_route_lacks_is_405_with_allow(api: Api) -> None:
    # RFC 9110 §15.5.6: the 405 names the methods the resource has
    wallet_id = api.create()
    for method, path, allow in (
        ("TRACE", f"/api/v1/wallets/{wallet_id}/balance", "GET"),
        ("DELETE", f"/api/v1/wallets/{wallet_id}/deposit/", "PUT"),
        ("POST", f"/api/v1/wallets/{wallet_id}/transfer/{UNKNOWN}", "PUT"),
        ("PATCH", "/api/v1/wallets", "POST"),
    ):
        response = api.http.request(method, path)
        assert error_of(response) == (405, "method_not_allowed"), (method, path)
        assert set(response.headers["Allow"].split(", ")) - {"HEAD"} == {allow}, (method, path)


def test_both_spellings_of_every_route_answer_directly_and_alike(api: Api) -> None:
    # GIVEN two wallets, created once with each spelling of the collection
    payer = api.call("POST", "/api/v1/wallets/", {"user_id": str(uuid.uuid4())}).json()["id"]
    payee = api.call("POST", "/api/v1/wallets", {"user_id": str(uuid.uuid4())}).json()["id"]
    # WHEN seed 000's implementation's spelling (no slash) and its design's (slash) are both used
    for slash, nonce in (("", "a"), ("/", "b")):
        deposit = api.call("PUT", f"/api/v1/wallets/{payer}/deposit{slash}", {"amount": 10, "nonce": nonce})
        # THEN each answers itself: no redirect for the client to (not) follow
        assert deposit.status_code == 204, (slash, deposit.status_code, deposit.headers)
        transfer = api.call(
            "PUT", f"/api/v1/wallets/{payer}/transfer/{payee}{slash}", {"amount": 3, "nonce": f"t{nonce}"}
        )
        assert transfer.status_code == 204, (slash, transfer.status_code)
    # AND a replay under the other spelling is the same request (one nonce space per wallet)
    replay = api.call("PUT", f"/api/v1/wallets/{payer}/deposit", {"amount": 10, "nonce": "b"})
    assert replay.status_code == 204
    assert api.call("GET", f"/api/v1/wallets/{payer}/balance").json() == {"balance": "14"}
    assert api.call("GET", f"/api/v1/wallets/{payer}/balance/").json() == {"balance": "14"}
    assert error_of(api.call("GET", f"/api/v1/wallets/{UNKNOWN}/balance/")) == (404, "wallet_not_found")


def test_openapi_documents_every_route_with_its_statuses(api: Api) -> None:
    paths = api.openapi["paths"]
    statuses = {
        ("post", "/api/v1/wallets/"): {"200", "201", "422", "429", "401", "403", "400", "413", "500", "503"},
        ("get", "/api/v1/wallets/me/"): {"200", "400", "401", "403", "413", "429", "500", "503"},
        ("put", "/api/v1/wallets/{wallet_id}/deposit/"): {
            "204",
            "404",
            "409",
            "422",
            "429",
            "401",
            "403",
            "400",
            "413",
            "500",
            "503",
        },
        ("put", "/api/v1/wallets/{wallet_id}/transfer/{target_wallet_id}/"): {
            "204",
            "404",
            "409",
            "422",
            "429",
            "401",
            "403",
            "400",
            "413",
            "500",
            "503",
        },
        ("get", "/api/v1/wallets/{wallet_id}/balance"): {
            "200",
            "404",
            "422",
            "429",
            "401",
            "403",
            "400",
            "413",
            "500",
            "503",
        },
        ("get", "/api/v1/wallets/{wallet_id}/transactions/{nonce}"): {
            "200",
            "404",
            "409",
            "422",
            "429",
            "401",
            "403",
            "400",
            "413",
            "500",
            "503",
        },
        ("get", "/healthz"): {"200"},
        ("get", "/metrics"): {"200"},
    }
    for (method, path), expected in statuses.items():
        assert set(paths[path][method]["responses"]) == expected, (method, path)
        # the other spelling of each wallet route is documented alike
        if path.startswith("/api/v1/wallets") and "/transactions/" not in path:
            other = path.removesuffix("/") if path.endswith("/") else f"{path}/"
            assert paths[other][method]["responses"] == paths[path][method]["responses"], other
    # request bodies refuse fields they do not declare, as the server does
    for path in ("/api/v1/wallets/", "/api/v1/wallets/{wallet_id}/deposit"):
        method = "post" if path.endswith("wallets/") else "put"
        schema = paths[path][method]["requestBody"]["content"]["application/json"]["schema"]
        assert schema["additionalProperties"] is False
    transfer = paths["/api/v1/wallets/{wallet_id}/transfer/{target_wallet_id}/"]["put"]
    body = transfer["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["amount", "nonce"]
    assert transfer["responses"]["409"]["content"]["application/json"]["schema"]["properties"]["error"][
        "enum"
    ] == [
        "idempotency_key_reused",
        "nonce_expired",
        "nonce_voided",
        "insufficient_funds",
        "balance_limit_exceeded",
    ]
    lookup = paths["/api/v1/wallets/{wallet_id}/transactions/{nonce}"]["get"]["responses"]["409"]
    assert lookup["content"]["application/json"]["schema"]["properties"]["error"]["enum"] == [
        "outcome_pending"
    ]
    assert set(lookup["headers"]) == {"Retry-After"}
    description = api.openapi["info"]["description"]
    assert "2 days" in description
    assert "WALLETLAKE_IDEMPOTENCY_WINDOW_SECONDS" in description
    # every write's 204 names its transaction; an unknown outcome is its own 503 code
    assert set(transfer["responses"]["204"]["headers"]) == {"Transaction-Id", "Idempotent-Replayed"}
    assert transfer["responses"]["503"]["content"]["application/json"]["schema"]["properties"]["error"][
        "enum"
    ] == ["unavailable", "outcome_unknown"]
