"""Capacity model: what 1 %, 10 % and 100 % of the seed's load need, from unit costs measured here.

The seed's load is 20,000 transactions/s, 70 % of them transfers (two ledger rows; deposits one).
This script measures, on this machine, what one unit of each kind of work costs:

- **consumer**: CPU per stream record through the Lambda handler's batch loop
  (:func:`stream_processor.batch.process_batch`: decode → Parquet → PUT, the PUT's body handed to
  a counting client: its network time is not on this machine), on the seeded stream of
  ``bench/stream_to_parquet.py``, and the stream records' JSON size (Lambda's 6 MB payload bound);
- **compaction**: rows/s and bytes/s per core (CPU-seconds of the process, DuckDB's threads
  included) of :func:`lake.compaction.compact_files` over landing files built like
  ``bench/reconcile.py``'s (:func:`compact_landing`: the kernel ``lake.compaction_units.compact_unit``
  runs on a unit's downloaded inputs, without the S3 transfers);
- **reconciliation**: rows/s per core of the day's reconciliation on DuckDB
  (``bench/reconcile.py``'s :func:`timed_reconciliation`);
- **Parquet**: compacted bytes per ledger row, and the share of them the reconciliation's
  queries read (the columns they name, from the column chunks' sizes).

Then a pure model (:func:`model`, checked by ``tests/unit/test_capacity.py``) turns those and AWS's
published prices and limits into, per load: ledger rows and Parquet GB per day, landing objects
per hour, compaction units and their size, parallel workers to finish in an hour, Athena bytes and
cost per night, Lambda GB-seconds, DynamoDB request units, and the monthly cost. Money is integer
micro-USD (1 USD = 1,000,000); every price and limit cites its AWS page.

    .venv/bin/python bench/capacity.py [--quick] [--json] [--rows N]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))

from capacity_api import (
    API_BYTES_PER_REQUEST,
    API_TARGET_CPU_PERCENT,
    api_tier,
)
from capacity_measure import API_CPU_BASIS, Measured, measure
from capacity_prices import (
    ATHENA_DML_TIMEOUT_SECONDS,
    ATHENA_MICRO_USD_PER_TB,
    ATHENA_MIN_BYTES_PER_QUERY,
    DAYS_PER_MONTH,
    DYNAMODB_MICRO_USD_PER_GB_MONTH,
    DYNAMODB_MICRO_USD_PER_MILLION_RRU,
    DYNAMODB_MICRO_USD_PER_MILLION_WRU,
    DYNAMODB_PITR_MICRO_USD_PER_GB_MONTH,
    GLUE_MICRO_USD_PER_DPU_HOUR,
    GLUE_MICRO_USD_PER_MILLION_REQUESTS,
    LAMBDA_MICRO_USD_PER_MILLION_GB_SECONDS,
    LAMBDA_MICRO_USD_PER_MILLION_REQUESTS,
    LAMBDA_PAYLOAD_BYTES,
    LAMBDA_TIMEOUT_SECONDS,
    READ_UNIT_BYTES,
    S3_MICRO_USD_PER_GB_MONTH,
    S3_MICRO_USD_PER_THOUSAND_GET,
    S3_MICRO_USD_PER_THOUSAND_LIST,
    S3_MICRO_USD_PER_THOUSAND_PUT,
    SECONDS_PER_DAY,
    SFN_MICRO_USD_PER_THOUSAND_TRANSITIONS,
    STREAMS_MICRO_USD_PER_LAMBDA_READ,
    WRITE_UNITS_PER_PARTITION,
    ceil_div,
    cost,
)
from request_sizes import (
    PAYEE,
    PRINCIPAL,
    WALLET,
    decline_units,
    grouped_wallet,
    transaction_units,
)

from contracts.idempotency_table import TTL_MARGIN_SECONDS
from wallet.commands import Deposit, Transfer

# --- the seed's load -------------------------------------------------------------------------
SEED_TRANSACTIONS_PER_SECOND: Final = 20_000
TRANSFER_SHARE_PERCENT: Final = 70
FRACTIONS_PERCENT: Final = (1, 10, 100)
#: Stream records per transaction: the transaction item's INSERT, one wallet MODIFY per wallet it
#: touches (2 for a transfer, 1 for a deposit), and its TTL REMOVE 8 hours later. The idempotency
#: record makes none: it lives in a table of its own with no stream (contracts.idempotency_table).
HOT_TTL_SECONDS: Final = 28_800
#: WALLETLAKE_IDEMPOTENCY_WINDOW_SECONDS's default: nonces remembered 2 days (seed 000's).
IDEMPOTENCY_WINDOW_SECONDS: Final = 172_800
#: Wallets at the seed's load (an assumption: the seed fixes the write rate, not the population);
#: scaled with the load.
SEED_WALLETS: Final = 10_000_000
#: Item sizes (bytes) as DynamoDB counts them (names + values): a transaction item and a wallet item.
TRANSACTION_ITEM_BYTES: Final = 450
#: An idempotency record (key {wallet_id}_{nonce} in the idempotency table): key, txn_id, type,
#: wallet and counterparty ids, amount, nonce, request_hash (64 hex), created_at, expires_at. Under
#: 1 KB, so one more item in the transaction: 2 write units (transactional) per transaction.
IDEMPOTENCY_RECORD_BYTES: Final = 360
IDEMPOTENCY_ITEMS_PER_TRANSACTION: Final = 1
WALLET_ITEM_BYTES: Final = 200

# --- deployment choices (cdk/walletlake_cdk/config.py) ----------------------------------------
STREAM_BATCH_SIZE: Final = 10_000
STREAM_WINDOW_SECONDS: Final = 30
#: One batch per shard at a time: the Iceberg committer's per-shard progress needs batches in order.
STREAM_PARALLELIZATION: Final = 1
CONSUMER_MEMORY_MB: Final = 1_024
SNAPSHOT_SEGMENTS: Final = 200
SNAPSHOT_READ_UNITS_PER_SECOND: Final = 60_000
#: S3 PUT latency added to each consumer invocation's duration (assumed, not measured here).
PUT_SECONDS: Final = 0.05

# --- the Iceberg lake (cdk/walletlake_cdk/committer.py, catalog.py) -----------------------------
#: The stream's Iceberg tables (ledger, wallets, quarantine).
ICEBERG_TABLE_COUNT: Final = 3
#: Data files a batch lands (ledger and wallets; quarantine only for undecodable records), plus
#: one landing record; before writing, the consumer lists its shard's landing records once.
DATA_FILES_PER_BATCH: Final = 2
#: The committer: 512 MB, invoked once a minute, committing every 30 s until its minute is over:
#: it is billed for about the whole minute (55 s, its 5 s margin off).
COMMITTER_MEMORY_MB: Final = 512
COMMITTER_BILLED_SECONDS: Final = 55
COMMITTER_INVOCATIONS_PER_DAY: Final = 24 * 60
COMMIT_INTERVAL_SECONDS: Final = 30
#: Per table and commit: the catalog's LoadTable (glue:GetTable) and the commit (glue:UpdateTable);
#: pyiceberg writes a manifest and a manifest list, Glue the new metadata file, and the table's
#: metadata file and manifest list are read back (2 GETs).
GLUE_REQUESTS_PER_TABLE_COMMIT: Final = 2
PUTS_PER_TABLE_COMMIT: Final = 3
GETS_PER_TABLE_COMMIT: Final = 2
#: Glue's optimizers. How compaction is billed: DPU-hours of the rewrite, per second with a
#: 1-minute minimum per run. Its rate is not measured here: it is *assumed* to rewrite at this
#: project's measured compaction rate per core (Measured.compaction_bytes_per_core_second), 4 vCPU
#: per DPU, slowed by SPARK_OVERHEAD (assumed 2x), each GB of the day rewritten once; with at most
#: OPTIMIZER_COMPACTION_RUNS_PER_DAY runs per table (assumed hourly), each billed at least a minute
#: of 1 DPU. Snapshot retention and orphan file deletion run daily per table, assumed 5 minutes of
#: 1 DPU each.
DPU_VCPUS: Final = 4
SPARK_OVERHEAD: Final = 2
OPTIMIZER_COMPACTION_RUNS_PER_DAY: Final = 24
OPTIMIZER_MAINTENANCE_DPU_HOURS_PER_TABLE_DAY: Final = 2 * 5 / 60

#: Write units of one deposit and one transfer as wallet.write_requests.transaction_request builds them.
WRITE_UNITS: Final = {
    "deposit": transaction_units([Deposit(WALLET, 25_000_000, "n-1", initiated_by=PRINCIPAL)]),
    "transfer": transaction_units([Transfer(WALLET, PAYEE, 25_000_000, "n-1", initiated_by=PRINCIPAL)]),
}
#: What remembering one refusal adds (its declined record, a plain PutItem), for a transfer.
DECLINE_UNITS: Final = decline_units(Transfer(WALLET, PAYEE, 25_000_000, "n-1", initiated_by=PRINCIPAL))
#: Requests refused for money or a missing wallet, as a share of all: an assumption (the seed
#: gives none), stated with its figure so the cost of a higher rate is a multiplication.
DECLINE_SHARE_PERCENT: Final = 1
#: A hot wallet credited in one group commit of the store's largest group (32 requests).
GROUPED_WALLET: Final = grouped_wallet(32)


def model(measured: Measured, percent: int) -> dict[str, Any]:
    """Everything a load of ``percent`` % of the seed's needs, from ``measured`` (pure)."""
    tx_per_second = SEED_TRANSACTIONS_PER_SECOND * percent / 100
    transfer = TRANSFER_SHARE_PERCENT / 100
    rows_per_tx = 2 * transfer + (1 - transfer)
    records_per_tx = 1 + (2 * transfer + (1 - transfer)) + 1
    wallets = SEED_WALLETS * percent // 100

    # Ledger and Parquet
    rows_per_day = round(tx_per_second * SECONDS_PER_DAY * rows_per_tx)
    parquet_bytes_per_day = rows_per_day * measured.parquet_bytes_per_row

    # DynamoDB: transactional writes of 3 items (transfer) or 2 (deposit) on the wallets table plus
    # the idempotency record on its own table, 2 units each (one transaction spans both tables).
    # The wallets table holds 8 hours of transaction items and the wallets; the idempotency table 2
    # days of records. Stream shards follow the wallets table's partitions (its writes alone); the
    # nightly snapshot scans the wallets table alone.
    # Units of the items the store's own builder makes (bench/request_sizes.py), one request per
    # transaction: every item is under 1 KB, so 2 units each. A group commit makes a wallet item
    # carry its earlier entries (GROUPED_WALLET below): such wallets cost more, not modelled here.
    records_wru_per_tx = WRITE_UNITS["deposit"]["idempotency_record_units"]
    wallets_wru_per_tx = transfer * (
        WRITE_UNITS["transfer"]["total_units"] - WRITE_UNITS["transfer"]["idempotency_record_units"]
    ) + (1 - transfer) * (
        WRITE_UNITS["deposit"]["total_units"] - WRITE_UNITS["deposit"]["idempotency_record_units"]
    )
    wru_per_tx = wallets_wru_per_tx + records_wru_per_tx
    wru_per_second = tx_per_second * wru_per_tx
    shards = max(1, ceil_div(tx_per_second * wallets_wru_per_tx, WRITE_UNITS_PER_PARTITION))
    # a record lives its window and TTL's margin (the nonce is never executed again while it exists)
    records_bytes = (
        tx_per_second * (IDEMPOTENCY_WINDOW_SECONDS + TTL_MARGIN_SECONDS) * IDEMPOTENCY_RECORD_BYTES
    )
    decline_wru_per_second = tx_per_second * DECLINE_SHARE_PERCENT / 100 * DECLINE_UNITS["record_units"]
    table_bytes = tx_per_second * HOT_TTL_SECONDS * TRANSACTION_ITEM_BYTES + wallets * WALLET_ITEM_BYTES
    snapshot_rru = ceil_div(table_bytes, READ_UNIT_BYTES) / 2
    snapshot_seconds = snapshot_rru / SNAPSHOT_READ_UNITS_PER_SECOND

    # Consumer batching: a batch closes at BatchSize, the 6 MB payload, or the window.
    records_per_second = tx_per_second * records_per_tx
    batchers = shards * STREAM_PARALLELIZATION
    per_batcher = records_per_second / batchers
    payload_records = LAMBDA_PAYLOAD_BYTES / measured.stream_record_json_bytes
    records_per_batch = max(1.0, min(STREAM_BATCH_SIZE, payload_records, per_batcher * STREAM_WINDOW_SECONDS))
    batch_wait_seconds = min(STREAM_WINDOW_SECONDS, records_per_batch / per_batcher)
    batches_per_day = records_per_second * SECONDS_PER_DAY / records_per_batch
    landing_objects_per_hour = round(batches_per_day / 24)
    batch_seconds = records_per_batch * measured.consumer_cpu_us_per_record / 1e6 + PUT_SECONDS
    consumer_gb_seconds = batches_per_day * batch_seconds * CONSUMER_MEMORY_MB / 1024

    # The committer: one invocation a minute, a commit per table every interval. Each commit lists
    # every shard's landing log past its position (per table), reads the new landing records once
    # and the new data files' footers (one ranged GET each).
    commits_per_day = SECONDS_PER_DAY // COMMIT_INTERVAL_SECONDS
    committer_gb_seconds = (
        COMMITTER_INVOCATIONS_PER_DAY * COMMITTER_BILLED_SECONDS * COMMITTER_MEMORY_MB / 1024
    )
    data_files_per_day = batches_per_day * DATA_FILES_PER_BATCH
    table_commits_per_day = commits_per_day * ICEBERG_TABLE_COUNT
    glue_requests_per_day = table_commits_per_day * GLUE_REQUESTS_PER_TABLE_COMMIT
    landing_puts = batches_per_day * (DATA_FILES_PER_BATCH + 1)
    commit_puts = table_commits_per_day * PUTS_PER_TABLE_COMMIT
    lists_per_day = batches_per_day + table_commits_per_day * shards
    landing_gets = batches_per_day + data_files_per_day
    commit_gets = table_commits_per_day * GETS_PER_TABLE_COMMIT

    # Glue's optimizers (assumptions above): the day's bytes rewritten once, at least a minute a run.
    compaction_dpu_hours_by_rate = (
        parquet_bytes_per_day
        * SPARK_OVERHEAD
        / (measured.compaction_bytes_per_core_second * DPU_VCPUS * 3600)
    )
    compaction_dpu_hours = max(
        compaction_dpu_hours_by_rate, ICEBERG_TABLE_COUNT * OPTIMIZER_COMPACTION_RUNS_PER_DAY / 60
    )
    optimizer_dpu_hours = (
        compaction_dpu_hours + ICEBERG_TABLE_COUNT * OPTIMIZER_MAINTENANCE_DPU_HOURS_PER_TABLE_DAY
    )

    # Reconciliation on Athena: the day's ledger columns the queries name (twice: wallets and
    # transfers), the previous close and the snapshot (about 40 bytes per wallet each).
    athena_bytes = 2 * parquet_bytes_per_day * measured.reconciliation_read_fraction + 2 * wallets * 40
    athena_queries = 2
    athena_billed = max(athena_bytes, athena_queries * ATHENA_MIN_BYTES_PER_QUERY)
    reconcile_core_seconds = rows_per_day / measured.reconciliation_rows_per_core_second
    athena_cores_for_timeout = max(1, ceil_div(reconcile_core_seconds, ATHENA_DML_TIMEOUT_SECONDS))

    snapshot_gb_seconds = SNAPSHOT_SEGMENTS * snapshot_seconds * 1024 / 1024
    lambda_gb_seconds = consumer_gb_seconds + committer_gb_seconds + snapshot_gb_seconds
    lambda_requests = batches_per_day + COMMITTER_INVOCATIONS_PER_DAY + SNAPSHOT_SEGMENTS + 4
    s3_puts = landing_puts + commit_puts + SNAPSHOT_SEGMENTS
    s3_gets = landing_gets + commit_gets
    # The nightly machine: plan, one child execution per segment (3 transitions each), reconcile.
    transitions = 3 * SNAPSHOT_SEGMENTS + 20

    daily = {
        "dynamodb_writes": cost(
            (wru_per_second + decline_wru_per_second) * SECONDS_PER_DAY,
            DYNAMODB_MICRO_USD_PER_MILLION_WRU,
            10**6,
        ),
        "dynamodb_snapshot_reads": cost(snapshot_rru, DYNAMODB_MICRO_USD_PER_MILLION_RRU, 10**6),
        "streams_reads": 0 * STREAMS_MICRO_USD_PER_LAMBDA_READ,
        "lambda_compute": cost(lambda_gb_seconds, LAMBDA_MICRO_USD_PER_MILLION_GB_SECONDS, 10**6),
        "lambda_requests": cost(lambda_requests, LAMBDA_MICRO_USD_PER_MILLION_REQUESTS, 10**6),
        "athena": cost(athena_billed, ATHENA_MICRO_USD_PER_TB, 10**12),
        "s3_requests": cost(s3_puts, S3_MICRO_USD_PER_THOUSAND_PUT, 1_000)
        + cost(lists_per_day, S3_MICRO_USD_PER_THOUSAND_LIST, 1_000)
        + cost(s3_gets, S3_MICRO_USD_PER_THOUSAND_GET, 1_000),
        "step_functions": cost(transitions, SFN_MICRO_USD_PER_THOUSAND_TRANSITIONS, 1_000),
        "glue_catalog_requests": cost(glue_requests_per_day, GLUE_MICRO_USD_PER_MILLION_REQUESTS, 10**6),
        "glue_table_optimizers": cost(optimizer_dpu_hours, GLUE_MICRO_USD_PER_DPU_HOUR, 1),
    }
    storage_month = cost(parquet_bytes_per_day * DAYS_PER_MONTH / 1e9, S3_MICRO_USD_PER_GB_MONTH, 1)
    monthly = {name: value * DAYS_PER_MONTH for name, value in daily.items()}
    monthly["s3_storage_one_month_of_data"] = storage_month
    held_gb = (table_bytes + records_bytes) / 1e9
    monthly["dynamodb_storage"] = cost(held_gb, DYNAMODB_MICRO_USD_PER_GB_MONTH, 1)
    monthly["dynamodb_point_in_time_recovery"] = cost(held_gb, DYNAMODB_PITR_MICRO_USD_PER_GB_MONTH, 1)
    api = api_tier(tx_per_second, measured.api_cpu_us_per_request)
    monthly["api_fleet_lattice"] = api["monthly_micro_usd"]["fleet_lattice"]
    return {
        "percent": percent,
        "transactions_per_second": tx_per_second,
        "ledger_rows_per_day": rows_per_day,
        "parquet_gb_per_day": round(parquet_bytes_per_day / 1e9, 3),
        "stream_records_per_second": round(records_per_second),
        "stream_shards_at_least": shards,
        "records_per_batch": round(records_per_batch),
        "batch_wait_seconds": round(batch_wait_seconds, 1),
        "landing_objects_per_hour": landing_objects_per_hour,
        "data_files_per_day": round(data_files_per_day),
        "commits_per_day": table_commits_per_day,
        "committer_gb_seconds_per_day": round(committer_gb_seconds),
        "glue_requests_per_day": glue_requests_per_day,
        "s3_puts_per_day": round(s3_puts),
        "s3_lists_per_day": round(lists_per_day),
        "s3_gets_per_day": round(s3_gets),
        "optimizer_dpu_hours_per_day": round(optimizer_dpu_hours, 2),
        "snapshot_read_units": round(snapshot_rru),
        "snapshot_minutes": round(snapshot_seconds / 60, 1),
        "snapshot_fits_lambda": snapshot_seconds < LAMBDA_TIMEOUT_SECONDS,
        "athena_bytes_per_night": round(athena_bytes),
        "athena_micro_usd_per_night": daily["athena"],
        "reconciliation_core_seconds": round(reconcile_core_seconds),
        "athena_cores_within_dml_timeout": athena_cores_for_timeout,
        "lambda_gb_seconds_per_day": round(lambda_gb_seconds),
        "dynamodb_write_units_per_day": round(wru_per_second * SECONDS_PER_DAY),
        "dynamodb_write_units_per_transaction": round(wru_per_tx, 2),
        "idempotency_write_units_per_transaction": records_wru_per_tx,
        "decline_record_write_units": DECLINE_UNITS["record_units"],
        "decline_write_units_per_day": round(decline_wru_per_second * SECONDS_PER_DAY),
        "grouped_wallet_32_credits": GROUPED_WALLET,
        "api_bytes_per_request": API_BYTES_PER_REQUEST,
        "api_cpu_us_per_request": measured.api_cpu_us_per_request,
        "api_cpu_basis": API_CPU_BASIS,
        "idempotency_records_gb_held": round(records_bytes / 1e9, 1),
        "dynamodb_table_gb_held": round(table_bytes / 1e9, 1),
        "dynamodb_gb_held": round(held_gb, 1),
        "dynamodb_read_units_per_day": round(snapshot_rru),
        "daily_micro_usd": daily,
        "monthly_micro_usd": monthly,
        "monthly_total_micro_usd": sum(monthly.values()),
        "api_tasks": api["tasks"],
        "api_monthly_micro_usd": api["monthly_micro_usd"],
    }


# --- output ------------------------------------------------------------------------------------

_ROWS: Final = (
    ("ledger rows per day", "ledger_rows_per_day", "{:,}"),
    ("Parquet GB per day", "parquet_gb_per_day", "{:,.1f}"),
    ("stream records/s", "stream_records_per_second", "{:,}"),
    ("stream shards (at least)", "stream_shards_at_least", "{:,}"),
    ("records per Lambda batch", "records_per_batch", "{:,}"),
    ("batch wait (freshness), s", "batch_wait_seconds", "{:,.1f}"),
    ("landing records per hour", "landing_objects_per_hour", "{:,}"),
    ("Iceberg data files landed per day", "data_files_per_day", "{:,}"),
    ("table commits per day", "commits_per_day", "{:,}"),
    ("committer GB-seconds per day", "committer_gb_seconds_per_day", "{:,}"),
    ("Glue catalog requests per day (commits)", "glue_requests_per_day", "{:,}"),
    ("S3 PUT per day", "s3_puts_per_day", "{:,}"),
    ("S3 LIST per day", "s3_lists_per_day", "{:,}"),
    ("S3 GET per day", "s3_gets_per_day", "{:,}"),
    ("Glue optimizer DPU-hours per day (assumed rate)", "optimizer_dpu_hours_per_day", "{:,.2f}"),
    ("snapshot read units", "snapshot_read_units", "{:,}"),
    ("snapshot minutes at the pace", "snapshot_minutes", "{:,.1f}"),
    ("Athena bytes scanned per night", "athena_bytes_per_night", "{:,}"),
    ("Athena USD per night", "athena_micro_usd_per_night", "usd"),
    ("reconciliation core-seconds", "reconciliation_core_seconds", "{:,}"),
    ("Athena cores to stay in 30 min", "athena_cores_within_dml_timeout", "{:,}"),
    ("Lambda GB-seconds per day", "lambda_gb_seconds_per_day", "{:,}"),
    ("DynamoDB write units per day", "dynamodb_write_units_per_day", "{:,}"),
    ("DynamoDB write units per transaction", "dynamodb_write_units_per_transaction", "{:,.2f}"),
    ("  of which the idempotency record", "idempotency_write_units_per_transaction", "{:,}"),
    ("Write units of a refusal's record (a plain PutItem)", "decline_record_write_units", "{:,}"),
    (
        f"  per day if {DECLINE_SHARE_PERCENT} % of requests are refused",
        "decline_write_units_per_day",
        "{:,}",
    ),
    ("API bytes per request (SigV4-signed + answer)", "api_bytes_per_request", "{:,}"),
    ("DynamoDB GB held (both tables)", "dynamodb_gb_held", "{:,.1f}"),
    ("  wallets table (8 h of items, wallets)", "dynamodb_table_gb_held", "{:,.1f}"),
    ("  idempotency table (2 days of records)", "idempotency_records_gb_held", "{:,.1f}"),
    ("DynamoDB read units per day", "dynamodb_read_units_per_day", "{:,}"),
    ("API tasks (2 vCPU ARM, 50 % CPU, ≥ 1 per AZ)", "api_tasks", "{:,}"),
    ("monthly cost, USD (fleet behind Lattice)", "monthly_total_micro_usd", "usd"),
)


def _usd(micro: int) -> str:
    return f"${micro // 1_000_000:,}.{micro % 1_000_000 // 10_000:02d}"


def print_table(measured: Measured, loads: list[dict[str, Any]]) -> None:
    print("measured on this machine:")
    for field in dataclasses.fields(measured):
        print(f"  {field.name}: {getattr(measured, field.name):,.3f}")
    header = f"{'':42}" + "".join(f"{str(load['percent']) + ' %':>18}" for load in loads)
    print(header)
    for label, key, spec in _ROWS:
        cells = [_usd(load[key]) if spec == "usd" else spec.format(load[key]) for load in loads]
        print(f"{label:42}" + "".join(f"{cell:>18}" for cell in cells))
    print("API tier per month (USD): fleet behind Lattice / behind an internal ALB / API Gateway + Lambda:")
    for front in ("fleet_lattice", "fleet_alb", "lambda"):
        print(
            f"  {front:40}" + "".join(f"{_usd(load['api_monthly_micro_usd'][front]):>18}" for load in loads)
        )
    grouped = loads[0]["grouped_wallet_32_credits"]
    print(
        f"a wallet credited {grouped['credits']} times in one group commit: {grouped['wallet_item_bytes']:,} "
        f"bytes, {grouped['wallet_units']} write units, and {grouped['next_write_units']} for its next write"
    )
    print(f"API CPU per request: {loads[0]['api_cpu_us_per_request']:,.0f} µs, {API_CPU_BASIS}")
    print("monthly cost by item (USD):")
    for item in loads[0]["monthly_micro_usd"]:
        print(f"  {item:40}" + "".join(f"{_usd(load['monthly_micro_usd'][item]):>18}" for load in loads))


#: The unit costs the README's cost section is rendered from (``bench/capacity.py --readme``): the
#: run of 2026-11-23 (docs/capacity.md, "Measured here"); ``tests/unit/test_capacity.py`` fails when the
#: README and the model disagree.
PUBLISHED: Final = Measured(
    consumer_cpu_us_per_record=3.2,
    stream_record_json_bytes=1_160.0,
    compaction_rows_per_core_second=183_000.0,
    compaction_bytes_per_core_second=17_500_000.0,
    reconciliation_rows_per_core_second=850_000.0,
    parquet_bytes_per_row=106.0,
    reconciliation_read_fraction=0.39,
)
README_BEGIN: Final = "<!-- generated by bench/capacity.py --readme: do not edit -->"
README_END: Final = "<!-- end of generated cost section -->"


def lambda_break_even_requests_per_second(measured: Measured = PUBLISHED) -> int:
    """The load (requests/s) below which API Gateway + Lambda costs less than the Lattice fleet."""
    low, high = 1, SEED_TRANSACTIONS_PER_SECOND
    while low < high:
        middle = (low + high) // 2
        tier = api_tier(middle, measured.api_cpu_us_per_request)["monthly_micro_usd"]
        if tier["lambda"] < tier["fleet_lattice"]:
            low = middle + 1
        else:
            high = middle
    return low


def readme_section(measured: Measured = PUBLISHED) -> str:
    """The README's cost table: the whole deployment per month at 1, 10 and 100 % of the seed's load."""
    loads = [model(measured, percent) for percent in FRACTIONS_PERCENT]
    header = (
        "| per month, us-east-1, on-demand | " + " | ".join(f"{load['percent']} %" for load in loads) + " |"
    )
    rows = [header, "| --- |" + " ---: |" * len(loads)]

    def row(label: str, values: list[int], bold: bool = False) -> None:
        cells = [f"**{_usd(value)}**" if bold else _usd(value) for value in values]
        rows.append(f"| {'**' + label + '**' if bold else label} | " + " | ".join(cells) + " |")

    def item(name: str) -> list[int]:
        return [load["monthly_micro_usd"][name] for load in loads]

    row(
        "DynamoDB writes (transactional, the store's own items: 2 units each; "
        f"refusals' records at {DECLINE_SHARE_PERCENT} %)",
        item("dynamodb_writes"),
    )
    held = ("dynamodb_storage", "dynamodb_point_in_time_recovery")
    row(
        "DynamoDB storage and point-in-time recovery (wallets; 2 days of idempotency records)",
        [sum(load["monthly_micro_usd"][name] for name in held) for load in loads],
    )
    lake = [
        sum(
            value
            for name, value in load["monthly_micro_usd"].items()
            if not name.startswith(("dynamodb_writes", "api_")) and name not in held
        )
        for load in loads
    ]
    row(
        "the lake: consumer, committer, Glue (catalog, optimizers), snapshot, Athena, S3, Step Functions",
        lake,
    )
    row("API: ECS Fargate fleet behind VPC Lattice (default)", item("api_fleet_lattice"))
    row("total", [load["monthly_total_micro_usd"] for load in loads], bold=True)
    row("API instead behind an internal ALB", [load["api_monthly_micro_usd"]["fleet_alb"] for load in loads])
    row("API instead on API Gateway + Lambda", [load["api_monthly_micro_usd"]["lambda"] for load in loads])
    tasks = " / ".join(f"{load['api_tasks']}" for load in loads)
    rows.append("")
    rows.append(
        f"Fleet tasks (2 vCPU, 4 GB, ARM64, scaled to {API_TARGET_CPU_PERCENT} % CPU at "
        f"{measured.api_cpu_us_per_request:,.0f} µs of CPU per request, measured on x86 and assumed on "
        f"Graviton, at least one per zone): {tasks}. Requests are priced as signed: "
        f"{API_BYTES_PER_REQUEST:,} bytes with the answer. A wallet credited {GROUPED_WALLET['credits']} "
        f"times in one group commit is a {GROUPED_WALLET['wallet_item_bytes']:,}-byte item: "
        f"{GROUPED_WALLET['wallet_units']} write units, and as many for its next write (not in the totals). "
        f"API Gateway + Lambda is cheaper only below about "
        f"{lambda_break_even_requests_per_second(measured):,} requests/s (`-c api_front=lambda`)."
    )
    return "\n".join([README_BEGIN, *rows, README_END])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--quick", action="store_true", help="small measurements (tests): seconds, not minutes"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--rows", type=int, default=None, help="ledger rows of the measured day")
    parser.add_argument(
        "--readme", action="store_true", help="print the README's cost section (from the published figures)"
    )
    args = parser.parse_args(argv)
    if args.readme:
        print(readme_section())
        return 0
    rows = args.rows or (200_000 if args.quick else 3_000_000)
    measured = measure(
        rows=rows,
        wallets=max(1_000, rows // 10),
        records=2_000 if args.quick else 10_000,
        events=2 if args.quick else 5,
    )
    loads = [model(measured, percent) for percent in FRACTIONS_PERCENT]
    if args.json:
        print(json.dumps({"measured": dataclasses.asdict(measured), "rows_measured": rows, "loads": loads}))
    else:
        print(f"capacity model ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {rows:,} ledger rows measured)")
        print_table(measured, loads)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
