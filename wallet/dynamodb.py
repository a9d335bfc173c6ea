"""A lean, signed, asyncio DynamoDB JSON-protocol client for the write path's hot loop.

Why not boto3 here: a boto3 ``transact_write_items`` costs about 2,800 us of client CPU (request
model validation, serialisation through the service model, event hooks, retry handlers), more than
the whole request's budget (issue 2: 1,500 us per transfer). This client keeps everything that must
be right and maintained from botocore, and drops only the generic machinery:

- **endpoint and region**: resolved once by a real botocore client, so ``AWS_ENDPOINT_URL_DYNAMODB``,
  ``AWS_ENDPOINT_URL``, the config file's ``endpoint_url`` and the regional AWS endpoint all work
  exactly as they do for boto3 (the embedded stack is found the same way as AWS);
- **credentials**: botocore's provider chain (environment, profile, SSO, container, instance
  metadata), refreshed by botocore's own windows, but in a worker thread ahead of expiry, never on
  the event loop (:mod:`wallet.aws_credentials`);
- **signing**: Signature Version 4 by the AWS Common Runtime (``awscrt``, AWS's C signer, the one
  botocore itself uses when installed with its ``crt`` extra): ~35 us per request where botocore's
  pure-Python :class:`~botocore.auth.SigV4Auth` takes ~90 us. ``SigV4Auth`` remains the reference:
  tests check both produce the same ``Authorization`` header, and ``signer="botocore"`` selects it;
- **JSON**: orjson both ways; the wire format is DynamoDB's low-level JSON (``{"N": "12"}``), so
  numbers never pass through a float;
- **HTTP**: keep-alive HTTP/1.1 connections on the server's own event loop (uvloop under
  uvicorn), responses parsed by httptools (llhttp, the parser uvicorn itself uses). Measured here
  per GetItem, CPU: this ~510 us, aiohttp ~900 us, http.client in a thread pool ~950 us (the
  thread hop and GIL hand-offs cost more than the HTTP). The requests it writes are fixed:
  ``POST`` with the signed headers and a ``Content-Length`` body; everything it reads goes through
  the parser.

Every answer's ``x-amz-crc32`` is checked against its body (botocore's DynamoDB policy retries a
mismatch): a mismatch is a transport error, the answer is not trusted. Every failure carries
DynamoDB's request id (``x-amzn-RequestId``) for the logs and AWS support.

Retrying is *not* done here, except for one case botocore also repeats (a pooled keep-alive
connection the server had closed): the store decides (:mod:`wallet.dynamodb_retry` says what each
error calls for), because only it knows which failures are safe to repeat (with the nonce
condition and the ``ClientRequestToken``, all of its writes are).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
import ssl
import typing
import urllib.parse
import zlib
from typing import Any, Final

import botocore.credentials
import botocore.httpsession
import botocore.session
import httptools
import orjson
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from wallet.aws_credentials import BackgroundCredentials, CredentialsUnavailableError
from wallet.dynamodb_retry import Verdict, classify

_logger = logging.getLogger(__name__)

_TARGET_PREFIX: Final = "DynamoDB_20120810."
_CONTENT_TYPE: Final = "application/x-amz-json-1.0"

#: The response headers read: the body's checksum and DynamoDB's request id.
_CRC32_HEADER: Final = b"x-amz-crc32"
_REQUEST_ID_HEADER: Final = b"x-amzn-requestid"


class DynamoDBError(Exception):
    """DynamoDB answered with an error document (HTTP 4xx/5xx).

    ``type`` is the short error name (``TransactionCanceledException``...), ``body`` the whole
    decoded document (it holds ``CancellationReasons`` for cancelled transactions), ``request_id``
    DynamoDB's ``x-amzn-RequestId``. :attr:`verdict` is what botocore's retry data makes of it.
    """

    def __init__(
        self, status: int, type_: str, message: str, body: dict[str, Any], request_id: str | None = None
    ) -> None:
        super().__init__(f"DynamoDB {status} {type_}: {message} (request id {request_id})")
        self.status = status
        self.type = type_
        self.message = message
        self.body = body
        self.request_id = request_id

    @property
    def verdict(self) -> Verdict:
        """Throttled, transient, cancelled or refused (:func:`wallet.dynamodb_retry.classify`)."""
        return classify(self.status, self.type)

    @property
    def throttled(self) -> bool:
        """True when DynamoDB refused for capacity: back off and retry."""
        return self.verdict is Verdict.THROTTLED

    @property
    def server_side(self) -> bool:
        """True for DynamoDB's own failures, which botocore retries: a write's outcome is unknown."""
        return self.verdict is Verdict.TRANSIENT


class DynamoDBTransportError(Exception):
    """The request or its response was lost on the network (outcome of a write unknown).

    ``sent`` is False when the request never left (no connection, no credentials): nothing
    reached DynamoDB, so a write's outcome is known (not applied). ``request_id`` is DynamoDB's,
    when an answer came (one whose checksum did not match).
    """

    def __init__(self, message: str, *, sent: bool = True, request_id: str | None = None) -> None:
        super().__init__(message)
        self.sent = sent
        self.request_id = request_id


class _StaleConnectionError(DynamoDBTransportError):
    """A pooled connection was closed by the server before it answered anything."""


class DynamoDBClient:
    """Signed POSTs of DynamoDB operations over a pool of keep-alive connections.

    Connections belong to the event loop that opened them; a client used from another loop (a
    test's, a Lambda's) opens its own. Safe for any number of concurrent calls on one loop.

    Parameters
    ----------
    region:
        Signing region and regional endpoint.
    session:
        botocore session to resolve endpoint and credentials from (a fresh one by default).
    timeout:
        Seconds allowed to connect, and for a whole answer to arrive, unless a call says otherwise
        (the store gives each attempt its own, within its deadline).
    max_idle:
        Idle connections kept for reuse; more may be open while calls are in flight.
    signer:
        ``"crt"`` (awscrt, the default) or ``"botocore"`` (:class:`~botocore.auth.SigV4Auth`).
    credentials_margin:
        Seconds before their expiry from which credentials are no longer signed with (a request
        could reach DynamoDB after they expired); a refresh is waited for instead.
    """

    def __init__(
        self,
        region: str,
        *,
        session: botocore.session.Session | None = None,
        timeout: float = 10.0,
        max_idle: int = 64,
        signer: str = "crt",
        credentials_margin: float = 30.0,
    ) -> None:
        self._session = session or botocore.session.get_session()
        resolver = self._session.create_client("dynamodb", region_name=region)
        self.endpoint_url: str = resolver.meta.endpoint_url
        self.region: str = resolver.meta.region_name
        parsed = urllib.parse.urlsplit(self.endpoint_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"unsupported DynamoDB endpoint {self.endpoint_url!r}")
        https = parsed.scheme == "https"
        self._host = parsed.hostname
        self._port = parsed.port or (443 if https else 80)
        self._path = parsed.path or "/"
        self._url = f"{parsed.scheme}://{parsed.netloc}{self._path}"
        default_port = 443 if https else 80
        self._host_header = parsed.netloc if parsed.port not in (None, default_port) else parsed.hostname
        self._timeout = timeout
        self._max_idle = max_idle
        self._idle: collections.deque[_Connection] = collections.deque()
        self._ssl: ssl.SSLContext | None = None
        if https:
            cafile = self._session.get_config_variable("ca_bundle") or botocore.httpsession.get_cert_path(
                True
            )
            self._ssl = ssl.create_default_context(cafile=cafile)
        self._credentials = BackgroundCredentials(self._session, margin_seconds=credentials_margin)
        self._signer: Signer = SIGNERS[signer](self._url, self.region)
        classify(400, "ValidationException")  # loads botocore's retry data now, not on the loop

    async def call(
        self, operation: str, payload: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Run one DynamoDB operation (``GetItem``, ``TransactWriteItems``...) and decode its answer.

        ``timeout`` bounds this attempt (credentials, connecting and the whole answer), the client's
        default if None.

        Raises
        ------
        DynamoDBError
            DynamoDB answered with an error document.
        DynamoDBTransportError
            No complete, intact answer arrived (no credentials, connection failed, closed or timed
            out, checksum mismatch).
        """
        limit = self._timeout if timeout is None else timeout
        started = asyncio.get_running_loop().time()
        try:
            credentials = await self._credentials.current(limit)
        except CredentialsUnavailableError as error:
            raise DynamoDBTransportError(str(error), sent=False) from error
        request = self._request(operation, orjson.dumps(payload), credentials)
        limit = max(0.001, limit - (asyncio.get_running_loop().time() - started))
        connection = self._pooled() or await self._connect(limit)
        reused = not connection.fresh
        try:
            try:
                status, headers, data = await connection.exchange(request, limit)
            except _StaleConnectionError:
                if not reused:
                    raise
                # A keep-alive connection the server had already closed: botocore repeats these
                # too. Safe because every write of the store is conditional (nonce, version).
                connection.close()
                connection = await self._connect(limit)
                status, headers, data = await connection.exchange(request, limit)
        except BaseException:
            connection.close()  # an unanswered or cancelled request leaves it unusable
            raise
        request_id = headers.get(_REQUEST_ID_HEADER)
        expected = headers.get(_CRC32_HEADER)
        if expected is not None and expected != str(zlib.crc32(data)):
            connection.close()  # whatever garbled the body may have garbled the stream
            raise DynamoDBTransportError(
                f"DynamoDB's answer to {operation} failed its CRC32 check (x-amz-crc32 {expected}, "
                f"body {zlib.crc32(data)}; request id {request_id}): not trusted",
                request_id=request_id,
            )
        if connection.reusable and len(self._idle) < self._max_idle:
            self._idle.append(connection)
        else:
            connection.close()
        if status == 200:
            decoded: dict[str, Any] = orjson.loads(data)
            return decoded
        raise _error(status, data, request_id)

    def close(self) -> None:
        """Close idle connections (in-flight ones close when their call ends)."""
        while self._idle:
            self._idle.pop().close()

    def _request(
        self, operation: str, body: bytes, credentials: botocore.credentials.ReadOnlyCredentials
    ) -> bytes:
        """The whole HTTP request, signed."""
        headers = [
            ("Host", self._host_header),
            ("Content-Type", _CONTENT_TYPE),
            ("X-Amz-Target", _TARGET_PREFIX + operation),
        ]
        signed = self._signer.sign(credentials, self._path, headers, body)
        head = "".join(f"{name}: {value}\r\n" for name, value in signed)
        return f"POST {self._path} HTTP/1.1\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body

    def _pooled(self) -> _Connection | None:
        loop = asyncio.get_running_loop()
        while self._idle:
            connection = self._idle.pop()
            if connection.loop is loop and connection.reusable:
                return connection
            connection.close()
        return None

    async def _connect(self, timeout: float) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Connection(loop),
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=self._host if self._ssl else None,
                ),
                timeout,
            )
        except (TimeoutError, OSError) as error:
            raise DynamoDBTransportError(
                f"cannot connect to {self.endpoint_url}: {error!r}", sent=False
            ) from error
        return connection


Headers = list[tuple[str, str]]


class Signer(typing.Protocol):
    """Adds SigV4 ``X-Amz-Date``, ``Authorization`` (and the session token) to a POST's headers."""

    def sign(
        self, credentials: botocore.credentials.ReadOnlyCredentials, path: str, headers: Headers, body: bytes
    ) -> Headers:
        """The headers to send: ``headers`` plus the signature's."""
        ...


class BotocoreSigner:
    """botocore's pure-Python :class:`~botocore.auth.SigV4Auth`: the reference implementation."""

    def __init__(self, url: str, region: str) -> None:
        self._url = url
        self._region = region

    def sign(
        self, credentials: botocore.credentials.ReadOnlyCredentials, path: str, headers: Headers, body: bytes
    ) -> Headers:
        """Sign with SigV4Auth, the way boto3 signs every request."""
        request = AWSRequest(method="POST", url=self._url, data=body, headers=dict(headers))
        SigV4Auth(credentials, "dynamodb", self._region).add_auth(request)
        return list(request.headers.items())


class CrtSigner:
    """The AWS Common Runtime's signer (aws-c-auth, in C): same signature, a third of the CPU."""

    def __init__(self, url: str, region: str) -> None:
        from awscrt import auth, http  # imported here: only this signer needs the CRT

        self._auth = auth
        self._http = http
        self._region = region
        self._provider_for: botocore.credentials.ReadOnlyCredentials | None = None
        self._provider: Any = None

    def sign(
        self, credentials: botocore.credentials.ReadOnlyCredentials, path: str, headers: Headers, body: bytes
    ) -> Headers:
        """Sign with ``awscrt.auth.aws_sign_request`` (completes at once with static credentials)."""
        if credentials != self._provider_for:  # botocore refreshed them
            self._provider = self._auth.AwsCredentialsProvider.new_static(
                credentials.access_key, credentials.secret_key, credentials.token
            )
            self._provider_for = credentials
        config = self._auth.AwsSigningConfig(
            credentials_provider=self._provider,
            region=self._region,
            service="dynamodb",
            signed_body_value=hashlib.sha256(body).hexdigest(),
        )
        request = self._http.HttpRequest("POST", path, self._http.HttpHeaders(headers))
        self._auth.aws_sign_request(request, config).result()
        return list(request.headers)


#: Signers by name (``DynamoDBClient(signer=...)``).
SIGNERS: Final[dict[str, type[BotocoreSigner] | type[CrtSigner]]] = {
    "crt": CrtSigner,
    "botocore": BotocoreSigner,
}


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection: one request at a time, the answer parsed by httptools."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._body: list[bytes] = []
        self._headers: dict[bytes, str] = {}
        self._answer: asyncio.Future[tuple[int, dict[bytes, str], bytes]] | None = None
        self._received = False
        self._keep_alive = True
        #: True until the connection carried its first request (a fresh one cannot be stale).
        self.fresh = True

    @property
    def reusable(self) -> bool:
        """Open, idle, and the server did not ask to close."""
        return self._transport is not None and self._answer is None and self._keep_alive

    async def exchange(self, request: bytes, timeout: float) -> tuple[int, dict[bytes, str], bytes]:
        """Send ``request`` and wait at most ``timeout`` s for the whole answer: ``(status, headers, body)``.

        ``headers`` holds the ones this client reads, by lower-case name.
        """
        if self._transport is None or self._transport.is_closing():
            raise _StaleConnectionError("connection closed while idle")
        answer: asyncio.Future[tuple[int, dict[bytes, str], bytes]] = self.loop.create_future()
        self._answer, self._received = answer, False
        self._headers = {}
        self.fresh = False
        self._transport.write(request)
        timer = self.loop.call_later(timeout, self._time_out, timeout)
        try:
            return await answer
        finally:
            timer.cancel()

    def close(self) -> None:
        """Close the connection (idempotent; a no-op once its event loop is closed)."""
        transport, self._transport = self._transport, None
        if transport is not None and not self.loop.is_closed():
            transport.close()

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = typing.cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._fail(DynamoDBTransportError(f"malformed HTTP answer from DynamoDB: {error}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if self._received:
            self._fail(DynamoDBTransportError(f"DynamoDB closed the connection mid-answer ({exc!r})"))
        else:
            self._fail(_StaleConnectionError(f"DynamoDB closed the connection before answering ({exc!r})"))

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        lowered = name.lower()
        if lowered in (_CRC32_HEADER, _REQUEST_ID_HEADER):
            self._headers[lowered] = value.decode("latin-1").strip()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._keep_alive = self._parser.should_keep_alive()
        body, self._body = b"".join(self._body), []
        answer, self._answer = self._answer, None
        if answer is not None and not answer.done():
            answer.set_result((self._parser.get_status_code(), self._headers, body))

    def _time_out(self, timeout: float) -> None:
        self._fail(DynamoDBTransportError(f"DynamoDB did not answer within {timeout:.2f} s"))
        self.close()

    def _fail(self, error: Exception) -> None:
        answer, self._answer = self._answer, None
        self._keep_alive = False
        if answer is not None and not answer.done():
            answer.set_exception(error)


def _error(status: int, data: bytes, request_id: str | None = None) -> DynamoDBError:
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    type_ = str(body.get("__type", "")).rpartition("#")[2] or f"HTTP{status}"
    message = str(body.get("message") or body.get("Message") or data[:200].decode(errors="replace"))
    return DynamoDBError(status, type_, message, body, request_id)
