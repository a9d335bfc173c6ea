"""The nightly reconciliation: the lake against a snapshot of the table, per wallet, exactly.

Incremental by construction: a day's closing balances and versions are the day before's
(``daily_balances``, written by the previous run) plus the day's ledger, so a run reads one
partition of ``daily_balances``, the ledger from the day through the snapshot's day (a day or
two), and one snapshot: its cost follows a day or two of ledger plus the wallet count, never the
history. The heavy lifting is ``.sql`` files that run on Athena or DuckDB alike:
``reconcile_wallets`` (per wallet: opening, the day's close, how many entries fail each check,
the snapshot), ``reconcile_wallet_problems`` (which versions fail; asked only when a count is not
zero, so a clean night pays for one pass) and ``reconcile_transfers``.

This module runs them; what they return is classified by the pure rules of
:mod:`queries.reconciliation_rules` (the statuses and checks are described there), and the run is
recorded, and earlier days found to need it, by :mod:`queries.reconciliation_runs`.

The run passes (``ok``, exit code 0) when every finding is ``lagging``. A day whose run had
lagging wallets is reconciled again by the next day's run before it (its close may change when
the late entries land), and so is any missing day before it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

import boto3
import pandas as pd
import pyarrow as pa

from contracts.settings import Settings
from contracts.timestamps import utc_text
from lake.snapshots import SnapshotRef, latest_snapshot, snapshot_taken_at
from queries._catalog import get_query
from queries._engine import QueryEngine, engine_for
from queries._parameters import render
from queries.reconciliation_rules import (
    DEFAULT_MAX_LAG_SECONDS,
    DayOutcome,
    add_global_checks,
    has_problems,
    judge_wallets,
)
from queries.reconciliation_runs import (
    ReconciliationError,
    ReconciliationReport,
    compare_with_recorded,
    days_to_catch_up,
    record_day,
    recorded_run,
)
from queries.time_travel import gone_versions, pin_night

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

#: The queries of one day's reconciliation (``queries/sql/``): two always, the third when needed.
WALLETS_QUERY: Final = "reconcile_wallets"
TRANSFERS_QUERY: Final = "reconcile_transfers"
PROBLEMS_QUERY: Final = "reconcile_wallet_problems"


def reconcile(
    settings: Settings,
    day: dt.date,
    *,
    max_lag_seconds: int = DEFAULT_MAX_LAG_SECONDS,
    now: dt.datetime | None = None,
    engine: QueryEngine | None = None,
    s3: S3Client | None = None,
) -> ReconciliationReport:
    """Reconcile one UTC day against the latest complete snapshot taken on it or later.

    Writes ``daily_balances`` and ``reconciliation`` for the day (fixed object names: a rerun
    replaces them) and a JSON summary under ``{lake_prefix}/_reports/reconciliation/``. Days
    before it whose run is missing or had lagging wallets are reconciled first, oldest first.

    On the Iceberg lake the queries read the tables' current snapshots, pinned for the whole run
    and tagged before anything reads them (``night-{day}-{id}``); their ids are recorded in the
    summary and tagged ``reconciled-YYYY-MM-DD`` as well (both kept through snapshot expiry for
    the audit retention), so :func:`replay` can read exactly the same rows again.

    Raises :class:`ReconciliationError` when there is no snapshot to compare with.
    """
    now = now or dt.datetime.now(dt.UTC)
    s3 = s3 or boto3.Session(region_name=settings.region).client("s3")
    snapshot = latest_snapshot(s3, settings, not_before=day)
    if snapshot is None:
        raise ReconciliationError(
            f"no complete balance snapshot taken on {day} or later; run `walletlake snapshot` first"
        )
    # pinned and tagged before anything reads them (the night protected before it is used)
    versions = pin_night(settings, day) if settings.lake_format == "iceberg" else {}
    owned = engine is None
    engine = engine or engine_for(settings, versions=versions)
    try:
        earlier = [
            _run_day(engine, s3, settings, earlier_day, snapshot, now, max_lag_seconds, (), versions)
            for earlier_day in days_to_catch_up(s3, settings, day)
        ]
        return _run_day(engine, s3, settings, day, snapshot, now, max_lag_seconds, tuple(earlier), versions)
    finally:
        if owned:
            engine.close()


@dataclasses.dataclass(frozen=True)
class Replay:
    """A recorded day reconciled again from what it read: the new outcome and how it differs."""

    recorded: dict[str, Any]
    report: ReconciliationReport
    differences: list[str]

    @property
    def identical(self) -> bool:
        """True when the replay's counts, checks, totals and findings equal the recorded ones."""
        return not self.differences


def replay(settings: Settings, day: dt.date, *, s3: S3Client | None = None) -> Replay:
    """Reconcile a recorded day again, as of what its run read; writes nothing.

    It reads the Iceberg snapshots the run recorded, the balance snapshot it compared with, and
    classifies lag as of the run's own time, then compares the outcome with the recorded summary.
    The day before's closing balances (the opening) are read as they are now; a difference there
    means that day was reconciled again since (its summary says when).

    Raises :class:`ReconciliationError` when the day has no recorded run, the run read no Iceberg
    snapshots (the plain-Parquet lake cannot be read as of a moment), or its balance snapshot is gone.
    """
    s3 = s3 or boto3.Session(region_name=settings.region).client("s3")
    recorded = recorded_run(settings, day, s3=s3)
    if recorded is None:
        raise ReconciliationError(f"{day} has no recorded reconciliation to replay")
    versions = {
        name: None if value is None else int(value)
        for name, value in (recorded.get("lake_snapshots") or {}).items()
    }
    if not versions:
        raise ReconciliationError(
            f"the reconciliation of {day} recorded no Iceberg snapshots: it cannot be replayed"
        )
    gone = gone_versions(settings, versions) if settings.lake_format == "iceberg" else []
    if gone:
        raise ReconciliationError(
            f"the lake snapshots the reconciliation of {day} read are gone from {', '.join(gone)} "
            f"(its tags are kept {settings.audit_tag_retention_days} days): it cannot be replayed"
        )
    snapshot = snapshot_taken_at(s3, settings, dt.datetime.fromisoformat(recorded["snapshot_at"]))
    if snapshot is None:
        raise ReconciliationError(
            f"the balance snapshot of {recorded['snapshot_at']} the run compared with is gone"
        )
    run_at = dt.datetime.fromisoformat(recorded["run_at"])
    engine = engine_for(settings, versions=versions)
    started = time.perf_counter()
    try:
        outcome = reconcile_day(
            engine, day, snapshot, now=run_at, max_lag_seconds=int(recorded["max_lag_seconds"])
        )
    finally:
        engine.close()
    report = ReconciliationReport.from_outcome(
        day,
        outcome,
        snapshot_at=snapshot.snapshot_at,
        run_at=run_at,
        max_lag_seconds=int(recorded["max_lag_seconds"]),
        seconds=time.perf_counter() - started,
        lake_snapshots=versions,
    )
    return Replay(recorded=recorded, report=report, differences=compare_with_recorded(report, recorded))


def reconcile_day(
    engine: QueryEngine, day: dt.date, snapshot: SnapshotRef, *, now: dt.datetime, max_lag_seconds: int
) -> DayOutcome:
    """Run the reconciliation queries for one day and classify what they return (no writes).

    The transfer query runs while the wallets are classified (the engine works, Python waits).
    """
    wallets_query, transfers_query = get_query(WALLETS_QUERY), get_query(TRANSFERS_QUERY)
    parameters = day_parameters(day, snapshot)
    wallets = engine.arrow(wallets_query.sql, wallets_query.bind(parameters))
    problems = problem_pass(engine, wallets, parameters)
    cutoff = now - dt.timedelta(seconds=max_lag_seconds)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="reconcile") as pool:
        transfers = pool.submit(
            engine.arrow, transfers_query.sql, transfers_query.bind({"date": day.isoformat()})
        )
        judged = judge_wallets(
            wallets,
            problems,
            snapshot_at=snapshot.snapshot_at,
            cutoff=cutoff,
            max_lag_seconds=max_lag_seconds,
        )
        return add_global_checks(judged, transfers.result())


def day_parameters(day: dt.date, snapshot: SnapshotRef) -> dict[str, str]:
    """The textual parameters of a day's reconciliation queries (``QueryInfo.bind`` parses them)."""
    return {
        "date": day.isoformat(),
        "previous_date": (day - dt.timedelta(days=1)).isoformat(),
        "snapshot_date": snapshot.day.isoformat(),
        "snapshot_at": utc_text(snapshot.snapshot_at),
    }


def rendered_sql(name: str, parameters: dict[str, str]) -> str:
    """The query with its parameters as literals: what Athena runs when no client renders it.

    The same rendering the engines use (:func:`queries._parameters.render`), for the AWS nightly
    job, where Step Functions starts the query on Athena itself.
    """
    query = get_query(name)
    declared = {parameter.name for parameter in query.parameters}
    return render(query.sql, query.bind({k: v for k, v in parameters.items() if k in declared}))


def problem_pass(
    engine: QueryEngine, wallets: pa.Table | pd.DataFrame, parameters: dict[str, str]
) -> pa.Table | None:
    """Run ``reconcile_wallet_problems`` only when a count of ``reconcile_wallets`` is not zero.

    A clean day (the usual night) pays for one pass.
    """
    if not has_problems(wallets):
        return None
    problems_query = get_query(PROBLEMS_QUERY)
    return engine.arrow(problems_query.sql, problems_query.bind(parameters))


def _run_day(
    engine: QueryEngine,
    s3: S3Client,
    settings: Settings,
    day: dt.date,
    snapshot: SnapshotRef,
    now: dt.datetime,
    max_lag_seconds: int,
    earlier: tuple[ReconciliationReport, ...],
    versions: Mapping[str, int | None],
) -> ReconciliationReport:
    started = time.perf_counter()
    outcome = reconcile_day(engine, day, snapshot, now=now, max_lag_seconds=max_lag_seconds)
    return record_day(
        s3,
        settings,
        day,
        outcome,
        snapshot=snapshot,
        now=now,
        max_lag_seconds=max_lag_seconds,
        earlier=earlier,
        seconds=time.perf_counter() - started,
        lake_snapshots=versions,
    )
