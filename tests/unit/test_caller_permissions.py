"""The role map, the routes as operations, and the server's verdicts: one definition, held both ways.

The server (:func:`wallet.authorization.judge`) and Lattice's service policy (written by the CDK
app from ``Route.lattice_paths``) must agree on which request is which operation; these tests hold
the routes to the API's own document and to IAM's wildcard rules.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from contracts.caller_permissions import (
    API_PREFIX,
    DEFAULT_OPERATIONS,
    ROUTES,
    CallerPermissions,
    CallerPermissionsError,
    match_route,
    operation_of,
    role_of,
)
from contracts.settings import Settings, SettingsError
from wallet.api import create_app
from wallet.authorization import judge

ACCOUNT = "111122223333"
MAP = CallerPermissions.parse(
    f"arn:aws:iam::{ACCOUNT}:role/treasury=deposit+read, arn:aws:iam::{ACCOUNT}:role/teams/payments"
)
#: Fixed ids: parametrized test ids must be the same in every xdist worker.
WALLET, PAYEE = "8a6e0804-2bd0-4672-b79d-d97027f9071a", "1f0c5d2e-3b4a-4c6d-8e9f-0a1b2c3d4e5f"


def iam_like(pattern: str) -> re.Pattern[str]:
    """IAM's StringLike / resource wildcards: ``*`` any run of characters (``/`` too), ``?`` one."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern))


CONCRETE = {
    ("POST", "/api/v1/wallets/"): "create_wallet",
    ("POST", "/api/v1/wallets"): "create_wallet",
    ("PUT", f"/api/v1/wallets/{WALLET}/deposit/"): "deposit",
    ("PUT", f"/api/v1/wallets/{WALLET}/deposit"): "deposit",
    ("PUT", f"/api/v1/wallets/{WALLET}/transfer/{PAYEE}/"): "transfer",
    ("PUT", f"/api/v1/wallets/{WALLET}/transfer/{PAYEE}"): "transfer",
    ("GET", f"/api/v1/wallets/{WALLET}/balance"): "read",
    ("GET", f"/api/v1/wallets/{WALLET}/balance/"): "read",
    ("GET", f"/api/v1/wallets/{WALLET}/transactions/n-1"): "read",
    ("GET", f"/api/v1/wallets/{WALLET}/transactions"): "read",
    ("GET", f"/api/v1/wallets/{WALLET}/transactions/"): "read",
    ("GET", f"/api/v1/wallets/{WALLET}/transactions/by-id/{PAYEE}"): "read",
    ("GET", "/api/v1/wallets/me/"): "read",
    ("GET", "/api/v1/wallets/me"): "read",
}


@pytest.mark.parametrize(("method", "path"), sorted(CONCRETE))
def test_each_route_is_one_operation_for_the_server_and_for_lattices_policy(method: str, path: str) -> None:
    expected = CONCRETE[(method, path)]
    # THEN the server and the Lattice paths of exactly that operation's routes match it
    assert operation_of(method, path) == expected
    matching = {
        route.operation
        for route in ROUTES
        if route.method == method and any(iam_like(glob).fullmatch(path) for glob in route.lattice_paths)
    }
    assert matching == {expected}


def test_every_wallet_route_of_the_api_document_is_an_operation() -> None:
    # GIVEN every route the app documents (both spellings)
    paths = create_app(Settings()).openapi()["paths"]
    found = {}
    for template, operations in paths.items():
        concrete = template.replace("{wallet_id}", WALLET).replace("{target_wallet_id}", PAYEE)
        concrete = concrete.replace("{nonce}", "n-1").replace("{txn_id}", PAYEE)
        for method in operations:
            found[(method.upper(), concrete)] = operation_of(method.upper(), concrete)
    # THEN each is the operation its name says, and only the operators' routes are none
    assert {key: value for key, value in found.items() if value is None} == {
        ("GET", "/healthz"): None,
        ("GET", "/metrics"): None,
    }
    assert {key: value for key, value in found.items() if value is not None} == CONCRETE


def test_the_documents_routes_are_the_tables_rows_by_name_and_spelling() -> None:
    # GIVEN the app's document
    paths = create_app(Settings()).openapi()["paths"]
    documented = {
        (method.upper(), template, operation["operationId"])
        for template, operations in paths.items()
        for method, operation in operations.items()
        if template.startswith(API_PREFIX)
    }
    # THEN its wallet routes are exactly the table's rows, each spelling under the row's name
    assert documented == {
        (route.method, path, route.name if index == 0 else f"{route.name}_alt")
        for route in ROUTES
        for index, path in enumerate(route.spellings)
    }


@pytest.mark.parametrize(
    "path",
    [
        f"/api/v1/wallets/{WALLET}/deposit\n",
        f"/api/v1/wallets/{WALLET}/deposit/\n",
        f"/api/v1/wallets/{WALLET}\n/deposit",
        f"/api/v1/wallets/{WALLET}/deposit\r",
        f"/api/v1/wallets/{WALLET}/deposit\x00",
        f"/api/v1/wallets/{WALLET}/deposit\x85",
        f"/api/v1/wallets/{WALLET}/deposit//",
        f"/api/v1/wallets/{WALLET}/deposit/x",
        f"/api/v1/wallets/{WALLET}/./deposit",
        f"/api/v1/wallets/{WALLET}/DEPOSIT",
    ],
)
def test_a_path_one_character_off_a_route_is_no_route(path: str) -> None:
    assert match_route("PUT", path) is None


def test_the_role_map_reads_defaults_and_refuses_in_one_line() -> None:
    assert MAP.operations_of_role(f"arn:aws:iam::{ACCOUNT}:role/treasury") == ("deposit", "read")
    assert MAP.operations_of_role(f"arn:aws:iam::{ACCOUNT}:role/teams/payments") == DEFAULT_OPERATIONS
    assert "deposit" not in DEFAULT_OPERATIONS
    assert MAP.roles_for("deposit") == (f"arn:aws:iam::{ACCOUNT}:role/treasury",)
    assert CallerPermissions.parse(str(MAP)) == MAP
    # a role's session matches the role whatever its path; another account's role of that name not
    assert role_of(f"arn:aws:sts::{ACCOUNT}:assumed-role/payments/bob") == ("aws", ACCOUNT, "payments")
    assert MAP.permits(f"arn:aws:sts::{ACCOUNT}:assumed-role/payments/bob", "transfer")
    assert not MAP.permits("arn:aws:sts::444455556666:assumed-role/payments/bob", "transfer")
    assert not MAP.permits(f"arn:aws:iam::{ACCOUNT}:user/payments", "read")
    with pytest.raises(CallerPermissionsError, match=r"'mint' is not an operation"):
        CallerPermissions.parse(f"arn:aws:iam::{ACCOUNT}:role/treasury=deposit+mint")
    with pytest.raises(CallerPermissionsError, match="must be an IAM role ARN"):
        CallerPermissions.parse("*")
    with pytest.raises(CallerPermissionsError, match="named twice"):
        CallerPermissions.parse(f"arn:aws:iam::{ACCOUNT}:role/a,arn:aws:iam::{ACCOUNT}:role/a=read")
    with pytest.raises(SettingsError, match=r"^WALLETLAKE_CALLER_PERMISSIONS must be"):
        Settings.from_env({"WALLETLAKE_CALLER_PERMISSIONS": "arn:aws:iam::1:role/x"})


def _scope(method: str, path: str, **extra: Any) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "headers": [], **extra}


def test_behind_api_gateway_the_verified_iam_caller_is_judged_by_the_same_map() -> None:
    settings = Settings(trust_front="apigateway", caller_permissions=MAP)

    def event(user_arn: str | None) -> dict[str, Any]:
        iam = {"userArn": user_arn} if user_arn else {}
        return {"requestContext": {"authorizer": {"iam": iam}}}

    deposit = f"/api/v1/wallets/{WALLET}/deposit"
    treasurer = f"arn:aws:sts::{ACCOUNT}:assumed-role/treasury/ann"
    payer = f"arn:aws:sts::{ACCOUNT}:assumed-role/payments/bob"
    # a forged Lattice header means nothing behind API Gateway
    forged = [(b"x-amzn-lattice-identity", f"Principal={treasurer}".encode())]
    verdicts = {
        "treasury deposits": judge(settings, _scope("PUT", deposit, **{"aws.event": event(treasurer)})),
        "payments deposits": judge(settings, _scope("PUT", deposit, **{"aws.event": event(payer)})),
        "no identity": judge(settings, _scope("PUT", deposit, **{"aws.event": event(None)})),
        "forged header": judge(settings, {**_scope("PUT", deposit), "headers": forged}),
        "health": judge(settings, _scope("GET", "/healthz")),
    }
    assert {name: verdict and verdict.code for name, verdict in verdicts.items()} == {
        "treasury deposits": None,
        "payments deposits": "operation_not_permitted",
        "no identity": "unauthenticated",
        "forged header": "unauthenticated",
        "health": None,
    }


def test_without_a_trusted_front_nothing_is_judged() -> None:
    # the embedded stack and `walletlake serve` on a laptop: every request is the default principal
    assert judge(Settings(caller_permissions=MAP), _scope("PUT", f"/api/v1/wallets/{WALLET}/deposit")) is None
