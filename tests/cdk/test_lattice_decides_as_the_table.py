"""VPC Lattice's synthesized policies and the server's route table decide alike (issue 44, point 2).

The service's auth policy is written from the route table (:mod:`walletlake_cdk.lattice_front`),
the server judges on the same table (:func:`contracts.caller_permissions.match_route`). Drawn
requests (a role and its grants, a method, a path spelt from a route or not, mutated with
encodings and control characters) are decided by the deploy check's evaluation of both policies,
as the Lattice stand-in evaluates them, and by the table. Pure: no server, no AWS.

- What the table permits, spelt as a client spells it (UUID ids, either spelling), Lattice admits.
- What Lattice admits never runs an operation the table does not grant that caller: either the
  path the server decodes is no route (refused, 403), holds a control character (400), or is a
  route whose operation the map grants the role.
"""

from __future__ import annotations

import uuid
from urllib.parse import unquote

from hypothesis import event, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from contracts.caller_permissions import CONTROL_CHARACTER, ROUTES, CallerPermissions, Route, match_route
from walletlake_cdk.deploy_check.lattice import allows
from walletlake_cdk.lattice_front import network_auth_policy, service_auth_policy

ACCOUNT = "123456789012"
SERVICE = f"arn:aws:vpc-lattice:us-east-1:{ACCOUNT}:service/svc-0123456789abcdef0"
VPC = "vpc-0123456789abcdef0"
PERMISSIONS = CallerPermissions.parse(
    f"arn:aws:iam::{ACCOUNT}:role/treasury=deposit:any+read,"
    f"arn:aws:iam::{ACCOUNT}:role/payments=create_wallet+transfer:any+read:any,"
    f"arn:aws:iam::{ACCOUNT}:role/support=read,"
    f"arn:aws:iam::{ACCOUNT}:role/customers"
)
ROLES = ("treasury", "payments", "support", "customers", "stranger")
SERVICE_POLICY = service_auth_policy(PERMISSIONS, SERVICE, (VPC,))
NETWORK_POLICY = network_auth_policy(PERMISSIONS)
INSERTIONS = ("%0A", "%0D", "%00", "%250A", "%2F", "%64", "/", "x", "?", "%3F", "//", "..")
WALLET_IDS = (str(uuid.UUID(int=1)), str(uuid.UUID(int=2)).upper(), "me", "x" * 36)


def lattice_admits(principal: str, method: str, path: str) -> bool:
    """Both auth policies allow the request, as the stand-in evaluates them (the path as sent)."""
    context = {
        "vpc-lattice-svcs:RequestMethod": method,
        "vpc-lattice-svcs:SourceVpc": VPC,
        "aws:PrincipalType": "AssumedRole",
    }
    resource = f"{SERVICE}{path}"
    return allows(NETWORK_POLICY, principal, resource, context) and allows(
        SERVICE_POLICY, principal, resource, context
    )


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, str, Route | None, bool]:
    """(principal, method, path as sent, the route it was spelt from, whether it is spelt plainly)."""
    role = draw(st.sampled_from(ROLES))
    principal = f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/ann@example.com"
    route = draw(st.sampled_from([None, *ROUTES]))
    if route is None:
        path = "/api/v1/wallets/" + "/".join(draw(st.lists(st.sampled_from(["me", "deposit", *WALLET_IDS]))))
    else:
        path = draw(st.sampled_from(route.spellings)).format(
            wallet_id=draw(st.sampled_from(WALLET_IDS)),
            target_wallet_id=draw(st.sampled_from(WALLET_IDS)),
            nonce=draw(st.sampled_from(["n1", "a_b-C"])),
            txn_id=draw(st.sampled_from(WALLET_IDS)),
        )
    plain = True
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        position = draw(st.integers(1, len(path)))
        path = path[:position] + draw(st.sampled_from(INSERTIONS)) + path[position:]
        plain = False
    methods = ["GET", "PUT", "POST", "DELETE"]
    method = draw(st.sampled_from([*([route.method] * 6 if route else []), *methods]))
    return principal, method, path, route, plain


@given(request=requests())
@hypothesis_settings(max_examples=1_000, deadline=None)
def test_lattice_and_the_route_table_decide_every_drawn_request_alike(
    request: tuple[str, str, str, Route | None, bool],
) -> None:
    principal, method, path, spelt_from, plain = request
    decoded = unquote(path.partition("?")[0])
    match = match_route(method, decoded)
    permitted = match is not None and PERMISSIONS.permits(principal, match.route.operation)
    admitted = lattice_admits(principal, method, path.partition("?")[0])
    event(f"lattice {'admits' if admitted else 'denies'}, the table {'permits' if permitted else 'refuses'}")
    # THEN what the table permits, spelt plainly with UUIDs, Lattice admits
    canonical = plain and all(
        value in WALLET_IDS[:2]
        for key, value in (match.parameters.items() if match else ())
        if key != "nonce"
    )
    if permitted and canonical and spelt_from is not None and "?" not in path:
        assert admitted, (principal, method, path)
    # AND what Lattice admits never runs an operation the table does not grant
    if admitted and not CONTROL_CHARACTER.search(decoded):
        assert match is None or permitted, (principal, method, path)
