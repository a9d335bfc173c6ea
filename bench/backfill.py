"""Backfill bench: one incremental export window of a fraction of the seed's load, replayed into the
Iceberg lake on the embedded stack, as ``walletlake replay --export`` does it.

What a backfill after an outage past the stream's 24 hours costs (docs/operations.md, section 4).
A full export holds the whole 8-hour hot window, which at 1 % of the seed's load is 5.76 million
transactions: numbered in memory, more than this machine holds. So the runbook takes incremental
exports of windows sized to memory, and this bench measures one window:

1. **Build** an ``INCREMENTAL_EXPORT`` (``NEW_AND_OLD_IMAGES``) of ``--window-minutes`` at
   ``--fraction`` of seed 000's 20,000 transactions/s (70 % transfers) over ``fraction`` x 10
   million wallets: every transaction item written in the window, and each touched wallet's item
   as it stands at the window's end (versions continuing from an earlier history), gzip JSON
   lines in the lake bucket, as the service writes them.
2. **Replay into a lake that lacks it** (:func:`stream_processor.replay.replay_export`, then one
   committer cycle): wall and CPU seconds, transactions per second, peak resident memory of this
   process (the stack's servers apart), rows appended.
3. **Replay it again under another export id** (an overlapping export): every row is already in
   the lake, so this is the commit's identity check alone reading the table's rows of each
   chunk's time span (:mod:`lake.identity_guard`); rows held back, seconds.

Then the 1 % day: the hot window's 8 hours as windows of this size, run one after another (or on
as many hosts at once: each window is independent, and the commit keeps each entry once).

Run: ``.venv/bin/python bench/backfill.py --fraction 0.01 --window-minutes 10`` (``--window-minutes
1`` for a quick look).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import boto3
from nightly_scale import MemorySampler

from contracts.settings import Settings
from contracts.wallets_table import transaction_key, wallet_key
from lake.committer import commit_now
from stream_processor.replay import replay_export
from walletlake.local import EmbeddedStack, patched_environ

SEED_TPS = 20_000
SEED_WALLETS = 10_000_000
TRANSFER_SHARE = 0.7
HOT_WINDOW_HOURS = 8
CALLER = "arn:aws:sts::123456789012:assumed-role/bench/ops"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=0.01, help="share of the seed's load (0.01 = 1 %%)")
    parser.add_argument("--window-minutes", type=float, default=10.0, help="the incremental export's window")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="walletlake-backfill-") as scratch:
        memory = MemorySampler()
        memory.start()
        try:
            with EmbeddedStack(Path(scratch) / "stack") as stack, patched_environ(stack.environment()):
                memory.servers = {
                    stack.server(name).process.pid for name in ("DynamoDB Local", "SeaweedFS", "moto server")
                }
                settings = Settings.from_env().replace(lake_format="iceberg", query_engine="duckdb")
                return run(settings, args.fraction, args.window_minutes, memory)
        finally:
            memory.stop()


def run(settings: Settings, fraction: float, window_minutes: float, memory: MemorySampler) -> int:
    s3 = boto3.client("s3", region_name=settings.region)
    tps = SEED_TPS * fraction
    count = round(tps * window_minutes * 60)
    wallets = max(2, round(SEED_WALLETS * fraction))
    print(
        f"load: {fraction:.3%} of the seed's = {tps:,.0f} tx/s over {wallets:,} wallets; one incremental "
        f"export of {window_minutes:g} minutes = {count:,} transactions",
        flush=True,
    )
    started = time.perf_counter()
    end = dt.datetime.now(dt.UTC).replace(microsecond=0)
    start = end - dt.timedelta(minutes=window_minutes)
    lines, ledger_rows = _window(count, wallets, start, end)
    first = _put_export(s3, settings.bucket, "01800000000000-bench001", lines, start, end)
    again = _put_export(s3, settings.bucket, "01800000000000-bench002", lines, start, end)
    del lines
    print(f"build: {time.perf_counter() - started:.1f} s ({ledger_rows:,} ledger rows)", flush=True)

    figures = {}
    for name, uri in (("into a lake that lacks it", first), ("again, all already held", again)):
        memory.begin()
        wall, cpu = time.perf_counter(), _cpu_seconds()
        report = replay_export(settings, uri, s3=s3)
        commit = commit_now(settings)
        wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
        memory.end()
        ledger = next(table for table in commit.tables if table.table == "ledger")
        own = (memory.step_tree - memory.step_servers) / 2**30
        figures[name] = wall
        print(
            f"replay {name}: {wall:.1f} s wall, {cpu:.1f} CPU-seconds, {count / wall:,.0f} tx/s; "
            f"ledger rows appended {ledger.rows:,}, already held {ledger.held_rows:,}; "
            f"problems {len(report.problems)}; peak memory {own:.2f} GiB (servers "
            f"{memory.step_servers / 2**30:.2f})",
            flush=True,
        )
    windows = HOT_WINDOW_HOURS * 60 / window_minutes
    day = figures["into a lake that lacks it"] * windows
    print(
        f"the {fraction:.0%} load's 8-hour hot window = {windows:g} such windows: {day / 60:,.1f} min "
        "one after another (each window independent: as many hosts as windows divide it)",
        flush=True,
    )
    return 0


def _window(count: int, wallets: int, start: dt.datetime, end: dt.datetime) -> tuple[list[str], int]:
    """The export's JSON lines: the window's transactions and the touched wallets at its end."""
    rng = random.Random(7)
    step_ms = max(1, int((end - start).total_seconds() * 1000) // max(count, 1))
    base_ms = int(start.timestamp() * 1000)
    state: dict[int, list[int]] = {}  # wallet -> [version, balance, created_at, updated_at]
    lines: list[str] = []
    newest: dict[int, tuple[str, str, str, int, str, str | None]] = {}
    rows = 0
    for index in range(count):
        at = base_ms + index * step_ms
        payer = rng.randrange(wallets)
        transfer = rng.random() < TRANSFER_SHARE
        amount = rng.randint(1, 5_000_000)
        payee = (payer + 1 + rng.randrange(wallets - 1)) % wallets if transfer else None
        txn_id = f"{index:08d}-0000-4000-8000-{rng.getrandbits(48):012x}"
        nonce = f"n{index}"
        item: dict[str, Any] = {
            "pk": {"S": transaction_key(_wallet(payer), nonce, CALLER)},
            "entity": {"S": "transaction"},
            "txn_id": {"S": txn_id},
            "type": {"S": "transfer" if transfer else "deposit"},
            "wallet_id": {"S": _wallet(payer)},
            "amount": {"N": str(amount)},
            "nonce": {"S": nonce},
            "request_hash": {"S": "bench"},
            "created_at": {"N": str(at)},
            "expires_at": {"N": str(at // 1000 + 28_800)},
            "initiated_by": {"S": CALLER},
        }
        legs = [(payer, -amount if transfer else amount, "debit" if transfer else "credit", payee)]
        if transfer and payee is not None:
            item["to_wallet_id"] = {"S": _wallet(payee)}
            legs.append((payee, amount, "credit", payer))
        for wallet, delta, direction, other in legs:
            # a wallet made a day ago, 50 entries in, rich enough for any debit of the window
            held = state.setdefault(wallet, [50, 10**12, base_ms - 86_400_000, 0])
            held[0] += 1
            held[1] += delta
            held[3] = at
            newest[wallet] = (
                txn_id,
                item["type"]["S"],
                direction,
                amount,
                nonce,
                _wallet(other) if other else None,
            )
            rows += 1
        lines.append(json.dumps({"Keys": {"pk": item["pk"]}, "NewImage": item}))
    for wallet, (version, balance, created, updated) in state.items():
        txn_id, kind, direction, amount, nonce, other = newest[wallet]
        image: dict[str, Any] = {
            "pk": {"S": wallet_key(_wallet(wallet))},
            "entity": {"S": "wallet"},
            "wallet_id": {"S": _wallet(wallet)},
            "user_id": {"S": f"user-{wallet}"},
            "balance": {"N": str(balance)},
            "version": {"N": str(version)},
            "created_at": {"N": str(created)},
            "updated_at": {"N": str(updated)},
            "entry_txn_id": {"S": txn_id},
            "entry_type": {"S": kind},
            "entry_direction": {"S": direction},
            "entry_amount": {"N": str(amount)},
            "entry_nonce": {"S": nonce},
        }
        if other is not None:
            image["entry_counterparty_wallet_id"] = {"S": other}
        lines.append(json.dumps({"Keys": {"pk": image["pk"]}, "NewImage": image}))
    return lines, rows


def _wallet(number: int) -> str:
    return f"00000000-0000-4000-8000-{number:012d}"


def _put_export(
    s3: Any, bucket: str, export_id: str, lines: list[str], start: dt.datetime, end: dt.datetime
) -> str:
    folder = f"backfill/AWSDynamoDB/{export_id}/"
    summary = {
        "exportType": "INCREMENTAL_EXPORT",
        "exportFromTime": start.isoformat(),
        "exportToTime": end.isoformat(),
        "itemCount": len(lines),
    }
    s3.put_object(Bucket=bucket, Key=f"{folder}manifest-summary.json", Body=json.dumps(summary))
    per_file = 100_000
    for index in range(0, len(lines), per_file):
        body = gzip.compress(("\n".join(lines[index : index + per_file]) + "\n").encode(), compresslevel=1)
        s3.put_object(Bucket=bucket, Key=f"{folder}data/part-{index // per_file:05d}.json.gz", Body=body)
    return f"s3://{bucket}/{folder}"


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    sys.exit(main())
