"""What a reconciliation run leaves in S3, and what the next run reads back from it.

A day's run writes ``daily_balances`` (a fixed object name: the day's close is the latest run's,
which a rerun replaces), then its ``reconciliation`` rows in an object of its own, named for its
``run_at`` (every run is kept, never overwritten, as docs/analysts.md says: a day reconciled four
times has four runs, and the queries take the latest), and then, last, its JSON summary under
``{lake_prefix}/_reports/reconciliation/`` (the latest run's; each run's own copy beside it, named
for its ``run_at``). The summary is the record that the day is done: a run that crashes before
writing it leaves a day with no summary, which :func:`days_to_catch_up` hands to the next run to
reconcile again, and so does a day whose run found lagging wallets (its close may change when the
late entries land). Those days run before the day itself, oldest first, so each day opens (from
``daily_balances``) on the close its predecessor's recorded run wrote.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

import boto3
import pyarrow as pa

from contracts.lake_layout import PARQUET_SUFFIX, partition_prefix, table_prefix
from contracts.lake_tables import RECONCILIATION
from contracts.settings import Settings
from contracts.timestamps import utc_text
from lake import objects
from lake.snapshot_tags import SnapshotGoneError
from lake.snapshots import SnapshotRef
from queries.reconciliation_rules import LAGGING, OK, PASSING_STATUSES, DayOutcome, Finding
from queries.time_travel import tag_versions

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_logger = logging.getLogger(__name__)

_REPORTS_FOLDER: Final = "_reports/reconciliation"


class ReconciliationError(RuntimeError):
    """Reconciliation cannot run (no snapshot to compare with, or the lake snapshots it read are gone)."""


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
    #: what :func:`queries.reconciliation.replay` reads again to reproduce the run.
    lake_snapshots: dict[str, int | None] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_outcome(
        cls,
        day: dt.date,
        outcome: DayOutcome,
        *,
        snapshot_at: dt.datetime,
        run_at: dt.datetime,
        max_lag_seconds: int,
        seconds: float,
        keys: tuple[str, ...] = (),
        earlier: tuple[ReconciliationReport, ...] = (),
        lake_snapshots: Mapping[str, int | None] | None = None,
    ) -> ReconciliationReport:
        """The report of a classified day, as a run records it and as a replay compares it."""
        return cls(
            day=day,
            counts=outcome.counts,
            findings=outcome.findings,
            checks=outcome.checks,
            wallets=outcome.wallets,
            ledger_rows=outcome.ledger_rows,
            totals=outcome.totals,
            snapshot_at=snapshot_at,
            run_at=run_at,
            max_lag_seconds=max_lag_seconds,
            seconds=seconds,
            keys=keys,
            earlier=earlier,
            lake_snapshots=dict(lake_snapshots or {}),
        )

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
            "snapshot_at": utc_text(self.snapshot_at),
            "run_at": utc_text(self.run_at),
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


def record_day(
    s3: S3Client,
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
    the same objects behind. The summary goes last: until it is written, the day counts as not
    reconciled and the next run does it again (:func:`days_to_catch_up`).
    """
    # To the millisecond, as the summary spells it: a replay classifies lag as of the recorded
    # run_at, which is then exactly the time this run classified it with.
    run_at = now.astimezone(dt.UTC).replace(microsecond=now.microsecond // 1000 * 1000)
    if lake_snapshots:
        # Kept through snapshot expiry for audits: what a replay reads again. First, so a run
        # whose snapshots expired meanwhile records nothing a replay could not read again.
        try:
            tag_versions(settings, lake_snapshots, f"reconciled-{day.isoformat()}")
        except SnapshotGoneError as error:
            raise ReconciliationError(
                f"the reconciliation of {day} cannot be recorded: {error} (night tags are kept "
                f"{settings.audit_tag_retention_days} days); nothing was recorded, reconcile the day again"
            ) from error
    keys = _store(s3, settings, day, outcome, run_at)
    report = ReconciliationReport.from_outcome(
        day,
        outcome,
        snapshot_at=snapshot.snapshot_at,
        run_at=run_at,
        max_lag_seconds=max_lag_seconds,
        seconds=seconds,
        keys=keys,
        earlier=earlier,
        lake_snapshots=lake_snapshots,
    )
    body = json.dumps({**report.to_dict(), "earlier": [r.day.isoformat() for r in earlier]}).encode()
    # This run's own record first, then the day's latest: a crash between them leaves the day to redo.
    for key in (run_summary_key(settings.lake_prefix, day, run_at), summary_key(settings.lake_prefix, day)):
        s3.put_object(Bucket=settings.bucket, Key=key, Body=body, ContentType="application/json")
    _logger.info("reconciled %s: %s", day, {k: v for k, v in report.counts.items() if v})
    return report


def days_to_catch_up(s3: S3Client, settings: Settings, day: dt.date) -> list[dt.date]:
    """Days before ``day`` to reconcile first: those with no run or a lagging one, oldest first.

    Walks back from the day before while the run of that day is missing or had lagging wallets,
    and stops at the lake's first ledger day: a few LIST and GET calls, whatever the history.
    """
    first = _first_ledger_day(s3, settings)
    if first is None:
        return []
    pending = []
    current = day - dt.timedelta(days=1)
    while current >= first:
        summary = _read_summary(s3, settings, current)
        if summary is not None and not summary.get("counts", {}).get(LAGGING):
            break
        pending.append(current)
        current -= dt.timedelta(days=1)
    return sorted(pending)


def recorded_run(settings: Settings, day: dt.date, *, s3: S3Client | None = None) -> dict[str, Any] | None:
    """The summary the day's latest run recorded (None if never reconciled): counts, findings, and on
    the Iceberg lake the ``lake_snapshots`` it read, which an as-of query can pin."""
    s3 = s3 or boto3.Session(region_name=settings.region).client("s3")
    return _read_summary(s3, settings, day)


def compare_with_recorded(report: ReconciliationReport, recorded: Mapping[str, Any]) -> list[str]:
    """What differs between a replayed day and its recorded summary (empty: identical). Pure."""
    now = report.to_dict()
    differences = []
    for field in ("counts", "checks", "totals", "wallets", "ledger_rows", "findings"):
        if now[field] != recorded.get(field):
            differences.append(f"{field}: recorded {recorded.get(field)!r}, replayed {now[field]!r}")
    return differences


def summary_key(lake_prefix: str, day: dt.date) -> str:
    """Where a day's JSON summary lives: beside the tables, outside any table's location."""
    root = lake_prefix.strip("/")
    return f"{root + '/' if root else ''}{_REPORTS_FOLDER}/dt={day.isoformat()}/summary.json"


def run_summary_key(lake_prefix: str, day: dt.date, run_at: dt.datetime) -> str:
    """Where one run's own summary lives, kept whatever runs after it."""
    return summary_key(lake_prefix, day).replace("/summary.json", f"/runs/{run_name(run_at)}.json")


def run_name(run_at: dt.datetime) -> str:
    """A run's name in object keys: its ``run_at`` to the millisecond, sortable (``20261121T010203.456Z``)."""
    moment = run_at.astimezone(dt.UTC)
    return moment.strftime("%Y%m%dT%H%M%S.") + f"{moment.microsecond // 1000:03d}Z"


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


def _store(
    s3: S3Client, settings: Settings, day: dt.date, outcome: DayOutcome, run_at: dt.datetime
) -> tuple[str, ...]:
    written = []
    for table, name, rows in (
        ("daily_balances", "daily_balances", outcome.daily_balances),
        (
            "reconciliation",
            f"reconciliation-{run_name(run_at)}",
            findings_table(outcome.findings, outcome.checks, run_at),
        ),
    ):
        key = partition_prefix(settings.lake_prefix, table, day) + name + PARQUET_SUFFIX
        objects.put_table(s3, settings.bucket, key, rows)
        written.append(key)
    return tuple(written)


def _read_summary(s3: S3Client, settings: Settings, day: dt.date) -> dict[str, Any] | None:
    try:
        body = s3.get_object(Bucket=settings.bucket, Key=summary_key(settings.lake_prefix, day))["Body"]
    except s3.exceptions.NoSuchKey:
        return None
    value = json.loads(body.read())
    return value if isinstance(value, dict) else None


def _first_ledger_day(s3: S3Client, settings: Settings) -> dt.date | None:
    prefix = table_prefix(settings.lake_prefix, "ledger")
    response = s3.list_objects_v2(Bucket=settings.bucket, Prefix=prefix, Delimiter="/", MaxKeys=1)
    for common in response.get("CommonPrefixes", []):
        name = common["Prefix"][len(prefix) :].strip("/")
        if name.startswith("dt="):
            return dt.date.fromisoformat(name[3:])
    return None
