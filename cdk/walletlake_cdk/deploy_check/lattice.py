"""A local stand-in for VPC Lattice in front of the API task: what Lattice does to a request, here.

The deployed tasks are reached only through a Lattice service with ``AWS_IAM`` auth. To run the
task as deployed, the deploy check puts this in front of it on 127.0.0.1, doing what Lattice does
with each request, from the synthesized template:

1. **Authenticate** the SigV4 signature (service ``vpc-lattice-svcs``) against the check's own
   local credentials, each mapped to a role session (an assumed-role ARN and its source VPC). A
   payload must not be signed: the request carries ``x-amz-content-sha256: UNSIGNED-PAYLOAD``
   ("SIGv4 authenticated requests for Amazon VPC Lattice", VPC Lattice User Guide). An unsigned
   request is anonymous; a bad signature is refused.
2. **Authorize** with the template's own auth policies, the service network's first and then the
   service's ("How VPC Lattice evaluates auth policies", auth-policies.html): the principal (a
   role's sessions match the role), the action ``vpc-lattice-svcs:Invoke``, the resource (the
   service ARN followed by the path, IAM wildcards) and the conditions the templates use
   (``vpc-lattice-svcs:RequestMethod``, ``vpc-lattice-svcs:SourceVpc``, ``aws:PrincipalType``). A
   condition it does not know fails the check instead of passing silently. A denial is answered
   403 and never reaches the task.
3. **Forward** what is allowed, first dropping any client-sent ``x-amzn-lattice-*`` header and then
   adding Lattice's own ("HTTP targets in VPC Lattice", caller identity headers):
   ``x-amzn-lattice-identity`` (``Principal=…; SessionName=…; Type=AWSIAM``),
   ``x-amzn-lattice-network`` (``SourceVpcArn=…``) and ``x-amzn-lattice-target``
   (``ServiceArn=…;ServiceNetworkArn=…;TargetGroupArn=…``), in the target group's protocol: over
   HTTPS without checking the task's certificate, as Lattice does (target-groups.html, routing
   configuration).

Each request leaves one access-log line in Lattice's field names
(:data:`contracts.audit_log.LATTICE_COLUMNS`; ``-`` where Lattice writes ``-``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import fnmatch
import hashlib
import hmac
import http.client
import json
import ssl
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from contracts.audit_log import LATTICE_COLUMNS
from contracts.caller_permissions import role_of, session_of

SERVICE: Final = "vpc-lattice-svcs"
INVOKE: Final = "vpc-lattice-svcs:Invoke"
UNSIGNED_PAYLOAD: Final = "UNSIGNED-PAYLOAD"
LATTICE_HEADER_PREFIX: Final = "x-amzn-lattice-"
#: Hop-by-hop headers a proxy does not forward (RFC 9110, section 7.6.1).
_HOP_BY_HOP: Final = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host"}
)


class PolicyError(ValueError):
    """An auth policy uses something the stand-in cannot evaluate (the check must learn it first)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Caller:
    """Local credentials standing for one role session, and the VPC it sends from."""

    access_key_id: str
    secret_access_key: str
    principal: str
    source_vpc: str


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """What a client got: status, body, and whether the task saw the request."""

    status: int
    body: bytes
    forwarded: bool


def sign(caller: Caller, method: str, url: str, body: bytes | None, region: str) -> dict[str, str]:
    """The headers of a request signed as AWS's SDKs sign it for Lattice (botocore's SigV4)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(
        method=method,
        url=url,
        data=body or b"",
        headers={"content-type": "application/json", "x-amz-content-sha256": UNSIGNED_PAYLOAD},
    )
    request.context["payload_signing_enabled"] = False
    SigV4Auth(Credentials(caller.access_key_id, caller.secret_access_key), SERVICE, region).add_auth(request)
    return dict(request.headers.items())


def verify(
    method: str, target: str, headers: Mapping[str, str], callers: Mapping[str, Caller], region: str
) -> Caller | None:
    """The caller whose signature this is; None for an unsigned request. Raises on a bad one.

    Written from the SigV4 specification ("Create a signed AWS API request", IAM User Guide), not
    from botocore, so a request botocore signs is checked by a second implementation.
    """
    authorization = headers.get("authorization")
    if authorization is None:
        return None
    scheme, _, fields_text = authorization.partition(" ")
    fields = dict(part.strip().split("=", 1) for part in fields_text.split(","))
    if scheme != "AWS4-HMAC-SHA256" or set(fields) != {"Credential", "SignedHeaders", "Signature"}:
        raise PermissionError("not a SigV4 signature")
    access_key_id, date, signed_region, service, terminal = fields["Credential"].split("/")
    if (signed_region, service, terminal) != (region, SERVICE, "aws4_request"):
        raise PermissionError(f"signed for {service} in {signed_region}, not {SERVICE} in {region}")
    caller = callers.get(access_key_id)
    if caller is None:
        raise PermissionError("unknown access key")
    if headers.get("x-amz-content-sha256") != UNSIGNED_PAYLOAD:
        raise PermissionError("Lattice needs x-amz-content-sha256: UNSIGNED-PAYLOAD")
    stamp = headers.get("x-amz-date", "")
    if not stamp.startswith(date):
        raise PermissionError("x-amz-date is not the credential's date")
    signed = fields["SignedHeaders"].split(";")
    if "host" not in signed:
        raise PermissionError("the host header is not signed")
    path, _, query = target.partition("?")
    canonical = "\n".join(
        [
            method,
            urllib.parse.quote(path, safe="/~"),
            "&".join(sorted(query.split("&"))) if query else "",
            "".join(f"{name}:{' '.join(headers.get(name, '').split())}\n" for name in signed),
            fields["SignedHeaders"],
            UNSIGNED_PAYLOAD,
        ]
    )
    scope = f"{date}/{region}/{SERVICE}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = f"AWS4{caller.secret_access_key}".encode()
    for part in (date, region, SERVICE, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, fields["Signature"]):
        raise PermissionError("signature does not match")
    return caller


def allows(
    policy: Mapping[str, Any], principal: str | None, resource: str, context: Mapping[str, str]
) -> bool:
    """Whether ``policy`` allows ``principal`` to invoke ``resource`` with these condition values.

    An explicit Deny wins, else any Allow; nothing matching is a denial (IAM's evaluation).
    """
    decisions = [
        statement["Effect"]
        for statement in _as_list(policy["Statement"])
        if _principal_matches(statement.get("Principal"), principal)
        and any(action in (INVOKE, "*", "vpc-lattice-svcs:*") for action in _as_list(statement["Action"]))
        and any(fnmatch.fnmatchcase(resource, pattern) for pattern in _as_list(statement["Resource"]))
        and _conditions_hold(statement.get("Condition", {}), context)
    ]
    return "Deny" not in decisions and "Allow" in decisions


def _principal_matches(principal: Any, caller: str | None) -> bool:
    if principal == "*":
        return True
    if not isinstance(principal, dict) or set(principal) != {"AWS"}:
        raise PolicyError(f"principal {principal!r} is not one the stand-in evaluates")
    for named in _as_list(principal["AWS"]):
        if named == "*":
            return True
        if caller is not None and role_of(caller) is not None and role_of(caller) == role_of(named):
            return True
    return False


def _conditions_hold(conditions: Mapping[str, Mapping[str, Any]], context: Mapping[str, str]) -> bool:
    tests = {
        "StringEquals": lambda actual, wanted: actual in wanted,
        "StringNotEqualsIgnoreCase": lambda actual, wanted: actual.lower() not in {w.lower() for w in wanted},
    }
    for operator, keys in conditions.items():
        if operator not in tests:
            raise PolicyError(f"condition operator {operator} is not one the stand-in evaluates")
        for key, wanted in keys.items():
            if key not in context:
                raise PolicyError(f"condition key {key} is not one the stand-in evaluates")
            if not tests[operator](context[key], [str(value) for value in _as_list(wanted)]):
                return False
    return True


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@dataclasses.dataclass
class LatticeStandIn:
    """Lattice's part of a request, between a client and the task at ``upstream`` (host:port).

    Parameters
    ----------
    upstream:
        ``127.0.0.1:<port>`` of the task.
    service_arn, network_arn, target_group_arn:
        The template's service, service network and target group, as CloudFormation names them.
    service_policy, network_policy:
        Their auth policies, resolved.
    callers:
        The local credentials it knows.
    region:
        The region requests are signed for.
    upstream_protocol:
        The target group's protocol, ``HTTP`` or ``HTTPS`` (the task's certificate unchecked).
    """

    upstream: str
    service_arn: str
    network_arn: str
    target_group_arn: str
    service_policy: Mapping[str, Any]
    network_policy: Mapping[str, Any]
    callers: Sequence[Caller]
    region: str
    upstream_protocol: str = "HTTP"
    access_log: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    forwarded: list[dict[str, str]] = dataclasses.field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def host(self) -> str:
        """The service's DNS name as a client addresses it (signed as the ``host`` header)."""
        return f"walletlake-api.{self.region}.vpc-lattice-svcs.local"

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` of the stand-in."""
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> LatticeStandIn:
        """Listen on a free port of 127.0.0.1, in a thread."""
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {name.lower(): value for name, value in self.headers.items()}
                status, answer, response_headers = stand_in.handle(self.command, self.path, headers, body)
                self.send_response(status)
                for name, value in response_headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _any  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening (what :meth:`start` started, nothing else)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # --- Lattice's part ----------------------------------------------------------------------

    def handle(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, bytes, dict[str, str]]:
        """Authenticate, authorize, forward: the answer the client gets."""
        started = time.monotonic()
        path = target.partition("?")[0]
        record: dict[str, Any] = {
            "startTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "requestMethod": method,
            "requestPath": path,
            "callerPrincipal": "-",
            "sourceVpcArn": "-",
            "serviceArn": self.service_arn,
            "targetGroupArn": "-",
            "authDeniedReason": "-",
            "userAgent": headers.get("user-agent", "-"),
        }
        try:
            caller = verify(method, target, headers, {c.access_key_id: c for c in self.callers}, self.region)
        except PermissionError as error:
            return self._deny(record, started, "Unauthenticated", f"InvalidSignatureException: {error}")
        principal = caller.principal if caller is not None else None
        source_vpc = caller.source_vpc if caller is not None else "-"
        record["callerPrincipal"] = principal or "-"
        record["sourceVpcArn"] = self._vpc_arn(source_vpc) if caller is not None else "-"
        context = {
            "vpc-lattice-svcs:RequestMethod": method,
            "vpc-lattice-svcs:SourceVpc": source_vpc,
            "aws:PrincipalType": "AssumedRole" if principal else "Anonymous",
        }
        resource = f"{self.service_arn}{path}"
        for layer, policy in (("Network", self.network_policy), ("Service", self.service_policy)):
            if not allows(policy, principal, resource, context):
                return self._deny(
                    record, started, layer, f"AccessDeniedException: no {layer.lower()} policy allows"
                )
        assert caller is not None  # no policy here admits an anonymous request
        status, answer, response_headers = self._forward(method, target, headers, body, caller)
        record["targetGroupArn"] = self.target_group_arn
        return self._logged(record, started, status), answer, response_headers

    def _forward(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes, caller: Caller
    ) -> tuple[int, bytes, dict[str, str]]:
        outgoing = {
            name: value
            for name, value in headers.items()
            if not name.startswith(LATTICE_HEADER_PREFIX) and name not in _HOP_BY_HOP
        }
        outgoing["x-amzn-lattice-identity"] = (
            f"Principal={caller.principal}; SessionName={session_of(caller.principal) or ''}; Type=AWSIAM"
        )
        outgoing["x-amzn-lattice-network"] = f"SourceVpcArn={self._vpc_arn(caller.source_vpc)}"
        outgoing["x-amzn-lattice-target"] = (
            f"ServiceArn={self.service_arn};ServiceNetworkArn={self.network_arn};"
            f"TargetGroupArn={self.target_group_arn}"
        )
        outgoing["x-forwarded-for"] = "127.0.0.1"
        outgoing["x-forwarded-proto"] = "https"
        self.forwarded.append(dict(outgoing))
        connection = self._upstream_connection()
        try:
            connection.request(method, target, body=body or None, headers=outgoing)
            response = connection.getresponse()
            answer = response.read()
            kept = {
                name: value
                for name, value in response.getheaders()
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length"
            }
            return response.status, answer, kept
        finally:
            connection.close()

    def _upstream_connection(self) -> http.client.HTTPConnection:
        """A connection to the task in the target group's protocol; over TLS no certificate checked."""
        if self.upstream_protocol == "HTTP":
            return http.client.HTTPConnection(self.upstream, timeout=30)
        if self.upstream_protocol != "HTTPS":
            raise PolicyError(f"the stand-in cannot forward over {self.upstream_protocol}")
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return http.client.HTTPSConnection(self.upstream, timeout=30, context=context)

    def _deny(
        self, record: dict[str, Any], started: float, reason: str, message: str
    ) -> tuple[int, bytes, dict[str, str]]:
        record["authDeniedReason"] = reason
        self._logged(record, started, 403)
        return 403, json.dumps({"message": message}).encode(), {"content-type": "application/json"}

    def _logged(self, record: dict[str, Any], started: float, status: int) -> int:
        record["responseCode"] = status
        record["duration"] = int((time.monotonic() - started) * 1000)
        self.access_log.append({name: record.get(name) for name, _ in LATTICE_COLUMNS})
        return status

    def _vpc_arn(self, vpc: str) -> str:
        account = self.service_arn.split(":")[4]
        return f"arn:aws:ec2:{self.region}:{account}:vpc/{vpc}"

    # --- a client ------------------------------------------------------------------------------

    def request(
        self,
        caller: Caller | None,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        extra_headers: Mapping[str, str] | None = None,
        secret: str | None = None,
    ) -> Answer:
        """Send one request as ``caller`` would (signed; unsigned for None), through the stand-in.

        ``secret`` signs with another secret than the caller's (a forged signature).
        """
        data = json.dumps(body).encode() if body is not None else None
        headers = {"content-type": "application/json", "host": self.host}
        if caller is not None:
            signer = dataclasses.replace(caller, secret_access_key=secret) if secret else caller
            headers = sign(signer, method, f"https://{self.host}{path}", data, self.region)
            headers["host"] = self.host
        headers.update(extra_headers or {})
        before = len(self.forwarded)
        assert self._server is not None
        connection = http.client.HTTPConnection("127.0.0.1", self._server.server_address[1], timeout=30)
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            return Answer(response.status, response.read(), len(self.forwarded) > before)
        finally:
            connection.close()
