"""A lean, signed DynamoDB JSON-protocol client for the write path's hot loop.

Why not boto3 here: a boto3 ``transact_write_items`` costs about 2,800 us of client CPU (request
model validation, serialisation through the service model, event hooks, retry handlers), more than
the whole request's budget (issue 2: 1,500 us per transfer). This client keeps everything that must
be right and maintained from botocore, and drops only the generic machinery:

- **endpoint and region**: resolved once by a real botocore client, so ``AWS_ENDPOINT_URL_DYNAMODB``,
  ``AWS_ENDPOINT_URL``, the config file's ``endpoint_url`` and the regional AWS endpoint all work
  exactly as they do for boto3 (the embedded stack is found the same way as AWS);
- **credentials**: botocore's provider chain (environment, profile, SSO, container, instance
  metadata), refreshed by botocore;
- **signing**: botocore's own :class:`~botocore.auth.SigV4Auth` on every request;
- **JSON**: orjson both ways; the wire format is DynamoDB's low-level JSON (``{"N": "12"}``), so
  numbers never pass through a float;
- **HTTP**: the standard library's :mod:`http.client` over a small pool of keep-alive connections.
  Measured here, urllib3's pool adds ~150 us per call on top of http.client for features this
  client does not use (its own retries, redirects, decompression).

Retrying is *not* done here: the store decides, because only it knows which failures are safe to
repeat (with the nonce condition, all of its writes are).
"""

from __future__ import annotations

import collections
import http.client
import logging
import ssl
import threading
import urllib.parse
from typing import Any, Final

import botocore.credentials
import botocore.httpsession
import botocore.session
import orjson
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

_logger = logging.getLogger(__name__)

_TARGET_PREFIX: Final = "DynamoDB_20120810."
_CONTENT_TYPE: Final = "application/x-amz-json-1.0"

#: Error types (the part after ``#`` of ``__type``) that mean "slow down".
THROTTLING_ERRORS: Final = frozenset(
    {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}
)


class DynamoDBError(Exception):
    """DynamoDB answered with an error document (HTTP 4xx/5xx).

    ``type`` is the short error name (``TransactionCanceledException``...), ``body`` the whole
    decoded document (it holds ``CancellationReasons`` for cancelled transactions).
    """

    def __init__(self, status: int, type_: str, message: str, body: dict[str, Any]) -> None:
        super().__init__(f"DynamoDB {status} {type_}: {message}")
        self.status = status
        self.type = type_
        self.message = message
        self.body = body

    @property
    def throttled(self) -> bool:
        """True when DynamoDB refused for capacity."""
        return self.type in THROTTLING_ERRORS

    @property
    def server_side(self) -> bool:
        """True for DynamoDB's own failures (5xx): the outcome of a write is unknown."""
        return self.status >= 500


class DynamoDBTransportError(Exception):
    """The request or its response was lost on the network (outcome of a write unknown)."""


class DynamoDBClient:
    """Signed POSTs of DynamoDB operations, one pooled keep-alive connection per in-flight call.

    Thread-safe: the pool is a deque (atomic ``append``/``pop`` in CPython), credentials are
    frozen per call.

    Parameters
    ----------
    region:
        Signing region and regional endpoint.
    session:
        botocore session to resolve endpoint and credentials from (a fresh one by default).
    timeout:
        Socket timeout in seconds for connect and each read.
    max_idle:
        Idle connections kept for reuse; more may be open while calls are in flight.
    """

    def __init__(
        self,
        region: str,
        *,
        session: botocore.session.Session | None = None,
        timeout: float = 10.0,
        max_idle: int = 64,
    ) -> None:
        self._session = session or botocore.session.get_session()
        resolver = self._session.create_client("dynamodb", region_name=region)
        self.endpoint_url: str = resolver.meta.endpoint_url
        self.region: str = resolver.meta.region_name
        parsed = urllib.parse.urlsplit(self.endpoint_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"unsupported DynamoDB endpoint {self.endpoint_url!r}")
        self._https = parsed.scheme == "https"
        self._host = parsed.hostname
        self._port = parsed.port
        self._path = parsed.path or "/"
        self._url = f"{parsed.scheme}://{parsed.netloc}{self._path}"
        default_port = 443 if self._https else 80
        self._host_header = parsed.netloc if parsed.port not in (None, default_port) else parsed.hostname
        self._timeout = timeout
        self._max_idle = max_idle
        self._idle: collections.deque[http.client.HTTPConnection] = collections.deque()
        self._ssl_context: ssl.SSLContext | None = None
        if self._https:
            cafile = self._session.get_config_variable("ca_bundle") or botocore.httpsession.get_cert_path(
                True
            )
            self._ssl_context = ssl.create_default_context(cafile=cafile)
        self._credentials: botocore.credentials.Credentials | None = None
        self._credentials_lock = threading.Lock()

    def call(self, operation: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Run one DynamoDB operation (``GetItem``, ``TransactWriteItems``...) and decode its answer.

        Raises
        ------
        DynamoDBError
            DynamoDB answered with an error document.
        DynamoDBTransportError
            The connection failed before a complete answer arrived.
        """
        body = orjson.dumps(payload)
        headers = self._signed_headers(operation, body)
        connection, reused = self._checkout()
        try:
            response, data = _exchange(connection, self._path, body, headers)
        except _STALE_CONNECTION_ERRORS as error:
            connection.close()
            if not reused:
                raise DynamoDBTransportError(f"DynamoDB {operation}: {error!r}") from error
            # A keep-alive connection the server had already closed: botocore repeats these too.
            # Repeating is safe because every write of the store is conditional (nonce, version).
            connection = self._connect()
            try:
                response, data = _exchange(connection, self._path, body, headers)
            except (OSError, http.client.HTTPException) as again:
                connection.close()
                raise DynamoDBTransportError(f"DynamoDB {operation}: {again!r}") from again
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            raise DynamoDBTransportError(f"DynamoDB {operation}: {error!r}") from error
        if response.will_close or len(self._idle) >= self._max_idle:
            connection.close()
        else:
            self._idle.append(connection)
        if response.status == 200:
            decoded: dict[str, Any] = orjson.loads(data)
            return decoded
        raise _error(response.status, data)

    def close(self) -> None:
        """Close idle connections (in-flight ones close when their call ends)."""
        while self._idle:
            self._idle.pop().close()

    def _signed_headers(self, operation: str, body: bytes) -> dict[str, str]:
        request = AWSRequest(
            method="POST",
            url=self._url,
            data=body,
            headers={
                "Host": self._host_header,
                "Content-Type": _CONTENT_TYPE,
                "X-Amz-Target": _TARGET_PREFIX + operation,
            },
        )
        SigV4Auth(self._frozen_credentials(), "dynamodb", self.region).add_auth(request)
        return dict(request.headers.items())

    def _frozen_credentials(self) -> botocore.credentials.ReadOnlyCredentials:
        credentials = self._credentials
        if credentials is None:
            with self._credentials_lock:
                if self._credentials is None:
                    found = self._session.get_credentials()
                    if found is None:
                        raise DynamoDBTransportError(
                            "no AWS credentials found (environment, profile, or instance role)"
                        )
                    self._credentials = found
                credentials = self._credentials
        return credentials.get_frozen_credentials()

    def _checkout(self) -> tuple[http.client.HTTPConnection, bool]:
        try:
            return self._idle.pop(), True
        except IndexError:
            return self._connect(), False

    def _connect(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=self._timeout, context=self._ssl_context
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)


#: What a reused keep-alive connection raises when the server closed it while it sat idle.
_STALE_CONNECTION_ERRORS: Final = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    BrokenPipeError,
    ConnectionAbortedError,
)


def _exchange(
    connection: http.client.HTTPConnection, path: str, body: bytes, headers: dict[str, str]
) -> tuple[http.client.HTTPResponse, bytes]:
    connection.request("POST", path, body=body, headers=headers)
    response = connection.getresponse()
    return response, response.read()


def _error(status: int, data: bytes) -> DynamoDBError:
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    type_ = str(body.get("__type", "")).rpartition("#")[2] or f"HTTP{status}"
    message = str(body.get("message") or body.get("Message") or data[:200].decode(errors="replace"))
    return DynamoDBError(status, type_, message, body)
