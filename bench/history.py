"""History bench: a wallet's history pages from the hot store and from the lake, through the served API.

Issue 44's load: a lake of ``--days`` days x ``--entries-per-day`` entries over ``--wallets``
wallets on the embedded stack (the Iceberg ledger on SeaweedFS's catalog; each day laid out as the
compaction lays it out: sorted by wallet, row groups of 32,768 rows), and wallets whose entries
are all still hot (written through the API, not yet in the lake). Then, through ``walletlake
serve`` (one worker, the deployed process), with the lake read as the tasks read it:

1. **first page from the lake**: ``GET …/transactions?limit=50`` of wallets whose history is all
   in the lake (each wallet once, so its first page pays the day-window walk): p50 and p99;
2. **first page from the hot store**: the same for the hot wallets;
3. **a 90-day walk**: ``from`` 90 days ago, every page (limit 200) to the end: p50 and p99 of the
   whole walk;
4. **what a lake page reads**: data files opened per first page (the S3 GETs a call costs on AWS).

Run: ``.venv/bin/python bench/history.py`` (the issue's load; about 3 GB of Parquet built first), or
``--days 5 --entries-per-day 100000 --wallets 10000`` for a quick look.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import httpx
import numpy as np
import pyarrow as pa

from contracts.lake_tables import LEDGER
from contracts.settings import Settings
from contracts.wallets_table import Attr, wallet_key
from lake.iceberg_catalog import load_table, open_catalog
from lake.iceberg_tables import to_iceberg_rows
from lake.ledger_history import LakeLedger
from walletlake.api_server import ApiServer
from walletlake.local import EmbeddedStack, patched_environ
from walletlake.local._provision import provision

ROW_GROUP_ROWS = 32_768
DAY_MS = 86_400_000
#: Deposits each hot wallet gets through the API (none reaches the lake: no consumer runs).
HOT_ENTRIES = 60


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--entries-per-day", type=int, default=1_000_000)
    parser.add_argument("--wallets", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=200, help="lake wallets asked for their first page")
    parser.add_argument("--walks", type=int, default=30, help="lake wallets walked over 90 days")
    parser.add_argument("--hot-wallets", type=int, default=100)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="walletlake-history-") as scratch,
        EmbeddedStack(Path(scratch) / "stack") as stack,
        patched_environ(stack.environment()),
    ):
        settings = Settings.from_env().replace(lake_format="iceberg", query_engine="duckdb")
        provision(settings)
        return run(settings, args)


def wallet_id(index: int) -> str:
    """The bench's wallet ``index`` as a UUID (spread over the id space, as random ids are)."""
    return str(uuid.UUID(int=(index * 0x9E3779B97F4A7C15F39CC0605CEDC835) % 2**128))


def run(settings: Settings, args: argparse.Namespace) -> int:
    started = time.perf_counter()
    today = dt.datetime.now(dt.UTC).date()
    first_day = today - dt.timedelta(days=args.days - 1)
    counts, balances, last_ms = build_lake(settings, args, first_day)
    created_ms = _ms(first_day) - 1
    print(
        f"lake: {args.days} days x {args.entries_per_day:,} entries over {args.wallets:,} wallets "
        f"built in {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    rng = np.random.default_rng(7)
    sampled = [int(i) for i in rng.choice(args.wallets, size=args.samples + args.walks, replace=False)]
    dynamodb = boto3.client("dynamodb", region_name=settings.region)
    for index in sampled:
        dynamodb.put_item(
            TableName=settings.table,
            Item={
                Attr.PK: {"S": wallet_key(wallet_id(index))},
                Attr.ENTITY: {"S": "wallet"},
                Attr.WALLET_ID: {"S": wallet_id(index)},
                Attr.USER_ID: {"S": str(uuid.uuid4())},
                Attr.BALANCE: {"N": str(int(balances[index]))},
                Attr.VERSION: {"N": str(int(counts[index]))},
                Attr.CREATED_AT: {"N": str(created_ms)},
                Attr.UPDATED_AT: {"N": str(int(last_ms[index]))},
            },
        )
    env = {**settings.to_env(), "WALLETLAKE_LAKE_FORMAT": "iceberg"}
    with ApiServer(env=env) as api, httpx.Client(base_url=api.url, timeout=60) as http:
        hot = [_hot_wallet(http, n) for n in range(args.hot_wallets)]
        lake_pages = [_first_page(http, wallet_id(i), counts[i]) for i in sampled[: args.samples]]
        hot_pages = [_first_page(http, wallet, HOT_ENTRIES) for wallet in hot]
        since = (dt.datetime.now(dt.UTC) - dt.timedelta(days=90)).isoformat()
        walks = [_walk(http, wallet_id(i), counts[i], since) for i in sampled[args.samples :]]
    _report("first page of 50 from the lake", lake_pages)
    _report("first page of 50 from the hot store", hot_pages)
    _report(f"90-day walk (limit 200, {statistics.mean(counts[sampled[args.samples :]]):.0f} entries)", walks)
    files = files_per_first_page(settings, [wallet_id(i) for i in sampled[:20]], today, first_day)
    median = statistics.median(files)
    print(f"data files opened per first page from the lake: median {median:.0f}, max {max(files)}")
    return 0


def build_lake(
    settings: Settings, args: argparse.Namespace, first_day: dt.date
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The ledger's days, each one append sorted by wallet; every wallet's versions 1..n, balances chained."""
    table = load_table(settings, "ledger", open_catalog(settings))
    with table.transaction() as change:
        change.set_properties({"write.parquet.row-group-limit": str(ROW_GROUP_ROWS)})
    table = load_table(settings, "ledger", open_catalog(settings))
    rng = np.random.default_rng(44)
    counts = np.zeros(args.wallets, dtype=np.int64)
    balances = np.zeros(args.wallets, dtype=np.int64)
    last_ms = np.zeros(args.wallets, dtype=np.int64)
    ids = np.array([wallet_id(i) for i in range(args.wallets)], dtype=object)
    order_of_ids = np.argsort(ids)
    rank_of = np.empty(args.wallets, dtype=np.int64)
    rank_of[order_of_ids] = np.arange(args.wallets)
    for offset in range(args.days):
        day = first_day + dt.timedelta(days=offset)
        n = args.entries_per_day
        wallets = rng.integers(0, args.wallets, n)
        times = rng.integers(_ms(day), _ms(day) + DAY_MS - 10_000, n)
        order = np.lexsort((times, rank_of[wallets]))
        wallets, times = wallets[order], times[order]
        starts = np.r_[0, np.flatnonzero(np.diff(wallets)) + 1]
        sizes = np.diff(np.r_[starts, n])
        rank = np.arange(n) - np.repeat(starts, sizes)
        times = times + rank  # strictly increasing within a wallet
        amounts = rng.integers(1, 1_000_000, n)
        running = np.cumsum(amounts)
        before_group = np.repeat(running[starts] - amounts[starts], sizes)
        balance_after = balances[wallets] + running - before_group
        versions = counts[wallets] + rank + 1
        ends = starts + sizes - 1
        counts[wallets[ends]] = versions[ends]
        balances[wallets[ends]] = balance_after[ends]
        last_ms[wallets[ends]] = times[ends]
        txn = [str(uuid.UUID(int=(offset << 64) | i)) for i in range(n)]
        rows = pa.table(
            {
                "entry_id": [f"{t}:credit" for t in txn],
                "txn_id": txn,
                "txn_type": ["deposit"] * n,
                "wallet_id": ids[wallets],
                "counterparty_wallet_id": pa.nulls(n, pa.string()),
                "direction": ["credit"] * n,
                "amount": amounts,
                "delta": amounts,
                "wallet_version": versions,
                "balance_after": balance_after,
                "nonce": [f"n-{offset}-{i}" for i in range(n)],
                "created_at": pa.array(times, pa.timestamp("ms", tz="UTC")),
                "stream_sequence": [f"{offset:06d}{i:015d}" for i in range(n)],
                "ingested_at": pa.array(times, pa.timestamp("ms", tz="UTC")),
                "initiated_by": ["bench"] * n,
            },
            schema=pa.schema([LEDGER.field(name) for name in LEDGER.names if name != "extra_attributes"]),
        )
        table.append(to_iceberg_rows("ledger", rows, day.isoformat(), table.schema()))
        print(f"  day {day}: {n:,} entries", flush=True)
    return counts, balances, last_ms


def _hot_wallet(http: httpx.Client, n: int) -> str:
    wallet = http.post("/api/v1/wallets/", json={"user_id": str(uuid.uuid4())}).json()["id"]
    for k in range(HOT_ENTRIES):
        http.put(f"/api/v1/wallets/{wallet}/deposit/", json={"amount": "1000", "nonce": f"h-{n}-{k}"})
    return str(wallet)


def _first_page(http: httpx.Client, wallet: str, count: int) -> float:
    started = time.perf_counter()
    answer = http.get(f"/api/v1/wallets/{wallet}/transactions", params={"limit": "50"})
    elapsed = time.perf_counter() - started
    entries = answer.json()["entries"]
    assert answer.status_code == 200, answer.text[:300]
    assert len(entries) == min(50, count)
    assert entries[0]["version"] == count
    return elapsed


def _walk(http: httpx.Client, wallet: str, count: int, since: str) -> float:
    started = time.perf_counter()
    seen = 0
    params = {"limit": "200", "from": since}
    while True:
        page = http.get(f"/api/v1/wallets/{wallet}/transactions", params=params).json()
        seen += len(page["entries"])
        if page["next_cursor"] is None:
            break
        params = {"limit": "200", "from": since, "cursor": page["next_cursor"]}
    elapsed = time.perf_counter() - started
    assert seen == count, (wallet, seen, count)
    return elapsed


def files_per_first_page(
    settings: Settings, wallets: list[str], today: dt.date, first_day: dt.date
) -> list[int]:
    """Data files a first page's lake reads plan (each is a footer and its row groups' ranges on S3)."""
    lake = LakeLedger(settings)
    table = lake.table()
    opened: list[int] = []
    original = type(table).scan

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        scan = original(self, *args, **kwargs)
        opened[-1] += sum(1 for _ in scan.plan_files())
        return scan

    type(table).scan = counting  # type: ignore[method-assign]
    try:
        for wallet in wallets:
            opened.append(0)
            lake.newest(wallet, limit=50, below=None, newest_day=today, oldest_day=first_day, table=table)
    finally:
        type(table).scan = original  # type: ignore[method-assign]
    return opened


def _report(what: str, seconds: list[float]) -> None:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    print(
        f"{what}: p50 {statistics.median(ordered) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms "
        f"({len(ordered)} calls)",
        flush=True,
    )


def _ms(day: dt.date) -> int:
    return int(dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC).timestamp() * 1000)


if __name__ == "__main__":
    raise SystemExit(main())
