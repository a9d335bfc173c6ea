"""The API task behind Lattice speaks HTTPS only, run from the task definition the CDK app deploys.

The server is started with the synthesized container's own flags and variables (``walletlake serve
--workers N`` with ``WALLETLAKE_TLS=self-signed``, ``TMPDIR=/dev/shm``, the caller map, the audit
log on stdout: :mod:`support.deployed_task`), on loopback, against DynamoDB Local. It is then sent
what VPC Lattice sends a target over an HTTPS target group: TLS with no certificate check (Lattice
validates none, target-groups.html) and the caller's identity headers. The answers, the audit line
and the certificate's files are checked; a client speaking plain HTTP to the same port gets no
HTTP answer and moves nothing.
"""

from __future__ import annotations

import json
import socket
import ssl
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from cryptography import x509
from support.deployed_task import DeployedTask, synthesize_task
from support.fresh_resources import write_path_env
from support.lattice_callers import SERVICE, caller, principal, role_arn

from contracts.settings import LATTICE_SERVICE_ARN_VARIABLE, Settings
from walletlake.api_server import ApiServer

pytestmark = pytest.mark.stack

#: The deployment's ``-c`` values: one role that may create wallets, deposit and read.
CONTEXT = {
    "api_callers": f"{role_arn('payments')}=create_wallet+deposit+read",
    "caller_vpc_ids": "vpc-0123456789abcdef0",
    "lattice_prefix_list_id": "pl-0123456789abcdef0",
    "lambda_deps": "skip",
}
#: The people whose sessions call (the deployment's session rule: an e-mail).
SESSION = "alice.smith@example.com"


@pytest.fixture(scope="module")
def task() -> DeployedTask:
    """The API task definition of a Lattice deployment, synthesized."""
    return synthesize_task(CONTEXT)


def _server(task: DeployedTask, settings: Settings) -> ApiServer:
    """``walletlake serve`` with the task's flags and variables, on this test's tables, on loopback."""
    environment = {
        **task.environment,
        **write_path_env(settings),
        # a CloudFormation attribute in the template: the service this test plays
        LATTICE_SERVICE_ARN_VARIABLE: SERVICE,
    }
    return ApiServer(env=environment, args=task.serve_args())


@pytest.fixture
def deployed(task: DeployedTask, settings: Settings) -> Iterator[ApiServer]:
    with _server(task, settings) as api:
        yield api


def _until(found: Callable[[], Any], what: str, timeout: float = 15) -> Any:
    """Poll ``found`` until it returns something truthy (its value), or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _audit_lines(api: ApiServer) -> list[dict[str, Any]]:
    lines = []
    for line in api.output().splitlines():
        if line.startswith("{") and '"operation"' in line:
            lines.append(json.loads(line))
    return lines


def _tls_session(port: int) -> tuple[str | None, bytes | None]:
    """The TLS version and the certificate a client gets when it checks nothing (as Lattice)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw) as tls,
    ):
        return tls.version(), tls.getpeercert(binary_form=True)


def _plain_exchange(port: int, request: bytes) -> bytes:
    """Send ``request`` as plain bytes and read whatever comes back until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(4096):
            answer += chunk
        return answer


def _wallet_items(settings: Settings) -> int:
    dynamodb = boto3.client("dynamodb", region_name=settings.region)
    return int(dynamodb.scan(TableName=settings.table, Select="COUNT")["Count"])


def test_a_caller_lattice_vouches_for_is_served_over_https_with_a_key_made_at_start(
    task: DeployedTask, settings: Settings
) -> None:
    # GIVEN the deployment: Lattice forwards over HTTPS and the task makes its certificate under TMPDIR
    assert task.target_group is not None
    assert (task.target_group["Protocol"], task.target_group["HealthCheck"]["Protocol"]) == ("HTTPS", "HTTPS")
    scratch = Path(task.environment["TMPDIR"])
    before = set(scratch.glob("walletlake-tls-*"))
    with _server(task, settings) as api:
        # WHEN a signed caller's requests arrive as Lattice forwards them: TLS, certificate unchecked
        assert api.url.startswith("https://127.0.0.1:")
        headers = caller("payments", SESSION)
        with httpx.Client(base_url=api.url, verify=False, timeout=10) as http:
            created = http.post("/api/v1/wallets/", json={"user_id": str(uuid.uuid4())}, headers=headers)
            assert created.status_code == 201, created.text
            wallet = created.json()["id"]
            deposited = http.put(
                f"/api/v1/wallets/{wallet}/deposit/",
                json={"amount": "2500000", "nonce": "d1"},
                headers=headers,
            )
            balance = http.get(f"/api/v1/wallets/{wallet}/balance", headers=headers)
            unvouched = http.get(f"/api/v1/wallets/{wallet}/balance")
        # THEN each is answered as over HTTP before: the money moved, the balance says so
        assert deposited.status_code == 204, deposited.text
        assert (balance.status_code, balance.json()) == (200, {"balance": "2500000"})
        # AND the server still judges the identity header: none is 401, nothing read
        assert unvouched.status_code == 401
        # AND the deposit's audit line names the verified principal, the wallet and the answer
        (line,) = _until(
            lambda: [
                entry
                for entry in _audit_lines(api)
                if entry["operation"] == "deposit" and entry.get("walletId") == wallet
            ],
            "the deposit's audit line",
        )
        assert (line["callerPrincipal"], line["responseCode"]) == (principal("payments", SESSION), 204)
        # AND the session is TLS 1.2 or newer, with a certificate the server signed itself
        version, der = _tls_session(api.port or 0)
        assert version in ("TLSv1.2", "TLSv1.3")
        assert der is not None
        certificate = x509.load_der_x509_certificate(der)
        assert certificate.issuer == certificate.subject
        # AND its key and certificate live under TMPDIR in a folder of the server's user alone
        (folder,) = set(scratch.glob("walletlake-tls-*")) - before
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert {path.name: stat.S_IMODE(path.stat().st_mode) for path in folder.iterdir()} == {
            "server.crt": 0o600,
            "server.key": 0o600,
        }
    # AND once the task stops, nothing of the key is left
    assert not folder.exists()


def test_plain_http_to_the_tls_port_gets_no_answer_and_moves_nothing(
    deployed: ApiServer, settings: Settings
) -> None:
    # GIVEN the task listening with TLS on, and a caller's request written as plain HTTP (what a
    # target group left at HTTP would send, the identity header in clear text)
    port = deployed.port or 0
    body = json.dumps({"user_id": str(uuid.uuid4())}).encode()
    headers = "".join(f"{name}: {value}\r\n" for name, value in caller("payments", SESSION).items())
    request = (
        f"POST /api/v1/wallets/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n{headers}connection: close\r\n\r\n"
    ).encode() + body
    # WHEN it is sent to the task's port
    answer = _plain_exchange(port, request)
    # THEN no HTTP answer comes back (at most a TLS alert), and an HTTP client fails to connect
    assert not answer.startswith(b"HTTP/"), answer[:200]
    with pytest.raises(httpx.TransportError):
        httpx.post(
            f"http://127.0.0.1:{port}/api/v1/wallets/", content=body, headers=caller("payments", SESSION)
        )
    # AND nothing was created, nor audited as served
    assert _wallet_items(settings) == 0
    assert not [entry for entry in _audit_lines(deployed) if entry["operation"] == "create_wallet"]
    # AND the same request over TLS is served at once (the server was not disturbed)
    served = httpx.post(
        f"{deployed.url}/api/v1/wallets/", content=body, headers=caller("payments", SESSION), verify=False
    )
    assert served.status_code == 201, served.text


def test_the_task_definitions_health_check_passes_over_https_only(
    task: DeployedTask, deployed: ApiServer
) -> None:
    # GIVEN the container's health check as the template has it, pointed at this server's port
    assert task.health_check[:3] == ["CMD", "python", "-c"]
    deployed_port = task.command[task.command.index("--port") + 1]
    probe = task.health_check[3].replace(f":{deployed_port}/", f":{deployed.port}/")
    assert f"https://127.0.0.1:{deployed.port}/healthz" in probe
    # WHEN ECS would run it
    checked = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, check=False
    )
    # THEN the task is healthy
    assert checked.returncode == 0, checked.stderr
    # AND the same probe over plain HTTP (the check of before) finds it unhealthy
    plain = probe.replace("https://", "http://").replace(", context=ssl._create_unverified_context()", "")
    assert "http://127.0.0.1" in plain
    unchecked = subprocess.run(
        [sys.executable, "-c", plain], capture_output=True, text=True, timeout=30, check=False
    )
    assert unchecked.returncode != 0
