"""Counters an operator watches: seed 000's telemetry list, per API process.

Seed 000 asks for the number of failed and of successful requests, DynamoDB conflicts, DynamoDB
internal errors and ``ProvisionedThroughputExceededException`` counts. They are kept here as plain
in-process counters (near-zero cost per request: one locked integer increment), served as JSON by
``GET /metrics``, and published by every long-running server as CloudWatch metrics under the names
of :data:`~contracts.api_metrics.PUBLISHED` (:mod:`wallet.emf`: one embedded-metric-format line
on stdout at a fixed interval, which the container's log driver turns into metrics with no agent).
Every event that needs a human (throttling, DynamoDB failures, exhausted conflict retries) is
also logged once as a ``key=value`` line. Counters are per process: with ``--workers N``, a fleet
or on Lambda, sum them (CloudWatch sums the published lines).
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from http import HTTPStatus
from typing import Any

from contracts.api_metrics import FAILED, PUBLISHED, SERVER_ERRORS, SUCCEEDED, THROTTLED

_logger = logging.getLogger(__name__)


class Telemetry:
    """Thread-safe named counters plus per-status and per-error breakdowns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: collections.Counter[str] = collections.Counter()
        self._by_status: collections.Counter[int] = collections.Counter()
        self._by_error: collections.Counter[str] = collections.Counter()
        self._started = time.time()

    def count(self, name: str, increment: int = 1) -> None:
        """Add ``increment`` to counter ``name``."""
        with self._lock:
            self._counts[name] += increment

    def response(self, status: int, error: str | None = None) -> None:
        """Record one answered request: 2xx succeeded, anything else failed (by code)."""
        with self._lock:
            self._counts[SUCCEEDED if status < 400 else FAILED] += 1
            if status == 429:
                self._counts[THROTTLED] += 1
            elif status >= 500 and status != HTTPStatus.NOT_IMPLEMENTED:
                # a 501 is a designed answer (``/me/`` without an identity provider), not a fault:
                # counted as failed and by status, never as a server error an operator must chase
                self._counts[SERVER_ERRORS] += 1
            self._by_status[status] += 1
            if error is not None:
                self._by_error[error] += 1

    def event(self, name: str, **fields: object) -> None:
        """Count ``name`` and log it as one ``event=name key=value ...`` warning line."""
        self.count(name)
        details = " ".join(f"{key}={value}" for key, value in fields.items())
        _logger.warning("event=%s %s", name, details)

    def totals(self) -> dict[str, int]:
        """Every published counter (0 when nothing was counted), read at one instant."""
        with self._lock:
            return {name: self._counts.get(name, 0) for name in PUBLISHED}

    def snapshot(self) -> dict[str, Any]:
        """Everything counted so far, as the JSON document of ``GET /metrics``."""
        with self._lock:
            counts = {name: self._counts.get(name, 0) for name in PUBLISHED}
            by_status = {str(status): n for status, n in sorted(self._by_status.items())}
            by_error = dict(sorted(self._by_error.items()))
        return {
            "pid": os.getpid(),
            "uptime_seconds": round(time.time() - self._started, 3),
            **counts,
            "responses_by_status": by_status,
            "errors_by_code": by_error,
        }
