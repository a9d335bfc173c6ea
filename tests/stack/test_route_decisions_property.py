"""The server decides every request as the route table does: a property over drawn requests.

Each example draws a caller (a role granted a drawn set of operations, a role not named, or no
identity at all), a method, and a path spelt from a route of the table or not, then mutated with
encodings and control characters (percent-encoded, double-encoded, raw). The request is sent as
typed to the deployed API (``trust_front=lattice``, the caller map, the audit log) on DynamoDB Local.
The expected decision is the table's own: :func:`contracts.caller_permissions.match_route` over the
path the server decodes, and the map's grants. Then:

- a refusal is the table's refusal, code for code, and the table holds what it held before;
- a request the table serves ran the endpoint of the route the table matched (its answer is one
  that route documents; never the router's own 404 or 405), and only a writing route wrote.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, unquote_to_bytes

import orjson
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from support.lattice_callers import PERSON, SERVICE, caller, role_arn
from support.raw_http import send
from support.wallet_http import Api, serve

from contracts.caller_permissions import (
    CONTROL_CHARACTER,
    OPERATIONS,
    ROUTES,
    CallerPermissions,
    Operation,
    Route,
    match_route,
)
from contracts.settings import Settings

pytestmark = pytest.mark.stack

#: One role per non-empty set of operations: drawing a role draws its grants.
GRANTS: dict[str, tuple[Operation, ...]] = {
    f"granted{index}": operations
    for index, operations in enumerate(
        combination
        for size in range(1, len(OPERATIONS) + 1)
        for combination in itertools.combinations(OPERATIONS, size)
    )
}
PERMISSIONS = CallerPermissions.of({role_arn(role): operations for role, operations in GRANTS.items()})
#: Routes whose endpoint may write (a lookup voids an unused nonce).
WRITERS = frozenset({"create_wallet", "deposit", "transfer", "transaction"})
#: Codes no endpoint of the table answers: a refusal before it, or the router's own.
NOT_AN_ENDPOINT = frozenset(
    {
        "invalid_path",
        "unauthenticated",
        "wrong_target",
        "session_not_a_person",
        "caller_not_permitted",
        "not_an_operation",
        "operation_not_permitted",
        "not_found",
        "method_not_allowed",
    }
)
INSERTIONS = (
    "%0A",
    "%0a",
    "%0D",
    "%00",
    "%09",
    "%7F",
    "%C2%85",
    "%250A",
    "%2F",
    "%64",
    "%20",
    "%3F",
    "/",
    "\x01",
    "\x7f",
    "x",
)


def _raw_control(target: str) -> bool:
    return any(ord(character) < 0x20 or ord(character) == 0x7F for character in target)


def expected(role: str | None, method: str, target: str) -> tuple[int, str | None] | Route:
    """The table's decision: a refusal (status, code; None: any), or the route that must run."""
    if _raw_control(target):
        return (400, None)  # the HTTP parser or the path guard: either way nothing routes
    decoded = unquote(target)  # as the server decodes the path into scope["path"]
    if CONTROL_CHARACTER.search(decoded) or any(b < 0x20 or b == 0x7F for b in unquote_to_bytes(target)):
        return (400, "invalid_path")
    if role is None:
        return (401, "unauthenticated")
    if role not in GRANTS:
        return (403, "caller_not_permitted")
    match = match_route(method, decoded)
    if match is None:
        return (403, "not_an_operation")
    if match.route.operation not in GRANTS[role]:
        return (403, "operation_not_permitted")
    return match.route


@st.composite
def targets(draw: st.DrawFn, wallets: tuple[str, str]) -> tuple[str, Route | None]:
    """A path spelt from a route of the table (or not), mutated; and the route it was spelt from."""
    route = draw(st.none() | st.sampled_from(ROUTES))
    if route is None:
        segments = draw(st.lists(st.sampled_from(["me", "x", "deposit", *wallets]), max_size=3))
        path = "/api/v1/wallets/" + "/".join(segments)
    else:
        path = draw(st.sampled_from(route.spellings))
        values = {
            "wallet_id": draw(st.sampled_from([*wallets, str(uuid.UUID(int=1)), "me"])),
            "target_wallet_id": draw(st.sampled_from([*wallets, str(uuid.UUID(int=2))])),
            "nonce": draw(st.sampled_from(["n1", uuid.uuid4().hex])),
        }
        path = path.format(**values)
    for _ in range(draw(st.integers(0, 2))):
        position = draw(st.integers(1, len(path)))
        path = path[:position] + draw(st.sampled_from(INSERTIONS)) + path[position:]
    return path, route


@pytest.fixture
def deployed_api(settings: Settings, tmp_path: Any) -> Iterator[tuple[Api, tuple[str, str], dict[str, Any]]]:
    deployed = settings.replace(
        trust_front="lattice",
        lattice_service_arn=SERVICE,
        caller_permissions=PERMISSIONS,
        caller_session_pattern=PERSON,
        admin_routes=False,
        audit_log=str(tmp_path / "audit.jsonl"),
    )
    everything = next(role for role, operations in GRANTS.items() if operations == OPERATIONS)
    with serve(deployed) as api:
        payer = api.create(headers=caller(everything))
        payee = api.create(headers=caller(everything))
        funded = api.http.put(
            f"/api/v1/wallets/{payer}/deposit/",
            json={"amount": "100000000", "nonce": "fund"},
            headers=caller(everything),
        )
        assert funded.status_code == 204
        operations = {
            operation["operationId"].removesuffix("_alt"): operation
            for methods in api.openapi["paths"].values()
            for operation in methods.values()
        }
        yield api, (payer, payee), operations


@given(data=st.data())
@hypothesis_settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_the_server_decides_every_drawn_request_as_the_route_table_does_and_refusals_write_nothing(
    deployed_api: tuple[Api, tuple[str, str], dict[str, Any]], data: st.DataObject
) -> None:
    api, wallets, documented = deployed_api
    # GIVEN a drawn caller, method and path
    role = data.draw(st.none() | st.just("stranger") | st.sampled_from(sorted(GRANTS)), label="role")
    method = data.draw(st.sampled_from(["GET", "PUT", "POST", "DELETE", "PATCH"]), label="method")
    target, spelt_from = data.draw(targets(wallets), label="target")
    body = (
        {"user_id": str(uuid.uuid4())}
        if spelt_from is not None and spelt_from.name == "create_wallet"
        else {"amount": "1", "nonce": uuid.uuid4().hex}
    )
    headers = {"content-type": "application/json", **(caller(role) if role is not None else {})}
    before = api.table()
    # WHEN it is sent as typed
    answer = send(str(api.http.base_url), method, target.encode("latin-1"), headers, orjson.dumps(body))
    after = api.table()
    decision = expected(role, method, target)
    if isinstance(decision, tuple):
        # THEN a refusal is the table's, and nothing was written
        status, code = decision
        assert answer.status == status, (answer, decision)
        if code is not None:
            assert answer.error == code, (answer, decision)
        assert after == before
        return
    # THEN a request the table serves reached the endpoint of the route it matched
    assert answer.error not in NOT_AN_ENDPOINT, (answer, decision.name)
    responses = documented[decision.name]["responses"]
    assert str(answer.status) in responses, (answer, decision.name)
    if answer.error is not None:
        schema = responses[str(answer.status)]["content"]["application/json"]["schema"]
        assert answer.error in schema["properties"]["error"]["enum"]
    if after != before:
        assert decision.name in WRITERS, (answer, decision.name)
