"""Scale run: a synthetic day at a fraction of the seed's load, compacted hour by hour and reconciled.

On the embedded stack (DynamoDB Local, SeaweedFS for S3, moto for Glue, DuckDB for SQL), as the
product runs it:

1. **Build** the day: ``--fraction`` of seed 000's 20,000 transactions/s (70 % transfers), 1.7
   ledger rows per transaction (``--fraction 0.01``: ~29 million rows), over ``fraction`` x 10
   million wallets, landed in S3 as the consumer would land them at that load: one object per
   batch and five-minute slot, batches as large as the CDK app's batching gives at that load
   (``bench/capacity.py``'s model: 10,000 records, the 6 MB payload, or 30 s). Also the previous
   day's ``daily_balances`` (every wallet's opening) and a complete snapshot after midnight. Data
   is made an hour at a time (vectorised), so building stays small whatever the fraction.
2. **Hourly compaction**: for every hour of the day, at HH:05 of the next, the units that closed
   (``lake.compaction_units.closed_units``) compacted ``--workers`` at a time
   (``run_units``: the process pool ``walletlake compact --closed-hours`` uses).
3. **Nightly**: compact what is left of the day (``lake.compaction.compact_day``), then reconcile it
   (``queries.reconciliation.reconcile``: DuckDB over SeaweedFS's S3, the product's own path).
4. **One-wallet statement**: the bytes a ``wallet_statement`` of one wallet must fetch, measured as
   ``bench/reconcile.py`` does (footers plus the column chunks of every row group whose
   ``wallet_id`` min/max holds the wallet), over the compacted day, for 20 wallets.

Prints wall and CPU seconds of each step, the peak resident memory of this process tree (sampled;
with and without the stack's servers), the day's objects before and after, and PASS/FAIL lines
for the issue's bounds: 15 minutes, 4 GB, 1 % of the day's bytes.

Run: ``.venv/bin/python bench/nightly_scale.py --fraction 0.01`` (``--fraction 0.001`` for a
quick look).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import psutil
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

import capacity
from reconcile import (
    STREAM_ARN,
    WalletState,
    ledger_chunk,
    opening_and_snapshot,
    statement_columns,
    uuid_strings,
)

from lake import objects, parquet
from lake.compaction import compact_day, read_footer
from lake.compaction_units import closed_units, run_units
from lake.layout import landing_key, partition_prefix
from lake.writer import split_by_slot
from queries.reconciliation import reconcile
from walletlake.local import EmbeddedStack, patched_environ
from walletlake.settings import Settings

DAY = dt.date(2026, 11, 22)
SNAPSHOT_AT = dt.datetime(2026, 11, 23, 0, 30, tzinfo=dt.UTC)
NOW = dt.datetime(2026, 11, 23, 0, 40, tzinfo=dt.UTC)
LIMIT_SECONDS = 15 * 60
LIMIT_BYTES = 4 * 2**30
STATEMENT_TARGET_PERCENT = 1.0
UPLOAD_THREADS = 8


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=0.01, help="share of the seed's load (0.01 = 1 %%)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="units side by side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="walletlake-scale-") as scratch:
        memory = MemorySampler()
        memory.start()
        try:
            with EmbeddedStack(Path(scratch) / "stack") as stack, patched_environ(stack.environment()):
                servers = {
                    stack.server(name).process.pid for name in ("DynamoDB Local", "SeaweedFS", "moto server")
                }
                memory.servers = servers
                return run(Settings.from_env(), args.fraction, args.workers, memory)
        finally:
            memory.stop()


def run(settings: Settings, fraction: float, workers: int, memory: MemorySampler) -> int:
    client = boto3.client("s3", region_name=settings.region)
    load = capacity.model(_batching_only(), fraction * 100)
    rows_per_object = max(
        1, round(load["records_per_batch"] * load["ledger_rows_per_day"] / _records_per_day(load))
    )
    print(
        f"load: {fraction:.3%} of the seed's = {load['transactions_per_second']:,.0f} tx/s, "
        f"{load['ledger_rows_per_day']:,} ledger rows a day; the consumer lands batches of "
        f"{load['records_per_batch']:,.0f} stream records (~{rows_per_object:,} ledger rows) per object"
    )
    clock = Clock()
    with clock.step("build and land the day"):
        built = build_day(
            client,
            settings,
            load["ledger_rows_per_day"],
            max(1_000, round(10_000_000 * fraction)),
            rows_per_object,
        )
    before = ledger_objects(client, settings)
    print(
        f"  {built['rows']:,} ledger rows over {built['wallets']:,} wallets in "
        f"{len(before):,} landing objects ({sum(size for _, size in before) / 1e9:.2f} GB)"
    )

    memory.reset()
    product = Clock()
    hours_done = 0
    with product.step("hourly compaction (24 runs of the closed units)"):
        for hour in range(24):
            now = dt.datetime.combine(DAY, dt.time(hour), tzinfo=dt.UTC) + dt.timedelta(hours=1, minutes=5)
            units = [unit for unit in closed_units(settings, now, client=client) if unit.day == DAY]
            hours_done += len(run_units(settings, units, workers=workers))
    with product.step("nightly: compact what is left of the day"):
        left = compact_day(settings, DAY, workers=workers)
    with product.step("nightly: reconcile the day (DuckDB over S3)"):
        verdict = reconcile(settings, DAY, now=NOW)
    after = ledger_objects(client, settings)
    print(
        f"  {hours_done} units compacted hourly, {len(left.units)} left for the night; "
        f"reconciliation {'CLEAN' if verdict.ok else 'FAILED'} {verdict.counts}"
    )
    print(f"  ledger objects of the day: {len(before):,} before, {len(after):,} after compaction")

    columns = statement_columns()
    footers = {key: read_footer(client, settings.bucket, key) for key, _ in after}
    total = sum(size for _, size in after)
    probe = built["probe"]
    fetched = [statement_bytes(footers, wallet, columns) for wallet in probe]
    worst = max(fetched) / total * 100
    print(
        f"  one-wallet statement: fetches {fetched[0]:,} of {total:,} bytes ({fetched[0] / total:.3%}); "
        f"worst of {len(probe)} wallets {worst:.3f} %"
    )

    wall = product.total
    peak_tree, peak_servers = memory.peak_tree, memory.peak_servers
    usage = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"product steps: {wall:.1f} s wall, {product.cpu:.1f} CPU-seconds in this process and its workers "
        f"(load average {os.getloadavg()[0]:.2f}); peak resident memory of the process tree "
        f"{peak_tree / 2**30:.2f} GiB, of which the stack's servers {peak_servers / 2**30:.2f} GiB; "
        f"whole run {clock.total + wall:.1f} s, max RSS of one process "
        f"{max(u.ru_maxrss for u in usage) / 2**20:.2f} GiB"
    )
    passes = [
        verdict_line(
            f"hourly compaction + nightly job within 15 minutes: {wall:.0f} s", wall <= LIMIT_SECONDS
        ),
        verdict_line(
            f"peak memory of the process tree under 4 GB: {peak_tree / 2**30:.2f} GiB",
            peak_tree < LIMIT_BYTES,
        ),
        verdict_line(
            f"one-wallet statement ≤ {STATEMENT_TARGET_PERCENT} % of the day's bytes: worst {worst:.3f} %",
            worst <= STATEMENT_TARGET_PERCENT,
        ),
        verdict_line(
            f"every wallet reconciled ok, every entry once: {verdict.counts.get('ok', 0):,} ok",
            verdict.ok and verdict.counts.get("ok", 0) == built["moved"],
        ),
    ]
    return 0 if all(passes) else 1


def _batching_only() -> capacity.Measured:
    """The model needs measured costs; only the stream record's size matters for batching."""
    return capacity.Measured(
        consumer_cpu_us_per_record=3.2,
        stream_record_json_bytes=1_160.0,  # measured by bench/capacity.py
        compaction_rows_per_core_second=180_000.0,
        compaction_bytes_per_core_second=17_500_000.0,
        reconciliation_rows_per_core_second=850_000.0,
        parquet_bytes_per_row=106.0,
        reconciliation_read_fraction=0.39,
    )


def _records_per_day(load: dict[str, Any]) -> float:
    return float(load["stream_records_per_second"]) * 86_400


def build_day(
    client: Any, settings: Settings, rows: int, wallets: int, rows_per_object: int
) -> dict[str, Any]:
    """Land ``rows`` ledger rows of DAY, an hour at a time; write the opening closes and the snapshot."""
    rng = np.random.default_rng(20261122)
    wallet_ids = uuid_strings(rng, wallets)
    open_version = rng.integers(1, 50, wallets)
    open_balance = rng.integers(10**10, 10**12, wallets)
    start_of_day = _ms(dt.datetime.combine(DAY, dt.time(), tzinfo=dt.UTC))
    state = WalletState(open_version.copy(), open_balance.copy(), np.full(wallets, start_of_day - 3_600_000))
    sequence = 10**16
    written = 0
    transactions_per_hour = rows * 10 // 17 // 24  # 1.7 rows per transaction
    with concurrent.futures.ThreadPoolExecutor(UPLOAD_THREADS) as pool:
        for hour in range(24):
            start_ms = _ms(dt.datetime.combine(DAY, dt.time(hour), tzinfo=dt.UTC))
            ledger = ledger_chunk(  # 70 % transfers, as seed 000's load
                rng,
                wallet_ids,
                state,
                created=start_ms + np.sort(rng.integers(0, 3_600_000, transactions_per_hour)),
                is_transfer=rng.random(transactions_per_hour) < 0.7,
                amount=rng.integers(1, 10**6, transactions_per_hour),
                first_sequence=sequence,
            )
            sequence += ledger.num_rows
            written += ledger.num_rows
            uploads = []
            for offset in range(0, ledger.num_rows, rows_per_object):
                batch = ledger.slice(offset, rows_per_object)
                first = batch.column("stream_sequence")[0].as_py()
                for (day, slot), part in split_by_slot(batch, "created_at").items():
                    key = landing_key(settings.lake_prefix, "ledger", day, STREAM_ARN, first, slot)
                    uploads.append(
                        pool.submit(
                            _put, client, settings.bucket, key, parquet.encode(part, text_statistics=False)
                        )
                    )
            for upload in uploads:
                upload.result()
            print(f"  hour {hour:02d}: {ledger.num_rows:,} rows landed", flush=True)
    opening, snapshot = opening_and_snapshot(wallet_ids, open_version, open_balance, state, SNAPSHOT_AT)
    day_before = DAY - dt.timedelta(days=1)
    _put_table(client, settings, "daily_balances", day_before, "daily_balances.parquet", opening)
    stamp = SNAPSHOT_AT.strftime("%Y%m%dT%H%M%S") + f"{SNAPSHOT_AT.microsecond // 1000:03d}Z"
    name = f"snapshot-{stamp}-000-of-001.parquet"  # the name lake.snapshots gives a complete snapshot
    _put_table(client, settings, "balance_snapshots", SNAPSHOT_AT.date(), name, snapshot)
    assert state.moved is not None
    busy = np.flatnonzero(state.moved)
    probe = wallet_ids.take(pa.array(busy[np.linspace(0, len(busy) - 1, 20).astype(np.int64)])).to_pylist()
    return {"rows": written, "wallets": wallets, "moved": wallets, "probe": probe}


def ledger_objects(client: Any, settings: Settings) -> list[tuple[str, int]]:
    prefix = partition_prefix(settings.lake_prefix, "ledger", DAY)
    return [
        item for item in objects.iter_objects(client, settings.bucket, prefix) if item[0].endswith(".parquet")
    ]


def statement_bytes(footers: dict[str, Any], wallet_id: str, columns: set[str]) -> int:
    """Bytes one wallet's statement fetches: every footer, and the chunks of row groups that may hold it."""
    fetched = 0
    for meta in footers.values():
        fetched += meta.serialized_size + 8
        wallet_column = meta.schema.names.index("wallet_id")
        for index in range(meta.num_row_groups):
            group = meta.row_group(index)
            stats = group.column(wallet_column).statistics
            if stats is not None and stats.has_min_max and not stats.min <= wallet_id <= stats.max:
                continue
            fetched += sum(
                group.column(c).total_compressed_size
                for c in range(group.num_columns)
                if group.column(c).path_in_schema in columns
            )
    return fetched


class Clock:
    """Wall and CPU seconds of named steps (CPU: this process and its finished workers)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.cpu = 0.0

    def step(self, name: str) -> Any:
        clock = self

        class _Step:
            def __enter__(self) -> None:
                self.wall, self.cpu = time.perf_counter(), _cpu_seconds()
                print(f"{name} ...", flush=True)

            def __exit__(self, *exc: object) -> None:
                wall, cpu = time.perf_counter() - self.wall, _cpu_seconds() - self.cpu
                clock.total += wall
                clock.cpu += cpu
                print(f"{name}: {wall:.1f} s wall, {cpu:.1f} CPU-seconds", flush=True)

        return _Step()


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class MemorySampler(threading.Thread):
    """Samples the resident memory of this process and every descendant, every 0.2 s."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.servers: set[int] = set()
        self.peak_tree = 0
        self.peak_servers = 0
        self._halt = threading.Event()

    def reset(self) -> None:
        self.peak_tree = self.peak_servers = 0

    def run(self) -> None:
        me = psutil.Process()
        while not self._halt.wait(0.2):
            tree = servers = 0
            for process in [me, *me.children(recursive=True)]:
                try:
                    rss = process.memory_info().rss
                except psutil.Error:
                    continue
                tree += rss
                if process.pid in self.servers or (self.servers & {p.pid for p in process.parents()}):
                    servers += rss
            self.peak_tree = max(self.peak_tree, tree)
            self.peak_servers = max(self.peak_servers, servers)

    def stop(self) -> None:
        self._halt.set()


def _put(client: Any, bucket: str, key: str, body: bytes) -> None:
    client.put_object(Bucket=bucket, Key=key, Body=body)


def _put_table(client: Any, settings: Settings, table: str, day: dt.date, name: str, rows: pa.Table) -> None:
    _put(
        client,
        settings.bucket,
        partition_prefix(settings.lake_prefix, table, day) + name,
        parquet.encode(rows),
    )


def _ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


def verdict_line(text: str, ok: bool) -> bool:
    print(f"{'PASS' if ok else 'FAIL'}: {text}")
    return ok


if __name__ == "__main__":
    raise SystemExit(main())
