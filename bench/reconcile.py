"""Benchmark: the nightly reconciliation of a 10-million-row day, and what a one-wallet statement reads.

Builds a synthetic lake of one UTC day: ``--rows`` ledger rows (default 10,000,000) over
``--wallets`` wallets (default 1,000,000), as deposits and transfers in arrival order, landed in
50,000-row batches like the stream processor's; the previous day's ``daily_balances`` (every
wallet's opening) and a complete snapshot taken after midnight. Then, in the nightly order:

1. the Parquet bytes a ``wallet_statement`` of one wallet must fetch from the day's landing files:
   the footers, plus the column chunks the query reads in every row group whose ``wallet_id``
   min/max (from the Parquet metadata) holds the wallet — what Athena reads after partition
   pruning and row-group skipping, and bills;
2. compaction of the day in hourly units, as the product does (``lake.compaction.compact_files``,
   the kernel ``compact_unit`` runs, once per ``lake.compaction_units`` unit);
3. the same statement's bytes after compaction;
4. the reconciliation of the day with DuckDB (``queries.reconciliation.reconcile_day``: both
   reconciliation queries and the classification) plus writing its ``daily_balances`` and
   ``reconciliation`` objects, timed three times (each a complete run; the median is judged, as
   the machine is shared); every wallet must come out ok.

The lake lives in a local folder laid out exactly as in S3 (``{table}/dt=YYYY-MM-DD/*.parquet``),
read by the same DuckDB engine through a ``location`` of a folder instead of ``s3://``: moto's S3
server, a single Python process, would measure itself (it copies a whole object for every ranged
GET) rather than the reconciliation. Only the object store differs from the production path.

Run: ``.venv/bin/python bench/reconcile.py`` (about 3 minutes and 8 GB of memory at full size;
``--rows 1000000 --wallets 100000`` for a quick look). Prints figures and PASS/FAIL lines.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import sqlglot
from sqlglot import exp

from contracts.lake_layout import landing_object_name
from contracts.lake_tables import BALANCE_SNAPSHOTS, DAILY_BALANCES, LEDGER, table_of
from contracts.settings import DEFAULT_COMPACTION_UNIT_MINUTES, Settings
from lake import parquet
from lake.compaction import compact_files
from lake.compaction_kernel import generation
from lake.compaction_units import group_into_units
from lake.snapshots import SnapshotRef
from lake.writer import split_by_slot
from queries import get_query
from queries._duckdb import DuckDBEngine
from queries._parameters import render
from queries.reconciliation import reconcile_day
from queries.reconciliation_rules import DEFAULT_MAX_LAG_SECONDS, OK, DayOutcome
from queries.reconciliation_runs import findings_table

DAY = dt.date(2026, 11, 22)
SNAPSHOT_AT = dt.datetime(2026, 11, 23, 0, 30, tzinfo=dt.UTC)
NOW = dt.datetime(2026, 11, 23, 0, 40, tzinfo=dt.UTC)
STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/wallets/stream/2026-11-01T00:00:00.000"
BATCH_ROWS = 50_000
RECONCILE_TARGET_SECONDS = 10.0
#: The machine is shared: the reconciliation runs this many times and the median is judged.
RECONCILE_RUNS = 3
STATEMENT_TARGET_PERCENT = 1.0
MS = pa.timestamp("ms", tz="UTC")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="ledger rows of the day (about)")
    parser.add_argument("--wallets", type=int, default=1_000_000, help="wallets")
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to build the lake (default: a temp dir)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the lake folder afterwards")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="walletlake-bench-"))
    try:
        return run(root, args.rows, args.wallets)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"lake kept in {root}")


def run(root: Path, rows: int, wallets: int) -> int:
    started = time.perf_counter()
    ledger, closes = build_lake(root, rows, wallets)
    print(
        f"synthetic lake: {ledger:,} ledger rows over {wallets:,} wallets "
        f"in {time.perf_counter() - started:.1f} s"
    )
    day_dir = root / "ledger" / f"dt={DAY.isoformat()}"
    columns = statement_columns()
    probe = pick_wallets(day_dir, 100)

    before = [statement_bytes(day_dir, wallet, columns) for wallet in probe]
    report_statement("before compaction", before)

    started = time.perf_counter()
    inputs = sorted(day_dir.glob("*.parquet"))
    out_dir = root / "compacting"
    out_dir.mkdir()
    # As the product compacts: one unit per hour (lake.compaction_units), row groups sized per unit.
    units = group_into_units("ledger", DAY, [path.name for path in inputs], DEFAULT_COMPACTION_UNIT_MINUTES)
    outputs = rows_out = 0
    for unit, names in sorted(units.items(), key=lambda item: item[0].first_slot):
        paths = [day_dir / name for name in names]
        done = compact_files(
            "ledger",
            [str(path) for path in paths],
            lambda name, path: shutil.copyfile(path, out_dir / name),
            name=generation([(path.name, path.stat().st_size) for path in paths]),
            row_group_rows=None,
            scratch=root / "spill",
            file_prefix=unit.file_prefix,
        )
        outputs += len(done.names)
        rows_out += done.rows_out
    for path in inputs:
        path.unlink()
    for path in out_dir.iterdir():
        path.rename(day_dir / path.name)
    print(
        f"compaction in {len(units)} hourly units: {len(inputs)} files → {outputs} files, {rows_out:,} rows, "
        f"{time.perf_counter() - started:.1f} s"
    )

    after = [statement_bytes(day_dir, wallet, columns) for wallet in probe]
    report_statement("after compaction", after)

    runs = [timed_reconciliation(root) for _ in range(RECONCILE_RUNS)]
    seconds = statistics.median(run[0] for run in runs)
    cpu = statistics.median(run[1] for run in runs)
    outcome = runs[-1][2]
    print(
        f"reconciliation (DuckDB), {RECONCILE_RUNS} runs: {', '.join(f'{run[0]:.2f} s' for run in runs)} "
        f"(median {seconds:.2f} s, {cpu:.2f} CPU-seconds on {os.cpu_count()} cores; load average "
        f"{os.getloadavg()[0]:.2f}, this process included) for {outcome.ledger_rows:,} ledger rows and "
        f"{outcome.wallets:,} wallets; {outcome.counts[OK]:,} ok, {len(outcome.findings)} findings"
    )

    passes = []
    first_after = 100 * after[0][0] / after[0][1]
    worst_after = max(100 * fetched / total for fetched, total in after)
    passes.append(
        verdict(
            f"one-wallet statement after compaction fetches {first_after:.3f} % of the day's bytes "
            f"(worst of {len(after)} wallets {worst_after:.3f} %; target ≤ {STATEMENT_TARGET_PERCENT} %)",
            worst_after <= STATEMENT_TARGET_PERCENT,
        )
    )
    passes.append(
        verdict(
            f"nightly reconciliation of the {outcome.ledger_rows:,}-row day: {seconds:.2f} s, median of "
            f"{RECONCILE_RUNS} runs "
            f"(target ≤ {RECONCILE_TARGET_SECONDS:.0f} s)",
            seconds <= RECONCILE_TARGET_SECONDS,
        )
    )
    passes.append(
        verdict(
            "reconciliation found every wallet ok and every entry once",
            outcome.counts[OK] == closes and not outcome.findings and outcome.ledger_rows == ledger,
        )
    )
    return 0 if all(passes) else 1


def build_lake(root: Path, rows: int, wallets: int) -> tuple[int, int]:
    """Write the day's landing files, the previous day's closes and the snapshot; returns (rows, wallets)."""
    rng = np.random.default_rng(20261122)
    start_ms = int(dt.datetime.combine(DAY, dt.time(), tzinfo=dt.UTC).timestamp() * 1000)
    wallet_ids = uuid_strings(rng, wallets)
    open_version = rng.integers(1, 50, wallets)
    open_balance = rng.integers(10**10, 10**12, wallets)

    # Transactions: a fifth of them deposits (one row), the rest transfers (two rows).
    transactions = rows * 5 // 9
    state = WalletState(open_version.copy(), open_balance.copy(), np.full(wallets, start_ms - 3_600_000))
    ledger = ledger_chunk(
        rng,
        wallet_ids,
        state,
        created=start_ms + np.sort(rng.integers(0, 86_400_000, transactions)),
        is_transfer=rng.random(transactions) >= 0.2,
        amount=rng.integers(1, 10**8, transactions),
        first_sequence=10**16,
    )
    count = ledger.num_rows
    day_dir = root / "ledger" / f"dt={DAY.isoformat()}"
    day_dir.mkdir(parents=True)
    for offset in range(0, count, BATCH_ROWS):
        batch = ledger.slice(offset, BATCH_ROWS)
        first = batch.column("stream_sequence")[0].as_py()
        for (_, slot), part in split_by_slot(batch, "created_at").items():
            (day_dir / landing_object_name(STREAM_ARN, first, slot)).write_bytes(parquet.encode(part))

    opening, snapshot = opening_and_snapshot(wallet_ids, open_version, open_balance, state, SNAPSHOT_AT)
    write(root, "daily_balances", DAY - dt.timedelta(days=1), "daily_balances.parquet", opening)
    write(root, "balance_snapshots", SNAPSHOT_AT.date(), "snapshot-bench-000-of-001.parquet", snapshot)
    return count, wallets


@dataclasses.dataclass
class WalletState:
    """Every wallet's version, balance and last update, carried from one chunk of ledger to the next."""

    version: np.ndarray
    balance: np.ndarray
    updated: np.ndarray
    moved: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.moved is None:
            self.moved = np.zeros(len(self.version), bool)


def ledger_chunk(
    rng: np.random.Generator,
    wallet_ids: pa.Array,
    state: WalletState,
    *,
    created: np.ndarray,
    is_transfer: np.ndarray,
    amount: np.ndarray,
    first_sequence: int,
) -> pa.Table:
    """Ledger rows of transactions in commit order (``created`` sorted), advancing ``state``.

    Deposits credit a random wallet; transfers debit it and credit another. Versions and balances
    continue each wallet's chain from ``state``, so a day can be made an hour at a time in little
    memory (``bench/nightly_scale.py``) or at once (this bench).
    """
    transactions, wallets = len(created), len(state.version)
    payer = rng.integers(0, wallets, transactions)
    payee = (payer + rng.integers(1, wallets, transactions)) % wallets
    legs = np.where(is_transfer, 2, 1)
    txn = np.repeat(np.arange(transactions), legs)
    first_leg = np.concatenate([[True], txn[1:] != txn[:-1]])
    transfer_row = is_transfer[txn]
    debit = transfer_row & first_leg
    wallet = np.where(first_leg, payer[txn], payee[txn])
    counterparty = np.where(first_leg, payee[txn], payer[txn])
    delta = np.where(debit, -amount[txn], amount[txn])
    count = len(txn)

    # Versions and balances per wallet, in commit order (rows are already in time order).
    order = np.argsort(wallet, kind="stable")
    sorted_wallet = wallet[order]
    starts = np.flatnonzero(np.concatenate([[True], sorted_wallet[1:] != sorted_wallet[:-1]]))
    sizes = np.diff(np.append(starts, count))
    rank = np.arange(count) - np.repeat(starts, sizes)
    sorted_delta = delta[order]
    running = np.cumsum(sorted_delta)
    running -= np.repeat(running[starts] - sorted_delta[starts], sizes)
    version = np.empty(count, np.int64)
    balance = np.empty(count, np.int64)
    version[order] = state.version[sorted_wallet] + rank + 1
    balance[order] = state.balance[sorted_wallet] + running
    if balance.min() < 0:
        raise SystemExit("synthetic ledger went negative; raise the opening balances")
    last = np.append(starts[1:] - 1, count - 1)
    touched = sorted_wallet[last]
    state.version[touched] = version[order[last]]
    state.balance[touched] = balance[order[last]]
    state.updated[touched] = created[txn[order[last]]]
    assert state.moved is not None
    state.moved[touched] = True

    txn_ids = uuid_strings(rng, transactions).take(pa.array(txn))
    direction = pa.array(np.where(debit, "debit", "credit"))
    ingested = created[txn] + rng.integers(200, 2_000, count)
    sequence = pc.binary_join_element_wise(
        "1000", pc.cast(pa.array(first_sequence + np.arange(count)), pa.string()), ""
    )
    return table_of(  # every column not named here null: a new nullable column changes nothing
        LEDGER,
        {
            "entry_id": pc.binary_join_element_wise(txn_ids, direction, ":"),
            "txn_id": txn_ids,
            "txn_type": pa.array(np.where(transfer_row, "transfer", "deposit")),
            "wallet_id": wallet_ids.take(pa.array(wallet)),
            "counterparty_wallet_id": pc.if_else(
                pa.array(transfer_row), wallet_ids.take(pa.array(counterparty)), pa.scalar(None, pa.string())
            ),
            "direction": direction,
            "amount": amount[txn],
            "delta": delta,
            "wallet_version": version,
            "balance_after": balance,
            "nonce": uuid_strings(rng, count, dashed=False),
            "created_at": pa.array(created[txn], MS),
            "stream_sequence": sequence,
            "ingested_at": pa.array(ingested, MS),
        },
        count,
    )


def opening_and_snapshot(
    wallet_ids: pa.Array,
    open_version: np.ndarray,
    open_balance: np.ndarray,
    state: WalletState,
    snapshot_at: dt.datetime,
) -> tuple[pa.Table, pa.Table]:
    """The day before's ``daily_balances`` (every wallet's opening) and a snapshot of the close."""
    wallets = len(wallet_ids)
    opening = pa.table(
        {
            "wallet_id": wallet_ids,
            "closing_balance": open_balance,
            "closing_version": open_version,
            "entries": np.ones(wallets, np.int64),
            "net_delta": np.zeros(wallets, np.int64),
        },
        schema=DAILY_BALANCES,
    )
    snapshot = pa.table(
        {
            "wallet_id": wallet_ids,
            "balance": state.balance,
            "version": state.version,
            "updated_at": pa.array(state.updated, MS),
            "snapshot_at": pa.array(np.full(wallets, int(snapshot_at.timestamp() * 1000)), MS),
        },
        schema=BALANCE_SNAPSHOTS,
    )
    return opening, snapshot


def timed_reconciliation(root: Path) -> tuple[float, float, DayOutcome]:
    """Reconcile the day on the local lake and write its outputs, as the nightly job does.

    Returns wall seconds, CPU seconds of this process (DuckDB's threads included) and the outcome.
    """
    snapshot = SnapshotRef(day=SNAPSHOT_AT.date(), snapshot_at=SNAPSHOT_AT, keys=())
    with DuckDBEngine(Settings(lake_format="parquet"), location=str(root)) as engine:
        started, cpu = time.perf_counter(), time.process_time()
        outcome = reconcile_day(engine, DAY, snapshot, now=NOW, max_lag_seconds=DEFAULT_MAX_LAG_SECONDS)
        write(root, "daily_balances", DAY, "daily_balances.parquet", outcome.daily_balances)
        findings = findings_table(outcome.findings, outcome.checks, NOW)
        write(root, "reconciliation", DAY, "reconciliation.parquet", findings)
        return time.perf_counter() - started, time.process_time() - cpu, outcome


def statement_columns() -> set[str]:
    """The ledger columns ``wallet_statement.sql`` reads (Athena fetches only their chunks)."""
    query = get_query("wallet_statement")
    values = query.bind({"wallet_id": "w", "start": "2026-11-22T00:00:00Z", "end": "2026-11-23T00:00:00Z"})
    tree = sqlglot.parse_one(render(query.sql, values), read="trino")
    return {column.name for column in tree.find_all(exp.Column)} & set(LEDGER.names)


def pick_wallets(day_dir: Path, count: int) -> list[str]:
    """Wallets to ask for: spread over the key space, the first one at random."""
    sample = pq.read_table(sorted(day_dir.glob("*.parquet"))[0], columns=["wallet_id"]).column("wallet_id")
    return sample.take(pa.array(np.linspace(0, len(sample) - 1, count).astype(np.int64))).to_pylist()


def statement_bytes(day_dir: Path, wallet_id: str, columns: set[str]) -> tuple[int, int]:
    """(bytes fetched, bytes of the day) for one wallet's statement over the day's partition."""
    fetched = total = 0
    for path in sorted(day_dir.glob("*.parquet")):
        total += path.stat().st_size
        meta = pq.read_metadata(path)
        fetched += meta.serialized_size + 8  # the footer, read to find the row groups
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
    return fetched, total


def report_statement(label: str, figures: list[tuple[int, int]]) -> None:
    fetched, total = figures[0]
    worst = max(figures, key=lambda f: f[0] / f[1])
    print(
        f"wallet_statement of one wallet, {label}: fetches {fetched:,} of {total:,} bytes "
        f"({100 * fetched / total:.3f} %); worst of {len(figures)} wallets {100 * worst[0] / worst[1]:.3f} %"
    )


def write(root: Path, table: str, day: dt.date, name: str, rows: pa.Table) -> None:
    folder = root / table / f"dt={day.isoformat()}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(parquet.encode(rows))


def uuid_strings(rng: np.random.Generator, count: int, *, dashed: bool = True) -> pa.Array:
    """Random UUID-looking ids, made without a Python loop."""
    raw = rng.integers(0, 256, size=(count, 16), dtype=np.uint8)
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    chars = np.empty((count, 32), dtype=np.uint8)
    chars[:, 0::2] = digits[raw >> 4]
    chars[:, 1::2] = digits[raw & 15]
    if dashed:
        out = np.full((count, 36), ord("-"), dtype=np.uint8)
        for (start, end), at in zip(
            ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32)), (0, 9, 14, 19, 24), strict=True
        ):
            out[:, at : at + end - start] = chars[:, start:end]
        chars = out
    width = chars.shape[1]
    return pa.array(np.ascontiguousarray(chars).view(f"S{width}").ravel()).cast(pa.string())


def verdict(text: str, ok: bool) -> bool:
    print(f"{'PASS' if ok else 'FAIL'}: {text}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
