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
6. :func:`reconcile_classify_handler` reads what they unloaded, runs the rare second pass if a
   count asks for it, classifies with :func:`queries.reconciliation.classify` (the same pure
   code as the local run) and writes the same objects as ``walletlake reconcile``.

Locally, ``walletlake snapshot``, ``walletlake compact`` and ``walletlake reconcile`` (and the demo)
run the same steps in one process on DuckDB.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import TYPE_CHECKING, Any, Final

import boto3
import pyarrow as pa
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
from contracts.timestamps import parse_utc_text
from lake import objects
from lake.snapshots import SnapshotRef, SnapshotSegment, latest_snapshot, plan_snapshot, snapshot_segment
from queries._engine import engine_for
from queries.reconciliation import (
    DEFAULT_MAX_LAG_SECONDS,
    TRANSFERS_QUERY,
    WALLETS_QUERY,
    ReconciliationError,
    classify,
    day_parameters,
    days_to_catch_up,
    problem_pass,
    record_day,
    rendered_sql,
)
from queries.time_travel import current_versions, pin_versions
from walletlake.days import last_closed_day

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

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


def unload_statement(sql: str, location: str) -> str:
    """Wrap a SELECT in Athena's ``UNLOAD … TO … WITH (format = 'PARQUET')``.

    UNLOAD writes the result as Parquet files under ``location`` (which must be empty: every run
    has its own) instead of one CSV, so a result of millions of wallets is read back column by
    column, and nothing is registered in Glue (unlike CTAS).
    """
    body = sql.strip().rstrip(";")
    return f"UNLOAD (\n{body}\n) TO '{location}' WITH (format = 'PARQUET', compression = 'ZSTD')"


def plan_reconciliation(s3: S3Client, settings: Settings, day: dt.date, *, run: str) -> dict[str, Any]:
    """The days to reconcile (catch-up days, oldest first, then ``day``) with their UNLOAD statements.

    Each run's UNLOADs write under ``settings.unload_prefix``/``run`` in the lake bucket.

    Raises :class:`ReconciliationError` when no complete snapshot was taken on ``day`` or later.
    """
    snapshot = latest_snapshot(s3, settings, not_before=day)
    if snapshot is None:
        raise ReconciliationError(f"no complete balance snapshot taken on {day} or later")
    days = [*days_to_catch_up(s3, settings, day), day]
    # The Iceberg tables are read as of their current snapshots, the same for every day and every
    # step of the night (the UNLOADs here, the second pass in classify), and recorded with the run.
    versions = current_versions(settings) if settings.lake_format == "iceberg" else {}
    items = []
    for each in days:
        parameters = day_parameters(each, snapshot)
        base = f"s3://{settings.bucket}/{settings.unload_prefix}/{run}/dt={each.isoformat()}"
        wallets_sql = pin_versions(rendered_sql(WALLETS_QUERY, parameters), versions)
        transfers_sql = pin_versions(rendered_sql(TRANSFERS_QUERY, parameters), versions)
        items.append(
            {
                "date": each.isoformat(),
                "snapshot_date": snapshot.day.isoformat(),
                "snapshot_at": parameters["snapshot_at"],
                "wallets_location": f"{base}/wallets/",
                "transfers_location": f"{base}/transfers/",
                "wallets_sql": unload_statement(wallets_sql, f"{base}/wallets/"),
                "transfers_sql": unload_statement(transfers_sql, f"{base}/transfers/"),
                "lake_snapshots": {name: None if v is None else str(v) for name, v in versions.items()},
            }
        )
    return {"date": day.isoformat(), "days": items}


@logger.inject_lambda_context(log_event=False)
def reconcile_plan_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Event ``{"date": "YYYY-MM-DD", "run": <execution name>}``."""
    settings = SETTINGS()
    planned = plan_reconciliation(
        _s3(settings.region), settings, dt.date.fromisoformat(str(event["date"])), run=str(event["run"])
    )
    logger.info("reconciliation planned", extra={"days": [item["date"] for item in planned["days"]]})
    return planned


def read_unloaded(s3: S3Client, location: str) -> pa.Table | None:
    """Every Parquet file an UNLOAD wrote under ``location``; None when it wrote none (no rows)."""
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    tables = [objects.get_table(s3, bucket, key) for key in objects.list_keys(s3, bucket, prefix)]
    return pa.concat_tables(tables, promote_options="default") if tables else None


def classify_unloaded(
    s3: S3Client, settings: Settings, item: dict[str, Any], *, now: dt.datetime, max_lag_seconds: int
) -> dict[str, Any]:
    """Classify one day from its UNLOADed results and write what ``walletlake reconcile`` writes.

    Returns the day's summary without the findings list (Step Functions state stays small);
    the findings are in the ``reconciliation`` table and the summary object.
    """
    day = dt.date.fromisoformat(item["date"])
    snapshot_at = parse_utc_text(item["snapshot_at"])
    snapshot = SnapshotRef(day=dt.date.fromisoformat(item["snapshot_date"]), snapshot_at=snapshot_at, keys=())
    wallets = read_unloaded(s3, item["wallets_location"])
    transfers = read_unloaded(s3, item["transfers_location"])
    if wallets is None:
        raise ReconciliationError(f"the wallets query of {day} unloaded nothing (an empty snapshot?)")
    parameters = day_parameters(day, snapshot)
    versions = {
        name: None if value is None else int(value)
        for name, value in (item.get("lake_snapshots") or {}).items()
    }
    engine = engine_for(settings, versions=versions)
    try:
        problems = problem_pass(engine, wallets, parameters)
    finally:
        engine.close()
    outcome = classify(
        wallets,
        transfers if transfers is not None else pa.table({"txn_id": pa.array([], pa.string())}),
        problems=problems,
        snapshot_at=snapshot_at,
        cutoff=now - dt.timedelta(seconds=max_lag_seconds),
        max_lag_seconds=max_lag_seconds,
    )
    report = record_day(
        s3,
        settings,
        day,
        outcome,
        snapshot=snapshot,
        now=now,
        max_lag_seconds=max_lag_seconds,
        lake_snapshots=versions,
    )
    summary = report.to_dict()
    return {k: v for k, v in summary.items() if k not in ("findings", "earlier")}


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def reconcile_classify_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """One item of :func:`plan_reconciliation`; publishes one metric per status."""
    settings = SETTINGS()
    result = classify_unloaded(
        _s3(settings.region),
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


@functools.cache
def _s3(region: str) -> S3Client:
    """One client per execution environment, reused across invocations."""
    return boto3.client("s3", region_name=region)
