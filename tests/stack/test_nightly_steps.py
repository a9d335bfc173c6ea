"""The AWS nightly job's units, run here as Step Functions would run them, against the local path.

Athena is the one piece not on the embedded stack: where the state machine runs a rendered
``UNLOAD`` on Athena, the test runs the same query on DuckDB and writes its result as Parquet
under the UNLOAD's location, then lets the classification function take it from there.
"""

from __future__ import annotations

import datetime as dt
import importlib
from collections.abc import Callable, Iterator
from types import ModuleType

import pyarrow as pa
import pytest
import sqlglot
from support.lambda_context import FakeLambdaContext
from support.ledger_builder import USD, Book, put_wallet_items, read_partition, s3_client, write_landing

from contracts.settings import LAMBDA_FUNCTION_VARIABLE, SNAPSHOT_SEGMENTS_VARIABLE, Settings
from lake import objects
from lake.snapshots import (
    SnapshotRef,
    SnapshotSegment,
    latest_snapshot,
    plan_snapshot,
    snapshot_segment,
    take_snapshot,
)
from queries import engine_for, get_query
from queries.reconciliation import TRANSFERS_QUERY, WALLETS_QUERY, day_parameters, reconcile
from queries.reconciliation_athena import classify_unloaded, plan_reconciliation, unload_statement
from walletlake.handlers import nightly as nightly_handlers
from walletlake.handlers.nightly import plan_night

pytestmark = pytest.mark.stack

DAY = dt.date(2026, 11, 20)
NOW = dt.datetime(2026, 11, 21, 1, 30, tzinfo=dt.UTC)
UNLOAD_PREFIX = "athena-results/unload/test"


@pytest.fixture
def cold_start(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Settings], ModuleType]]:
    """Start the module as Lambda does: the deployment's variables set, then the handler imported."""

    def start(settings: Settings) -> ModuleType:
        monkeypatch.setenv(LAMBDA_FUNCTION_VARIABLE, "walletlake-nightly-step")
        for name, value in settings.to_env(nightly_handlers.REQUIRED_VARIABLES).items():
            monkeypatch.setenv(name, value)
        return importlib.reload(nightly_handlers)

    yield start
    monkeypatch.undo()
    importlib.reload(nightly_handlers)  # reading at first use again, as everywhere off Lambda


def a_day() -> Book:
    start = dt.datetime.combine(DAY, dt.time(10), tzinfo=dt.UTC)
    book = Book()
    for wallet in ("alice", "bob", "carol", "dave"):
        book.open(wallet, start)
    book.deposit("alice", 40 * USD, start)
    book.deposit("bob", 5 * USD, start + dt.timedelta(minutes=1))
    book.transfer("alice", "carol", 15 * USD, start + dt.timedelta(minutes=2))
    book.transfer("carol", "bob", 5 * USD, start + dt.timedelta(minutes=3))
    book.deposit("dave", 1 * USD, start + dt.timedelta(minutes=4))
    return book


def run_like_athena(settings: Settings, item: dict[str, str]) -> None:
    """What ``athena:startQueryExecution.sync`` does with the item's UNLOADs, on DuckDB."""
    parameters = day_parameters(dt.date.fromisoformat(item["date"]), latest_or_fail(settings))
    client = s3_client(settings)
    engine = engine_for(settings)
    try:
        for name, location in (
            (WALLETS_QUERY, item["wallets_location"]),
            (TRANSFERS_QUERY, item["transfers_location"]),
        ):
            query = get_query(name)
            declared = {parameter.name for parameter in query.parameters}
            result = engine.arrow(
                query.sql, query.bind({k: v for k, v in parameters.items() if k in declared})
            )
            if result.num_rows:  # Athena's UNLOAD writes no file for an empty result
                bucket, _, prefix = location.removeprefix("s3://").partition("/")
                objects.put_table(client, bucket, prefix + "part-0.parquet", pa.table(result))
    finally:
        engine.close()


def latest_or_fail(settings: Settings) -> SnapshotRef:
    found = latest_snapshot(s3_client(settings), settings, not_before=DAY)
    assert found is not None
    return found


def test_snapshot_segments_as_map_items_make_one_complete_snapshot(settings: Settings) -> None:
    # GIVEN wallets in the table
    book = a_day()
    put_wallet_items(settings, book.wallets.values())
    # WHEN the night is planned and every segment runs from its Map item (JSON round trip), one twice
    deployed = settings.replace(snapshot_segments=3, snapshot_read_units_per_second=300.0)
    night = plan_night({"date": DAY.isoformat()}, deployed, now=NOW)
    summaries = [snapshot_segment(settings, SnapshotSegment.from_dict(item)) for item in night["segments"]]
    rerun = snapshot_segment(settings, SnapshotSegment.from_dict(night["segments"][1]))
    # THEN the day and the pace shared out are in the plan
    assert night["date"] == DAY.isoformat()
    assert [item["max_read_units_per_second"] for item in night["segments"]] == [100.0] * 3
    # AND the segments wrote one complete snapshot holding every wallet once; the rerun replaced its object
    assert rerun["key"] == summaries[1]["key"]
    found = latest_or_fail(settings)
    assert found.snapshot_at == NOW
    assert sorted(found.keys) == sorted(summary["key"] for summary in summaries)
    assert sum(summary["wallets"] for summary in summaries) == 4
    assert read_partition(settings, "balance_snapshots", NOW.date()).num_rows == 4


def test_a_missing_segment_leaves_no_snapshot_and_a_bad_item_is_refused(settings: Settings) -> None:
    # GIVEN two of three segments written
    put_wallet_items(settings, a_day().wallets.values())
    units = plan_snapshot(segments=3, max_read_units_per_second=None, now=NOW)
    for unit in units[:2]:
        snapshot_segment(settings, unit)
    # THEN no snapshot counts yet
    assert latest_snapshot(s3_client(settings), settings, not_before=DAY) is None
    # AND a malformed Map item is refused with its content named, before anything is read
    with pytest.raises(ValueError, match="not a snapshot segment"):
        SnapshotSegment.from_dict({"segment": 3, "segments": 3, "snapshot_at": "2026-11-21T01:30:00Z"})


def test_athena_path_classifies_and_writes_what_the_local_reconciliation_does(
    make_settings: Callable[..., Settings],
) -> None:
    # GIVEN the same compacted day, table and snapshot in two lakes
    local, aws = make_settings(), make_settings(unload_prefix=UNLOAD_PREFIX)
    book = a_day()
    for settings in (local, aws):
        write_landing(settings, book.rows, batch_rows=2)
        put_wallet_items(settings, book.wallets.values())
        take_snapshot(settings, now=NOW, max_read_units_per_second=None)
    # WHEN one is reconciled locally, the other as the state machine does it
    expected = reconcile(local, DAY, now=NOW)
    plan = plan_reconciliation(s3_client(aws), aws, DAY, run="exec-1")
    results = []
    for item in plan["days"]:
        run_like_athena(aws, item)
        results.append(classify_unloaded(s3_client(aws), aws, item, now=NOW, max_lag_seconds=3600))
    # THEN the plan holds the day's two UNLOADs into this run's own locations
    assert [item["date"] for item in plan["days"]] == [DAY.isoformat()]
    item = plan["days"][0]
    base = f"s3://{aws.bucket}/{UNLOAD_PREFIX}/exec-1/dt={DAY.isoformat()}"
    assert item["wallets_location"] == f"{base}/wallets/"
    assert item["wallets_sql"].startswith("UNLOAD (\n")
    assert item["wallets_sql"].endswith(
        f"\n) TO '{base}/wallets/' WITH (format = 'PARQUET', compression = 'ZSTD')"
    )
    inner = item["transfers_sql"].removeprefix("UNLOAD (\n").rsplit("\n) TO ", 1)[0]
    assert ":date" not in inner
    assert f"'{DAY.isoformat()}'" in inner
    sqlglot.parse_one(inner, read="trino")  # the rendered query is valid Trino
    # AND the classification agrees with the local run, and wrote the same tables
    assert results[0]["ok"] is expected.ok is True
    assert results[0]["counts"] == expected.counts
    assert results[0]["wallets"] == expected.wallets == 4
    assert (
        read_partition(aws, "daily_balances", DAY)
        .sort_by("wallet_id")
        .equals(read_partition(local, "daily_balances", DAY).sort_by("wallet_id"))
    )
    columns = ["wallet_id", "status", "expected", "actual", "detail", "run_at"]
    assert (
        read_partition(aws, "reconciliation", DAY)
        .select(columns)
        .sort_by("detail")
        .equals(read_partition(local, "reconciliation", DAY).select(columns).sort_by("detail"))
    )


def test_unload_statement_wraps_the_query_and_drops_a_trailing_semicolon() -> None:
    statement = unload_statement("SELECT 1 AS x;\n", "s3://b/p/")
    assert (
        statement
        == "UNLOAD (\nSELECT 1 AS x\n) TO 's3://b/p/' WITH (format = 'PARQUET', compression = 'ZSTD')"
    )


def test_athena_path_reports_lost_entries_as_the_state_machine_expects(settings: Settings) -> None:
    # GIVEN a day whose first two entries never reached the lake, and a snapshot taken long after
    book = a_day()
    write_landing(settings, book.rows[2:], batch_rows=2)
    put_wallet_items(settings, book.wallets.values())
    take_snapshot(settings, now=NOW, max_read_units_per_second=None)
    # WHEN the reconciliation runs as the state machine runs it, hours after the day closed
    plan = plan_reconciliation(s3_client(settings), settings, DAY, run="exec-2")
    item = plan["days"][0]
    run_like_athena(settings, item)
    later = NOW + dt.timedelta(hours=6)
    result = classify_unloaded(s3_client(settings), settings, item, now=later, max_lag_seconds=3600)
    # THEN the result is not ok (the Choice state fails the day) and names the missing entries
    assert result["ok"] is False
    assert result["counts"]["missing"] == 2
    assert "findings" not in result  # the state stays small; findings are in the lake
    statuses = read_partition(settings, "reconciliation", DAY).column("status").to_pylist()
    assert statuses.count("missing") == 2


def test_plan_night_handler_plans_what_the_deployment_set_at_cold_start(
    cold_start: Callable[[Settings], ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the function started with 5 segments sharing 1,000 read units a second
    steps = cold_start(Settings(snapshot_segments=5, snapshot_read_units_per_second=1000))
    # WHEN the environment changes afterwards and the night is planned
    monkeypatch.setenv(SNAPSHOT_SEGMENTS_VARIABLE, "7")
    night = steps.plan_night_handler({"date": DAY.isoformat()}, FakeLambdaContext())
    # THEN the plan has the cold start's segments, each with its share of the pace
    assert night["date"] == DAY.isoformat()
    assert [item["segment"] for item in night["segments"]] == [0, 1, 2, 3, 4]
    assert {item["max_read_units_per_second"] for item in night["segments"]} == {200.0}
    assert {item["snapshot_at"] for item in night["segments"]} == {night["snapshot_at"]}


def test_reconcile_plan_handler_unloads_under_the_deployments_prefix(
    settings: Settings, cold_start: Callable[[Settings], ModuleType]
) -> None:
    # GIVEN a day with its snapshot, and the function started with its own UNLOAD prefix
    put_wallet_items(settings, a_day().wallets.values())
    take_snapshot(settings, now=NOW, max_read_units_per_second=None)
    steps = cold_start(
        settings.replace(unload_prefix="/results/handler/", snapshot_read_units_per_second=500)
    )
    # WHEN the state machine asks for the day's plan
    plan = steps.reconcile_plan_handler({"date": DAY.isoformat(), "run": "exec-3"}, FakeLambdaContext())
    # THEN the UNLOADs write under that prefix, in this run's own location
    base = f"s3://{settings.bucket}/results/handler/exec-3/dt={DAY.isoformat()}"
    assert [item["wallets_location"] for item in plan["days"]] == [f"{base}/wallets/"]
