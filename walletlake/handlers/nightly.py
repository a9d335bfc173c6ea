"""The nightly job's Lambda entry points other than compaction, one handler per unit of work.

In AWS the nightly job is a Step Functions state machine (``cdk/walletlake_cdk/nightly.py``), not
one function, so no step is bounded by one function's 15 minutes, memory or ``/tmp``:

1. :func:`plan_night_handler` picks the day and plans the snapshot's segments (pure, no I/O);
2. a Map runs :func:`snapshot_segment_handler` once per segment (one parallel-scan segment each);
3. compaction of what is left of the day (the plain-Parquet lake only: the Iceberg tables are
   compacted by the table optimizer, atomically for readers);
4. :func:`reconcile_plan_handler` finds the snapshot and the days to reconcile (catch-up days
   first) and renders each day's reconciliation queries as Athena ``UNLOAD`` statements;
5. Step Functions runs those on Athena itself (``athena:startQueryExecution.sync``), and
6. :func:`reconcile_classify_handler` reads what they unloaded and classifies it with the same
   pure code as the local run, writing the same objects as ``walletlake reconcile``
   (:mod:`queries.reconciliation_athena` does steps 4 and 6).

Locally, ``walletlake snapshot``, ``walletlake compact`` and ``walletlake reconcile`` (and the demo)
run the same steps in one process on DuckDB.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from contracts import lambda_metrics as names
from contracts.settings import (
    DEPLOYED_VARIABLES,
    SNAPSHOT_READ_UNITS_VARIABLE,
    SNAPSHOT_SEGMENTS_VARIABLE,
    UNLOAD_PREFIX_VARIABLE,
    HandlerSettings,
    Settings,
)
from lake.snapshots import SnapshotSegment, plan_snapshot, snapshot_segment
from queries.reconciliation_athena import classify_unloaded, plan_reconciliation
from queries.reconciliation_rules import DEFAULT_MAX_LAG_SECONDS
from walletlake.days import last_closed_day
from walletlake.handlers import clients

#: What the CDK app sets for every function of this module (``cdk/walletlake_cdk/nightly.py``):
#: the module reads one settings object, so each of its functions gets the steps' three knobs. On
#: Lambda, a function missing one or holding one it cannot use fails at cold start.
REQUIRED_VARIABLES: Final = (
    *DEPLOYED_VARIABLES,
    SNAPSHOT_SEGMENTS_VARIABLE,
    SNAPSHOT_READ_UNITS_VARIABLE,
    UNLOAD_PREFIX_VARIABLE,
)

#: The functions' settings, read once (at import on Lambda).
SETTINGS: Final = HandlerSettings(REQUIRED_VARIABLES)

logger = Logger(service=names.NIGHTLY_SERVICE)
metrics = Metrics(namespace=names.NAMESPACE, service=names.NIGHTLY_SERVICE)


def plan_night(event: dict[str, Any], settings: Settings, *, now: dt.datetime) -> dict[str, Any]:
    """The day (``event["date"]`` or yesterday) and the snapshot's segments, as Map items.

    ``settings.snapshot_segments`` segments share ``settings.snapshot_read_units_per_second``.
    Pure: the state machine carries the result through every later step.
    """
    day = dt.date.fromisoformat(str(event["date"])) if event.get("date") else last_closed_day(now)
    units = plan_snapshot(
        segments=settings.snapshot_segments,
        max_read_units_per_second=settings.snapshot_read_units_per_second,
        now=now,
    )
    return {
        "date": day.isoformat(),
        "snapshot_at": units[0].to_dict()["snapshot_at"],
        "segments": [unit.to_dict() for unit in units],
    }


@logger.inject_lambda_context(log_event=False)
def plan_night_handler(event: dict[str, Any] | None, context: LambdaContext) -> dict[str, Any]:
    """:func:`plan_night` with the deployment's segment count and read pace."""
    night = plan_night(event or {}, SETTINGS(), now=dt.datetime.now(dt.UTC))
    logger.info("night planned", extra={"date": night["date"], "segments": len(night["segments"])})
    return night


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def snapshot_segment_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Scan one segment of the table into its snapshot object."""
    done = snapshot_segment(SETTINGS(), SnapshotSegment.from_dict(event))
    metrics.add_metric(name=names.SNAPSHOT_WALLETS, unit=MetricUnit.Count, value=int(done.get("wallets", 0)))
    logger.info("snapshot segment written", extra=done)
    return done


@logger.inject_lambda_context(log_event=False)
def reconcile_plan_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Event ``{"date": "YYYY-MM-DD", "run": <execution name>}``."""
    settings = SETTINGS()
    planned = plan_reconciliation(
        clients.s3(settings.region),
        settings,
        dt.date.fromisoformat(str(event["date"])),
        run=str(event["run"]),
    )
    logger.info("reconciliation planned", extra={"days": [item["date"] for item in planned["days"]]})
    return planned


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def reconcile_classify_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """One item of :func:`plan_reconciliation`; publishes one metric per status."""
    settings = SETTINGS()
    result = classify_unloaded(
        clients.s3(settings.region),
        settings,
        event,
        now=dt.datetime.now(dt.UTC),
        max_lag_seconds=int(event.get("max_lag_seconds", DEFAULT_MAX_LAG_SECONDS)),
    )
    for status, count in result["counts"].items():
        metrics.add_metric(
            name=names.reconciliation_status_metric(status), unit=MetricUnit.Count, value=count
        )
    metrics.add_metric(
        name=names.RECONCILIATION_FAILED, unit=MetricUnit.Count, value=0 if result["ok"] else 1
    )
    log = logger.info if result["ok"] else logger.error
    log("day reconciled", extra={"day": result["day"], "ok": result["ok"], "counts": result["counts"]})
    return result
