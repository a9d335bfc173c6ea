"""The whole pipeline end to end on the embedded stack, with progress and a summary a person can read.

Stages: provision → wallets, deposits and transfers through the real HTTP API → stream consumption →
TTL expiry of the hot items (the hot window is shortened so it happens while you watch) → a second
drain that sees the expiries and changes nothing in the lake → snapshot → compaction → reconciliation
→ analyst queries → an HTML report. Every count is checked against the stage before it; the demo
fails (exit 1) when any disagree or the reconciliation is not clean.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from contracts.settings import Settings
from contracts.wallets_table import ENTITY_TRANSACTION, Attr
from walletlake.demo_config import DemoConfig
from walletlake.local import EmbeddedStack, patched_environ, provision

_logger = logging.getLogger(__name__)


@dataclasses.dataclass
class DemoResult:
    """What each stage counted, for the summary, the report and the tests."""

    counts: dict[str, Any] = dataclasses.field(default_factory=dict)
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    checks: dict[str, bool] = dataclasses.field(default_factory=dict)
    frames: dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)
    reconciliation: dict[str, Any] = dataclasses.field(default_factory=dict)
    report_path: Path | None = None
    lake_uri: str = ""
    #: What the summary must say besides the counts (a lake that was not empty, and what was checked).
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every cross-stage check held."""
        return all(self.checks.values())


def stage_line(name: str, done: int | None, total: int | None, seconds: float) -> str:
    """A stage's closing line: what it counted, of what it expected when the two differ.

    The TTL stage expects every transaction item to expire and counts those that did while it
    watched; saying "1,339 done" for 1,200 expired would disagree with the summary's table.

    Examples
    --------
    >>> stage_line("TTL expiry of hot items", 1_200, 1_339, 15.04)
    'TTL expiry of hot items: 1,200 of 1,339 done in 15.0 s'
    >>> stage_line("stream → lake (consume)", 4_400, 4_400, 6.25)
    'stream → lake (consume): 4,400 done in 6.2 s'
    >>> stage_line("snapshot balances", None, 1, 0.5)
    'snapshot balances: 1 done in 0.5 s'
    """
    if done is not None and total and done != total:
        return f"{name}: {done:,} of {total:,} done in {seconds:.1f} s"
    shown = total or done or 1
    return f"{name}: {shown:,} done in {seconds:.1f} s"


class _Stages:
    """Each stage's progress and timing: a rich bar on a terminal; off one (a log, a CI job, a pipe)
    one plain line per finished stage with its count and seconds, which no terminal width cuts."""

    def __init__(self, progress: Progress | None, result: DemoResult, console: Console) -> None:
        self.progress = progress
        self.result = result
        self.console = console

    @contextlib.contextmanager
    def stage(self, name: str, total: int | None = 1) -> Iterator[Callable[[int, int | None], None]]:
        started = time.perf_counter()
        if self.progress is None:
            counted: dict[str, Any] = {"done": 0, "total": total, "counted": False}

            def count(done: int, new_total: int | None = None) -> None:
                counted["done"] = done
                counted["counted"] = True
                if new_total is not None:
                    counted["total"] = new_total

            yield count
            seconds = time.perf_counter() - started
            self.result.timings[name] = seconds
            line = stage_line(
                name, counted["done"] if counted["counted"] else None, counted["total"], seconds
            )
            self.console.print(line, soft_wrap=True, highlight=False)
            return
        task: TaskID = self.progress.add_task(name, total=total)
        progress = self.progress

        def advance(done: int, new_total: int | None = None) -> None:
            if new_total is not None:
                progress.update(task, total=new_total)
            progress.update(task, completed=done)

        advanced = False

        def advance_seen(done: int, new_total: int | None = None) -> None:
            nonlocal advanced
            advanced = True
            advance(done, new_total)

        yield advance_seen
        self.result.timings[name] = time.perf_counter() - started
        if not advanced:  # a stage that counts nothing along the way is whole when it ends
            progress.update(task, completed=progress.tasks[task].total or 1)


def run_demo(config: DemoConfig, console: Console | None = None) -> DemoResult:
    """Run every stage; uses an already running stack when the SDK's endpoint variables point at one."""
    console = console or Console()
    result = DemoResult()
    output = config.output_dir.resolve()
    output.mkdir(parents=True, exist_ok=True)
    progress = (
        Progress(
            TextColumn("[bold]{task.description:<34}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        )
        if console.is_terminal
        else None
    )
    with progress or contextlib.nullcontext(), contextlib.ExitStack() as cleanup:
        stages = _Stages(progress, result, console)
        with stages.stage("provision embedded stack"):
            settings = _stack(config, output, cleanup)
        _pipeline(config, settings, stages, result, output)
    return result


def _stack(config: DemoConfig, output: Path, cleanup: contextlib.ExitStack) -> Settings:
    """Start a fresh embedded stack (or reuse a running one) and point the SDK at it."""
    if os.environ.get("AWS_ENDPOINT_URL_DYNAMODB"):
        settings = Settings.from_env()
        provision(settings)
        return settings
    data_dir = output / "stack"
    shutil.rmtree(data_dir, ignore_errors=True)
    stack = EmbeddedStack(data_dir)
    stack.start()
    cleanup.callback(stack.stop)
    cleanup.enter_context(patched_environ(stack.environment()))
    return Settings.from_env()


def _pipeline(
    config: DemoConfig, settings: Settings, stages: _Stages, result: DemoResult, output: Path
) -> None:
    # Imported here so `walletlake --help` stays fast and does not load the whole pipeline.
    from queries import run_query
    from stream_processor.consumer import drain
    from walletlake.report import render_report

    counts = result.counts
    today = dt.datetime.now(dt.UTC).date()
    result.lake_uri = (
        f"Iceberg tables {settings.glue_database}.{{ledger,wallets,quarantine}} in {settings.catalog_uri}"
        if settings.lake_format == "iceberg"
        else f"s3://{settings.bucket}/{settings.lake_prefix}/"
    )
    with stages.stage("look at the lake before this run"):
        before = _lake_before(settings, today)
    workload = _drive_api(config, stages, result)
    committed = workload.deposits_ok + workload.transfers_ok
    counts["api"] = {
        "wallets": workload.wallets_created,
        "deposits": workload.deposits_ok,
        "transfers": workload.transfers_ok,
        "refused (insufficient funds)": workload.transfers_refused,
        "replays (no effect)": workload.replays,
        "ledger entries expected": workload.ledger_entries_expected,
        "requests/s": round(workload.requests_per_second),
    }

    from lake.committer import commit_now

    iceberg = settings.lake_format == "iceberg"
    with stages.stage("stream → lake (consume)", workload.ledger_entries_expected) as advance:
        first = drain(settings, on_progress=lambda n: advance(n, None))
    counts["consume"] = first.as_dict()
    commits: list[dict[str, Any]] = []
    if iceberg:
        with stages.stage("commit landed batches (Iceberg)"):
            commits.append(commit_now(settings).as_dict())

    with stages.stage("TTL expiry of hot items", committed) as advance:
        hot_at_start, remaining = _wait_for_ttl(settings, committed, config.ttl_wait_seconds, advance)
    with stages.stage("stream → lake (after TTL)"):
        second = drain(settings)
        if iceberg:
            commits.append(commit_now(settings).as_dict())
    if iceberg:
        ledger_commits = [
            table for commit in commits for table in commit["tables"] if table["table"] == "ledger"
        ]
        counts["commit"] = {
            "commits with new batches (ledger)": sum(1 for table in ledger_commits if table["batches"]),
            "batches committed (ledger)": sum(table["batches"] for table in ledger_commits),
            "rows committed (ledger)": sum(table["rows"] for table in ledger_commits),
            "redelivered batches skipped": sum(table["skipped_batches"] for table in ledger_commits),
            # An id, not a quantity: text, so no summary or report shows it with thousands separators.
            "ledger snapshot id after the last commit": str(
                next((table["snapshot_id"] for table in reversed(ledger_commits) if table["snapshot_id"]), "")
            ),
        }
    expiries_seen = first.as_dict()["ttl_expired"] + second.as_dict()["ttl_expired"]
    counts["ttl"] = {
        "hot window (seconds)": config.hot_ttl_seconds,
        "transaction items committed": committed,
        "expired from DynamoDB by TTL while watched": hot_at_start - remaining,
        "still hot in DynamoDB": remaining,
        "TTL deletions seen on the stream": expiries_seen,
        "ledger rows added by TTL deletions": second.as_dict()["ledger_rows"],
        "quarantined": first.as_dict()["quarantined"] + second.as_dict()["quarantined"],
    }

    report, rows_after_compaction, replayed_identical = _nightly(settings, stages, counts, result, today)

    queries = {
        "daily_volume": {"start_date": today.isoformat(), "end_date": today.isoformat()},
        "money_conservation": {"date": today.isoformat()},
        "top_wallets": {"start_date": today.isoformat(), "end_date": today.isoformat(), "limit": "5"},
    }
    with stages.stage("analyst queries", len(queries) + 1) as advance:
        for done, (name, params) in enumerate(queries.items(), start=1):
            result.frames[name] = run_query(name, params, settings)
            advance(done, None)
        top = str(result.frames["top_wallets"].iloc[0]["wallet_id"])
        day_start, day_end = (
            f"{today.isoformat()}T00:00:00Z",
            f"{(today + dt.timedelta(days=1)).isoformat()}T00:00:00Z",
        )
        result.frames["wallet_statement"] = run_query(
            "wallet_statement", {"wallet_id": top, "start": day_start, "end": day_end}, settings
        )

    conservation = result.frames["money_conservation"]
    lake_entries = _entries(conservation)
    expected = workload.ledger_entries_expected
    counts["lake"] = {
        "ledger rows queryable (SQL)": lake_entries,
        "wallets in the lake": first.as_dict()["wallets"],
        "money conserved (SQL)": bool(conservation["conserved"].all()),
    }
    if before.day_rows or before.table_rows:
        # A stack that already holds data (an earlier demo, tests): judge this run by what it added.
        result.notes.append(
            f"the lake was not empty: it held {before.day_rows:,} ledger rows of {today} before this run, so "
            f"the demo checked that SQL sees exactly this run's {expected:,} entries more"
        )
        counts["lake"]["ledger rows of the day before this run"] = before.day_rows
        counts["lake"]["ledger rows this run added (SQL)"] = lake_entries - before.day_rows
    result.checks = {
        "every wallet reached the lake": first.as_dict()["wallets"] == workload.wallets_created,
        "every ledger entry reached the lake once": first.as_dict()["ledger_rows"] == expected
        and rows_after_compaction in (None, before.table_rows + expected),
        "TTL deletions reached the stream and changed nothing in the lake": (
            second.as_dict()["ledger_rows"] == 0 and expiries_seen >= hot_at_start - remaining
        ),
        "analyst SQL sees every entry": lake_entries - before.day_rows == expected,
        "nothing quarantined": counts["ttl"]["quarantined"] == 0,
        "reconciliation clean": report.ok,
        **(
            {"reconciliation replays identically as of its snapshots": bool(replayed_identical)}
            if iceberg
            else {}
        ),
        **(_history(config, settings, stages, counts, top) if iceberg else {}),
    }
    with stages.stage("render report"):
        result.report_path = render_report(
            output / "report.html",
            summary={
                "counts": counts,
                "timings": result.timings,
                "checks": result.checks,
                "lake": result.lake_uri,
                **({"note": " ".join(result.notes)} if result.notes else {}),
            },
            frames=result.frames,
            reconciliation=result.reconciliation,
            captions={"wallet_statement": f"wallet {top} (the day's busiest), {day_start} to {day_end}"},
        )


def _history(
    config: DemoConfig, settings: Settings, stages: _Stages, counts: dict[str, Any], wallet: str
) -> dict[str, bool]:
    """The wallet's history through the API, spanning DynamoDB and the lake (walletlake.demo_history)."""
    from walletlake.demo_history import show_history

    with stages.stage("a wallet's history (DynamoDB + lake)"):
        counts["history"], whole = show_history(settings, wallet, config.hot_ttl_seconds)
    return {"one owner's history is every entry once, across DynamoDB and the lake": whole}


@dataclasses.dataclass(frozen=True, slots=True)
class _LakeBefore:
    """What the lake held before the run: the day's ledger rows (by SQL) and the rows the compaction
    count covers (the whole Iceberg ledger table, or the day's partition on the Parquet lake)."""

    day_rows: int
    table_rows: int


def _lake_before(settings: Settings, today: dt.date) -> _LakeBefore:
    from queries import run_query

    day_rows = _entries(run_query("money_conservation", {"date": today.isoformat()}, settings))
    if settings.lake_format != "iceberg":
        return _LakeBefore(day_rows, day_rows)
    from lake.iceberg_catalog import open_catalog
    from lake.iceberg_tables import identifier

    ledger = open_catalog(settings).load_table(identifier(settings.glue_database, "ledger"))
    return _LakeBefore(day_rows, sum(task.file.record_count for task in ledger.scan().plan_files()))


def _entries(conservation: pd.DataFrame) -> int:
    """The day's ledger rows as money_conservation counts them (none on an empty lake)."""
    if conservation.empty:
        return 0
    return int(conservation["entries"].fillna(0).to_numpy(dtype="int64").sum())


def _drive_api(config: DemoConfig, stages: _Stages, result: DemoResult) -> Any:
    """Wallets, deposits and transfers through the real HTTP API, one progress bar per kind."""
    from walletlake.api_server import ApiServer
    from walletlake.workload import run_workload

    api_env = {**os.environ, "WALLETLAKE_HOT_TTL_SECONDS": str(config.hot_ttl_seconds)}

    with ApiServer(env=api_env) as api:
        bars: dict[str, Callable[[int, int | None], None]] = {}
        contexts: dict[str, contextlib.AbstractContextManager[Callable[[int, int | None], None]]] = {}
        started = time.perf_counter()

        def on_progress(stage: str, done: int, total: int) -> None:
            if stage not in bars:
                for name in list(bars):  # a new stage closes the previous one
                    contexts.pop(name).__exit__(None, None, None)
                    bars.pop(name)
                contexts[stage] = stages.stage(f"{stage} via HTTP API", total)
                bars[stage] = contexts[stage].__enter__()
            bars[stage](done, total)

        workload = run_workload(
            api.url,
            wallets=config.wallets,
            deposits_per_wallet=config.deposits_per_wallet,
            transfers=config.transfers,
            concurrency=config.concurrency,
            seed=config.seed,
            on_progress=on_progress,
        )
        for name in list(bars):
            contexts.pop(name).__exit__(None, None, None)
        result.timings["api total"] = time.perf_counter() - started
    return workload


def _nightly(
    settings: Settings, stages: _Stages, counts: dict[str, Any], result: DemoResult, today: dt.date
) -> tuple[Any, int | None, bool | None]:
    """Snapshot, compaction (or the Iceberg maintenance), reconciliation and, on Iceberg, its replay."""
    from lake.compaction_units import compact_day
    from lake.snapshots import take_snapshot
    from queries.reconciliation import reconcile

    iceberg = settings.lake_format == "iceberg"
    with stages.stage("snapshot balances"):
        snapshot = take_snapshot(settings)
    compacted: dict[str, Any]
    if iceberg:
        with stages.stage("compact today's partitions (one atomic Iceberg rewrite per table)"):
            compacted = _maintain(settings, today)
        rows_after_compaction: int | None = compacted["ledger rows after compaction"]
    else:
        with stages.stage("compact today's partition, hour by hour (one unit per table and hour)"):
            compaction = compact_day(settings, today)
        rows_after_compaction = _attr(compaction, "rows_out", "ledger_rows")
        compacted = {
            "compaction units with work (one per table and hour)": len(compaction.units),
            "hours compacted (UTC)": ", ".join(
                sorted({f"{unit['unit']['hour']:02d}:00" for unit in compaction.units}) or ["none"]
            ),
            "ledger rows after compaction": rows_after_compaction,
        }
    with stages.stage("reconcile (exact)"):
        report = reconcile(settings, today)
    result.reconciliation = report.to_dict()
    counts["nightly"] = {
        "wallets snapshotted": _attr(snapshot, "wallets"),
        **compacted,
        "reconciliation": "CLEAN" if report.ok else "FAILED",
        **{f"findings: {k}": v for k, v in report.counts.items()},
    }
    replayed_identical: bool | None = None
    if iceberg:
        from queries.reconciliation import replay

        with stages.stage("replay the reconciliation as of its snapshots"):
            replayed = replay(settings, today)
        replayed_identical = replayed.identical
        counts["nightly"]["reconciled as of Iceberg snapshots"] = ", ".join(
            f"{name} {snapshot_id}"
            for name, snapshot_id in sorted(report.lake_snapshots.items())
            if snapshot_id
        )
        counts["nightly"]["replay as of those snapshots"] = "identical" if replayed.identical else "DIFFERENT"

    return report, rows_after_compaction, replayed_identical


def _maintain(settings: Settings, day: dt.date) -> dict[str, Any]:
    """The day's Iceberg maintenance per table, summed up for the demo's table."""
    from contracts.lake_tables import STREAM_TABLES
    from lake.iceberg_catalog import open_catalog
    from lake.iceberg_maintenance import maintain
    from lake.iceberg_tables import identifier

    catalog = open_catalog(settings)
    reports = {name: maintain(settings, catalog, name, day) for name in STREAM_TABLES}
    ledger = catalog.load_table(identifier(settings.glue_database, "ledger"))
    rows = sum(task.file.record_count for task in ledger.scan().plan_files())
    return {
        "files rewritten → written": ", ".join(
            f"{name} {report.compaction.files_in} → {report.compaction.files_out}"
            for name, report in reports.items()
        ),
        "ledger rows after compaction": rows,
    }


def _attr(obj: Any, *names: str) -> Any:
    """The first of ``names`` that ``obj`` (a report dataclass or dict) has, else None."""
    for name in names:
        if isinstance(obj, dict) and name in obj:
            return obj[name]
        if hasattr(obj, name):
            return getattr(obj, name)
    return None


def _wait_for_ttl(
    settings: Settings, committed: int, timeout: float, advance: Callable[[int, int | None], None]
) -> tuple[int, int]:
    """Watch TTL remove transaction items until all are gone or the time is up.

    Returns the hot items at the start and at the end: an earlier run's items may still be there,
    so what expired while watched is their difference, not this run's count minus what is left.
    """
    client = boto3.client("dynamodb", region_name=settings.region)
    deadline = time.monotonic() + timeout
    at_start = remaining = _count_transactions(client, settings.table)
    while time.monotonic() < deadline:
        remaining = _count_transactions(client, settings.table)
        advance(min(committed, max(0, at_start - remaining)), None)
        if remaining == 0:
            break
        time.sleep(1.0)
    return at_start, remaining


def _count_transactions(client: Any, table: str) -> int:
    total = 0
    kwargs: dict[str, Any] = {
        "TableName": table,
        "Select": "COUNT",
        "FilterExpression": "#e = :t",
        "ExpressionAttributeNames": {"#e": Attr.ENTITY},
        "ExpressionAttributeValues": {":t": {"S": ENTITY_TRANSACTION}},
    }
    while True:
        page = client.scan(**kwargs)
        total += page["Count"]
        if "LastEvaluatedKey" not in page:
            return total
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def print_summary(result: DemoResult, console: Console) -> None:
    """The readable end of the demo: counts per stage, checks, timings, where things are."""
    for section, values in result.counts.items():
        table = Table(title=section, show_header=False, title_justify="left")
        for key, value in values.items():
            table.add_row(str(key), str(value))
        console.print(table)
    checks = Table(title="cross-stage checks", show_header=False, title_justify="left")
    for name, passed in result.checks.items():
        checks.add_row(name, "[green]ok[/green]" if passed else "[red]FAILED[/red]")
    console.print(checks)
    for name in ("daily_volume", "money_conservation", "top_wallets"):
        if name in result.frames:
            console.print(f"[bold]query {name}[/bold]")
            console.print(result.frames[name].to_string(index=False))
    timing = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in result.timings.items())
    console.print(f"timings: {timing}")
    console.print(f"lake: {result.lake_uri}   report: {result.report_path}")
    for note in result.notes:
        console.print(f"note: {note}")
    verdict = "[bold green]DEMO OK[/bold green]" if result.ok else "[bold red]DEMO FAILED[/bold red]"
    console.print(verdict)
