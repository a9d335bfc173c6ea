"""Only the named, only for what each may do: the server's own refusals, and every act on record.

The API runs as the CDK app deploys it behind VPC Lattice (``trust_front=lattice``, this
service's ARN, the role map, the session-name rule, the audit log), on DynamoDB Local, and is
sent requests straight to the app as a second Lattice service, a forger or a misconfigured
policy would send them. Each refusal is checked against what DynamoDB Local holds afterwards
(nothing written), the counters, and the audit line it left; the named query ``who_did_what``
then reads those lines through the local engine.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import pytest
from support.lattice_callers import ACCOUNT, PERSON, SERVICE, caller
from support.wallet_http import error_of, serve

from contracts import api_metrics
from contracts.caller_permissions import CallerPermissions
from contracts.settings import Settings
from contracts.wallets_table import Attr
from queries import run_query
from wallet.store import WalletStore

pytestmark = pytest.mark.stack

OTHER_SERVICE = f"arn:aws:vpc-lattice:us-east-1:{ACCOUNT}:service/svc-0fedcba9876543210"
# Services acting on customers' wallets, so granted their operations on any wallet (issue 44).
PERMISSIONS = CallerPermissions.parse(
    f"arn:aws:iam::{ACCOUNT}:role/treasury=deposit:any+read,"
    f"arn:aws:iam::{ACCOUNT}:role/payments=create_wallet+transfer:any+read:any,"
    f"arn:aws:iam::{ACCOUNT}:role/support=read:any"
)
ROLE_SESSION = f"arn:aws:sts::{ACCOUNT}:assumed-role/treasury/alice.smith@example.com"


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


def audit_lines(settings: Settings) -> list[dict[str, object]]:
    assert settings.audit_log is not None
    return [json.loads(line) for line in Path(settings.audit_log).read_text().splitlines()]


def test_every_request_no_front_vouched_for_or_not_for_this_operation_is_refused_with_nothing_written(
    deployed: Settings,
) -> None:
    store = WalletStore(deployed)
    with serve(deployed, store) as api:
        # GIVEN a wallet with money, made by the roles allowed to
        wallet = api.http.post(
            "/api/v1/wallets/", json={"user_id": str(uuid.uuid4())}, headers=caller("payments")
        )
        wallet_id = wallet.json()["id"]
        other = api.http.post(
            "/api/v1/wallets/", json={"user_id": str(uuid.uuid4())}, headers=caller("payments")
        )
        other_id = other.json()["id"]
        funded = api.http.put(
            f"/api/v1/wallets/{wallet_id}/deposit/",
            json={"amount": "100", "nonce": "d0"},
            headers=caller("treasury"),
        )
        assert (wallet.status_code, other.status_code, funded.status_code) == (201, 201, 204)
        before = api.table()
        deposit = f"/api/v1/wallets/{wallet_id}/deposit/"
        body = {"amount": "5", "nonce": "n1"}
        forged_identity = {"x-amzn-lattice-identity": caller("treasury")["x-amzn-lattice-identity"]}
        # WHEN requests arrive that Lattice would not have sent as they are
        answers = {
            "no header": api.http.put(deposit, json=body),
            "anonymous": api.http.put(
                deposit, json=body, headers={"x-amzn-lattice-identity": "Type=Anonymous"}
            ),
            "anonymous with a principal": api.http.put(
                deposit,
                json=body,
                headers={
                    **caller("treasury"),
                    "x-amzn-lattice-identity": f"Principal={ROLE_SESSION}; Type=Anonymous",
                },
            ),
            "forged identity, no target": api.http.put(deposit, json=body, headers=forged_identity),
            "another Lattice service": api.http.put(
                deposit, json=body, headers=caller("treasury", target=OTHER_SERVICE)
            ),
            "a role not named": api.http.put(deposit, json=body, headers=caller("admin")),
            "payments depositing": api.http.put(deposit, json=body, headers=caller("payments")),
            "support transferring": api.http.put(
                f"/api/v1/wallets/{wallet_id}/transfer/{other_id}/", json=body, headers=caller("support")
            ),
            "treasury creating a wallet": api.http.post(
                "/api/v1/wallets/", json={"user_id": str(uuid.uuid4())}, headers=caller("treasury")
            ),
            "a session naming no one": api.http.put(deposit, json=body, headers=caller("treasury", "i-0abc")),
            "unsigned balance": api.http.get(f"/api/v1/wallets/{wallet_id}/balance"),
        }
        after = api.table()
        health = api.http.get("/healthz")
        # AND requests a role may make
        read = api.http.get(f"/api/v1/wallets/{wallet_id}/balance", headers=caller("support"))
        moved = api.http.put(
            f"/api/v1/wallets/{wallet_id}/transfer/{other_id}/", json=body, headers=caller("payments")
        )
        receipt = api.http.get(f"/api/v1/wallets/{wallet_id}/transactions/n1", headers=caller("payments"))
    # THEN each is refused with its own code
    assert {name: error_of(answer) for name, answer in answers.items()} == {
        "no header": (401, "unauthenticated"),
        "anonymous": (401, "unauthenticated"),
        "anonymous with a principal": (401, "unauthenticated"),
        "forged identity, no target": (403, "wrong_target"),
        "another Lattice service": (403, "wrong_target"),
        "a role not named": (403, "caller_not_permitted"),
        "payments depositing": (403, "operation_not_permitted"),
        "support transferring": (403, "operation_not_permitted"),
        "treasury creating a wallet": (403, "operation_not_permitted"),
        "a session naming no one": (403, "session_not_a_person"),
        "unsigned balance": (401, "unauthenticated"),
    }
    # AND nothing was written: the table holds exactly what it held before
    assert after.item_count == before.item_count
    assert after.wallets[wallet_id][Attr.BALANCE] == 100
    assert after.records == before.records
    # AND each refusal was counted, by kind
    totals = store.telemetry.totals()
    assert (totals[api_metrics.UNAUTHENTICATED], totals[api_metrics.FORBIDDEN]) == (4, 7)
    # AND what a role may do is served, attributed to the person who acted
    assert health.status_code == 200
    assert (read.status_code, read.json()) == (200, {"balance": "100"})
    assert moved.status_code == 204
    assert (
        receipt.json()["initiated_by"]
        == f"arn:aws:sts::{ACCOUNT}:assumed-role/payments/alice.smith@example.com"
    )


def test_every_act_is_on_record_and_the_audit_query_answers_who_did_what(deployed: Settings) -> None:
    started = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    with serve(deployed) as api:
        # GIVEN a wallet created, funded, read, paid from twice with one nonce, and a forger refused
        created = api.http.post(
            "/api/v1/wallets/",
            json={"user_id": str(uuid.uuid4())},
            headers=caller("payments", "bob.jones@example.com"),
        )
        wallet = created.json()["id"]
        payee = api.http.post(
            "/api/v1/wallets/", json={"user_id": str(uuid.uuid4())}, headers=caller("payments")
        ).json()["id"]
        deposit = api.http.put(
            f"/api/v1/wallets/{wallet}/deposit/",
            json={"amount": "50", "nonce": "d1"},
            headers=caller("treasury"),
        )
        api.http.get(
            f"/api/v1/wallets/{wallet}/balance", headers=caller("support", "carol.white@example.com")
        )
        transfer = {"amount": "20", "nonce": "t1"}
        first = api.http.put(
            f"/api/v1/wallets/{wallet}/transfer/{payee}/", json=transfer, headers=caller("payments")
        )
        replay = api.http.put(
            f"/api/v1/wallets/{wallet}/transfer/{payee}/", json=transfer, headers=caller("payments")
        )
        api.http.put(f"/api/v1/wallets/{wallet}/deposit/", json={"amount": "9", "nonce": "x"})
        api.http.get("/healthz")
    # THEN every request but the health check left one line, in Lattice's field names
    lines = audit_lines(deployed)
    assert [(line["requestMethod"], line["operation"], line["responseCode"]) for line in lines] == [
        ("POST", "create_wallet", 201),
        ("POST", "create_wallet", 201),
        ("PUT", "deposit", 204),
        ("GET", "read", 200),
        ("PUT", "transfer", 204),
        ("PUT", "transfer", 204),
        ("PUT", "deposit", 401),
    ]
    assert lines[0]["walletId"] == wallet
    assert (
        lines[0]["callerPrincipal"] == f"arn:aws:sts::{ACCOUNT}:assumed-role/payments/bob.jones@example.com"
    )
    assert lines[0]["sessionName"] == "bob.jones@example.com"
    assert lines[2]["transactionId"] == deposit.headers["Transaction-Id"]
    assert lines[3]["sessionName"] == "carol.white@example.com"
    assert (lines[4]["replayed"], lines[5]["replayed"]) == (False, True)
    assert lines[4]["transactionId"] == lines[5]["transactionId"] == first.headers["Transaction-Id"]
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert (lines[4]["walletId"], lines[4]["targetWalletId"]) == (wallet, payee)
    assert (lines[6]["callerPrincipal"], lines[6]["refusal"]) == (None, "unauthenticated")
    assert lines[3]["serviceArn"] == SERVICE
    assert lines[3]["sourceVpcArn"] == f"arn:aws:ec2:us-east-1:{ACCOUNT}:vpc/vpc-0caller"
    # AND the named query reads them through the local engine, as Athena reads Lattice's logs
    ended = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    frame = run_query(
        "who_did_what",
        {"start": started.isoformat(), "end": ended.isoformat()},
        deployed.replace(query_engine="duckdb"),
    )
    rows = frame.to_dict("records")
    assert len(rows) == 7
    assert [row["status"] for row in rows].count(204) == 3
    refused = [row for row in rows if isinstance(row["refused_because"], str)]
    assert [(row["path"], row["refused_because"]) for row in refused] == [
        (f"/api/v1/wallets/{wallet}/deposit/", "unauthenticated")
    ]
    assert {row["principal"] for row in rows if row["method"] == "GET"} == {
        f"arn:aws:sts::{ACCOUNT}:assumed-role/support/carol.white@example.com"
    }
