"""Every request on record: one JSON line per request, in VPC Lattice's access-log field names.

Who read which balance, who created a wallet, who sent a replay, who was refused: the server writes
it as it answers (``WALLETLAKE_AUDIT_LOG``: ``stdout`` on the tasks, whose log driver ships it to
CloudWatch Logs; a file on the embedded stack, which the local engine reads as ``api_access_log``).
The fields are :data:`contracts.audit_log.AUDIT_COLUMNS`: Lattice's names for what Lattice also
records, so one query (``who_did_what``) reads Lattice's logs on AWS and these lines locally, plus
what only the server knows (the operation, the wallets, the transaction, a replay, the error code).

Each line is written with one ``write(2)`` on a descriptor opened for appending: lines of several
worker processes sharing a file or a pipe never interleave (POSIX appends, and pipe writes of at
most ``PIPE_BUF``, 4,096 bytes on Linux, are atomic). So a line is bounded **after** JSON encoding,
newline included, to :data:`MAX_LINE_BYTES`: a field is bounded by what it costs encoded (a
control character costs six bytes, a quote two), not by its characters; while a line is too long
its longest text field is cut and ends with :data:`TRUNCATED`. A write that fails or writes part of
the line is counted (``audit_lines_lost``, alarmed); the rest of a part-written line is written
after it, so every byte the sink can take reaches it. ``/healthz`` is not recorded: health checks
every few seconds would bury the requests.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable
from typing import Any, Final

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from contracts import api_metrics
from contracts.settings import Settings
from wallet.authorization import LATTICE_TARGET_HEADER, OPEN_PATHS, session_name
from wallet.ownership import OWNER_KEY
from wallet.principals import header_fields, principal_of
from wallet.receipts import REPLAYED_HEADER, TRANSACTION_ID_HEADER
from wallet.routing import matched
from wallet.telemetry import Telemetry

#: The header naming the caller's VPC (``SourceVpcArn=...``).
LATTICE_NETWORK_HEADER: Final = b"x-amzn-lattice-network"
#: The longest line written, in bytes after encoding, its newline included: under ``PIPE_BUF``
#: (4,096 on Linux, POSIX's minimum 512 is not what any target runs), so one write is atomic.
MAX_LINE_BYTES: Final = 4_095
#: How a cut field ends.
TRUNCATED: Final = "…[truncated]"
#: The fields a client's request can make long, cut (longest first) until the line fits.
_SHORTENABLE: Final = (
    "requestPath",
    "userAgent",
    "callerPrincipal",
    "sessionName",
    "walletId",
    "targetWalletId",
    "sourceVpcArn",
    "serviceArn",
    "targetGroupArn",
    "walletOwner",
)
_TXN_HEADER: Final = TRANSACTION_ID_HEADER.lower().encode()
_REPLAYED_HEADER: Final = REPLAYED_HEADER.lower().encode()


def open_sink(destination: str, telemetry: Telemetry) -> Callable[[bytes], None]:
    """A function writing one line to ``destination`` (``stdout`` or a file path) in one ``write(2)``.

    A line not written whole (an error, or a short write: a full disk, a signal) is counted as
    ``audit_lines_lost``; a short write's rest is written after it, so nothing the sink can still
    take is dropped.
    """
    if destination == "stdout":
        descriptor = 1
    else:
        os.makedirs(os.path.dirname(destination) or ".", exist_ok=True)
        descriptor = os.open(destination, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)

    def write(line: bytes) -> None:
        try:
            written = os.write(descriptor, line)
        except OSError:
            telemetry.count(api_metrics.AUDIT_LINES_LOST)
            return
        if written == len(line):
            return
        telemetry.count(api_metrics.AUDIT_LINES_LOST)  # torn: no longer one atomic write
        rest = memoryview(line)[written:]
        try:
            while rest:
                rest = rest[os.write(descriptor, rest) :]
        except OSError:
            return

    return write


def bounded_line(record: dict[str, Any]) -> bytes:
    """``record`` as one JSON line of at most :data:`MAX_LINE_BYTES`, longest text fields cut first.

    Examples
    --------
    >>> line = bounded_line({"requestPath": '"' * 5_000, "operation": None})
    >>> len(line) <= MAX_LINE_BYTES, line.endswith(b'[truncated]","operation":null}\\n')
    (True, True)
    """
    line = orjson.dumps(record) + b"\n"
    while len(line) > MAX_LINE_BYTES:
        texts = [
            name for name in _SHORTENABLE if isinstance(record.get(name), str) and record[name] != TRUNCATED
        ]
        if not texts:
            raise ValueError(f"an audit line's fixed fields alone exceed {MAX_LINE_BYTES} bytes")
        longest = max(texts, key=lambda name: len(orjson.dumps(record[name])))
        record[longest] = _cut(record[longest], len(line) - MAX_LINE_BYTES)
        line = orjson.dumps(record) + b"\n"
    return line


def audit_line(
    settings: Settings,
    scope: Scope,
    *,
    started: float,
    duration_ms: int,
    status: int,
    response_headers: list[tuple[bytes, bytes]],
    body: bytes,
) -> bytes:
    """The JSON line of one answered request (pure but for nothing: all inputs given)."""
    headers = scope["headers"]
    method, path = scope["method"], scope["path"]
    principal = principal_of(scope, settings.trust_front, settings.default_principal)
    route = matched(scope)  # the one match the permission check judged and the endpoint ran by
    operation = route.route.operation if route is not None else None
    parameters = route.parameters if route is not None else {}
    wallet = parameters.get("wallet_id")
    target = parameters.get("target_wallet_id")
    answer = _answer(body) if body else {}
    if operation == "create_wallet" and status in (200, 201):
        wallet = answer.get("id") if isinstance(answer.get("id"), str) else None
    refusal = answer.get("error") if status >= 400 and isinstance(answer.get("error"), str) else None
    record: dict[str, Any] = {
        "startTime": dt.datetime.fromtimestamp(started, dt.UTC).isoformat(timespec="milliseconds")[:-6] + "Z",
        "requestMethod": method,
        "requestPath": path,
        "responseCode": status,
        "callerPrincipal": principal,
        "sourceVpcArn": header_fields(_header(headers, LATTICE_NETWORK_HEADER)).get("SourceVpcArn"),
        "serviceArn": header_fields(_header(headers, LATTICE_TARGET_HEADER)).get("ServiceArn"),
        "targetGroupArn": header_fields(_header(headers, LATTICE_TARGET_HEADER)).get("TargetGroupArn"),
        "authDeniedReason": None,
        "duration": duration_ms,
        "userAgent": _header(headers, b"user-agent") or None,
        "operation": operation,
        "walletId": wallet or None,
        "targetWalletId": target or None,
        "transactionId": _header(response_headers, _TXN_HEADER) or None,
        "replayed": _header(response_headers, _REPLAYED_HEADER) == "true",
        "refusal": refusal,
        "sessionName": session_name(settings, headers, principal) if principal else None,
        "walletOwner": scope.get(OWNER_KEY),
    }
    return bounded_line(record)


class AuditTrail:
    """ASGI middleware writing :func:`audit_line` for every request ``app`` answers."""

    def __init__(self, app: ASGIApp, settings: Settings, sink: Callable[[bytes], None]) -> None:
        self.app = app
        self.settings = settings
        self.sink = sink

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, keeping what its answer said; write the line once it is sent."""
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        started, clock = time.time(), time.monotonic()
        route = matched(scope)
        creates = route is not None and route.route.operation == "create_wallet"
        answer: dict[str, Any] = {"status": 500, "headers": [], "body": b""}

        async def keeping(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
                answer["headers"] = list(message.get("headers", ()))
            elif message["type"] == "http.response.body" and (answer["status"] >= 400 or creates):
                # an error's code, or the created wallet's id: small bodies, read up to a bound
                answer["body"] = (answer["body"] + message.get("body", b""))[:4096]
            await send(message)

        try:
            await self.app(scope, receive, keeping)
        finally:
            self.sink(
                audit_line(
                    self.settings,
                    scope,
                    started=started,
                    duration_ms=round((time.monotonic() - clock) * 1000),
                    status=answer["status"],
                    response_headers=answer["headers"],
                    body=answer["body"],
                )
            )


def _answer(body: bytes) -> dict[str, Any]:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


def _cut(text: str, excess: int) -> str:
    """``text`` shortened by at least ``excess`` encoded bytes, ending with :data:`TRUNCATED`."""
    budget = len(orjson.dumps(text)) - excess - len(orjson.dumps(TRUNCATED))
    kept, used = 0, 2  # the quotes
    for character in text:
        cost = len(orjson.dumps(character)) - 2
        if used + cost > budget:
            break
        kept, used = kept + 1, used + cost
    return text[:kept] + TRUNCATED
