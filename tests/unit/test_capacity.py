"""bench/capacity.py: the model's arithmetic, on fixed unit costs and on a quick measured run."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import capacity  # noqa: E402

FIXED = capacity.Measured(
    consumer_cpu_us_per_record=10.0,
    stream_record_json_bytes=1_048.576,  # 6,000 records fill Lambda's 6 MB payload
    compaction_rows_per_core_second=250_000.0,
    compaction_bytes_per_core_second=20_000_000.0,
    reconciliation_rows_per_core_second=500_000.0,
    parquet_bytes_per_row=82.0,
    reconciliation_read_fraction=0.5,
)


def test_the_seed_load_gives_the_issue_figures() -> None:
    # GIVEN fixed unit costs (82 bytes per row, as measured for the issue)
    # WHEN the model runs for 100 % of the seed's load
    load = capacity.model(FIXED, 100)
    # THEN a day is 20,000 tx/s * 86,400 s * 1.7 rows (70 % transfers of two rows, 30 % deposits of one)
    assert load["ledger_rows_per_day"] == 2_937_600_000
    assert load["parquet_gb_per_day"] == pytest.approx(2_937_600_000 * 82 / 1e9, abs=1e-3)
    # AND the stream carries 3.7 records per transaction (INSERT, 1.7 wallet MODIFYs, TTL REMOVE):
    # the idempotency record is in a table with no stream
    assert load["stream_records_per_second"] == 74_000
    # AND a transactional write costs 2 units per item: 3 items per transfer, 2 per deposit, plus
    # the idempotency record in its own table (a transaction spans tables at the same cost)
    assert load["dynamodb_write_units_per_day"] == 12_787_200_000  # 20,000 * (0.7 * 8 + 0.3 * 6) * 86,400
    # AND the stream's shards follow the wallets table's writes alone: 108,000 units/s, 1,000 a partition
    assert load["stream_shards_at_least"] == 108
    assert (
        load["dynamodb_write_units_per_transaction"],
        load["idempotency_write_units_per_transaction"],
    ) == (
        7.4,
        2,
    )
    # AND the idempotency table holds 2 days of records: 20,000 tx/s * 172,800 s * 360 bytes
    # a record lives its window and TTL's margin of a day (never executed over while it exists)
    assert load["idempotency_records_gb_held"] == pytest.approx(
        20_000 * (172_800 + 86_400) * 360 / 1e9, abs=0.1
    )
    # a refusal's record is one plain PutItem of one write unit; at 1 % of requests refused
    assert load["decline_record_write_units"] == 1
    assert load["decline_write_units_per_day"] == 20_000 * 86_400 // 100
    # AND the wallets table (8 h of transaction items and the wallets) is all the snapshot scans:
    # 261 GB at 60,000 read units/s (eventually consistent, 8 KB each) is 9 minutes, in one Lambda run
    wallets_bytes = 20_000 * 28_800 * 450 + 10_000_000 * 200
    assert load["dynamodb_table_gb_held"] == pytest.approx(wallets_bytes / 1e9, abs=0.1)
    assert load["snapshot_minutes"] == pytest.approx(wallets_bytes / 8_192 / 60_000 / 60, abs=0.1)
    assert load["snapshot_fits_lambda"] is True
    # AND storage and point-in-time recovery are billed on both tables
    held_gb = (wallets_bytes + 20_000 * (172_800 + 86_400) * 360) / 1e9
    assert load["monthly_micro_usd"]["dynamodb_storage"] == math.ceil(held_gb * 250_000)
    assert load["monthly_micro_usd"]["dynamodb_point_in_time_recovery"] == math.ceil(held_gb * 200_000)
    # AND batches close on the 6 MB payload (6,000 records), before the 30 s window, with one batch
    # per shard at a time (the Iceberg committer's per-shard progress)
    assert load["records_per_batch"] == 6_000
    assert load["batch_wait_seconds"] == pytest.approx(6_000 / (74_000 / 108), abs=0.1)
    assert load["landing_objects_per_hour"] == round(74_000 * 86_400 / 6_000 / 24)
    # AND each batch lands two data files (ledger, wallets) and one landing record
    batches_per_day = 74_000 * 86_400 / 6_000
    assert load["data_files_per_day"] == round(2 * batches_per_day)
    # AND the committer runs once a minute (512 MB, billed ~55 s), committing 3 tables every 30 s,
    # each commit a LoadTable and an UpdateTable on Glue
    assert load["committer_gb_seconds_per_day"] == 1_440 * 55 // 2
    assert load["commits_per_day"] == 3 * 2_880
    assert load["glue_requests_per_day"] == 2 * 3 * 2_880
    # AND every commit lists each shard's landing log per table; each batch lists its shard's once
    assert load["s3_lists_per_day"] == round(batches_per_day + 3 * 2_880 * 108)
    # AND Glue's optimizers rewrite the day once at the assumed rate, plus daily maintenance runs
    day_bytes = 2_937_600_000 * 82
    compaction = max(day_bytes * 2 / (20_000_000 * 4 * 3_600), 3 * 24 / 60)
    assert load["optimizer_dpu_hours_per_day"] == pytest.approx(compaction + 3 * 10 / 60, abs=0.01)
    assert load["daily_micro_usd"]["glue_table_optimizers"] == math.ceil((compaction + 3 * 10 / 60) * 440_000)
    # AND no hourly compaction is modelled any more (the optimizers compact)
    assert not [key for key in load if key.startswith("compaction_unit")]


def test_costs_are_integer_micro_usd_and_add_up() -> None:
    # GIVEN the model at each load
    loads = [capacity.model(FIXED, percent) for percent in (1, 10, 100)]
    for load in loads:
        # THEN every amount is an integer of micro-USD, the month is 30 days, the total the sum
        assert all(isinstance(value, int) for value in load["monthly_micro_usd"].values())
        for item, daily in load["daily_micro_usd"].items():
            assert load["monthly_micro_usd"][item] == 30 * daily
        assert load["monthly_total_micro_usd"] == sum(load["monthly_micro_usd"].values())
        # AND Athena bills $5 per TB scanned, rounded up to the micro-USD
        assert load["athena_micro_usd_per_night"] == math.ceil(load["athena_bytes_per_night"] * 5 / 1e6)
    # AND writes scale with the load: $0.625 per million write units, the movements' and the 1 %
    # refused requests' records (one unit each)
    assert loads[2]["daily_micro_usd"]["dynamodb_writes"] == math.ceil((12_787_200_000 + 17_280_000) * 0.625)
    assert (
        loads[2]["daily_micro_usd"]["dynamodb_writes"] == 100 * loads[0]["daily_micro_usd"]["dynamodb_writes"]
    )


def test_quick_run_prints_one_json_object_whose_figures_follow_its_measurements() -> None:
    # WHEN the script measures on this machine in quick mode
    completed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "capacity.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    report = json.loads(completed.stdout)
    measured = report["measured"]
    loads = {load["percent"]: load for load in report["loads"]}
    # THEN it measured positive unit costs and modelled 1, 10 and 100 %
    assert set(loads) == {1, 10, 100}
    assert all(value > 0 for value in measured.values())
    assert 0 < measured["reconciliation_read_fraction"] <= 1
    # AND every load's figures are the model of those measurements
    for percent, load in loads.items():
        assert load == capacity.model(capacity.Measured(**measured), percent)
        assert load["ledger_rows_per_day"] == round(20_000 * percent / 100 * 86_400 * 1.7)
        assert load["parquet_gb_per_day"] == pytest.approx(
            load["ledger_rows_per_day"] * measured["parquet_bytes_per_row"] / 1e9, abs=1e-3
        )
    assert loads[100]["ledger_rows_per_day"] == 100 * loads[1]["ledger_rows_per_day"]


def test_the_readme_cost_section_is_the_models_output() -> None:
    # GIVEN the README and the model at the published unit costs
    readme = (ROOT / "README.md").read_text()
    begin = readme.index(capacity.README_BEGIN)
    end = readme.index(capacity.README_END) + len(capacity.README_END)
    # THEN the README's cost section is exactly what `bench/capacity.py --readme` renders
    assert readme[begin:end] == capacity.readme_section()
    # AND docs/capacity.md's monthly totals include the API tier the same model prices
    loads = [capacity.model(capacity.PUBLISHED, percent) for percent in (1, 10, 100)]
    assert all(load["monthly_micro_usd"]["api_fleet_lattice"] > 0 for load in loads)


def test_the_api_tier_prices_the_fleet_and_the_lambda_front() -> None:
    # GIVEN the seed's load and 700 µs of server CPU per request
    tier = capacity.api_tier(20_000, 700)
    # THEN 14 vCPU are busy, 28 at 50 %: 14 tasks of 2 vCPU
    assert tier["busy_vcpus"] == 14.0
    assert tier["tasks"] == 14
    # AND a task-month is 720 h * (2 * $0.03238 + 4 * $0.00356)
    assert tier["items_micro_usd"]["fargate"] == 14 * 720 * (2 * 32_380 + 4 * 3_560)
    # AND API Gateway charges 300 M requests at $1.00 and the rest at $0.90 a million
    requests = 20_000 * 86_400 * 30
    assert (
        tier["items_micro_usd"]["api_gateway"]
        == 300 * 1_000_000 + (requests - 300_000_000) * 900_000 // 10**6
    )
    # AND at that load the fleet costs a tenth of API Gateway + Lambda, behind either front
    monthly = tier["monthly_micro_usd"]
    assert monthly["fleet_alb"] < monthly["fleet_lattice"] < monthly["lambda"] / 10
    # AND at a tiny load the fleet's floor (a task per zone) makes Lambda the cheaper front
    small = capacity.api_tier(10, 700)["monthly_micro_usd"]
    assert small["lambda"] < small["fleet_lattice"]
    assert capacity.lambda_break_even_requests_per_second() < 200


def test_requests_are_priced_as_signed_and_write_units_come_from_the_stores_own_items() -> None:
    import request_sizes

    # THEN a SigV4-signed deposit with a session token is 1.5-2 KB on the wire, and the model uses it
    signed = request_sizes.signed_request_bytes()
    assert 1_500 <= signed <= 2_000
    assert signed + request_sizes.RESPONSE_BYTES == capacity.API_BYTES_PER_REQUEST
    # AND one deposit / transfer: every item under 1 KB, 2 units each (wallets, transaction, record)
    assert capacity.WRITE_UNITS["deposit"]["total_units"] == 3 * 2
    assert capacity.WRITE_UNITS["transfer"]["total_units"] == 4 * 2
    assert capacity.model(FIXED, 100)["dynamodb_write_units_per_transaction"] == pytest.approx(7.4)
    # AND a wallet credited 32 times in one group is a ~7 KB item: its update and the next cost more
    grouped = request_sizes.grouped_wallet(32)
    assert 6_500 < grouped["wallet_item_bytes"] < 8_192
    assert (
        grouped["wallet_units"]
        == grouped["next_write_units"]
        == 2 * math.ceil(grouped["wallet_item_bytes"] / 1024)
    )
    assert request_sizes.grouped_wallet(1)["wallet_units"] == 2
    # AND the ARM CPU figure is marked as an assumption wherever it is printed
    assert "assumed" in capacity.model(FIXED, 1)["api_cpu_basis"]
    assert "assumed on Graviton" in capacity.readme_section()


def test_request_sizes_runs_as_documented() -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "request_sizes.py")], capture_output=True, text=True, check=True
    )
    assert "signed deposit request:" in completed.stdout
    assert "'credits': 32" in completed.stdout
