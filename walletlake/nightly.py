"""The nightly job: snapshot → compact → reconcile, for the CLI, the demo and the AWS Lambda.

The order matters. The snapshot comes first so that it is taken after the day closed; compaction
then rewrites the closed day; reconciliation reads the compacted day and the snapshot. A
compaction that refuses to merge disagreeing copies (:class:`lake.compaction.CompactionConflictError`)
leaves the lake as it was, and reconciliation still runs to name the wallets and versions.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
from typing import Any

from contracts.settings import Settings
from lake.compaction import CompactionConflictError, compact_day
from lake.snapshots import take_snapshot
from queries.reconciliation import reconcile

_logger = logging.getLogger(__name__)


class NightlyJobError(RuntimeError):
    """The nightly job ran and found the lake not clean (the Lambda invocation fails with it)."""


def yesterday(now: dt.datetime | None = None) -> dt.date:
    """The last closed UTC day: what the nightly job works on by default."""
    return ((now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC) - dt.timedelta(days=1)).date()


def parse_day(text: str) -> dt.date:
    """A ``YYYY-MM-DD`` command-line date, with a one-line error otherwise."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def day_argument(text: str) -> dt.date:
    """``parse_day`` for argparse, whose error message it then shows as is."""
    try:
        return parse_day(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def run_nightly(settings: Settings, day: dt.date, *, now: dt.datetime | None = None) -> dict[str, Any]:
    """Snapshot the table, compact ``day``, reconcile ``day``; returns every step's summary.

    ``ok`` in the result is the reconciliation's verdict, false too when compaction refused.
    """
    now = now or dt.datetime.now(dt.UTC)
    snapshot = take_snapshot(settings, now=now)
    compaction: dict[str, Any]
    try:
        compaction = (
            _maintain_iceberg(settings, day)
            if settings.lake_format == "iceberg"
            else compact_day(settings, day).to_dict()
        )
    except CompactionConflictError as conflict:
        _logger.error("compaction of %s refused: %s", day, conflict)
        compaction = {"day": day.isoformat(), "error": str(conflict)}
    report = reconcile(settings, day, now=now)
    return {
        "day": day.isoformat(),
        "ok": report.ok and "error" not in compaction,
        "snapshot": snapshot.to_dict(),
        "compaction": compaction,
        "reconciliation": report.to_dict(),
    }


def lambda_handler(event: dict[str, Any] | None, context: Any) -> dict[str, Any]:
    """AWS entry point (an EventBridge schedule invokes it after midnight UTC).

    ``event["date"]`` (``YYYY-MM-DD``) picks the day; by default, yesterday in UTC. Publishes one
    metric per reconciliation status, and raises :class:`NightlyJobError` when the lake is not
    clean, so the failed invocation is visible to alarms and retried by the schedule's policy.
    """
    from aws_lambda_powertools import Logger, Metrics
    from aws_lambda_powertools.metrics import MetricUnit

    logger = Logger(service="walletlake-nightly")
    metrics = Metrics(namespace="walletlake", service="nightly")
    event = event or {}
    day = parse_day(str(event["date"])) if event.get("date") else yesterday()
    result = run_nightly(Settings.from_env(), day)
    for status, count in result["reconciliation"]["counts"].items():
        metrics.add_metric(name=f"reconciliation_{status}", unit=MetricUnit.Count, value=count)
    metrics.add_metric(name="reconciliation_failed", unit=MetricUnit.Count, value=0 if result["ok"] else 1)
    metrics.flush_metrics()
    summary = {k: v for k, v in result["reconciliation"].items() if k not in ("findings", "earlier")}
    if not result["ok"]:
        logger.error("nightly job found the lake not clean", extra={"result": summary})
        raise NightlyJobError(f"reconciliation of {day} failed: {result['reconciliation']['counts']}")
    logger.info("nightly job clean", extra={"result": summary})
    return result


def _maintain_iceberg(settings: Settings, day: dt.date) -> dict[str, Any]:
    from contracts.lake_tables import STREAM_TABLES
    from lake.iceberg_catalog import open_catalog
    from lake.iceberg_maintenance import maintain

    catalog = open_catalog(settings)
    return {
        "day": day.isoformat(),
        "tables": {name: maintain(settings, catalog, name, day).as_dict() for name in STREAM_TABLES},
    }
