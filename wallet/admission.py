"""Admission control: a server process past its bound of requests in flight answers 429 at once.

Behind a load balancer nothing else bounds what one process is asked to do (API Gateway's throttle
is gone), and a process that takes everything only makes every request wait longer: each queued
request holds a connection, memory and a place in the commit queue. So the front of the served app
counts the requests it is serving and, past ``WALLETLAKE_MAX_REQUESTS_IN_FLIGHT``, answers
:class:`~wallet.errors.OverloadedError` (429 ``throttled`` with ``Retry-After``, the API's usual
error body) before reading the body: the request never reaches the store, so DynamoDB is not
called and nothing is written, and the client repeats it with the same nonce (perhaps to a less busy
task). Shed requests are counted (``requests_shed``, published as ``RequestsShed``).

Liveness and metrics (``/healthz``, ``/metrics``) are never refused: a load balancer must not take
a busy process for a dead one.
"""

from __future__ import annotations

from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send

from contracts import api_metrics as metrics
from wallet.errors import OverloadedError
from wallet.http_errors import error_response, status_of
from wallet.telemetry import Telemetry

#: Paths served whatever the load: what the load balancer's health check and an operator call.
EXEMPT_PATHS: Final = frozenset({"/healthz", "/metrics"})


class AdmissionControl:
    """ASGI middleware serving at most ``limit`` HTTP requests of ``app`` at once; 429 for the rest.

    One instance per process (per event loop), so the count needs no lock.
    """

    def __init__(self, app: ASGIApp, *, limit: int, telemetry: Telemetry) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.app = app
        self.limit = limit
        self.telemetry = telemetry
        self.in_flight = 0
        refusal = OverloadedError(limit)
        self._status = status_of(refusal)
        self._code = refusal.code
        self._refusal = error_response(self._status, refusal.code, refusal.detail, refusal.retry_after)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request if there is room; otherwise answer 429 without reading it."""
        if scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            self.telemetry.count(metrics.SHED)
            self.telemetry.response(self._status, self._code)
            await self._refusal(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
