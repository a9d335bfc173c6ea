"""The nightly reconciliation: the lake against a snapshot of the table, per wallet, exactly.

Incremental by construction: a day's closing balances and versions are the day before's
(``daily_balances``, written by the previous run) plus the day's ledger, so a run reads one
partition of ``daily_balances``, the ledger from the day through the snapshot's day (a day or
two), and one snapshot: its cost follows a day or two of ledger plus the wallet count, never the
history. The heavy lifting is ``.sql`` files that run on Athena or DuckDB alike:
``reconcile_wallets`` (per wallet: opening, the day's close, how many entries fail each check,
the snapshot), ``reconcile_wallet_problems`` (which versions fail; asked only when a count is not
zero, so a clean night pays for one pass) and ``reconcile_transfers``; what they return is
classified here by pure functions. Nothing is sampled or hashed: every entry is paired with the
version before it (a window over the wallet's entries, with the opening and the snapshot as marker
rows), so every check is exact.

Per wallet (one finding per wallet and problem; a wallet with none is ``ok``):

``duplicate``
    the same entry is in the lake more than once (identical rows at one version).
``chain_break``
    the running balance does not follow: a version's balance before it (``balance_after -
    delta``) is not the previous version's ``balance_after``, or the day's first entry does not
    start from the previous day's reconciled close.
``mismatch``
    the lake contradicts itself or the table: different entries at one version, a delta that is
    not ±amount, versions already closed on an earlier day, a wallet the lake has but the
    snapshot lacks, or, with every version up to the snapshot's present, a ``balance_after`` at
    the snapshot's version that is not the table's balance.
``lagging`` / ``missing``
    versions absent from the lake, up to the table's version (every wallet's entries are
    versions 1..N). Each absent version has a latest possible commit time: the ``created_at`` of
    the next version the lake has, or the wallet's ``updated_at`` in the snapshot for absences at
    the end. When all of them are within ``max_lag_seconds`` of ``now`` the entries may still be
    on their way (``lagging``); otherwise the stream should have delivered them (``missing``).

Global checks: every transfer of the day has one debit and one credit that sum to zero
(``transfer_unbalanced``), and money is conserved: the sum of closing balances equals the sum of
opening balances plus the day's deposits (``not_conserved``) — by induction from an empty first
day, the sum of all balances equals the sum of all deposits. Conservation is judged only when no
version is absent (an entry in flight would make it fail for no fault).

The run passes (``ok``, exit code 0) when every finding is ``lagging``. A day whose run had
lagging wallets is reconciled again by the next day's run before it (its close may change when
the late entries land), and so is any missing day before it.

``max_lag_seconds`` defaults to :data:`DEFAULT_MAX_LAG_SECONDS`, one hour: far above the stream's
normal delivery delay (Lambda reads DynamoDB Streams within a second; batching windows are at most
5 minutes; retries of a failing batch add minutes), and far below the stream's 24-hour retention,
after which an undelivered record is gone: an hour leaves a day to replay it from the table.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

import boto3
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from contracts.lake_layout import PARQUET_SUFFIX, partition_prefix, table_prefix
from contracts.lake_tables import DAILY_BALANCES, RECONCILIATION
from contracts.settings import Settings
from lake import objects
from lake.snapshots import SnapshotRef, latest_snapshot, snapshot_taken_at
from queries._catalog import get_query
from queries._engine import QueryEngine, engine_for
from queries._parameters import render
from queries.time_travel import current_versions, tag_versions

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_logger = logging.getLogger(__name__)

DEFAULT_MAX_LAG_SECONDS: Final = 3600

OK: Final = "ok"
LAGGING: Final = "lagging"
MISSING: Final = "missing"
DUPLICATE: Final = "duplicate"
MISMATCH: Final = "mismatch"
CHAIN_BREAK: Final = "chain_break"
TRANSFER_UNBALANCED: Final = "transfer_unbalanced"
NOT_CONSERVED: Final = "not_conserved"
#: Every status, worst first.
STATUSES: Final = (MISMATCH, CHAIN_BREAK, DUPLICATE, MISSING, TRANSFER_UNBALANCED, NOT_CONSERVED, LAGGING, OK)
#: Statuses that do not fail the run (docs/architecture.md, invariant 4).
PASSING_STATUSES: Final = frozenset({OK, LAGGING})

_REPORTS_FOLDER: Final = "_reports/reconciliation"
_MAX_LISTED: Final = 20


class ReconciliationError(RuntimeError):
    """Reconciliation cannot run (no snapshot to compare with)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """One problem: a wallet's (or, with ``wallet_id`` None, a global check's)."""

    wallet_id: str | None
    status: str
    expected: int | None
    actual: int | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; integers as strings of digits, as money travels in JSON here."""
        return {
            "wallet_id": self.wallet_id,
            "status": self.status,
            "expected": None if self.expected is None else str(self.expected),
            "actual": None if self.actual is None else str(self.actual),
            "detail": self.detail,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class DayOutcome:
    """The classified day: findings, checks and the day's closing balances (no I/O done)."""

    findings: list[Finding]
    checks: dict[str, str]
    counts: dict[str, int]
    wallets: int
    daily_balances: pa.Table
    totals: dict[str, int]
    ledger_rows: int


@dataclasses.dataclass(frozen=True)
class ReconciliationReport:
    """The outcome of reconciling one day (and any earlier day it had to reconcile first).

    ``counts`` holds the number of findings of each status, and under ``ok`` the number of wallets
    with no finding; ``findings`` lists every finding but ``ok`` ones, worst first.
    """

    day: dt.date
    counts: dict[str, int]
    findings: list[Finding]
    checks: dict[str, str]
    wallets: int
    ledger_rows: int
    totals: dict[str, int]
    snapshot_at: dt.datetime
    run_at: dt.datetime
    max_lag_seconds: int
    seconds: float
    keys: tuple[str, ...] = ()
    earlier: tuple[ReconciliationReport, ...] = ()
    #: Per Iceberg table, the snapshot id the day's queries read (empty for the plain-Parquet lake):
    #: what :func:`replay` reads again to reproduce the run.
    lake_snapshots: dict[str, int | None] = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when every finding, here and in the earlier days reconciled first, is ok or lagging."""
        return all(f.status in PASSING_STATUSES for f in self.findings) and all(r.ok for r in self.earlier)

    @property
    def exit_code(self) -> int:
        """0 when :attr:`ok`, else 1."""
        return 0 if self.ok else 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (what the summary object in S3 and ``reconcile --json`` hold)."""
        return {
            "day": self.day.isoformat(),
            "ok": self.ok,
            "counts": dict(self.counts),
            "wallets": self.wallets,
            "ledger_rows": self.ledger_rows,
            "checks": dict(self.checks),
            "totals": {name: str(value) for name, value in self.totals.items()},
            "snapshot_at": _iso(self.snapshot_at),
            "run_at": _iso(self.run_at),
            "max_lag_seconds": self.max_lag_seconds,
            "seconds": round(self.seconds, 3),
            "findings": [finding.to_dict() for finding in self.findings],
            "keys": list(self.keys),
            "earlier": [report.to_dict() for report in self.earlier],
            "lake_snapshots": {
                name: None if snapshot is None else str(snapshot)
                for name, snapshot in self.lake_snapshots.items()
            },
        }


def reconcile(
    settings: Settings,
    day: dt.date,
    *,
    max_lag_seconds: int = DEFAULT_MAX_LAG_SECONDS,
    now: dt.datetime | None = None,
    engine: QueryEngine | None = None,
    session: boto3.Session | None = None,
) -> ReconciliationReport:
    """Reconcile one UTC day against the latest complete snapshot taken on it or later.

    Writes ``daily_balances`` and ``reconciliation`` for the day (fixed object names: a rerun
    replaces them) and a JSON summary under ``{lake_prefix}/_reports/reconciliation/``. Days
    before it whose run is missing or had lagging wallets are reconciled first, oldest first.

    On the Iceberg lake the queries read the tables' current snapshots, pinned for the whole run;
    their ids are recorded in the summary and tagged ``reconciled-YYYY-MM-DD`` (kept for audits
    through snapshot expiry), so :func:`replay` can read exactly the same rows again.

    Raises :class:`ReconciliationError` when there is no snapshot to compare with.
    """
    now = now or dt.datetime.now(dt.UTC)
    session = session or boto3.Session(region_name=settings.region)
    client: S3Client = session.client("s3")
    snapshot = latest_snapshot(client, settings, not_before=day)
    if snapshot is None:
        raise ReconciliationError(
            f"no complete balance snapshot taken on {day} or later; run `walletlake snapshot` first"
        )
    versions = current_versions(settings) if settings.lake_format == "iceberg" else {}
    owned = engine is None
    engine = engine or engine_for(settings, versions=versions)
    try:
        earlier = [
            _run_day(engine, client, settings, earlier_day, snapshot, now, max_lag_seconds, (), versions)
            for earlier_day in days_to_catch_up(client, settings, day)
        ]
        return _run_day(
            engine, client, settings, day, snapshot, now, max_lag_seconds, tuple(earlier), versions
        )
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


def replay(settings: Settings, day: dt.date, *, session: boto3.Session | None = None) -> Replay:
    """Reconcile a recorded day again, as of what its run read; writes nothing.

    It reads the Iceberg snapshots the run recorded, the balance snapshot it compared with, and
    classifies lag as of the run's own time, then compares the outcome with the recorded summary.
    The day before's closing balances (the opening) are read as they are now; a difference there
    means that day was reconciled again since (its summary says when).

    Raises :class:`ReconciliationError` when the day has no recorded run, the run read no Iceberg
    snapshots (the plain-Parquet lake cannot be read as of a moment), or its balance snapshot is gone.
    """
    session = session or boto3.Session(region_name=settings.region)
    client: S3Client = session.client("s3")
    recorded = _read_summary(client, settings, day)
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
    snapshot = snapshot_taken_at(client, settings, dt.datetime.fromisoformat(recorded["snapshot_at"]))
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
    report = _report(
        day,
        outcome,
        snapshot,
        run_at=run_at,
        max_lag_seconds=int(recorded["max_lag_seconds"]),
        seconds=time.perf_counter() - started,
        lake_snapshots=versions,
    )
    return Replay(recorded=recorded, report=report, differences=compare_with_recorded(report, recorded))


def compare_with_recorded(report: ReconciliationReport, recorded: Mapping[str, Any]) -> list[str]:
    """What differs between a replayed day and its recorded summary (empty: identical). Pure."""
    now = report.to_dict()
    differences = []
    for field in ("counts", "checks", "totals", "wallets", "ledger_rows", "findings"):
        if now[field] != recorded.get(field):
            differences.append(f"{field}: recorded {recorded.get(field)!r}, replayed {now[field]!r}")
    return differences


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
        judged = _judge_wallets(wallets, problems, snapshot.snapshot_at, cutoff, max_lag_seconds)
        return _finish(judged, transfers.result())


#: The queries of one day's reconciliation (``queries/sql/``): two always, the third when needed.
WALLETS_QUERY: Final = "reconcile_wallets"
TRANSFERS_QUERY: Final = "reconcile_transfers"
PROBLEMS_QUERY: Final = "reconcile_wallet_problems"


def day_parameters(day: dt.date, snapshot: SnapshotRef) -> dict[str, str]:
    """The textual parameters of a day's reconciliation queries (``QueryInfo.bind`` parses them)."""
    return {
        "date": day.isoformat(),
        "previous_date": (day - dt.timedelta(days=1)).isoformat(),
        "snapshot_date": snapshot.day.isoformat(),
        "snapshot_at": _iso(snapshot.snapshot_at),
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
    if not _has_problems(_arrow(wallets)):
        return None
    problems_query = get_query(PROBLEMS_QUERY)
    return engine.arrow(problems_query.sql, problems_query.bind(parameters))


def classify(
    wallets: pa.Table | pd.DataFrame,
    transfers: pa.Table | pd.DataFrame,
    *,
    problems: pa.Table | pd.DataFrame | None = None,
    snapshot_at: dt.datetime,
    cutoff: dt.datetime,
    max_lag_seconds: int = DEFAULT_MAX_LAG_SECONDS,
) -> DayOutcome:
    """Classify the rows of ``reconcile_wallets``, ``reconcile_wallet_problems`` (None when no
    count asked for it) and ``reconcile_transfers``.

    Pure: no I/O, no clock. ``cutoff`` is ``now - max_lag_seconds``: an absent version that must
    have been committed before it is ``missing``.
    """
    return _finish(_judge_wallets(wallets, problems, snapshot_at, cutoff, max_lag_seconds), transfers)


@dataclasses.dataclass(frozen=True, slots=True)
class _JudgedWallets:
    findings: list[Finding]
    wallets: int
    wallets_absent: int
    daily_balances: pa.Table
    totals: dict[str, int]
    ledger_rows: int


def _judge_wallets(
    wallets: pa.Table | pd.DataFrame,
    problems: pa.Table | pd.DataFrame | None,
    snapshot_at: dt.datetime,
    cutoff: dt.datetime,
    max_lag_seconds: int,
) -> _JudgedWallets:
    frame = _Columns(_with_problems(_arrow(wallets), None if problems is None else _arrow(problems)))
    findings, wallets_absent = _wallet_findings_of(frame, snapshot_at, _naive_utc(cutoff), max_lag_seconds)
    daily, totals = _close_day(frame)
    return _JudgedWallets(
        findings, len(frame), wallets_absent, daily, totals, int(frame.ints("day_rows").sum())
    )


def _finish(judged: _JudgedWallets, transfers: pa.Table | pd.DataFrame) -> DayOutcome:
    """Add the global checks to the wallets' findings and count."""
    findings = list(judged.findings)
    checks: dict[str, str] = {}
    transfer_findings = [_transfer_finding(row) for row in _arrow(transfers).to_pylist()]
    findings.extend(transfer_findings)
    checks["transfers"] = (
        "ok: every transfer's debit and credit sum to zero"
        if not transfer_findings
        else f"failed: {len(transfer_findings)} transfers do not sum to zero"
    )
    totals = judged.totals
    expected_total = totals["opening_balance"] + totals["deposits"]
    if judged.wallets_absent:
        checks["conservation"] = (
            f"skipped: {judged.wallets_absent} wallets have versions absent from the lake"
        )
    elif expected_total != totals["closing_balance"]:
        checks["conservation"] = "failed"
        findings.append(
            Finding(
                None,
                NOT_CONSERVED,
                expected_total,
                totals["closing_balance"],
                f"sum of closing balances {totals['closing_balance']} ≠ sum of opening balances "
                f"{totals['opening_balance']} + deposits {totals['deposits']}",
            )
        )
    else:
        checks["conservation"] = "ok: sum of balances = previous sum + the day's deposits"
    wallet_findings = [f for f in findings if f.wallet_id is not None]
    checks["wallets"] = "ok" if all(f.status in PASSING_STATUSES for f in wallet_findings) else "failed"
    counts = dict.fromkeys(STATUSES, 0)
    counts.update(Counter(finding.status for finding in findings))
    counts[OK] = judged.wallets - len({f.wallet_id for f in wallet_findings})
    return DayOutcome(
        findings=sorted(findings, key=_finding_order),
        checks=checks,
        counts=counts,
        wallets=judged.wallets,
        daily_balances=judged.daily_balances,
        totals=totals,
        ledger_rows=judged.ledger_rows,
    )


def _wallet_findings_of(
    frame: _Columns, snapshot_at: dt.datetime, cutoff: dt.datetime, max_lag_seconds: int
) -> tuple[list[Finding], int]:
    """Per-wallet findings (vectorised masks pick the wallets; details only for those), and how
    many wallets have absent versions."""
    has_opening = frame.present("opening_version")
    opening_version = frame.ints("opening_version")
    opening_balance = frame.ints("opening_balance")
    has_rows = frame.present("first_version")
    first_version = frame.ints("first_version")
    has_snapshot = frame.present("snapshot_version")
    snapshot_version = frame.ints("snapshot_version")
    top = np.where(has_rows, np.maximum(frame.ints("last_version"), opening_version), opening_version)

    # Gaps include versions missing before the day's first entry (the query pairs it with the
    # opening); absences at the end run up to the table's version.
    absent = frame.present("gap_starts") | (has_snapshot & (snapshot_version > top))
    duplicate = frame.ints("copies") > 0
    chain = frame.present("break_versions")
    early = has_rows & has_opening & (first_version <= opening_version)
    created_before = frame.times("earliest_created_at") < np.datetime64(_naive_utc(snapshot_at))
    not_in_snapshot = ~has_snapshot & (has_opening | (has_rows & created_before))
    behind = has_snapshot & (snapshot_version < opening_version)
    at_opening = snapshot_version == opening_version
    lake_balance = np.where(at_opening, opening_balance, frame.ints("balance_at_snapshot_version"))
    balance_differs = (
        has_snapshot
        & ~absent
        & ~behind
        & (at_opening | frame.present("balance_at_snapshot_version"))
        & (lake_balance != frame.ints("snapshot_balance"))
    )
    mismatch = (
        frame.present("conflict_versions")
        | frame.present("bad_amount_versions")
        | early
        | not_in_snapshot
        | behind
        | balance_differs
    )
    findings: list[Finding] = []
    for index in np.flatnonzero(absent | duplicate | chain | mismatch):
        findings.extend(
            _wallet_findings(
                frame.row(int(index)),
                absent=bool(absent[index]),
                duplicate=bool(duplicate[index]),
                chain=bool(chain[index]),
                early=bool(early[index]),
                not_in_snapshot=bool(not_in_snapshot[index]),
                behind=bool(behind[index]),
                balance_differs=bool(balance_differs[index]),
                lake_balance=int(lake_balance[index]),
                cutoff=cutoff,
                snapshot_at=snapshot_at,
                max_lag_seconds=max_lag_seconds,
            )
        )
    return findings, int(absent.sum())


def _close_day(frame: _Columns) -> tuple[pa.Table, dict[str, int]]:
    """The day's ``daily_balances`` (every wallet with a close: carried or moved) and its totals."""
    has_opening = frame.present("opening_version")
    day_rows = frame.ints("day_rows")
    closes = has_opening | (day_rows > 0)
    closing_version = np.where(day_rows > 0, frame.ints("day_last_version"), frame.ints("opening_version"))
    closing_balance = np.where(day_rows > 0, frame.ints("day_last_balance"), frame.ints("opening_balance"))
    totals = {
        "opening_balance": _exact_sum(frame.ints("opening_balance")[closes]),
        "deposits": _exact_sum(frame.ints("day_deposits")[closes]),
        "closing_balance": _exact_sum(closing_balance[closes]),
        "net_delta": _exact_sum(frame.ints("day_net_delta")[closes]),
    }
    return _daily_balances(frame, closes, closing_balance, closing_version), totals


def days_to_catch_up(client: S3Client, settings: Settings, day: dt.date) -> list[dt.date]:
    """Days before ``day`` to reconcile first: those with no run or a lagging one, oldest first.

    Walks back from the day before while the run of that day is missing or had lagging wallets,
    and stops at the lake's first ledger day: a few LIST and GET calls, whatever the history.
    """
    first = _first_ledger_day(client, settings)
    if first is None:
        return []
    pending = []
    current = day - dt.timedelta(days=1)
    while current >= first:
        summary = _read_summary(client, settings, current)
        if summary is not None and not summary.get("counts", {}).get(LAGGING):
            break
        pending.append(current)
        current -= dt.timedelta(days=1)
    return sorted(pending)


def summary_key(lake_prefix: str, day: dt.date) -> str:
    """Where a day's JSON summary lives: beside the tables, outside any table's location."""
    root = lake_prefix.strip("/")
    return f"{root + '/' if root else ''}{_REPORTS_FOLDER}/dt={day.isoformat()}/summary.json"


def findings_table(findings: Iterable[Finding], checks: dict[str, str], run_at: dt.datetime) -> pa.Table:
    """The ``reconciliation`` rows of a run: one per finding, and one per passing global check."""
    rows: list[dict[str, Any]] = [
        {
            "wallet_id": f.wallet_id,
            "status": f.status,
            "expected": f.expected,
            "actual": f.actual,
            "detail": f.detail,
        }
        for f in findings
    ]
    rows += [
        {"wallet_id": None, "status": OK, "expected": None, "actual": None, "detail": f"{name}: {outcome}"}
        for name, outcome in checks.items()
        if outcome.startswith("ok")
    ]
    for row in rows:
        row["run_at"] = run_at
    return pa.Table.from_pylist(rows, schema=RECONCILIATION)


def _run_day(
    engine: QueryEngine,
    client: S3Client,
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
        client,
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


def record_day(
    client: S3Client,
    settings: Settings,
    day: dt.date,
    outcome: DayOutcome,
    *,
    snapshot: SnapshotRef,
    now: dt.datetime,
    max_lag_seconds: int,
    earlier: tuple[ReconciliationReport, ...] = (),
    seconds: float = 0.0,
    lake_snapshots: Mapping[str, int | None] | None = None,
) -> ReconciliationReport:
    """Write a classified day's ``daily_balances``, ``reconciliation`` and JSON summary.

    Shared by the local run and the AWS nightly job (whose queries ran on Athena), so both leave
    the same objects behind.
    """
    run_at = now.astimezone(dt.UTC).replace(microsecond=now.microsecond // 1000 * 1000)
    keys = _store(client, settings, day, outcome, run_at)
    report = _report(
        day,
        outcome,
        snapshot,
        run_at=run_at,
        max_lag_seconds=max_lag_seconds,
        seconds=seconds,
        keys=keys,
        earlier=earlier,
        lake_snapshots=dict(lake_snapshots or {}),
    )
    if lake_snapshots:
        # Kept through snapshot expiry for audits: what :func:`replay` reads again.
        tag_versions(settings, lake_snapshots, f"reconciled-{day.isoformat()}")
    client.put_object(
        Bucket=settings.bucket,
        Key=summary_key(settings.lake_prefix, day),
        Body=json.dumps({**report.to_dict(), "earlier": [r.day.isoformat() for r in earlier]}).encode(),
        ContentType="application/json",
    )
    _logger.info("reconciled %s: %s", day, {k: v for k, v in report.counts.items() if v})
    return report


def _report(
    day: dt.date,
    outcome: DayOutcome,
    snapshot: SnapshotRef,
    *,
    run_at: dt.datetime,
    max_lag_seconds: int,
    seconds: float,
    keys: tuple[str, ...] = (),
    earlier: tuple[ReconciliationReport, ...] = (),
    lake_snapshots: Mapping[str, int | None] | None = None,
) -> ReconciliationReport:
    return ReconciliationReport(
        day=day,
        counts=outcome.counts,
        findings=outcome.findings,
        checks=outcome.checks,
        wallets=outcome.wallets,
        ledger_rows=outcome.ledger_rows,
        totals=outcome.totals,
        snapshot_at=snapshot.snapshot_at,
        run_at=run_at,
        max_lag_seconds=max_lag_seconds,
        seconds=seconds,
        keys=keys,
        earlier=earlier,
        lake_snapshots=dict(lake_snapshots or {}),
    )


def _store(
    client: S3Client, settings: Settings, day: dt.date, outcome: DayOutcome, run_at: dt.datetime
) -> tuple[str, ...]:
    written = []
    for table, name, rows in (
        ("daily_balances", "daily_balances", outcome.daily_balances),
        ("reconciliation", "reconciliation", findings_table(outcome.findings, outcome.checks, run_at)),
    ):
        key = partition_prefix(settings.lake_prefix, table, day) + name + PARQUET_SUFFIX
        objects.put_table(client, settings.bucket, key, rows)
        written.append(key)
    return tuple(written)


def recorded_run(settings: Settings, day: dt.date) -> dict[str, Any] | None:
    """The summary the day's latest run recorded (None if never reconciled): counts, findings, and on
    the Iceberg lake the ``lake_snapshots`` it read, which an as-of query can pin."""
    return _read_summary(boto3.Session(region_name=settings.region).client("s3"), settings, day)


def _read_summary(client: S3Client, settings: Settings, day: dt.date) -> dict[str, Any] | None:
    try:
        body = client.get_object(Bucket=settings.bucket, Key=summary_key(settings.lake_prefix, day))["Body"]
    except client.exceptions.NoSuchKey:
        return None
    value = json.loads(body.read())
    return value if isinstance(value, dict) else None


def _first_ledger_day(client: S3Client, settings: Settings) -> dt.date | None:
    prefix = table_prefix(settings.lake_prefix, "ledger")
    response = client.list_objects_v2(Bucket=settings.bucket, Prefix=prefix, Delimiter="/", MaxKeys=1)
    for common in response.get("CommonPrefixes", []):
        name = common["Prefix"][len(prefix) :].strip("/")
        if name.startswith("dt="):
            return dt.date.fromisoformat(name[3:])
    return None


def _wallet_findings(
    row: dict[str, Any],
    *,
    absent: bool,
    duplicate: bool,
    chain: bool,
    early: bool,
    not_in_snapshot: bool,
    behind: bool,
    balance_differs: bool,
    lake_balance: int,
    cutoff: dt.datetime,
    snapshot_at: dt.datetime,
    max_lag_seconds: int,
) -> list[Finding]:
    wallet = str(row["wallet_id"])
    opening_version = _int(row["opening_version"]) or 0
    snapshot_version = _int(row["snapshot_version"])
    found = []
    if absent:
        found.append(_absence(row, wallet, opening_version, snapshot_version, cutoff, max_lag_seconds))
    if duplicate:
        rows = _int(row["observed_rows"]) or 0
        copies = _int(row["copies"]) or 0
        found.append(
            Finding(
                wallet,
                DUPLICATE,
                rows - copies,
                rows,
                f"{copies} extra {'copy' if copies == 1 else 'copies'} of the entries at versions "
                f"{_listing(row['copy_versions'])}",
            )
        )
    if chain:
        found.append(_chain_break(row, wallet))
    reasons = []
    expected: int | None = None
    actual: int | None = None
    if row["conflict_versions"] is not None:
        reasons.append(f"different entries share versions {_listing(row['conflict_versions'])}")
    if row["bad_amount_versions"] is not None:
        reasons.append(f"delta is not ±amount at versions {_listing(row['bad_amount_versions'])}")
    if early:
        reasons.append(
            f"versions from {_int(row['first_version'])} are again in the lake, though the previous "
            f"day closed at version {opening_version}"
        )
    if not_in_snapshot:
        reasons.append(f"not in the snapshot of {_iso(snapshot_at)}, though the lake has its entries")
    if behind:
        reasons.append(
            f"the table is at version {snapshot_version}, behind the previous day's close at "
            f"version {opening_version}"
        )
    if balance_differs:
        expected, actual = _int(row["snapshot_balance"]), lake_balance
        reasons.append(
            f"balance at version {snapshot_version}: table {expected}, lake balance_after {actual}"
        )
    if reasons:
        found.append(Finding(wallet, MISMATCH, expected, actual, "; ".join(reasons)))
    return found


def _absence(
    row: dict[str, Any],
    wallet: str,
    opening_version: int,
    snapshot_version: int | None,
    cutoff: dt.datetime,
    max_lag_seconds: int,
) -> Finding:
    ranges: list[tuple[int, int]] = []
    bounds: list[dt.datetime] = []
    first_version = _int(row["first_version"])
    last_version = _int(row["last_version"])
    if row["gap_starts"] is not None:
        starts = [int(v) for v in str(row["gap_starts"]).split(",")]
        ends = [int(v) for v in str(row["gap_ends"]).split(",")]
        ranges.extend(zip(starts, ends, strict=True))
        bounds.append(_timestamp(row["oldest_gap_bound"]))
    top = max(last_version or 0, opening_version) if first_version is not None else opening_version
    if snapshot_version is not None and snapshot_version > top:
        ranges.append((top + 1, snapshot_version))
        bounds.append(_timestamp(row["snapshot_updated_at"]))
    ranges.sort()
    overdue = any(bound < cutoff for bound in bounds)
    status = MISSING if overdue else LAGGING
    count = sum(high - low + 1 for low, high in ranges)
    listed = ", ".join(f"{low}..{high}" if high > low else str(low) for low, high in ranges[:_MAX_LISTED])
    if len(ranges) > _MAX_LISTED:
        listed += f" and {len(ranges) - _MAX_LISTED} more ranges"
    table_part = f"; the table is at version {snapshot_version}" if snapshot_version is not None else ""
    if overdue:
        why = f"committed before {_iso(cutoff)}, past the {max_lag_seconds} s delivery bound"
    else:
        why = f"committed within the last {max_lag_seconds} s, may still be in flight"
    return Finding(
        wallet,
        status,
        snapshot_version if snapshot_version is not None else last_version,
        ranges[0][0] - 1,
        f"{count} {'version' if count == 1 else 'versions'} absent from the lake: {listed}"
        f"{table_part}; {why}",
    )


def _chain_break(row: dict[str, Any], wallet: str) -> Finding:
    expected, actual = _int(row["first_break_expected"]), _int(row["first_break_actual"])
    return Finding(
        wallet,
        CHAIN_BREAK,
        expected,
        actual,
        f"balance_after is not the previous balance plus delta at versions {_listing(row['break_versions'])} "
        f"(first: expected {expected}, lake {actual})",
    )


def _transfer_finding(row: dict[str, Any]) -> Finding:
    debit, credit = _int(row["debit_delta"]), _int(row["credit_delta"])
    debit_part = (
        f"debit {debit} ({row['debit_wallet_id']} version {_int(row['debit_version'])})"
        if debit is not None
        else "no debit leg"
    )
    credit_part = (
        f"credit {credit} ({row['credit_wallet_id']} version {_int(row['credit_version'])})"
        if credit is not None
        else "no credit leg"
    )
    total = None if debit is None or credit is None else debit + credit
    summed = f" = {total}" if total is not None else ""
    return Finding(
        None, TRANSFER_UNBALANCED, 0, total, f"transfer {row['txn_id']}: {debit_part} + {credit_part}{summed}"
    )


def _daily_balances(
    frame: _Columns, closes: np.ndarray, closing_balance: np.ndarray, closing_version: np.ndarray
) -> pa.Table:
    return pa.table(  # in the query's order: readers find a wallet by its value
        {
            "wallet_id": frame.arrow("wallet_id").filter(pa.array(closes)),
            "closing_balance": pa.array(closing_balance[closes], pa.int64()),
            "closing_version": pa.array(closing_version[closes], pa.int64()),
            "entries": pa.array(frame.ints("day_entries")[closes], pa.int64()),
            "net_delta": pa.array(frame.ints("day_net_delta")[closes], pa.int64()),
        },
        schema=DAILY_BALANCES,
    )


class _Columns:
    """Numpy views of the query result's columns: integers with nulls as 0 plus presence masks.

    Works on Arrow (a million-wallet result never becomes a pandas frame on the nightly path).
    """

    def __init__(self, result: pa.Table | pd.DataFrame) -> None:
        self._table = _arrow(result)

    def __len__(self) -> int:
        return int(self._table.num_rows)

    def present(self, name: str) -> np.ndarray:
        return np.asarray(pc.is_valid(self._table.column(name)).to_numpy(zero_copy_only=False), dtype=bool)

    def ints(self, name: str) -> np.ndarray:
        values = pc.fill_null(pc.cast(self._table.column(name), pa.int64()), 0)
        return np.asarray(values.to_numpy(), dtype=np.int64)

    def arrow(self, name: str) -> pa.Array:
        return pc.cast(self._table.column(name), pa.string()).combine_chunks()

    def times(self, name: str) -> np.ndarray:
        """UTC wall times as naive ``datetime64[us]`` (NaT where null)."""
        column = self._table.column(name)
        if pa.types.is_null(column.type):
            return np.full(len(self), np.datetime64("NaT"), dtype="datetime64[us]")
        # Epoch microseconds either way: naive times from DuckDB are UTC wall times (TimeZone=UTC).
        micros = pc.cast(pc.cast(column, pa.timestamp("us", tz=column.type.tz)), pa.int64())
        return np.asarray(pc.fill_null(micros, np.iinfo(np.int64).min).to_numpy()).view("datetime64[us]")

    def row(self, index: int) -> dict[str, Any]:
        return {str(name): value for name, value in self._table.slice(index, 1).to_pylist()[0].items()}


#: ``reconcile_wallets``' counts of entries failing each check.
PROBLEM_COUNTS: Final = ("copies", "conflicts", "bad_amounts", "breaks", "gaps")
#: What ``reconcile_wallet_problems`` adds per wallet (null for a wallet with nothing to explain).
_PROBLEM_DETAILS: Final[dict[str, pa.DataType]] = {
    "copy_versions": pa.string(),
    "conflict_versions": pa.string(),
    "bad_amount_versions": pa.string(),
    "break_versions": pa.string(),
    "first_break_expected": pa.int64(),
    "first_break_actual": pa.int64(),
    "gap_starts": pa.string(),
    "gap_ends": pa.string(),
    "oldest_gap_bound": pa.timestamp("us"),
}


def _has_problems(wallets: pa.Table) -> bool:
    """True when any wallet has an entry failing a check (the details query is then needed)."""
    return any(pc.max(wallets.column(name)).as_py() or 0 for name in PROBLEM_COUNTS)


def _with_problems(wallets: pa.Table, problems: pa.Table | None) -> pa.Table:
    """The per-wallet rows with the problems' details beside them (nulls where there are none).

    The details of a wallet the first pass did not flag are kept too: the lake may have changed
    between the passes (late rows landing), and a problem seen is never dropped.
    """
    if problems is None or problems.num_rows == 0:
        for name, kind in _PROBLEM_DETAILS.items():
            wallets = wallets.append_column(name, pa.nulls(wallets.num_rows, kind))
        return wallets
    # Cast to the declared types first: the same query comes back from DuckDB as Arrow but from
    # Athena through pandas, where pandas 3's strings become ``large_string`` (Arrow refuses to
    # join string with large_string) and timestamps nanoseconds. Found by the deploy check.
    details = problems.select(["wallet_id", *_PROBLEM_DETAILS]).cast(
        pa.schema(
            [
                pa.field("wallet_id", wallets.schema.field("wallet_id").type),
                *(pa.field(name, kind) for name, kind in _PROBLEM_DETAILS.items()),
            ]
        )
    )
    return wallets.join(details, keys="wallet_id", join_type="left outer")


def _arrow(result: pa.Table | pd.DataFrame) -> pa.Table:
    """A query result as Arrow (frames, from the pure :func:`classify` entry point, are converted)."""
    if isinstance(result, pa.Table):
        return result
    return pa.Table.from_pandas(result, preserve_index=False)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _timestamp(value: Any) -> dt.datetime:
    moment = pd.Timestamp(value).to_pydatetime()
    return (
        moment.replace(tzinfo=None)
        if moment.tzinfo is None
        else moment.astimezone(dt.UTC).replace(tzinfo=None)
    )


def _naive_utc(moment: dt.datetime) -> dt.datetime:
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(dt.UTC).replace(tzinfo=None)


def _listing(text: Any) -> str:
    values = str(text).split(",")
    shown = ", ".join(values[:_MAX_LISTED])
    return shown + (f" and {len(values) - _MAX_LISTED} more" if len(values) > _MAX_LISTED else "")


def _exact_sum(values: np.ndarray) -> int:
    """Sum without int64 overflow: in int64 when no overflow is possible, else in Python integers."""
    if not len(values):
        return 0
    if int(np.abs(values).max()) < (2**63 - 1) // len(values):
        return int(values.sum())
    return int(values.astype(object).sum())


def _finding_order(finding: Finding) -> tuple[int, str, str]:
    return (STATUSES.index(finding.status), finding.wallet_id or "", finding.detail)


def _iso(moment: dt.datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
