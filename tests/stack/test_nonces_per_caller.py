"""Nonces per caller: the security reviewer's request of issue 44, point 4, as sent.

A ``read`` role's lookup of an unused nonce on another caller's wallet once wrote a void record
under the wallet and nonce, and that caller's later deposit with the nonce was refused
``nonce_voided`` for good; two 404 wordings told used nonces from unused. Now records are keyed by
caller, wallet and nonce, a lookup writes only for a caller that may move money, and every 404 of
the lookup reads the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.lattice_callers import PERSON, SERVICE, caller, role_arn
from support.wallet_http import Api, serve

from contracts.caller_permissions import CallerPermissions
from contracts.settings import Settings

pytestmark = pytest.mark.stack

PERMISSIONS = CallerPermissions.parse(
    f"{role_arn('treasury')}=deposit+read,"
    f"{role_arn('payments')}=create_wallet+transfer+read,"
    f"{role_arn('support')}=read"
)


@pytest.fixture
def api(settings: Settings, tmp_path: Path) -> Iterator[Api]:
    deployed = settings.replace(
        trust_front="lattice",
        lattice_service_arn=SERVICE,
        caller_permissions=PERMISSIONS,
        caller_session_pattern=PERSON,
        admin_routes=False,
    )
    with serve(deployed) as served:
        yield served


def lookup(api: Api, wallet: str, nonce: str, role: str) -> httpx.Response:
    return api.http.get(f"/api/v1/wallets/{wallet}/transactions/{nonce}", headers=caller(role))


def deposit(api: Api, wallet: str, nonce: str) -> httpx.Response:
    return api.http.put(
        f"/api/v1/wallets/{wallet}/deposit/",
        json={"amount": "100", "nonce": nonce},
        headers=caller("treasury"),
    )


def test_a_read_roles_lookup_of_an_unused_nonce_on_another_callers_wallet_writes_nothing_and_decides_nothing(
    api: Api,
) -> None:
    # GIVEN a wallet the treasury deposits into
    wallet = api.create(headers=caller("payments"))
    before = api.table()
    # WHEN the read-only role looks up a nonce nobody used on it
    looked = lookup(api, wallet, "n9", "support")
    # THEN it is 404 and nothing was written
    assert (looked.status_code, looked.json()["error"]) == (404, "transaction_not_found")
    assert api.table() == before
    # AND the treasury's later deposit with that nonce is served, not refused as voided
    assert deposit(api, wallet, "n9").status_code == 204


def test_a_lookup_by_a_caller_that_may_move_money_voids_its_own_nonce_only(api: Api) -> None:
    wallet = api.create(headers=caller("payments"))
    # WHEN a role that may transfer looks up a nonce it never used: its own nonce is void
    assert lookup(api, wallet, "n8", "payments").status_code == 404
    payee = api.create(headers=caller("payments"))
    assert deposit(api, wallet, "fund").status_code == 204
    voided = api.http.put(
        f"/api/v1/wallets/{wallet}/transfer/{payee}/",
        json={"amount": "1", "nonce": "n8"},
        headers=caller("payments"),
    )
    assert (voided.status_code, voided.json()["error"]) == (409, "nonce_voided")
    # THEN another caller's nonce of the same spelling is untouched
    assert deposit(api, wallet, "n8").status_code == 204


def test_every_404_of_the_lookup_reads_the_same_whether_the_nonce_was_used_or_not(api: Api) -> None:
    wallet = api.create(headers=caller("payments"))
    assert deposit(api, wallet, "used").status_code == 204
    answers = {
        "used by another caller, asked by a mover": lookup(api, wallet, "used", "payments"),
        "used by another caller, asked by a reader": lookup(api, wallet, "used", "support"),
        "never used, asked by a mover": lookup(api, wallet, "never", "payments"),
        "voided by the mover's own lookup": lookup(api, wallet, "never", "payments"),
        "never used, asked by a reader": lookup(api, wallet, "other", "support"),
    }
    bodies = {
        name: (answer.status_code, answer.json()["error"], answer.json()["detail"].replace(nonce, "N"))
        for (name, answer), nonce in zip(
            answers.items(), ["used", "used", "never", "never", "other"], strict=True
        )
    }
    assert len(set(bodies.values())) == 1, bodies
    assert next(iter(bodies.values()))[:2] == (404, "transaction_not_found")
