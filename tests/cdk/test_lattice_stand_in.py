"""The deploy check's stand-in for VPC Lattice, against a recording upstream (no task, no AWS).

What it must do to stand for Lattice: accept a request botocore signs for ``vpc-lattice-svcs``
(payload unsigned) and nothing else, decide with the same auth policies the CDK app writes
(:mod:`walletlake_cdk.lattice_front`), and hand the target Lattice's headers, never a client's.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from contracts.caller_permissions import CallerPermissions
from walletlake.tls import self_signed_certificate
from walletlake_cdk.deploy_check.lattice import Caller, LatticeStandIn, PolicyError, allows, sign, verify
from walletlake_cdk.lattice_front import network_auth_policy, service_auth_policy

ACCOUNT = "123456789012"
SERVICE = f"arn:aws:vpc-lattice:us-east-1:{ACCOUNT}:service/svc-0123456789abcdef0"
VPC = "vpc-0123456789abcdef0"
PERMISSIONS = CallerPermissions.parse(
    f"arn:aws:iam::{ACCOUNT}:role/treasury=deposit+read,arn:aws:iam::{ACCOUNT}:role/support=read"
)
TREASURY = Caller(
    "AKIDTREASURY", "s3cret-t", f"arn:aws:sts::{ACCOUNT}:assumed-role/treasury/ann@example.com", VPC
)
SUPPORT = Caller(
    "AKIDSUPPORT", "s3cret-s", f"arn:aws:sts::{ACCOUNT}:assumed-role/support/bob@example.com", VPC
)
OUTSIDER = Caller(
    "AKIDOUTSIDE",
    "s3cret-o",
    f"arn:aws:sts::{ACCOUNT}:assumed-role/treasury/eve@example.com",
    "vpc-0ffffffffffffffff",
)
WALLET = "/api/v1/wallets/8a6e0804-2bd0-4672-b79d-d97027f9071a"


def _recording_server(seen: list[dict[str, str]], tls: ssl.SSLContext | None = None) -> ThreadingHTTPServer:
    """A task stand-in that records the headers it got (and its TLS version, if any) and answers 200."""

    class Recorder(BaseHTTPRequestHandler):
        def _any(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            headers = {name.lower(): value for name, value in self.headers.items()}
            if isinstance(self.connection, ssl.SSLSocket):
                headers["tls-version"] = str(self.connection.version())
            seen.append(headers)
            self.send_response(200)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        do_GET = do_PUT = _any  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def upstream() -> Iterator[list[dict[str, str]]]:
    """A task stand-in that records the headers it got and answers 200."""
    seen: list[dict[str, str]] = []
    server = _recording_server(seen)
    seen.append({"address": f"127.0.0.1:{server.server_address[1]}"})
    yield seen
    server.shutdown()
    server.server_close()


def _stand_in(upstream: str, protocol: str = "HTTP") -> LatticeStandIn:
    return LatticeStandIn(
        upstream=upstream,
        service_arn=SERVICE,
        network_arn=f"arn:aws:vpc-lattice:us-east-1:{ACCOUNT}:servicenetwork/sn-0123456789abcdef0",
        target_group_arn=f"arn:aws:vpc-lattice:us-east-1:{ACCOUNT}:targetgroup/tg-0123456789abcdef0",
        service_policy=service_auth_policy(PERMISSIONS, SERVICE, (VPC,)),
        network_policy=network_auth_policy(PERMISSIONS),
        callers=(TREASURY, SUPPORT, OUTSIDER),
        region="us-east-1",
        upstream_protocol=protocol,
    )


@pytest.fixture
def front(upstream: list[dict[str, str]]) -> Iterator[LatticeStandIn]:
    stand_in = _stand_in(upstream.pop(0)["address"]).start()
    yield stand_in
    stand_in.stop()


def test_a_signed_caller_reaches_the_target_with_lattices_headers_only(
    front: LatticeStandIn, upstream: list[dict[str, str]]
) -> None:
    # WHEN treasury deposits, sending a forged identity header of its own
    forged = {
        "x-amzn-lattice-identity": f"Principal=arn:aws:iam::{ACCOUNT}:role/admin",
        "x-amzn-lattice-target": "x",
    }
    answer = front.request(TREASURY, "PUT", f"{WALLET}/deposit/", {"amount": "1"}, extra_headers=forged)
    # THEN it is forwarded with Lattice's identity, network and target, the client's gone
    assert (answer.status, answer.forwarded) == (200, True)
    (headers,) = upstream
    assert (
        headers["x-amzn-lattice-identity"]
        == f"Principal={TREASURY.principal}; SessionName=ann@example.com; Type=AWSIAM"
    )
    assert headers["x-amzn-lattice-network"] == f"SourceVpcArn=arn:aws:ec2:us-east-1:{ACCOUNT}:vpc/{VPC}"
    assert headers["x-amzn-lattice-target"].startswith(f"ServiceArn={SERVICE};ServiceNetworkArn=")
    assert headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"


@pytest.mark.parametrize(
    ("caller", "method", "path", "secret", "reason"),
    [
        (SUPPORT, "PUT", f"{WALLET}/deposit/", None, "Service"),  # a role not named for deposits
        (OUTSIDER, "GET", f"{WALLET}/balance", None, "Service"),  # a named role from another VPC
        (TREASURY, "GET", "/healthz", None, "Service"),  # no route of the map
        (None, "GET", f"{WALLET}/balance", None, "Network"),  # unsigned: anonymous
        (TREASURY, "GET", f"{WALLET}/balance", "guessed", "Unauthenticated"),  # forged signature
    ],
)
def test_what_the_policies_do_not_allow_never_reaches_the_target(
    front: LatticeStandIn,
    upstream: list[dict[str, str]],
    caller: Caller | None,
    method: str,
    path: str,
    secret: str | None,
    reason: str,
) -> None:
    answer = front.request(caller, method, path, {"amount": "1"} if method == "PUT" else None, secret=secret)
    assert (answer.status, answer.forwarded) == (403, False)
    assert upstream == []
    (entry,) = front.access_log
    assert (
        entry["requestMethod"],
        entry["requestPath"],
        entry["responseCode"],
        entry["authDeniedReason"],
    ) == (
        method,
        path,
        403,
        reason,
    )


def test_an_https_target_group_is_forwarded_to_over_tls_with_the_certificate_unchecked(
    tmp_path: Path,
) -> None:
    # GIVEN a task that speaks TLS only, with a certificate it made itself (walletlake serve --tls)
    made = self_signed_certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(made.cert_file, made.key_file)
    seen: list[dict[str, str]] = []
    server = _recording_server(seen, context)
    stand_in = _stand_in(f"127.0.0.1:{server.server_address[1]}", "HTTPS").start()
    try:
        # WHEN a signed caller's request goes through a stand-in whose target group is HTTPS
        answer = stand_in.request(TREASURY, "GET", f"{WALLET}/balance")
    finally:
        stand_in.stop()
        server.shutdown()
        server.server_close()
    # THEN it reaches the task over TLS, Lattice's identity header inside it, as Lattice sends it
    assert (answer.status, answer.forwarded) == (200, True)
    (headers,) = seen
    assert headers["tls-version"] in ("TLSv1.2", "TLSv1.3")
    assert headers["x-amzn-lattice-identity"].startswith(f"Principal={TREASURY.principal};")
    # AND a protocol the stand-in does not speak fails the check instead of going out in clear
    with pytest.raises(PolicyError, match="TCP"):
        _stand_in("127.0.0.1:1", "TCP")._upstream_connection()


def test_the_signature_is_checked_over_what_was_signed() -> None:
    # GIVEN a request botocore signed for Lattice
    url = f"https://svc.example{WALLET}/balance"
    headers = {name.lower(): value for name, value in sign(SUPPORT, "GET", url, None, "us-east-1").items()}
    headers["host"] = "svc.example"
    callers = {SUPPORT.access_key_id: SUPPORT}
    # THEN the stand-in's own SigV4 check accepts it as support's
    assert verify("GET", f"{WALLET}/balance", headers, callers, "us-east-1") == SUPPORT
    # AND refuses it for another path, another method, another region, or with a signed payload
    for method, target, region in (
        ("GET", f"{WALLET}/transactions/n1", "us-east-1"),
        ("PUT", f"{WALLET}/balance", "us-east-1"),
        ("GET", f"{WALLET}/balance", "eu-west-1"),
    ):
        with pytest.raises(PermissionError):
            verify(method, target, headers, callers, region)
    with pytest.raises(PermissionError, match="UNSIGNED-PAYLOAD"):
        verify(
            "GET", f"{WALLET}/balance", {**headers, "x-amz-content-sha256": "e3b0c442"}, callers, "us-east-1"
        )
    # AND an unsigned request is anonymous, not an error
    assert verify("GET", "/", {"host": "svc.example"}, callers, "us-east-1") is None


def test_a_condition_the_stand_in_does_not_know_fails_loudly() -> None:
    policy = json.loads(json.dumps(service_auth_policy(PERMISSIONS, SERVICE, (VPC,))))
    policy["Statement"][0]["Condition"]["IpAddress"] = {"aws:SourceIp": "10.0.0.0/8"}
    with pytest.raises(PolicyError, match="IpAddress"):
        allows(
            policy,
            TREASURY.principal,
            f"{SERVICE}{WALLET}/deposit",
            {
                "vpc-lattice-svcs:RequestMethod": "PUT",
                "vpc-lattice-svcs:SourceVpc": VPC,
                "aws:PrincipalType": "AssumedRole",
            },
        )
