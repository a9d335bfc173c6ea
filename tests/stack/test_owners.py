"""Every wallet has an owner (issue 44, point 1): the person who created it, or whom a service named.

The API runs as deployed behind VPC Lattice (the caller map, the session rule); each wallet's
owner is read back from DynamoDB Local, and a refused creation is checked to have written nothing.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest
from support.lattice_callers import PERSON, SERVICE, caller, role_arn
from support.wallet_http import Api, error_of, serve

from contracts.caller_permissions import CallerPermissions
from contracts.settings import DEFAULT_PRINCIPAL, Settings
from contracts.wallets_table import Attr

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
