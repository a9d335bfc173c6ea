"""Every wallet has an owner (issue 44, point 1): the person who created it, or whom a service named.

The API runs as deployed behind VPC Lattice (the caller map, the session rule); each wallet's
owner is read back from DynamoDB Local, and a refused creation is checked to have written nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.lattice_callers import PERSON, SERVICE, caller, role_arn
from support.stream_records import poll_until
from support.wallet_http import Api, error_of, serve

from contracts import api_metrics
from contracts.caller_permissions import CallerPermissions
from contracts.settings import DEFAULT_PRINCIPAL, Settings
from contracts.wallets_table import Attr
from wallet.commands import CreateWallet
from wallet.store import WalletStore

pytestmark = pytest.mark.stack

PERMISSIONS = CallerPermissions.parse(
    f"{role_arn('payments')}=create_wallet+transfer+read,{role_arn('onboarding')}=create_wallet:any+read"
)


@pytest.fixture
def api(settings: Settings) -> Iterator[Api]:
    deployed = settings.replace(
        trust_front="lattice",
        lattice_service_arn=SERVICE,
        caller_permissions=PERMISSIONS,
        caller_session_pattern=PERSON,
        admin_routes=False,
    )
    with serve(deployed) as served:
        yield served


def test_a_wallet_is_owned_by_the_person_whose_session_created_it(api: Api) -> None:
    wallet = api.create(headers=caller("payments", "ann.lee@example.com"))
    assert api.table().wallets[wallet][Attr.OWNER] == "ann.lee@example.com"


def test_a_service_granted_create_wallet_any_opens_a_wallet_for_the_owner_it_names(api: Api) -> None:
    created = api.call(
        "POST",
        "/api/v1/wallets/",
        {"user_id": str(uuid.uuid4()), "owner": "bob.jones@example.com"},
        headers=caller("onboarding", "carol.white@example.com"),
    )
    assert created.status_code == 201
    assert api.table().wallets[created.json()["id"]][Attr.OWNER] == "bob.jones@example.com"


def test_naming_another_owner_without_create_wallet_any_is_403_and_writes_nothing(api: Api) -> None:
    before = api.table()
    refused = api.call(
        "POST",
        "/api/v1/wallets/",
        {"user_id": str(uuid.uuid4()), "owner": "bob.jones@example.com"},
        headers=caller("payments", "ann.lee@example.com"),
    )
    assert error_of(refused) == (403, "owner_not_permitted")
    assert api.table() == before
    # naming oneself is no other owner
    mine = api.call(
        "POST",
        "/api/v1/wallets/",
        {"user_id": str(uuid.uuid4()), "owner": "ann.lee@example.com"},
        headers=caller("payments", "ann.lee@example.com"),
    )
    assert mine.status_code == 201


def test_in_local_mode_wallets_are_the_default_principals_unless_the_body_names_an_owner(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="wallet.service"), serve(settings) as local:
        mine = local.create()
        named = local.call("POST", "/api/v1/wallets/", {"user_id": str(uuid.uuid4()), "owner": "demo-user"})
        wallets = local.table().wallets
    assert wallets[mine][Attr.OWNER] == DEFAULT_PRINCIPAL
    assert wallets[named.json()["id"]][Attr.OWNER] == "demo-user"
    # AND the server said so when it started: its banner names local mode and what it leaves out
    assert any("event=local_mode" in line and "no caller map" in line for line in caplog.messages)


# --- object-level authorization: the reviewer's requests (issue 44, point 1) --------------------

OBJECT_PERMISSIONS = CallerPermissions.parse(
    f"{role_arn('customers')}=create_wallet+transfer+read,"
    f"{role_arn('treasury')}=deposit:any+read,"
    f"{role_arn('payments')}=transfer:any+read:any"
)
ANN, BOB = "ann.lee@example.com", "bob.jones@example.com"


@pytest.fixture
def bank(settings: Settings, tmp_path: Path) -> Iterator[tuple[Api, WalletStore]]:
    deployed = settings.replace(
        trust_front="lattice",
        lattice_service_arn=SERVICE,
        caller_permissions=OBJECT_PERMISSIONS,
        caller_session_pattern=PERSON,
        admin_routes=False,
        audit_log=str(tmp_path / "audit.jsonl"),
    )
    store = WalletStore(deployed)
    with serve(deployed, store) as served:
        yield served, store


def _fund(api: Api, wallet: str, amount: int, nonce: str) -> None:
    funded = api.call(
        "PUT",
        f"/api/v1/wallets/{wallet}/deposit/",
        {"amount": str(amount), "nonce": nonce},
        headers=caller("treasury", "tess.cash@example.com"),
    )
    assert funded.status_code == 204, funded.text


def _audit(api: Api, until: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
    """The audit lines once ``until`` holds: a line is written after its answer is sent."""
    assert api.settings.audit_log is not None
    log = Path(api.settings.audit_log)

    def lines() -> list[dict[str, Any]] | None:
        found = [json.loads(line) for line in log.read_text().splitlines()]
        return found if until(found) else None

    found: list[dict[str, Any]] = poll_until(lines, timeout=10, interval=0.05, what="the audit lines")
    return found


def test_a_person_in_a_transfer_role_can_neither_read_nor_empty_another_customers_wallet(
    bank: tuple[Api, WalletStore],
) -> None:
    api, store = bank
    # GIVEN Bob's wallet with 1,000 USD and Ann's own wallet, both customers of the same role
    bobs = api.create(headers=caller("customers", BOB))
    anns = api.create(headers=caller("customers", ANN))
    _fund(api, bobs, 1_000_000_000, "fund-bob")
    before = api.table()
    # WHEN Ann reads Bob's balance and moves all of it into her own wallet
    read = api.call("GET", f"/api/v1/wallets/{bobs}/balance", headers=caller("customers", ANN))
    moved = api.call(
        "PUT",
        f"/api/v1/wallets/{bobs}/transfer/{anns}/",
        {"amount": "1000000000", "nonce": "take-it"},
        headers=caller("customers", ANN),
    )
    # THEN both are refused as not hers, nothing was written, and each was counted
    assert error_of(read) == (403, "not_wallet_owner")
    assert error_of(moved) == (403, "not_wallet_owner")
    assert api.table() == before
    assert store.telemetry.totals()[api_metrics.NOT_OWNER] == 2
    # AND the audit lines say whose wallet it was
    lines = _audit(api, until=lambda found: sum(line["refusal"] == "not_wallet_owner" for line in found) == 2)
    refused = [line for line in lines if line["refusal"] == "not_wallet_owner"]
    assert [(line["operation"], line["walletOwner"]) for line in refused] == [
        ("read", BOB),
        ("transfer", BOB),
    ]


def test_an_owner_reads_and_moves_their_own_wallet_to_a_payee_not_theirs(
    bank: tuple[Api, WalletStore],
) -> None:
    api, _ = bank
    anns = api.create(headers=caller("customers", ANN))
    bobs = api.create(headers=caller("customers", BOB))
    _fund(api, anns, 500, "fund-ann")
    paid = api.call(
        "PUT",
        f"/api/v1/wallets/{anns}/transfer/{bobs}/",
        {"amount": "200", "nonce": "rent"},
        headers=caller("customers", ANN),
    )
    assert paid.status_code == 204
    balance = api.call("GET", f"/api/v1/wallets/{anns}/balance", headers=caller("customers", ANN))
    assert balance.json() == {"balance": "300"}
    assert api.table().wallets[bobs][Attr.BALANCE] == 200


def test_a_role_granted_any_wallet_acts_for_its_owner_and_the_audit_line_names_the_owner(
    bank: tuple[Api, WalletStore],
) -> None:
    api, _ = bank
    anns = api.create(headers=caller("customers", ANN))
    bobs = api.create(headers=caller("customers", BOB))
    _fund(api, anns, 500, "fund-ann")
    # WHEN the payments service (transfer:any, read:any) moves Ann's money and reads her balance
    paid = api.call(
        "PUT",
        f"/api/v1/wallets/{anns}/transfer/{bobs}/",
        {"amount": "100", "nonce": "invoice-7"},
        headers=caller("payments", "pay.bot@example.com"),
    )
    read = api.call(
        "GET", f"/api/v1/wallets/{anns}/balance", headers=caller("payments", "pay.bot@example.com")
    )
    assert (paid.status_code, read.json()) == (204, {"balance": "400"})
    # THEN its lines name the owner it acted for
    lines = _audit(api, until=lambda found: bool(found) and found[-1]["operation"] == "read")[-2:]
    assert [(line["operation"], line["walletOwner"], line["responseCode"]) for line in lines] == [
        ("transfer", ANN, 204),
        ("read", ANN, 200),
    ]


def test_a_wallet_with_no_owner_is_only_for_roles_granted_any_wallet(bank: tuple[Api, WalletStore]) -> None:
    api, _ = bank
    # GIVEN a wallet created before owners existed (no owner attribute), by a store of its own

    async def create_legacy() -> str:
        store = WalletStore(api.settings)
        try:
            wallet, _ = await store.create_wallet(CreateWallet(str(uuid.uuid4())))
        finally:
            store.client.close()
        return wallet

    legacy = asyncio.run(create_legacy())
    assert Attr.OWNER not in api.table().wallets[legacy]
    # THEN a customer may not read it; the payments service may
    mine = api.call("GET", f"/api/v1/wallets/{legacy}/balance", headers=caller("customers", ANN))
    service = api.call(
        "GET", f"/api/v1/wallets/{legacy}/balance", headers=caller("payments", "pay.bot@example.com")
    )
    assert error_of(mine) == (403, "not_wallet_owner")
    assert service.json() == {"balance": "0"}


def test_me_lists_only_the_callers_own_wallets_both_spellings_at_once(bank: tuple[Api, WalletStore]) -> None:
    # GIVEN Ann's two wallets and Bob's one; seed 000's `me/` (issue 44, point 6)
    api, _ = bank
    anns = [api.create(headers=caller("customers", ANN)) for _ in range(2)]
    bobs = api.create(headers=caller("customers", BOB))
    for path in ("/api/v1/wallets/me/", "/api/v1/wallets/me"):
        # THEN each person's `me` lists their wallets only, oldest first, at once (a consistent
        # Query of the owners table), the oldest as seed 000's `wallet`
        ann = api.call("GET", path, headers=caller("customers", ANN)).json()
        bob = api.call("GET", path, headers=caller("customers", BOB)).json()
        assert ann == {"wallet": anns[0], "wallets": anns}
        assert bob == {"wallet": bobs, "wallets": [bobs]}
    # AND a person with no wallet gets an empty list, not another's
    nobody = api.call("GET", "/api/v1/wallets/me/", headers=caller("customers", "cy.new@example.com"))
    assert nobody.json() == {"wallet": None, "wallets": []}


def test_a_service_opening_a_wallet_for_a_customer_lists_it_in_the_customers_me_not_its_own(
    api: Api,
) -> None:
    # GIVEN the onboarding service (create_wallet:any) opens a wallet naming Ann as its owner
    opened = api.call(
        "POST",
        "/api/v1/wallets/",
        {"user_id": str(uuid.uuid4()), "owner": ANN},
        headers=caller("onboarding", "on.board@example.com"),
    )
    assert opened.status_code == 201
    wallet = opened.json()["id"]
    # THEN Ann's `me` lists it and the service's own does not
    mine = api.call("GET", "/api/v1/wallets/me/", headers=caller("payments", ANN))
    assert mine.json() == {"wallet": wallet, "wallets": [wallet]}
    service = api.call("GET", "/api/v1/wallets/me/", headers=caller("onboarding", "on.board@example.com"))
    assert service.json() == {"wallet": None, "wallets": []}
