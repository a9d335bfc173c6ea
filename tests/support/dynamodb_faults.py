"""DynamoDB as a fleet would meet it, for tests: conflicts, a slow or stuck write path.

DynamoDB Local serialises transactions on the same item where the service cancels one of them with
``TransactionConflict``, and it answers in a few milliseconds, so neither a conflict nor a request
still in flight when a server is told to stop happens on its own here. Two injectors make them:

- :class:`ScriptedDynamoDB` wraps the store's own client (in-process servers and stores): it
  records every TransactWriteItems, cancels the ones a test picks with ``TransactionConflict``
  reasons shaped like the service's, or holds them at a gate until the test opens it;
- :class:`DelayingProxy` is a loopback HTTP proxy to DynamoDB Local for servers in child
  processes (found through ``AWS_ENDPOINT_URL_DYNAMODB``): it delays, or holds, TransactWriteItems.
"""

from __future__ import annotations

import asyncio
import http.client
import http.server
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any, Self

from contracts.wallets_table import ENTITY_TRANSACTION, Attr
from wallet.dynamodb import DynamoDBClient, DynamoDBError
from walletlake.local import free_port

#: What the service says for an item another transaction holds (the message varies; the code not).
CONFLICT_REASON = {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
HELD_REASON = {"Code": "None"}


def nonces_of(payload: dict[str, Any]) -> list[str]:
    """The nonces of the requests a TransactWriteItems carries (its transaction items), in order."""
    return [
        item["Put"]["Item"][Attr.NONCE]["S"]
        for item in payload["TransactItems"]
        if "Put" in item and item["Put"]["Item"].get(Attr.ENTITY, {}).get("S") == ENTITY_TRANSACTION
    ]


def cancellation(payload: dict[str, Any], reasons: Sequence[dict[str, Any]]) -> DynamoDBError:
    """A ``TransactionCanceledException`` of ``payload`` with ``reasons`` (one per item)."""
    assert len(reasons) == len(payload["TransactItems"])
    codes = ", ".join(reason["Code"] for reason in reasons)
    message = f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]"
    body = {
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "Message": message,
        "CancellationReasons": list(reasons),
    }
    return DynamoDBError(400, "TransactionCanceledException", message, body)


def conflict_on_wallets(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Reasons of a transaction another one held every wallet of (every ``Update``), nothing else."""
    return [CONFLICT_REASON if "Update" in item else HELD_REASON for item in payload["TransactItems"]]


def conflict_on_first_item(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Reasons of a transaction another one held only the first item of."""
    return [CONFLICT_REASON, *[HELD_REASON] * (len(payload["TransactItems"]) - 1)]


#: Decides, for one TransactWriteItems about to be sent, the reasons to cancel it with (None: send).
Cancel = Callable[[dict[str, Any]], list[dict[str, Any]] | None]


class ScriptedDynamoDB:
    """The store's DynamoDB client with a test deciding what each TransactWriteItems meets.

    Attributes
    ----------
    writes:
        The nonces of every TransactWriteItems the store sent (cancelled or not), in sending order.
    cancelled:
        Indices into :attr:`writes` of those cancelled here.
    cancel:
        Asked for every movement TransactWriteItems: reasons to cancel it with, or None to send it.
    gate:
        When set to an unopened :class:`threading.Event`, movement writes wait for it before going
        on (``held`` counts those waiting).
    """

    def __init__(self, client: DynamoDBClient) -> None:
        self.client = client
        self.writes: list[list[str]] = []
        self.cancelled: list[int] = []
        self.other_calls: list[str] = []
        self.cancel: Cancel = lambda payload: None
        self.gate: threading.Event | None = None
        self.held = 0

    async def call(
        self, operation: str, payload: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        nonces = nonces_of(payload) if operation == "TransactWriteItems" else []
        if not nonces:  # wallet creation, reads
            self.other_calls.append(operation)
            return await self.client.call(operation, payload, timeout=timeout)
        self.writes.append(nonces)
        if (gate := self.gate) is not None:
            self.held += 1
            try:
                await asyncio.get_running_loop().run_in_executor(None, gate.wait)
            finally:
                self.held -= 1
        reasons = self.cancel(payload)
        if reasons is not None:
            self.cancelled.append(len(self.writes) - 1)
            raise cancellation(payload, reasons)
        return await self.client.call(operation, payload, timeout=timeout)

    def close(self) -> None:
        self.client.close()


def first_attempts_of_groups(
    attempts: int, reasons: Callable[[dict[str, Any]], list[dict[str, Any]]]
) -> Cancel:
    """Cancel the first ``attempts`` writes of every group commit (two requests or more) with ``reasons``.

    A group is known by the set of its nonces, so a group written again whole counts as the same.
    """
    seen: dict[frozenset[str], int] = {}

    def cancel(payload: dict[str, Any]) -> list[dict[str, Any]] | None:
        nonces = frozenset(nonces_of(payload))
        if len(nonces) < 2:
            return None
        seen[nonces] = seen.get(nonces, 0) + 1
        return reasons(payload) if seen[nonces] <= attempts else None

    return cancel


class DynamoDBProxy:
    """A loopback HTTP proxy to DynamoDB Local; a subclass decides what :meth:`handle` does per call.

    Servers find it through ``AWS_ENDPOINT_URL_DYNAMODB``, as they would find AWS.
    """

    def __init__(self, upstream: str) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        self.upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def handle(self, request: http.server.BaseHTTPRequestHandler, operation: str, body: bytes) -> None:
        """Answer one call: forward it by default."""
        self.reply(request, *self.forward(body, dict(request.headers)))

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                proxy.handle(self, self.headers["X-Amz-Target"].rpartition(".")[2], body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler

    def forward(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        """The call as DynamoDB Local answers it."""
        connection = http.client.HTTPConnection(*self.upstream, timeout=30)
        try:
            connection.request("POST", "/", body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    @staticmethod
    def reply(
        request: http.server.BaseHTTPRequestHandler,
        status: int,
        answer: bytes,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Send an answer as DynamoDB's JSON protocol does (with ``headers`` besides)."""
        request.send_response(status)
        request.send_header("Content-Type", "application/x-amz-json-1.0")
        request.send_header("Content-Length", str(len(answer)))
        for name, value in (headers or {}).items():
            request.send_header(name, value)
        request.end_headers()
        request.wfile.write(answer)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class DelayingProxy(DynamoDBProxy):
    """A proxy that slows down or holds movement writes.

    ``delay`` seconds are added before every TransactWriteItems is forwarded. While ``hold`` is set,
    TransactWriteItems are held instead (``held`` counts them) until :meth:`release`, and then
    dropped: the connection closes with no answer and DynamoDB never sees them. Every
    TransactWriteItems body is kept, so a test can tell which requests the server had read
    (:meth:`wrote`).
    """

    def __init__(self, upstream: str, delay: float = 0.0) -> None:
        super().__init__(upstream)
        self.delay = delay
        self.hold = False
        self.held = 0
        self.writes = 0
        self._bodies: list[bytes] = []
        self._released = threading.Event()
        self._lock = threading.Lock()

    def release(self) -> None:
        """Let held writes go (dropped, unanswered)."""
        self._released.set()

    def wrote(self, text: str) -> bool:
        """Whether a TransactWriteItems that reached the proxy carried ``text`` (a request's nonce)."""
        needle = text.encode()
        with self._lock:
            return any(needle in body for body in self._bodies)

    def handle(self, request: http.server.BaseHTTPRequestHandler, operation: str, body: bytes) -> None:
        """Delay or hold a TransactWriteItems; forward everything else."""
        if operation == "TransactWriteItems":
            with self._lock:
                self.writes += 1
                self._bodies.append(body)
            if self.hold:
                with self._lock:
                    self.held += 1
                self._released.wait()
                request.close_connection = True
                return
            if self.delay:
                self._released.wait(self.delay)  # a pause, cut short by release()
        super().handle(request, operation, body)

    def __exit__(self, *exc: object) -> None:
        self.release()
        super().__exit__(*exc)
