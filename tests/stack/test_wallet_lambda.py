"""The Lambda entry point: API Gateway (HTTP API) events through Mangum to the same app."""

from __future__ import annotations

import importlib
import uuid
from typing import Any

import orjson
import pytest
from support.lambda_context import FakeLambdaContext

from contracts.settings import DEPLOYED_VARIABLES, Settings

pytestmark = pytest.mark.stack


def http_api_event(method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """A minimal API Gateway HTTP API (payload 2.0) event."""
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json", "host": "wallets.example.com"},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "api",
            "domainName": "wallets.example.com",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1"},
            "requestId": str(uuid.uuid4()),
            "stage": "$default",
        },
        "body": orjson.dumps(body).decode() if body is not None else None,
        "isBase64Encoded": False,
    }


def test_warm_invocations_share_the_app_and_its_connections(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the handler module loaded in the environment the deployment sets, naming our table
    for name, value in settings.to_env(DEPLOYED_VARIABLES).items():
        monkeypatch.setenv(name, value)
    import walletlake.handlers.api

    module = importlib.reload(walletlake.handlers.api)
    handler = module.handler
    assert module.SETTINGS.to_env(DEPLOYED_VARIABLES) == settings.to_env(DEPLOYED_VARIABLES)
    # WHEN three invocations create a wallet, deposit into it and read its balance
    created = handler(
        http_api_event("POST", "/api/v1/wallets/", {"user_id": str(uuid.uuid4())}), FakeLambdaContext()
    )
    wallet_id = orjson.loads(created["body"])["id"]
    deposited = handler(
        http_api_event("PUT", f"/api/v1/wallets/{wallet_id}/deposit/", {"amount": "25", "nonce": "n"}),
        FakeLambdaContext(),
    )
    balance = handler(http_api_event("GET", f"/api/v1/wallets/{wallet_id}/balance"), FakeLambdaContext())
    # seed 000's implementation's spelling (no trailing slash) reaches the route itself behind the
    # HTTP API's $default route, with no redirect
    seed_spelling = handler(
        http_api_event("PUT", f"/api/v1/wallets/{wallet_id}/deposit", {"amount": "25", "nonce": "n"}),
        FakeLambdaContext(),
    )
    refused = handler(http_api_event("GET", "/api/v1/wallets/not-a-uuid/balance"), FakeLambdaContext())
    # THEN each answers as over HTTP
    assert created["statusCode"] == 201
    assert deposited["statusCode"] == 204
    assert seed_spelling["statusCode"] == 204  # a replay of the same request
    assert (balance["statusCode"], orjson.loads(balance["body"])) == (200, {"balance": "25"})
    assert (refused["statusCode"], orjson.loads(refused["body"])["error"]) == (422, "validation_error")


def test_the_lambda_front_attributes_a_write_to_the_iam_identity_api_gateway_verified(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the handler as the CDK app configures it behind API Gateway's IAM authorization
    for name, value in settings.to_env(DEPLOYED_VARIABLES).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WALLETLAKE_TRUST_FRONT", "apigateway")
    import walletlake.handlers.api

    handler = importlib.reload(walletlake.handlers.api).handler
    caller = "arn:aws:iam::123456789012:role/payments"
    create = http_api_event("POST", "/api/v1/wallets/", {"user_id": str(uuid.uuid4())})
    create["requestContext"]["authorizer"] = {"iam": {"userArn": caller}}
    created = handler(create, FakeLambdaContext())
    wallet_id = orjson.loads(created["body"])["id"]
    # a request API Gateway did not authorize (no IAM identity in the event) is refused, not run
    unsigned = handler(
        http_api_event("PUT", f"/api/v1/wallets/{wallet_id}/deposit/", {"amount": "25", "nonce": "u"}),
        FakeLambdaContext(),
    )
    assert (unsigned["statusCode"], orjson.loads(unsigned["body"])["error"]) == (401, "unauthenticated")
    # WHEN a deposit arrives signed by a role (and with a forged Lattice header besides)
    event = http_api_event("PUT", f"/api/v1/wallets/{wallet_id}/deposit/", {"amount": "25", "nonce": "n"})
    event["requestContext"]["authorizer"] = {"iam": {"userArn": caller}}
    event["headers"]["x-amzn-lattice-identity"] = "Principal=arn:aws:iam::123456789012:role/admin"
    assert handler(event, FakeLambdaContext())["statusCode"] == 204
    lookup = http_api_event("GET", f"/api/v1/wallets/{wallet_id}/transactions/n")
    lookup["requestContext"]["authorizer"] = {"iam": {"userArn": caller}}  # an outcome is its caller's
    outcome = handler(lookup, FakeLambdaContext())
    # THEN the outcome names the verified role, not the header
    assert orjson.loads(outcome["body"])["initiated_by"] == caller
