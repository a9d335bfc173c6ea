"""The named queries the notebooks add, each on a known lake through the real DuckDB engine.

Every expected value is computed in Python from the same rows the lake was written from
(``sample_lake``), so each test says what the query must answer, not what it happened to answer.
Each file must also parse as Trino, the dialect Athena runs.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import sqlglot
from support.sample_lake import SampleLake, make_sample, write_sample

from contracts.settings import Settings
from queries import QueryEngine, engine_for, run_query

pytestmark = pytest.mark.stack

FIRST_DAY = dt.date(2026, 3, 1)
NOTEBOOK_QUERIES = (
    "balance_distribution",
    "ingest_lag",
    "reconciliation_latest",
    "reconciliation_runs",
    "wallet_versions",
)


@pytest.fixture
def engine(settings: Settings) -> Iterator[QueryEngine]:
    engine = engine_for(settings)
    yield engine
    engine.close()


@pytest.fixture
def sample(settings: Settings) -> SampleLake:
    lake = make_sample(first_day=FIRST_DAY, days=3, wallets=8, transactions_per_day=15)
    write_sample(settings, lake)
    return lake


def _window(lake: SampleLake) -> dict[str, str]:
    return {"start_date": lake.days[0].isoformat(), "end_date": lake.days[-1].isoformat()}


@pytest.mark.parametrize("name", NOTEBOOK_QUERIES)
def test_query_file_parses_as_trino(project_root: Path, name: str) -> None:
    text = (project_root / "queries" / "sql" / f"{name}.sql").read_text(encoding="utf-8")
    statements = sqlglot.parse(text.replace(":", "_p_"), read="trino")
    assert len([s for s in statements if s is not None]) == 1


def test_balance_distribution_buckets_every_wallet_once(
    settings: Settings, engine: QueryEngine, sample: SampleLake
) -> None:
    # WHEN the distribution of the latest snapshot is asked for
    frame = run_query("balance_distribution", _window(sample) | {"end_date": "2026-03-10"}, settings, engine)
    # THEN each bucket counts exactly the wallets whose snapshot balance falls in it
    limits = [0, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000, 10_000_000_000]

    def bucket(balance: int) -> int:
        return 0 if balance == 0 else next((i for i, top in enumerate(limits) if balance < top), 6)

    expected = Counter(bucket(row["balance"]) for row in sample.snapshots)
    assert dict(zip(frame["bucket_order"], frame["wallets"], strict=True)) == dict(expected)
    assert list(frame["bucket_order"]) == sorted(expected)
    assert int(frame["total_balance"].sum()) == sum(row["balance"] for row in sample.snapshots)
    assert frame["total_balance"].dtype == "Int64"
    assert set(frame["bucket"]) <= {
        "0",
        "under 1 USD",
        "1 to 10 USD",
        "10 to 100 USD",
        "100 to 1k USD",
        "1k to 10k USD",
        "10k USD and more",
    }


def test_balance_distribution_takes_each_wallets_latest_snapshot(
    settings: Settings, engine: QueryEngine
) -> None:
    # GIVEN two snapshots on different days, the later one after a wallet spent everything
    lake = make_sample(first_day=FIRST_DAY, days=1, wallets=3)
    later = copy.deepcopy(lake.snapshots)
    for row in later:
        row["snapshot_at"] += dt.timedelta(days=1)
    later[0]["balance"] = 0
    lake.snapshots = lake.snapshots + later
    write_sample(settings, lake)
    # WHEN
    frame = run_query(
        "balance_distribution", {"start_date": "2026-03-01", "end_date": "2026-03-05"}, settings, engine
    )
    # THEN every wallet is counted once, at its later balance
    assert int(frame["wallets"].sum()) == 3
    assert int(frame.loc[frame["bucket_order"] == 0, "wallets"].iloc[0]) == 1
    assert int(frame["total_balance"].sum()) == sum(row["balance"] for row in later)


def test_reconciliation_runs_counts_each_run_by_class(
    settings: Settings, engine: QueryEngine, sample: SampleLake
) -> None:
    frame = run_query("reconciliation_runs", _window(sample), settings, engine)
    # THEN the two runs of the last day come oldest first: the failed one, then the clean one
    assert list(frame["day"]) == [sample.days[-1].isoformat()] * 2
    earlier, latest = frame.iloc[0], frame.iloc[1]
    assert (int(earlier["findings"]), int(earlier["missing"]), int(earlier["failing"])) == (1, 1, 1)
    assert not bool(earlier["passed"])
    assert pd.Timestamp(latest["run_at"]) == pd.Timestamp(sample.run_at).tz_localize(None)
    assert (int(latest["findings"]), int(latest["ok"]), int(latest["failing"])) == (8, 8, 0)
    assert int(latest["lagging"]) == int(latest["duplicate"]) == int(latest["other"]) == 0
    assert bool(latest["passed"])


def test_reconciliation_runs_counts_unknown_statuses_as_other_and_failing(
    settings: Settings, engine: QueryEngine
) -> None:
    lake = make_sample(first_day=FIRST_DAY, days=1, wallets=2)
    lake.reconciliation = [
        {**lake.reconciliation[0], "wallet_id": None, "status": "conservation_failed", "detail": "global"},
        {**lake.reconciliation[1], "status": "lagging"},
    ]
    write_sample(settings, lake)
    frame = run_query("reconciliation_runs", _window(lake), settings, engine)
    assert (int(frame["other"].iloc[0]), int(frame["lagging"].iloc[0]), int(frame["failing"].iloc[0])) == (
        1,
        1,
        1,
    )
    assert not bool(frame["passed"].iloc[0])


def test_reconciliation_latest_returns_only_the_latest_run(
    settings: Settings, engine: QueryEngine, sample: SampleLake
) -> None:
    frame = run_query("reconciliation_latest", _window(sample), settings, engine)
    assert len(frame) == 8
    assert set(frame["status"]) == {"ok"}
    assert set(frame["wallet_id"]) == {row["wallet_id"] for row in sample.wallets}
    assert {pd.Timestamp(value) for value in frame["run_at"]} == {
        pd.Timestamp(sample.run_at).tz_localize(None)
    }


def test_reconciliation_latest_lists_failing_findings_first(settings: Settings, engine: QueryEngine) -> None:
    lake = make_sample(first_day=FIRST_DAY, days=1, wallets=4)
    statuses = ["ok", "lagging", "mismatch", "ok"]
    lake.reconciliation = [
        {**row, "status": status} for row, status in zip(lake.reconciliation[:4], statuses, strict=True)
    ]
    write_sample(settings, lake)
    frame = run_query("reconciliation_latest", _window(lake), settings, engine)
    assert list(frame["status"]) == ["mismatch", "lagging", "ok", "ok"]


def _busiest(lake: SampleLake) -> str:
    counts = Counter(row["wallet_id"] for row in lake.ledger)
    return max(sorted(counts), key=lambda wallet: counts[wallet])


def test_wallet_versions_of_an_exact_wallet(
    settings: Settings, engine: QueryEngine, sample: SampleLake
) -> None:
    wallet = _busiest(sample)
    frame = run_query("wallet_versions", _window(sample) | {"wallet_id": wallet}, settings, engine)
    rows = sorted((r for r in sample.ledger if r["wallet_id"] == wallet), key=lambda r: r["wallet_version"])
    # THEN versions 1..N, each once, with the running balance equal to balance_after throughout
    assert list(frame["wallet_version"]) == list(range(1, len(rows) + 1))
    assert list(frame["balance_after"]) == [r["balance_after"] for r in rows]
    assert list(frame["running_balance"]) == [r["balance_after"] for r in rows]
    assert frame["chain_ok"].all()
    assert set(frame["copies"]) == {1}
    assert set(frame["gap_before"]) == {0}


def test_wallet_versions_window_may_start_mid_history(
    settings: Settings, engine: QueryEngine, sample: SampleLake
) -> None:
    wallet = _busiest(sample)
    window = {"start_date": sample.days[1].isoformat(), "end_date": sample.days[-1].isoformat()}
    frame = run_query("wallet_versions", window | {"wallet_id": wallet}, settings, engine)
    assert int(frame["wallet_version"].iloc[0]) > 1
    assert frame["chain_ok"].all()
    assert int(frame["gap_before"].iloc[0]) == 0


def test_wallet_versions_flags_gap_repeat_and_chain_break(settings: Settings, engine: QueryEngine) -> None:
    # GIVEN a wallet whose lake history lost version 3, holds version 5 twice and a wrong balance at 7
    lake = make_sample(first_day=FIRST_DAY, days=3, wallets=4, transactions_per_day=20)
    wallet = _busiest(lake)
    mine = sorted((r for r in lake.ledger if r["wallet_id"] == wallet), key=lambda r: r["wallet_version"])
    assert len(mine) >= 8
    others = [r for r in lake.ledger if r["wallet_id"] != wallet]
    duplicate = {**mine[4], "entry_id": mine[4]["entry_id"] + "-copy"}
    broken = {**mine[6], "balance_after": mine[6]["balance_after"] + 1}
    kept = [*mine[:2], *mine[3:6], duplicate, broken, *mine[7:]]
    lake.ledger = others + kept
    write_sample(settings, lake)
    # WHEN
    frame = run_query("wallet_versions", _window(lake) | {"wallet_id": wallet}, settings, engine).set_index(
        "entry_id"
    )
    # THEN the gap is before version 4, version 5 has two copies, and version 7 breaks the chain
    assert int(frame.loc[mine[3]["entry_id"], "gap_before"]) == 1
    assert int(frame["gap_before"].sum()) == 1
    assert int(frame.loc[mine[4]["entry_id"], "copies"]) == 2
    assert int(frame.loc[duplicate["entry_id"], "copies"]) == 2
    # (the missing version's delta is absent from the running sum, so the chain breaks from version 4 on)
    assert not bool(frame.loc[mine[3]["entry_id"], "chain_ok"])
    assert bool(frame.loc[mine[1]["entry_id"], "chain_ok"])


def test_wallet_versions_chain_break_alone(settings: Settings, engine: QueryEngine) -> None:
    lake = make_sample(first_day=FIRST_DAY, days=2, wallets=3, transactions_per_day=10)
    wallet = _busiest(lake)
    mine = sorted((r for r in lake.ledger if r["wallet_id"] == wallet), key=lambda r: r["wallet_version"])
    target = mine[2]
    lake.ledger = [{**r, "balance_after": r["balance_after"] + 5} if r is target else r for r in lake.ledger]
    write_sample(settings, lake)
    frame = run_query("wallet_versions", _window(lake) | {"wallet_id": wallet}, settings, engine)
    broken = frame.loc[~frame["chain_ok"].astype(bool), "wallet_version"]
    assert list(broken) == [target["wallet_version"]]
    assert set(frame["copies"]) == {1}
    assert int(frame["gap_before"].sum()) == 0


def test_ingest_lag_per_day(settings: Settings, engine: QueryEngine, sample: SampleLake) -> None:
    frame = run_query("ingest_lag", _window(sample), settings, engine)
    assert list(frame["day"]) == [day.isoformat() for day in sample.days]
    for day, row in zip(sample.days, frame.itertuples(), strict=True):
        lags = [(r["ingested_at"] - r["created_at"]).total_seconds() for r in sample.ledger_on(day)]
        assert row.entries == len(lags)
        assert row.max_lag_seconds == max(lags)
        assert min(lags) <= row.p50_lag_seconds <= row.p99_lag_seconds <= max(lags)
