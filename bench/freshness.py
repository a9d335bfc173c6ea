"""Freshness of the Iceberg lake: from a batch landing to its rows being queryable, at 1, 10 and 100 %.

On the embedded stack (SeaweedFS's S3 and Iceberg REST catalog, DuckDB), as the product runs it:
for each load, every commit interval the consumer lands what that load lands in one interval (the
capacity model's batches per second, each a ledger data file of the model's batch size plus its
landing record, written by :func:`lake.iceberg_landing.land_batch`), then the committer commits
(:func:`lake.committer.commit_landed`), then a DuckDB ``count(*)`` over ``iceberg_scan`` of the new
metadata sees the rows. A row's wait is the time to the next commit (half an interval on average,
a whole one at worst) plus the commit plus the query's planning; the commit is what grows with the
load, and is what is measured (median of ``--cycles`` cycles), beside the interval itself.

Also the raw commit rate of one table: ``--rate-commits`` appends of one 1,000-row file each,
back to back (commits/s, and the median commit time at the start and the end, which shows the
cost of a growing snapshot history without expiry).

Run: ``.venv/bin/python bench/freshness.py`` (``--cycles 3`` for a quick look).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

import capacity
from reconcile import STREAM_ARN, WalletState, ledger_chunk, uuid_strings

from contracts.settings import Settings
from lake.committer import commit_landed
from lake.iceberg_catalog import open_catalog
from lake.iceberg_landing import land_batch, table_locations
from lake.iceberg_tables import identifier
from walletlake.local import EmbeddedStack, patched_environ

LEVELS = (1, 10, 100)
WALLETS = 100_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=5, help="commit cycles per load (median reported)")
    parser.add_argument("--interval", type=int, default=30, help="commit interval, seconds (default 30)")
    parser.add_argument("--rate-commits", type=int, default=200, help="back-to-back commits for the rate")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="walletlake-freshness-") as folder:
        stack = EmbeddedStack(Path(folder))
        with stack, patched_environ(stack.environment()):
            settings = Settings.from_env().replace(lake_format="iceberg", query_engine="duckdb")
            rows = [freshness(settings, percent, args.cycles, args.interval) for percent in LEVELS]
            rate = commit_rate(settings, args.rate_commits)
    print(f"\ncommit interval {args.interval} s; median of {args.cycles} cycles per load")
    print(
        f"{'load':>6} {'batches/commit':>15} {'rows/commit':>12} {'commit s':>9} {'query s':>8} "
        f"{'mean wait s':>12} {'worst wait s':>13}"
    )
    for row in rows:
        print(
            f"{row['percent']:>5}% {row['batches']:>15,} {row['rows']:>12,} {row['commit']:>9.2f} "
            f"{row['query']:>8.2f} {args.interval / 2 + row['commit'] + row['query']:>12.1f} "
            f"{args.interval + row['commit'] + row['query']:>13.1f}"
        )
    print(
        f"\none table, back-to-back commits of one 1,000-row file: {rate['per_second']:.1f} commits/s; "
        f"median commit {rate['first_ms']:.0f} ms over the first 20, {rate['last_ms']:.0f} ms over the "
        f"last 20 of {rate['commits']} (no expiry in between)"
    )
    return 0


def freshness(settings: Settings, percent: int, cycles: int, interval: int) -> dict[str, Any]:
    """Land one interval's batches at ``percent`` % of the seed's load, commit, query; medians."""
    load = capacity.model(capacity.PUBLISHED, percent)
    batches_per_commit = max(1, round(_batches_per_second(load) * interval))
    rows_per_batch = max(1, round(load["ledger_rows_per_day"] / (_batches_per_second(load) * 86_400)))
    namespace = f"freshness_{percent}"
    run = settings.replace(glue_database=namespace, bucket=f"freshness-{percent}")
    client = boto3.client("s3", region_name=run.region)
    client.create_bucket(Bucket=run.bucket)
    catalog = open_catalog(run)
    from lake.iceberg_tables import ensure_tables

    ensure_tables(catalog, namespace)
    locations = table_locations(run)
    rng = np.random.default_rng(percent)
    wallet_ids, state = _wallets(rng, WALLETS)
    sequence = 1
    commits, queries, total_rows = [], [], 0
    import duckdb

    from queries._duckdb import connect

    connection: duckdb.DuckDBPyConnection = connect(
        boto3.Session(region_name=run.region), run.region, iceberg=True
    )
    for _cycle in range(cycles):
        for batch in range(batches_per_commit):
            rows = _ledger(rng, wallet_ids, state, rows_per_batch, sequence)
            records = [
                {"dynamodb": {"SequenceNumber": str(sequence)}},
                {"dynamodb": {"SequenceNumber": str(sequence + rows_per_batch)}},
            ]
            land_batch(
                client,
                run,
                records,
                lambda _records, rows=rows: {"ledger": rows},
                event_source_arn=STREAM_ARN,
                shard=f"shard-{batch % 108:03d}",
                locations=locations,
            )
            sequence += rows_per_batch + 1
            total_rows += rows.num_rows
        started = time.perf_counter()
        commit_landed(run, client, catalog, tables=("ledger",))
        commits.append(time.perf_counter() - started)
        started = time.perf_counter()
        metadata = catalog.load_table(identifier(namespace, "ledger")).metadata_location
        (seen,) = connection.execute(f"SELECT count(*) FROM iceberg_scan('{metadata}')").fetchone() or (0,)
        queries.append(time.perf_counter() - started)
        if seen != total_rows:
            raise AssertionError(f"query saw {seen} rows after the commit, {total_rows} were committed")
    print(
        f"{percent:>3}%: {batches_per_commit} batches of {rows_per_batch:,} rows per commit; "
        f"commit {', '.join(f'{c:.2f}' for c in commits)} s",
        flush=True,
    )
    return {
        "percent": percent,
        "batches": batches_per_commit,
        "rows": batches_per_commit * rows_per_batch,
        "commit": statistics.median(commits),
        "query": statistics.median(queries),
    }


def commit_rate(settings: Settings, commits: int) -> dict[str, float]:
    """Back-to-back commits of one small file each to a fresh table: commits/s and their growth."""
    run = settings.replace(glue_database="freshness_rate", bucket="freshness-rate")
    client = boto3.client("s3", region_name=run.region)
    client.create_bucket(Bucket=run.bucket)
    catalog = open_catalog(run)
    from lake.iceberg_tables import ensure_tables

    ensure_tables(catalog, run.glue_database)
    locations = table_locations(run)
    rng = np.random.default_rng(7)
    wallet_ids, state = _wallets(rng, 10_000)
    times = []
    for index in range(commits):
        rows = _ledger(rng, wallet_ids, state, 1_000, index * 2_000 + 1)
        records = [{"dynamodb": {"SequenceNumber": str(index * 2_000 + 1)}}]
        land_batch(
            client,
            run,
            records,
            lambda _r, rows=rows: {"ledger": rows},
            event_source_arn=STREAM_ARN,
            shard="rate",
            locations=locations,
        )
        started = time.perf_counter()
        commit_landed(run, client, catalog, tables=("ledger",))
        times.append(time.perf_counter() - started)
    return {
        "commits": commits,
        "per_second": commits / sum(times),
        "first_ms": statistics.median(times[:20]) * 1000,
        "last_ms": statistics.median(times[-20:]) * 1000,
    }


def _batches_per_second(load: dict[str, Any]) -> float:
    return float(load["stream_records_per_second"]) / float(load["records_per_batch"])


def _wallets(rng: np.random.Generator, count: int) -> tuple[pa.Array, WalletState]:
    now = int(time.time() * 1000)
    state = WalletState(
        rng.integers(1, 50, count), rng.integers(10**10, 10**12, count), np.full(count, now - 3_600_000)
    )
    return uuid_strings(rng, count), state


def _ledger(
    rng: np.random.Generator, wallet_ids: pa.Array, state: WalletState, rows: int, first_sequence: int
) -> pa.Table:
    now = int(time.time() * 1000)
    transactions = max(1, rows * 10 // 17)
    created = np.sort(rng.integers(now - 1_000, now, transactions))
    is_transfer = rng.random(transactions) < 0.7
    amount = rng.integers(1, 10_000_000, transactions)
    return ledger_chunk(
        rng,
        wallet_ids,
        state,
        created=created,
        is_transfer=is_transfer,
        amount=amount,
        first_sequence=first_sequence,
    )


if __name__ == "__main__":
    raise SystemExit(main())
