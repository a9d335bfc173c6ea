"""Scale run: a synthetic day at a fraction of the seed's load on the Iceberg lake, committed and reconciled.

On the embedded stack (DynamoDB Local, SeaweedFS for S3 and its Iceberg REST catalog, moto for
Glue, DuckDB for SQL), as the product runs it:

1. **Land** the day as the consumer would: ``--fraction`` of seed 000's 20,000 transactions/s (70 %
   transfers), 1.7 ledger rows per transaction (``--fraction 0.01``: ~29 million rows), over
   ``fraction`` x 10 million wallets, in batches as large as the CDK app's batching gives at that
   load (``bench/capacity.py``'s model: 10,000 records, the 6 MB payload, or 30 s), spread over the
   model's shards. Per batch: :func:`lake.iceberg_landing.land_rows`, what
   :func:`lake.iceberg_landing.land_batch` calls: one ledger data file of the day in the Iceberg
   ledger table's location, described from its bytes (what the commit appends without reading
   its footer), then its landing record (:mod:`lake.landing_log`). Without ``land_batch``'s
   per-batch LIST of the shard's records (the consumer's coverage check, which finds nothing to
   skip here): that LIST, over a day of records, would make building the bench slower than what
   it measures. Data is made an hour at a time
   (vectorised), so building stays small whatever the fraction. Also the previous day's
   ``daily_balances`` (every wallet's opening) and a complete snapshot after midnight.
2. **Committer** (:func:`lake.committer.commit_landed`, ledger table): landing and committing
   interleave as in production, one commit per ``--commit-seconds`` of landed batches. The
   product commits every 30 s (2,880 commits a day); by default the bench commits once per hour
   of the day (24 commits), each appending that hour's batches. Prints the commit time per commit
   (median, max), its CPU (median, the first and the last: a cost growing with the day shows) and
   the rows per commit.
3. **Nightly maintenance** of every Iceberg table for the day, as the nightly job does
   (:func:`lake.iceberg_maintenance.maintain`). For the ledger its three parts are timed apart:
   ``compact_day`` (the day's files rewritten into sorted files of at most 256 MB, in one atomic
   snapshot; it rewrites its groups one after another and has no workers), then
   ``expire_snapshots`` and ``remove_orphan_files``; ``maintain`` itself for wallets and
   quarantine (nothing landed in them, and the bench commits only the ledger, so they have no
   position and their orphan removal reads every landing record: the product commits all three
   every cycle, and reads only the records past each table's position).
4. **Nightly reconciliation** (:func:`queries.reconciliation.reconcile`: DuckDB over
   ``iceberg_scan`` of the pinned snapshots, the product's own path).
5. **One-wallet statement**: the bytes a ``wallet_statement`` of one wallet must fetch, measured as
   ``bench/reconcile.py`` does (footers plus the column chunks of every row group whose
   ``wallet_id`` min/max holds the wallet), over the data files of the ledger's current snapshot
   for the day (from pyiceberg's scan planning), for 20 wallets.

Prints wall and CPU seconds of each step, the peak resident memory of this process tree during
steps 2-4 (sampled; with and without the stack's servers), the day's data files before and after
compaction, and PASS/FAIL lines for the issue's bounds: 15 minutes, 4 GB, 1 % of the day's bytes.

Run: ``.venv/bin/python bench/nightly_scale.py --fraction 0.01`` (``--fraction 0.001`` for a
quick look).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import os
import resource
import statistics
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

from contracts.lake_layout import partition_prefix
from contracts.lake_tables import STREAM_TABLES
from contracts.settings import Settings
from lake import parquet
from lake.committer import commit_landed
from lake.compaction import read_footer
from lake.iceberg_catalog import load_table, open_catalog
from lake.iceberg_cleanup import expire_snapshots, remove_orphan_files
from lake.iceberg_landing import TableLayout, land_rows, split_bucket_key, table_layouts
from lake.iceberg_maintenance import compact_day, maintain
from queries.reconciliation import reconcile
from walletlake.local import EmbeddedStack, patched_environ

DAY = dt.date(2026, 11, 22)
SNAPSHOT_AT = dt.datetime(2026, 11, 23, 0, 30, tzinfo=dt.UTC)
NOW = dt.datetime(2026, 11, 23, 0, 40, tzinfo=dt.UTC)
LIMIT_SECONDS = 15 * 60
LIMIT_BYTES = 4 * 2**30
STATEMENT_TARGET_PERCENT = 1.0
UPLOAD_THREADS = 8
FOOTER_READERS = 16


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=0.01, help="share of the seed's load (0.01 = 1 %%)")
    parser.add_argument(
        "--commit-seconds",
        type=int,
        default=3600,
        help="landed seconds per commit (divides 3600; default 3600; the product commits every 30 s)",
    )
    args = parser.parse_args()
    if args.commit_seconds <= 0 or 3600 % args.commit_seconds:
        parser.error("--commit-seconds must divide 3600")
    with tempfile.TemporaryDirectory(prefix="walletlake-scale-") as scratch:
        memory = MemorySampler()
        memory.start()
        try:
            with EmbeddedStack(Path(scratch) / "stack") as stack, patched_environ(stack.environment()):
                memory.servers = {
                    stack.server(name).process.pid for name in ("DynamoDB Local", "SeaweedFS", "moto server")
                }
                settings = Settings.from_env().replace(lake_format="iceberg", query_engine="duckdb")
                return run(settings, args.fraction, args.commit_seconds, memory)
        finally:
            memory.stop()


def run(settings: Settings, fraction: float, commit_seconds: int, memory: MemorySampler) -> int:
    client = boto3.client("s3", region_name=settings.region)
    load = capacity.model(_batching_only(), fraction * 100)
    rows_per_batch = max(
        1, round(load["records_per_batch"] * load["ledger_rows_per_day"] / _records_per_day(load))
    )
    shards = [f"shardId-{index:08d}" for index in range(max(1, int(load["stream_shards_at_least"])))]
    print(
        f"load: {fraction:.3%} of the seed's = {load['transactions_per_second']:,.0f} tx/s, "
        f"{load['ledger_rows_per_day']:,} ledger rows a day; the consumer lands batches of "
        f"{load['records_per_batch']:,.0f} stream records (~{rows_per_batch:,} ledger rows) from "
        f"{len(shards)} shard(s): one ledger data file and one landing record per batch; "
        f"the committer commits every {commit_seconds:,} s of landed batches "
        f"({86_400 // commit_seconds:,} commits for the day; the product commits every 30 s)"
    )
    build, product = Clock(), Clock()
    commits = Committer(settings, client, open_catalog(settings), product, memory)
    with build.step("land the day (interleaved with the committer's commits)"):
        built = build_day(
            client,
            settings,
            load["ledger_rows_per_day"],
            max(1_000, round(10_000_000 * fraction)),
            rows_per_batch,
            shards,
            commit_seconds,
            commits,
        )
    build.total -= product.total  # the commits inside are product time, not building
    build.cpu -= product.cpu
    times = commits.seconds
    print(
        f"  {built['rows']:,} ledger rows over {built['wallets']:,} wallets in {built['files']:,} data files "
        f"({built['bytes'] / 1e9:.2f} GB) and as many landing records; building took {build.total:.1f} s"
    )
    print(
        f"committer: {len(times)} commits ({product.total:.1f} s wall, {product.cpu:.1f} CPU-seconds), "
        f"{sum(commits.rows):,} rows in {sum(commits.files):,} files; per commit: median "
        f"{statistics.median(times):.2f} s, max {max(times):.2f} s, CPU median "
        f"{statistics.median(commits.cpu):.2f} s (first {commits.cpu[0]:.2f} s, "
        f"last {commits.cpu[-1]:.2f} s); rows per commit median "
        f"{statistics.median(commits.rows):,.0f}, max {max(commits.rows):,}; peak memory "
        f"{commits.commit_peak / 2**30:.2f} GiB",
        flush=True,
    )
    if sum(commits.rows) != built["rows"]:
        print(f"  the committer appended {sum(commits.rows):,} rows, {built['rows']:,} landed")

    before = day_files(settings)
    catalog = open_catalog(settings)
    with product.step("nightly: compact the ledger's day (one atomic rewrite)", memory):
        compaction = compact_day(settings, catalog, "ledger", DAY, s3=client)
    with product.step("nightly: the ledger's snapshot expiry and orphan removal", memory):
        expiry = expire_snapshots(settings, catalog, "ledger")
        orphans = remove_orphan_files(settings, catalog, "ledger", s3=client)
    with product.step("nightly: maintain the other Iceberg tables (wallets, quarantine)", memory):
        for name in STREAM_TABLES:
            if name != "ledger":
                maintain(settings, catalog, name, DAY, s3=client)
    with product.step("nightly: reconcile the day (DuckDB over iceberg_scan)", memory):
        verdict = reconcile(settings, DAY, now=NOW)
    after = day_files(settings)
    print(
        f"  ledger compaction: {compaction.outcome}, {compaction.files_in:,} files "
        f"({compaction.bytes_in / 1e9:.2f} GB) into {compaction.files_out:,} "
        f"({compaction.bytes_out / 1e9:.2f} GB), {compaction.rows:,} rows; expiry kept "
        f"{expiry.kept} snapshots; orphans deleted {len(orphans.deleted)}"
    )
    print(
        f"  reconciliation {'CLEAN' if verdict.ok else 'FAILED'} {verdict.counts}; "
        f"pinned snapshots {verdict.lake_snapshots}"
    )
    print(f"  ledger data files of the day: {len(before):,} before, {len(after):,} after compaction")

    columns = statement_columns()
    with concurrent.futures.ThreadPoolExecutor(FOOTER_READERS) as pool:
        footers = dict(
            zip(
                after, pool.map(lambda path: read_footer(client, *split_bucket_key(path)), after), strict=True
            )
        )
    total = sum(after.values())
    probe = built["probe"]
    fetched = [statement_bytes(footers, wallet, columns) for wallet in probe]
    worst = max(fetched) / total * 100
    print(
        f"  one-wallet statement: fetches {fetched[0]:,} of {total:,} bytes ({fetched[0] / total:.3%}); "
        f"worst of {len(probe)} wallets {worst:.3f} % ({len(footers)} files, "
        f"{sum(meta.num_row_groups for meta in footers.values()):,} row groups, each file sorted by wallet)"
    )

    wall = product.total
    peak_tree, peak_servers = memory.peak_tree, memory.peak_servers
    usage = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"product steps: {wall:.1f} s wall, {product.cpu:.1f} CPU-seconds in this process "
        f"(load average {os.getloadavg()[0]:.2f}); peak resident memory of the process tree "
        f"{peak_tree / 2**30:.2f} GiB, of which the stack's servers {peak_servers / 2**30:.2f} GiB; "
        f"whole run {build.total + wall:.1f} s, max RSS of one process "
        f"{max(u.ru_maxrss for u in usage) / 2**20:.2f} GiB"
    )
    passes = [
        verdict_line(
            f"committer + nightly maintenance + reconciliation within 15 minutes: {wall:.0f} s",
            wall <= LIMIT_SECONDS,
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


class Committer:
    """The committer's cycles (ledger table), each timed into ``clock`` with memory sampled."""

    def __init__(self, settings: Settings, client: Any, catalog: Any, clock: Clock, memory: MemorySampler):
        self.settings, self.client, self.catalog = settings, client, catalog
        self.clock, self.memory = clock, memory
        self.seconds: list[float] = []
        self.cpu: list[float] = []
        self.rows: list[int] = []
        self.files: list[int] = []
        self.commit_peak = 0

    def commit(self) -> None:
        """One cycle, as the committer's schedule runs it."""
        self.memory.begin()
        wall, cpu = time.perf_counter(), _cpu_seconds()
        report = commit_landed(self.settings, self.client, self.catalog, tables=("ledger",))
        wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
        self.memory.end()
        self.commit_peak = max(self.commit_peak, self.memory.step_tree)
        self.clock.add(wall, cpu)
        self.seconds.append(wall)
        self.cpu.append(cpu)
        self.rows.append(report.rows)
        self.files.append(sum(table.files for table in report.tables))


def build_day(
    client: Any,
    settings: Settings,
    rows: int,
    wallets: int,
    rows_per_batch: int,
    shards: list[str],
    commit_seconds: int,
    committer: Committer,
) -> dict[str, Any]:
    """Land ``rows`` ledger rows of DAY an hour at a time, committing every ``commit_seconds`` of
    landed batches; write the opening closes and the snapshot."""
    rng = np.random.default_rng(20261122)
    wallet_ids = uuid_strings(rng, wallets)
    open_version = rng.integers(1, 50, wallets)
    open_balance = rng.integers(10**10, 10**12, wallets)
    start_of_day = _ms(dt.datetime.combine(DAY, dt.time(), tzinfo=dt.UTC))
    state = WalletState(open_version.copy(), open_balance.copy(), np.full(wallets, start_of_day - 3_600_000))
    layout = table_layouts(settings)["ledger"]
    sequence = 10**16
    written = files = size = batches = 0
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
            # Batches in arrival order, round robin over the shards; each commit interval's batches
            # land (all of them: data files, then the record) before its commit.
            created = ledger.column("created_at").cast(pa.int64()).to_numpy()
            intervals: dict[int, list[pa.Table]] = {}
            for offset in range(0, ledger.num_rows, rows_per_batch):
                interval = int(created[offset] - start_ms) // (commit_seconds * 1000)
                intervals.setdefault(interval, []).append(ledger.slice(offset, rows_per_batch))
            del ledger, created
            landed = 0
            for interval in sorted(intervals):
                uploads = []
                for batch in intervals[interval]:
                    shard = shards[batches % len(shards)]
                    batches += 1
                    uploads.append(pool.submit(land, client, settings, layout, shard, batch))
                sizes = [upload.result() for upload in uploads]
                files += len(sizes)
                size += sum(sizes)
                landed += sum(batch.num_rows for batch in intervals[interval])
                committer.commit()
            print(
                f"  hour {hour:02d}: {landed:,} rows landed in {sum(map(len, intervals.values())):,} "
                f"batches; "
                f"{len(intervals)} commit(s), last {committer.seconds[-1]:.2f} s",
                flush=True,
            )
    opening, snapshot = opening_and_snapshot(wallet_ids, open_version, open_balance, state, SNAPSHOT_AT)
    day_before = DAY - dt.timedelta(days=1)
    _put_table(client, settings, "daily_balances", day_before, "daily_balances.parquet", opening)
    stamp = SNAPSHOT_AT.strftime("%Y%m%dT%H%M%S") + f"{SNAPSHOT_AT.microsecond // 1000:03d}Z"
    name = f"snapshot-{stamp}-000-of-001.parquet"  # the name lake.snapshots gives a complete snapshot
    _put_table(client, settings, "balance_snapshots", SNAPSHOT_AT.date(), name, snapshot)
    assert state.moved is not None
    busy = np.flatnonzero(state.moved)
    probe = wallet_ids.take(pa.array(busy[np.linspace(0, len(busy) - 1, 20).astype(np.int64)])).to_pylist()
    return {
        "rows": written,
        "wallets": wallets,
        "moved": wallets,
        "probe": probe,
        "files": files,
        "bytes": size,
    }


def land(client: Any, settings: Settings, layout: TableLayout, shard: str, batch: pa.Table) -> int:
    """One batch as :func:`lake.iceberg_landing.land_batch` lands it (after its LIST): its data
    file, described, then its landing record; returns the file's size."""
    record = land_rows(
        client,
        settings,
        {"ledger": batch},
        event_source_arn=STREAM_ARN,
        shard=shard,
        first=int(batch.column("stream_sequence")[0].as_py()),
        last=int(batch.column("stream_sequence")[-1].as_py()),
        locations={"ledger": layout.location},
        schemas={"ledger": layout.schema},
    )
    (landed,) = record.files
    assert landed.description is not None, "the landing describes what it writes"
    return landed.size


def day_files(settings: Settings) -> dict[str, int]:
    """Path and size of every data file of the ledger's current snapshot for DAY (scan planning)."""
    from pyiceberg.expressions import EqualTo

    table = load_table(settings, "ledger")
    tasks = table.scan(row_filter=EqualTo("dt", DAY.isoformat())).plan_files()
    return {task.file.file_path: task.file.file_size_in_bytes for task in tasks}


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
    """Wall and CPU seconds of named steps (CPU: this process and its finished children)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.cpu = 0.0

    def add(self, wall: float, cpu: float) -> None:
        self.total += wall
        self.cpu += cpu

    def step(self, name: str, memory: MemorySampler | None = None) -> Any:
        """Time a step; with ``memory``, sample the process tree's memory through it and print its peak."""
        clock = self

        class _Step:
            def __enter__(self) -> None:
                if memory is not None:
                    memory.begin()
                self.wall, self.cpu = time.perf_counter(), _cpu_seconds()
                print(f"{name} ...", flush=True)

            def __exit__(self, *exc: object) -> None:
                wall, cpu = time.perf_counter() - self.wall, _cpu_seconds() - self.cpu
                clock.add(wall, cpu)
                peak = ""
                if memory is not None:
                    memory.end()
                    peak = (
                        f"; peak memory {memory.step_tree / 2**30:.2f} GiB "
                        f"(servers {memory.step_servers / 2**30:.2f})"
                    )
                print(f"{name}: {wall:.1f} s wall, {cpu:.1f} CPU-seconds{peak}", flush=True)

        return _Step()


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class MemorySampler(threading.Thread):
    """Samples the resident memory of this process and every descendant, every 0.1 s, while
    ``recording`` (the product steps)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.servers: set[int] = set()
        self.recording = False
        self.peak_tree = self.peak_servers = 0
        self.step_tree = self.step_servers = 0
        self._halt = threading.Event()

    def begin(self) -> None:
        """Start recording a step (its own peak from zero; the overall peak carries on)."""
        self.step_tree = self.step_servers = 0
        self.recording = True

    def end(self) -> None:
        """Stop recording."""
        self.recording = False

    def run(self) -> None:
        me = psutil.Process()
        while not self._halt.wait(0.1):
            if not self.recording:
                continue
            tree = servers = 0
            for process in [me, *me.children(recursive=True)]:
                try:
                    rss = process.memory_info().rss
                    parents = {p.pid for p in process.parents()}
                except psutil.Error:
                    continue
                tree += rss
                if process.pid in self.servers or (self.servers & parents):
                    servers += rss
            self.step_tree = max(self.step_tree, tree)
            self.step_servers = max(self.step_servers, servers)
            self.peak_tree = max(self.peak_tree, tree)
            self.peak_servers = max(self.peak_servers, servers)

    def stop(self) -> None:
        self._halt.set()


def _put_table(client: Any, settings: Settings, table: str, day: dt.date, name: str, rows: pa.Table) -> None:
    client.put_object(
        Bucket=settings.bucket,
        Key=partition_prefix(settings.lake_prefix, table, day) + name,
        Body=parquet.encode(rows),
    )


def _ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


def verdict_line(text: str, ok: bool) -> bool:
    print(f"{'PASS' if ok else 'FAIL'}: {text}")
    return ok


if __name__ == "__main__":
    raise SystemExit(main())
