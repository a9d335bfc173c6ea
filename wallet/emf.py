"""Seed 000's telemetry as CloudWatch metrics: embedded-metric-format (EMF) lines on stdout.

A long-running API process prints one JSON line every ``WALLETLAKE_METRICS_INTERVAL_SECONDS``
(60 by default) and one last line when it shuts down. CloudWatch Logs turns every log event that
is an EMF document into metrics, whatever sent it (the ``x-amzn-logs-format: json/emf`` header is
not required: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Generation_PutLogEvents.html),
so on ECS the ``awslogs`` log driver is the whole pipeline: no agent, no sidecar, no PutMetricData
call on the request path. The format, from the specification
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html)::

    {"_aws": {"Timestamp": <epoch ms>,
              "CloudWatchMetrics": [{"Namespace": "walletlake",
                                     "Dimensions": [["service"]],
                                     "Metrics": [{"Name": "RequestsSucceeded", "Unit": "Count"}, ...]}]},
     "service": "wallet-api", "pid": 7, "RequestsSucceeded": 1234, ...}

Each line carries what the process counted since its previous line (never running totals), so
over any period a metric's ``Sum`` is the fleet's count, whatever the number of tasks and workers.
Every counter is published on every line, zeros included: a silent alarm then means "nothing
happened", not "no data". The names are :data:`contracts.api_metrics.PUBLISHED`; the namespace and the
service dimension are the consumer's convention (Powertools in ``walletlake.handlers.stream``).

:func:`document` and :func:`line` are pure; :class:`EmfPublisher` is the timer around them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from contracts.api_metrics import NAMESPACE, PUBLISHED, SERVICE, SERVICE_DIMENSION, UNIT
from wallet.telemetry import Telemetry

_logger = logging.getLogger(__name__)


def document(
    counts: Mapping[str, int], *, timestamp_ms: int, properties: Mapping[str, object] | None = None
) -> dict[str, Any]:
    """One EMF document of ``counts`` (telemetry counter names, as in :data:`PUBLISHED`).

    ``properties`` are extra fields for Logs Insights (the process id), not metrics.

    Examples
    --------
    >>> doc = document({"requests_succeeded": 3}, timestamp_ms=1_000)
    >>> doc["_aws"]["CloudWatchMetrics"][0]["Metrics"], doc["RequestsSucceeded"], doc["service"]
    ([{'Name': 'RequestsSucceeded', 'Unit': 'Count'}], 3, 'wallet-api')
    """
    values = {PUBLISHED[name]: value for name, value in counts.items()}
    return {
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [
                {
                    "Namespace": NAMESPACE,
                    "Dimensions": [[SERVICE_DIMENSION]],
                    "Metrics": [{"Name": name, "Unit": UNIT} for name in values],
                }
            ],
        },
        SERVICE_DIMENSION: SERVICE,
        **(properties or {}),
        **values,
    }


def line(
    counts: Mapping[str, int], *, timestamp_ms: int, properties: Mapping[str, object] | None = None
) -> str:
    """:func:`document` as one line of compact JSON, newline included (one log event)."""
    doc = document(counts, timestamp_ms=timestamp_ms, properties=properties)
    return json.dumps(doc, separators=(",", ":")) + "\n"


def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()  # a pipe to the log driver: one event per line, now, not when a buffer fills


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class EmfPublisher:
    """Prints ``telemetry``'s counts as an EMF line every ``interval`` seconds and once at :meth:`stop`.

    Parameters
    ----------
    telemetry:
        The process's counters.
    interval:
        Seconds between two lines (on a fixed schedule from :meth:`start`); 0 publishes nothing.
    write:
        Where a line goes (stdout, flushed, by default).
    clock_ms:
        Epoch milliseconds now, the lines' timestamps.
    """

    def __init__(
        self,
        telemetry: Telemetry,
        interval: float,
        *,
        write: Callable[[str], None] = _stdout,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.telemetry = telemetry
        self.interval = interval
        self._write = write
        self._clock_ms = clock_ms
        self._published: dict[str, int] = dict.fromkeys(PUBLISHED, 0)
        self._task: asyncio.Task[None] | None = None

    def publish(self) -> None:
        """Print what was counted since the previous line; a failed write is logged, never raised."""
        totals = self.telemetry.totals()
        since = {name: totals[name] - self._published.get(name, 0) for name in totals}
        text = line(since, timestamp_ms=self._clock_ms(), properties={"pid": os.getpid()})
        try:
            self._write(text)
        except (OSError, ValueError) as error:  # stdout closed: the counts stay for the next line
            _logger.warning("event=metrics_unpublished error=%s", error)
            return
        self._published = totals

    def start(self) -> None:
        """Publish every ``interval`` seconds from now, on the running event loop."""
        if self.interval > 0 and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._every_interval())

    async def stop(self) -> None:
        """Stop the timer and publish what was counted since the last line."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.interval > 0:
            self.publish()

    async def _every_interval(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            due += self.interval
            await asyncio.sleep(max(0.0, due - loop.time()))
            self.publish()
