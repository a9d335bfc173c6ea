"""The nightly reconciliation as the state machine runs it: Athena ``UNLOAD``s, then the same classifier.

In AWS the two heavy queries of a day run on Athena itself (Step Functions'
``athena:startQueryExecution.sync``), not in a function: :func:`plan_reconciliation` renders them as
``UNLOAD`` statements, each writing Parquet under a location of its own, and
:func:`classify_unloaded` reads what they wrote back and runs the rare second pass and the pure
classifier (:func:`queries.reconciliation_rules.classify`) exactly as the local run does, then
records the day as ``walletlake reconcile`` does (:func:`queries.reconciliation_runs.record_day`).
A rerun of either step writes the same objects.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from contracts.settings import Settings
from contracts.timestamps import parse_utc_text
from lake import objects
from lake.snapshots import SnapshotRef, latest_snapshot
from queries._engine import engine_for
from queries.reconciliation import (
    TRANSFERS_QUERY,
    WALLETS_QUERY,
    ReconciliationError,
    day_parameters,
    problem_pass,
    rendered_sql,
)
from queries.reconciliation_rules import classify
from queries.reconciliation_runs import days_to_catch_up, record_day
from queries.time_travel import pin_night, pin_versions

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


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

    Each run's UNLOADs write under ``settings.unload_prefix``/``run`` in the lake bucket. The
    Iceberg snapshots the statements pin are tagged first (:func:`queries.time_travel.pin_night`).

    Raises :class:`ReconciliationError` when no complete snapshot was taken on ``day`` or later.
    """
    snapshot = latest_snapshot(s3, settings, not_before=day)
    if snapshot is None:
        raise ReconciliationError(f"no complete balance snapshot taken on {day} or later")
    days = [*days_to_catch_up(s3, settings, day), day]
    # The Iceberg tables are read as of their current snapshots, the same for every day and every
    # step of the night (the UNLOADs here, the second pass in classify), and recorded with the run:
    # tagged here, before any step reads them, so that no expiry removes them while the night (or a
    # rerun of it) runs.
    versions = pin_night(settings, day) if settings.lake_format == "iceberg" else {}
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
