"""Authorization decided on what runs: the security reviewer's requests of issue 44, point 2, as sent.

A trailing ``%0A`` once made the permission check find no operation (and let the caller through)
while the router still ran the handler. Now the server takes every request's route from one table
(``contracts.caller_permissions.ROUTES``), the check judges the operation that route declares, a
named caller on a path that is no route is refused, and a path with a control character is 400
before anything routes. Each request is checked against what DynamoDB Local holds afterwards.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.lattice_callers import PERSON, SERVICE, caller, role_arn
from support.raw_http import RawAnswer, send
from support.wallet_http import Api, serve

from contracts import api_metrics
from contracts.caller_permissions import CallerPermissions
from contracts.settings import Settings
from wallet.store import WalletStore

pytestmark = pytest.mark.stack

PERMISSIONS = CallerPermissions.parse(
    f"{role_arn('treasury')}=deposit+read,"
    f"{role_arn('cashier')}=deposit,"
    f"{role_arn('payments')}=create_wallet+transfer+read,"
    f"{role_arn('support')}=read"
)
MOVEMENT = json.dumps({"amount": "1000000000", "nonce": "reviewer-1"}).encode()


@dataclasses.dataclass
class World:
    """The deployed API with two wallets, the first holding 100 USD."""

    api: Api
    store: WalletStore
    payer: str
    payee: str

    def send(self, method: str, target: str, role: str, body: bytes = b"") -> RawAnswer:
        """The request with ``target`` as typed, from a session of ``role``."""
        headers = {**caller(role), "content-type": "application/json"}
        return send(str(self.api.http.base_url), method, target.encode("latin-1"), headers, body)


@pytest.fixture
def deployed(settings: Settings, tmp_path: Path) -> Settings:
    """The settings the deployed tasks run with (cdk/walletlake_cdk: front_environment)."""
    return settings.replace(
        trust_front="lattice",
        lattice_service_arn=SERVICE,
        caller_permissions=PERMISSIONS,
        caller_session_pattern=PERSON,
        admin_routes=False,
        audit_log=str(tmp_path / "audit.jsonl"),
    )


@pytest.fixture
def world(deployed: Settings) -> Iterator[World]:
    store = WalletStore(deployed)
    with serve(deployed, store) as api:
        payer = api.create(headers=caller("payments"))
        payee = api.create(headers=caller("payments"))
        funded = api.http.put(
            f"/api/v1/wallets/{payer}/deposit/",
            json={"amount": "100000000", "nonce": "fund"},
            headers=caller("treasury"),
        )
        assert funded.status_code == 204
        yield World(api, store, payer, payee)


def audit_lines(settings: Settings) -> list[dict[str, object]]:
    assert settings.audit_log is not None
    return [json.loads(line) for line in Path(settings.audit_log).read_text().splitlines()]


def test_a_read_only_role_depositing_through_deposit_with_an_encoded_newline_is_400_and_writes_nothing(
    world: World,
) -> None:
    before = world.api.table()
    # WHEN the read-only role deposits 1,000 USD through `…/deposit%0A`, then through `…/deposit/`
    newline = world.send("PUT", f"/api/v1/wallets/{world.payer}/deposit%0A", "support", MOVEMENT)
    slash = world.send("PUT", f"/api/v1/wallets/{world.payer}/deposit/", "support", MOVEMENT)
    # THEN the first is no path of the API, the second no operation of the role; nothing was written
    assert (newline.status, newline.error) == (400, "invalid_path")
    assert (slash.status, slash.error) == (403, "operation_not_permitted")
    assert world.api.table() == before


def test_a_deposit_only_role_transferring_with_an_encoded_newline_after_the_payee_is_400_and_writes_nothing(
    world: World,
) -> None:
    before = world.api.table()
    answer = world.send(
        "PUT", f"/api/v1/wallets/{world.payer}/transfer/{world.payee}/%0A", "cashier", MOVEMENT
    )
    assert (answer.status, answer.error) == (400, "invalid_path")
    assert world.api.table() == before


def test_a_deposit_only_role_creating_a_wallet_with_an_encoded_newline_is_400_and_writes_nothing(
    world: World,
) -> None:
    before = world.api.table()
    body = json.dumps({"user_id": str(uuid.uuid4())}).encode()
    answer = world.send("POST", "/api/v1/wallets%0A", "cashier", body)
    assert (answer.status, answer.error) == (400, "invalid_path")
    assert world.api.table() == before


@pytest.mark.parametrize("character", ["%0D", "%00", "%09", "%7F", "%C2%85", "%0d%0a"])
def test_any_encoded_control_character_anywhere_in_the_path_is_400_and_writes_nothing(
    world: World, character: str
) -> None:
    before = world.api.table()
    answers = [
        world.send("PUT", f"/api/v1/wallets/{world.payer}/deposit{character}", "treasury", MOVEMENT),
        world.send("PUT", f"/api/v1/wallets/{world.payer}{character}/deposit", "treasury", MOVEMENT),
        world.send("GET", f"/api/v1/wallets/{world.payer}/balance{character}/", "support"),
    ]
    assert {(answer.status, answer.error) for answer in answers} == {(400, "invalid_path")}
    assert world.api.table() == before


def test_a_raw_control_character_in_the_request_line_is_400_and_writes_nothing(world: World) -> None:
    before = world.api.table()
    answer = world.send("PUT", f"/api/v1/wallets/{world.payer}/deposit\x01", "support", MOVEMENT)
    # the HTTP parser or the path guard refuses it: either way a 400 and nothing runs
    assert answer.status == 400
    assert world.api.table() == before


def test_a_named_caller_on_a_path_that_is_no_operation_is_refused_counted_and_on_record(
    world: World,
) -> None:
    before = world.api.table()
    forbidden = world.store.telemetry.totals()[api_metrics.FORBIDDEN]
    # WHEN named callers send requests the route table has no row for
    answers = [
        world.send("PUT", f"/api/v1/wallets/{world.payer}/balance", "support", MOVEMENT),
        world.send("GET", f"/api/v1/wallets/{world.payer}/deposit", "treasury"),
        world.send("PUT", f"/api/v1/wallets/{world.payer}/deposit%250A", "treasury", MOVEMENT),
        world.send("PUT", f"/api/v1/wallets/{world.payer}/deposit/extra", "treasury", MOVEMENT),
        world.send("GET", "/openapi.json", "support"),
    ]
    # THEN each is refused as no operation, counted, and on record with no operation
    assert [(answer.status, answer.error) for answer in answers] == [(403, "not_an_operation")] * 5
    assert world.store.telemetry.totals()[api_metrics.FORBIDDEN] == forbidden + 5
    assert world.api.table() == before
    refused = [line for line in audit_lines(world.api.settings) if line["refusal"] == "not_an_operation"]
    assert [(line["requestMethod"], line["operation"]) for line in refused] == [
        ("PUT", None),
        ("GET", None),
        ("PUT", None),
        ("PUT", None),
        ("GET", None),
    ]


def test_the_audit_lines_operation_is_the_one_the_matched_route_declares(world: World) -> None:
    # WHEN a deposit is served spelt without its slash, refused for its role, and refused as no path
    served = world.send(
        "PUT", f"/api/v1/wallets/{world.payer}/deposit", "treasury", b'{"amount": "1", "nonce": "a1"}'
    )
    refused = world.send("PUT", f"/api/v1/wallets/{world.payer}/deposit/", "support", MOVEMENT)
    no_path = world.send("PUT", f"/api/v1/wallets/{world.payer}/deposit%0A", "support", MOVEMENT)
    assert (served.status, refused.status, no_path.status) == (204, 403, 400)
    # THEN the lines name the operation of the route that ran or was refused, and none for no route
    lines = audit_lines(world.api.settings)[-3:]
    assert [(line["operation"], line["walletId"], line["refusal"]) for line in lines] == [
        ("deposit", world.payer, None),
        ("deposit", world.payer, "operation_not_permitted"),
        (None, None, "invalid_path"),
    ]


def test_a_router_reading_a_path_otherwise_than_the_table_runs_nothing(settings: Settings) -> None:
    # GIVEN the FastAPI app alone: no path guard, no fast movement path, no trusted front
    with serve(settings, movement_routes=False) as api:
        wallet = api.create()
        before = api.table()
        # WHEN a deposit's path ends in a newline, which Starlette's `$` still routes to the deposit
        answer = send(
            str(api.http.base_url),
            "PUT",
            f"/api/v1/wallets/{wallet}/deposit%0A".encode(),
            {"content-type": "application/json"},
            MOVEMENT,
        )
        # THEN the endpoint does not run: its route is not the table's match of the request
        assert (answer.status, answer.error) == (404, "not_found")
        assert api.table() == before


def test_without_a_trusted_front_a_path_with_a_control_character_is_still_400(settings: Settings) -> None:
    with serve(settings) as api:
        wallet = api.create()
        before = api.table()
        answer = send(
            str(api.http.base_url),
            "PUT",
            f"/api/v1/wallets/{wallet}/deposit%0A".encode(),
            {"content-type": "application/json"},
            MOVEMENT,
        )
        assert (answer.status, answer.error) == (400, "invalid_path")
        assert api.table() == before
