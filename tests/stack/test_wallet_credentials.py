"""Credentials from an ECS-style endpoint that turns slow, then fails: the loop never waits on it.

The write path's DynamoDB client finds its credentials through botocore's provider chain; here the
chain ends at a credentials endpoint on 127.0.0.1 (``AWS_CONTAINER_CREDENTIALS_FULL_URI``, as an
ECS task's role is served), which the test controls: it answers at once, holds its answers until
released, or fails (500). DynamoDB Local does not check signatures, so the credentials only have to
be well formed; what is checked is what the server does around their refresh.
"""

from __future__ import annotations

import datetime as dt
import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Self

import pytest
from support.wallet_http import Api, error_of, serve

from contracts.settings import Settings
from wallet.dynamodb import DynamoDBClient
from wallet.store import RetryPolicy, WalletStore
from walletlake.local import free_port

pytestmark = pytest.mark.stack


class CredentialsEndpoint:
    """A loopback container-credentials endpoint: ``mode`` is ``answer``, ``hold`` or ``fail``.

    ``hold`` keeps each request waiting until :meth:`release`, then fails it (a slow endpoint that
    ends in an error). Credentials expire ``lifetime`` seconds after they are served.
    """

    def __init__(self, lifetime: float) -> None:
        self.lifetime = lifetime
        self.mode = "answer"
        self.arrived = 0
        self.answered = 0
        self.failed = 0
        self._released = threading.Event()
        self._lock = threading.Lock()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/credentials"
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def release(self) -> None:
        self._released.set()

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with endpoint._lock:
                    endpoint.arrived += 1
                if endpoint.mode == "hold":
                    endpoint._released.wait(30)
                if endpoint.mode != "answer":
                    with endpoint._lock:
                        endpoint.failed += 1
                    self.send_response(500)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=endpoint.lifetime)
                body = json.dumps(
                    {
                        "AccessKeyId": "ASIAEXAMPLEROTATING",
                        "SecretAccessKey": "secret/rotating",
                        "Token": "token",
                        "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                with endpoint._lock:
                    endpoint.answered += 1

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()


def _only_the_endpoint(monkeypatch: pytest.MonkeyPatch, endpoint: CredentialsEndpoint) -> None:
    """botocore's chain finds nothing before the container provider (the stack's keys removed)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", endpoint.url)


def _poll(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


@pytest.fixture
def endpoint() -> Iterator[CredentialsEndpoint]:
    # 12 minutes: inside botocore's advisory refresh window (15), outside its mandatory one (10)
    with CredentialsEndpoint(lifetime=12 * 60) as served:
        yield served


def test_a_slow_then_failing_refresh_blocks_no_request_and_every_answer_stays_true(
    settings: Settings, endpoint: CredentialsEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    _only_the_endpoint(monkeypatch, endpoint)
    with serve(settings, WalletStore(settings)) as api:
        # GIVEN credentials served once, already in botocore's advisory refresh window
        wallet_id = api.create()
        served, arrived = endpoint.answered, endpoint.arrived
        assert served >= 1
        # WHEN the endpoint turns slow: it holds every request until released, then fails it
        endpoint.mode = "hold"
        statuses: list[int] = []

        def deposited_and_refreshing() -> bool:
            statuses.append(api.deposit(wallet_id, 1, f"n-{len(statuses)}").status_code)
            return endpoint.arrived > arrived

        # a request starts the refresh (at most one every 5 s after the last)
        _poll(deposited_and_refreshing)
        assert statuses == [204] * len(statuses)
        deposits = len(statuses)
        # THEN requests are answered while the refresh is stuck (none waits on it): the event
        # loop never calls the endpoint, the snapshot taken before is still valid
        held = endpoint.arrived
        answers = [api.deposit(wallet_id, 1, f"h-{i}").status_code for i in range(5)]
        assert answers == [204] * 5
        assert endpoint.answered == served  # the refresh has not finished: nothing answered yet
        # AND still on its first fetch: no request waited out botocore's fetch timeout and retries
        # (on the loop, the first of them would have, and the endpoint seen 3 fetches)
        assert endpoint.arrived == held
        # WHEN the held refresh fails
        endpoint.mode = "fail"
        endpoint.release()
        _poll(lambda: endpoint.failed >= 1)
        # THEN requests still succeed on the valid credentials, and the balance is every deposit
        assert [api.deposit(wallet_id, 1, f"m-{i}").status_code for i in range(3)] == [204] * 3
        assert api.balance(wallet_id).json() == {"balance": str(deposits + 5 + 3)}


def test_credentials_expiring_with_no_refresh_answer_503_unavailable_and_write_nothing(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN credentials that expire 4 s after they are served, from an endpoint that then fails
    with CredentialsEndpoint(lifetime=4) as endpoint:
        _only_the_endpoint(monkeypatch, endpoint)
        retry = RetryPolicy(transient_attempts=2, base_delay=0.001, max_delay=0.01)
        client = DynamoDBClient(settings.region, credentials_margin=1)
        store = WalletStore(settings, dynamodb=client, retry=retry)
        with serve(settings, store) as api:
            wallet_id = api.create()
            endpoint.mode = "fail"
            # WHEN deposits keep coming until the credentials expire
            applied, refused = 0, None
            deadline = time.monotonic() + 20
            while refused is None:
                assert time.monotonic() < deadline, "the credentials never ran out"
                response = api.deposit(wallet_id, 1, f"n-{applied}")
                if response.status_code == 204:
                    applied += 1
                else:
                    refused = response
            # THEN the answer is the truth: 503 unavailable, retry later, nothing was written (no
            # 500, no outcome_unknown: nothing was sent), and it names the credentials
            assert error_of(refused) == (503, "unavailable")
            assert refused.headers["Retry-After"] in {"1", "2", "3"}
            assert "credentials" in refused.json()["detail"]
            _assert_balance(api, wallet_id, applied, endpoint)


def _assert_balance(api: Api, wallet_id: str, applied: int, endpoint: CredentialsEndpoint) -> None:
    """Read the balance with fresh credentials (the endpoint answers again): only the 204s moved money."""
    endpoint.mode = "answer"
    _poll(lambda: api.balance(wallet_id).status_code == 200)
    assert api.balance(wallet_id).json() == {"balance": str(applied)}
