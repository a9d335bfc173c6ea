"""An HTTP client of the wallet API for tests, checking every answer against the OpenAPI document."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx

from contracts.settings import Settings
from support.wallet_table import TableContents, contents
from wallet.api import create_app
from wallet.history import LakeEntries
from wallet.service import create_service
from wallet.store import WalletStore
from walletlake.api_server import ThreadedApiServer

#: A well-formed wallet id that no test creates.
UNKNOWN = "00000000-0000-4000-8000-000000000000"


@dataclasses.dataclass
class Api:
    """An HTTP client of a running API, the settings of its table, and its OpenAPI document."""

    http: httpx.Client
    settings: Settings
    openapi: dict[str, Any]

    def create(self, user_id: str | None = None, headers: dict[str, str] | None = None) -> str:
        response = self.call(
            "POST", "/api/v1/wallets/", {"user_id": user_id or str(uuid.uuid4())}, headers=headers
        )
        assert response.status_code in (200, 201), response.text
        return str(response.json()["id"])

    def deposit(self, wallet_id: str, amount: object, nonce: str) -> httpx.Response:
        return self.call("PUT", f"/api/v1/wallets/{wallet_id}/deposit/", {"amount": amount, "nonce": nonce})

    def transfer(self, wallet_id: str, target: str, amount: object, nonce: str) -> httpx.Response:
        return self.call(
            "PUT", f"/api/v1/wallets/{wallet_id}/transfer/{target}/", {"amount": amount, "nonce": nonce}
        )

    def balance(self, wallet_id: str) -> httpx.Response:
        return self.call("GET", f"/api/v1/wallets/{wallet_id}/balance")

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """Send a request and check its answer against the OpenAPI document."""
        if raw is not None:
            response = self.http.request(
                method, path, content=raw, headers={"content-type": "application/json", **(headers or {})}
            )
        else:
            response = self.http.request(method, path, json=body, headers=headers)
        assert_documented(self.openapi, method, path, response)
        return response

    def table(self) -> TableContents:
        return contents(self.settings)


def assert_documented(openapi: dict[str, Any], method: str, path: str, response: httpx.Response) -> None:
    """The answer's status is documented for the route, and so is its error code."""
    operation = _operation(openapi, method, path)
    documented = operation["responses"]
    assert str(response.status_code) in documented, f"{method} {path}: {response.status_code} undocumented"
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error", "detail"}
        schema = documented[str(response.status_code)]["content"]["application/json"]["schema"]
        assert body["error"] in schema["properties"]["error"]["enum"]
        if response.status_code in (429, 503):
            assert int(response.headers["Retry-After"]) >= 1


def _operation(openapi: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    for template, operations in openapi["paths"].items():
        pattern = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
        if re.match(pattern, path) and method.lower() in operations:
            return dict(operations[method.lower()])
    raise AssertionError(f"{method} {path} is not in the OpenAPI document")


def error_of(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]


@contextlib.contextmanager
def serve(
    settings: Settings,
    store: WalletStore | None = None,
    *,
    movement_routes: bool = True,
    lake: LakeEntries | None = None,
) -> Iterator[Api]:
    """The app (around ``store``, reading ``lake``, when given) on a free loopback port, with a client."""
    app = (create_service if movement_routes else create_app)(settings, store=store, lake=lake)
    # The document from the app itself: behind a trusted front /openapi.json asks for a caller too.
    openapi = create_app(settings.replace(trust_front="none"), store=store).openapi()
    with ThreadedApiServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        yield Api(http, settings, openapi)
