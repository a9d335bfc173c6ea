"""Counters an operator watches: seed 000's telemetry list, per API process.

Seed 000 asks for the number of failed and of successful requests, DynamoDB conflicts, DynamoDB
internal errors and ``ProvisionedThroughputExceededException`` counts. They are kept here as plain
in-process counters (near-zero cost per request: one locked integer increment), served as JSON by
``GET /metrics``, and published by every long-running server as CloudWatch metrics under the names
of :data:`PUBLISHED` (:mod:`wallet.emf`: one embedded-metric-format line on stdout at a fixed
interval, which the container's log driver turns into metrics with no agent). Every event that
needs a human (throttling, DynamoDB failures, exhausted conflict retries) is also logged once as a
``key=value`` line. Counters are per process: with ``--workers N``, a fleet or on Lambda, sum them
(CloudWatch sums the published lines).
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from typing import Any, Final

_logger = logging.getLogger(__name__)

# Counter names (one spelling, used by the store, the API and the tests).
SUCCEEDED: Final = "requests_succeeded"
FAILED: Final = "requests_failed"
REPLAYS: Final = "idempotent_replays"
CLOCK_RETRIES: Final = "dynamodb_clock_retries"
TRANSACTION_CONFLICTS: Final = "dynamodb_transaction_conflicts"
THROTTLES: Final = "dynamodb_throttles"
INTERNAL_ERRORS: Final = "dynamodb_internal_errors"
NETWORK_ERRORS: Final = "dynamodb_network_errors"
UNEXPECTED_ERRORS: Final = "dynamodb_unexpected_errors"
RETRIES: Final = "dynamodb_retries"
CONTENTION_EXHAUSTED: Final = "contention_exhausted"
#: Group commits (wallet.commit_queue): transactions that carried more than one request, the
#: requests they carried, and those DynamoDB cancelled (their requests were written again alone).
GROUP_COMMITS: Final = "group_commits"
GROUPED_REQUESTS: Final = "grouped_requests"
GROUP_SPLITS: Final = "group_splits"
#: Whole-group writes again after DynamoDB cancelled a group only for ``TransactionConflict``
#: (another process's transaction on one of its wallets), instead of splitting it.
GROUP_CONFLICT_RETRIES: Final = "group_conflict_retries"
#: Answers by kind: 429 (any cause), 429 of admission control alone (the process had its bound of
#: requests in flight; DynamoDB was not called), and 5xx.
THROTTLED: Final = "requests_throttled"
SHED: Final = "requests_shed"
SERVER_ERRORS: Final = "requests_server_errors"

#: Every counter, in the order ``GET /metrics`` lists them, with the CloudWatch metric it is
#: published as (namespace ``walletlake``, dimension ``service=wallet-api``, unit Count; each
#: line carries what was counted since the previous one, so a metric's Sum is the fleet's count).
PUBLISHED: Final[dict[str, str]] = {
    SUCCEEDED: "RequestsSucceeded",
    FAILED: "RequestsFailed",
    THROTTLED: "RequestsThrottled",
    SHED: "RequestsShed",
    SERVER_ERRORS: "RequestsServerErrors",
    REPLAYS: "IdempotentReplays",
    CLOCK_RETRIES: "DynamoDBClockRetries",
    TRANSACTION_CONFLICTS: "DynamoDBTransactionConflicts",
    THROTTLES: "DynamoDBThrottles",
    INTERNAL_ERRORS: "DynamoDBInternalErrors",
    NETWORK_ERRORS: "DynamoDBNetworkErrors",
    UNEXPECTED_ERRORS: "DynamoDBUnexpectedErrors",
    RETRIES: "DynamoDBRetries",
    CONTENTION_EXHAUSTED: "ContentionExhausted",
    GROUP_COMMITS: "GroupCommits",
    GROUPED_REQUESTS: "GroupedRequests",
    GROUP_SPLITS: "GroupSplits",
    GROUP_CONFLICT_RETRIES: "GroupConflictRetries",
}


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
            elif status >= 500:
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
        """Every counter of :data:`PUBLISHED` (0 when nothing was counted), read at one instant."""
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
