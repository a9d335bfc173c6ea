"""Deposits and transfers served ahead of FastAPI's router answer exactly as the FastAPI routes do.

Two apps on one table: one with :mod:`wallet.movement_routes` in front (as served), one with the
FastAPI routes alone. Every kind of answer a movement can get, valid or not, must be the same
status, body and headers from both; each app gets its own wallets, so both see the same states.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from support.wallet_http import Api, serve

from contracts.settings import Settings

pytestmark = pytest.mark.stack

_HEADERS = ("content-type", "content-length", "retry-after", "allow")

#: (name, request) where request(api, payer, payee) sends one call; applied in order to fresh wallets.
Step = Callable[[Api, str, str], httpx.Response]
STEPS: list[tuple[str, Step]] = [
    ("deposit", lambda api, a, b: api.deposit(a, 1_000, "d1")),
    ("replay", lambda api, a, b: api.deposit(a, 1_000, "d1")),
    ("nonce reused", lambda api, a, b: api.deposit(a, 999, "d1")),
    ("transfer", lambda api, a, b: api.transfer(a, b, 400, "t1")),
    ("transfer replay", lambda api, a, b: api.transfer(a, b, 400, "t1")),
    ("insufficient funds", lambda api, a, b: api.transfer(a, b, 10**9, "t2")),
    ("unknown payee", lambda api, a, b: api.transfer(a, str(uuid.UUID(int=7)), 1, "t3")),
    ("unknown wallet", lambda api, a, b: api.deposit(str(uuid.UUID(int=8)), 1, "d2")),
    ("same wallet", lambda api, a, b: api.transfer(a, a, 1, "t4")),
    ("bad uuid", lambda api, a, b: api.deposit("not-a-uuid", 1, "d3")),
    ("fractional amount", lambda api, a, b: api.deposit(a, 1.5, "d4")),
    (
        "exact decimal",
        lambda api, a, b: api.call(
            "PUT", f"/api/v1/wallets/{a}/deposit/", raw=b'{"amount": 100.0, "nonce": "d5"}'
        ),
    ),
    ("not json", lambda api, a, b: api.call("PUT", f"/api/v1/wallets/{a}/deposit/", raw=b"{")),
    (
        "unknown field",
        lambda api, a, b: api.call(
            "PUT", f"/api/v1/wallets/{a}/deposit/", {"amount": 1, "nonce": "d6", "x": 1}
        ),
    ),
    (
        "slashless",
        lambda api, a, b: api.call("PUT", f"/api/v1/wallets/{a}/transfer/{b}", {"amount": 1, "nonce": "t5"}),
    ),
    (
        "wrong method",
        lambda api, a, b: api.http.post(f"/api/v1/wallets/{a}/deposit/", json={"amount": 1, "nonce": "d7"}),
    ),
    ("balance", lambda api, a, b: api.balance(a)),
]


def _answers(api: Api) -> list[tuple[str, int, Any, dict[str, str]]]:
    payer, payee = api.create(), api.create()
    answers = []
    for name, step in STEPS:
        response = step(api, payer, payee)
        body = response.json() if response.content else None
        if isinstance(body, dict) and "detail" in body:
            body = {**body, "detail": body["detail"].replace(payer, "PAYER").replace(payee, "PAYEE")}
        headers = {name: response.headers[name] for name in _HEADERS if name in response.headers}
        answers.append((name, response.status_code, body, headers))
    return answers


def test_the_movement_routes_answer_every_case_as_the_fastapi_routes(settings: Settings) -> None:
    # GIVEN the app as served, and the app with its FastAPI routes alone, on one table
    with serve(settings) as fast, serve(settings, movement_routes=False) as plain:
        # WHEN each gets the same sequence of movements on its own two wallets
        served, reference = _answers(fast), _answers(plain)

    # THEN every answer is the same: status, body and headers
    assert served == reference
    # (and the sequence covered what it meant to: success, replay, each refusal)
    assert [status for _, status, _, _ in served] == [
        204,
        204,
        409,
        204,
        204,
        409,
        404,
        404,
        422,
        422,
        422,
        204,
        422,
        422,
        204,
        405,
        200,
    ]


def test_the_served_app_puts_the_movement_routes_in_front_of_the_fastapi_app(settings: Settings) -> None:
    from fastapi import FastAPI

    from wallet.audit import AuditTrail
    from wallet.authorization import Gatekeeper
    from wallet.body_limit import BodyLimit
    from wallet.movement_routes import MovementRoutes
    from wallet.ownership import OwnerGate
    from wallet.routing import PathGuard
    from wallet.service import create_service

    service = create_service(settings.replace(audit_log="stdout"))
    assert isinstance(service, AuditTrail)  # every answer on record, refusals included
    assert isinstance(service.app, PathGuard)  # a path no route can be is refused before routing
    assert isinstance(service.app.app, Gatekeeper)  # a caller nobody vouched for is refused first
    assert isinstance(service.app.app.app, BodyLimit)  # an oversized body is refused before anything runs
    assert isinstance(service.app.app.app.app, OwnerGate)  # a wallet not the caller's is refused
    assert isinstance(service.app.app.app.app.app, MovementRoutes)
    assert isinstance(service.app.app.app.app.app.app, FastAPI)
    assert isinstance(create_service(settings.replace(audit_log=None)), PathGuard)  # no audit layer
