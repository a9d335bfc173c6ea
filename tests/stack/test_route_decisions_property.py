"""The server decides every request as the route table does: a property over drawn requests.

Each example draws a caller (a role granted a drawn set of operations, each on its person's own
wallets or on any wallet, a role not named, or no identity at all), the person its session names
(one of two wallets' owners), a method, and a path spelt from a route of the table or not, then
mutated with encodings and control characters (percent-encoded, double-encoded, raw). The request is sent as
typed to the deployed API (``trust_front=lattice``, the caller map, the audit log) on DynamoDB Local.
The expected decision is the table's own: :func:`contracts.caller_permissions.match_route` over the
path the server decodes, the map's grants, and the owner rule (an addressed wallet is its owner's,
or any-wallet callers'). Then:

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
from hypothesis import HealthCheck, event, given
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

#: One role per way of granting the operations (each not at all, on one's own wallets, or on any
#: wallet; at least one granted): drawing a role draws its grants. Role -> {operation: scope}.
GRANTS: dict[str, dict[Operation, str]] = {
    f"granted{index}": {op: scope for op, scope in zip(OPERATIONS, scopes, strict=True) if scope}
    for index, scopes in enumerate(
        scopes for scopes in itertools.product(("", "own", "any"), repeat=len(OPERATIONS)) if any(scopes)
    )
}
PERMISSIONS = CallerPermissions.parse(
    ",".join(
        f"{role_arn(role)}="
        + "+".join(op + (":any" if scope == "any" else "") for op, scope in grants.items())
        for role, grants in GRANTS.items()
    )
)
#: The two people the drawn sessions name; the payer wallet is Ann's, the payee Bob's.
ANN, BOB = "ann.lee@example.com", "bob.jones@example.com"
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
        "not_wallet_owner",
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


def expected(
    role: str | None, person: str, method: str, target: str, owners: dict[str, str]
) -> tuple[int, str | None] | Route:
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
    operation = match.route.operation
    if operation not in GRANTS[role]:
        return (403, "operation_not_permitted")
    addressed = match.parameters.get("wallet_id", "").lower()
    if addressed in owners and owners[addressed] != person and GRANTS[role][operation] != "any":
        return (403, "not_wallet_owner")
    return match.route


@st.composite
def targets(draw: st.DrawFn, wallets: tuple[str, str]) -> tuple[str, Route | None]:
    """A path spelt from a route of the table (or not), mutated; and the route it was spelt from."""
    route = draw(st.sampled_from([None, *ROUTES]))
    if route is None:
        segments = draw(st.lists(st.sampled_from(["me", "x", "deposit", *wallets]), max_size=3))
        path = "/api/v1/wallets/" + "/".join(segments)
    else:
        path = draw(st.sampled_from(route.spellings))
        values = {
            "wallet_id": draw(st.sampled_from([*wallets, str(uuid.UUID(int=1)), "me"])),
            "target_wallet_id": draw(st.sampled_from([*wallets, str(uuid.UUID(int=2))])),
            "nonce": draw(st.sampled_from(["n1", uuid.uuid4().hex])),
            "txn_id": draw(st.sampled_from([str(uuid.UUID(int=3)), "x"])),
        }
        path = path.format(**values)
    for _ in range(draw(st.sampled_from([0, 0, 0, 0, 1, 2]))):  # mostly as spelt
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
    everything = next(role for role, grants in GRANTS.items() if grants == dict.fromkeys(OPERATIONS, "any"))
    with serve(deployed) as api:
        payer = api.create(headers=caller(everything, ANN))
        payee = api.create(headers=caller(everything, BOB))
        funded = api.http.put(
            f"/api/v1/wallets/{payer}/deposit/",
            json={"amount": "100000000", "nonce": "fund"},
            headers=caller(everything, ANN),
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
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_the_server_decides_every_drawn_request_as_the_route_table_does_and_refusals_write_nothing(
    deployed_api: tuple[Api, tuple[str, str], dict[str, Any]], data: st.DataObject
) -> None:
    api, wallets, documented = deployed_api
    # GIVEN a drawn caller, method and path
    role = data.draw(st.sampled_from([None, "stranger", *sorted(GRANTS)]), label="role")
    person = data.draw(st.sampled_from([ANN, BOB]), label="person")
    target, spelt_from = data.draw(targets(wallets), label="target")
    # mostly the route's own method: most drawn requests then reach the grants and the owner rule
    methods = ["GET", "PUT", "POST", "DELETE", "PATCH"]
    own = [] if spelt_from is None else [spelt_from.method] * 20
    method = data.draw(st.sampled_from([*own, *methods]), label="method")
    body = (
        {"user_id": str(uuid.uuid4())}
        if spelt_from is not None and spelt_from.name == "create_wallet"
        else {"amount": "1", "nonce": uuid.uuid4().hex}
    )
    headers = {"content-type": "application/json", **(caller(role, person) if role is not None else {})}
    before = api.table()
    # WHEN it is sent as typed
    answer = send(str(api.http.base_url), method, target.encode("latin-1"), headers, orjson.dumps(body))
    after = api.table()
    decision = expected(role, person, method, target, {wallets[0]: ANN, wallets[1]: BOB})
    event(decision[1] or "any 400" if isinstance(decision, tuple) else f"served by {decision.name}")
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
