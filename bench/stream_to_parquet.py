"""Benchmark of the stream processor's hot path: Lambda event → ledger rows → zstd Parquet bytes.

Builds realistic, seeded Lambda events of what the write path's transactions put on the stream
(70% transfers, 30% deposits, over 10,000 wallets whose versions and balances follow the
contract): per transaction its wallet MODIFYs (one per leg, OLD and NEW images, each a ledger
entry), its transaction INSERT, and a TTL REMOVE of an older one, about 3.7 records a transaction;
in events of 1,000 and 10,000 records. For each event
size it times, in the same run and on the same events:

- **walletlake**: what the Lambda handler does between receiving the event and the S3 PUT —
  :func:`stream_processor.decoder.decode_records` (typed attributes straight into columns, the
  checks against the OLD image in Arrow), then :func:`lake.writer.split_by_slot` and
  :func:`lake.parquet.encode` for every landing object;
- **naive**: boto3's ``TypeDeserializer`` per record → Python row dicts → ``pandas.DataFrame`` →
  ``to_parquet`` (zstd), the way a first version usually looks.

Each figure is the best of ``--repeat`` passes (the machine is shared; the best pass is the one
least disturbed); ``records/s`` is wall clock (what the verdicts use), ``CPU rec/s`` counts only
this process's CPU time, which shows what the code costs when other work shares the cores.
Targets (issue 3): >= 200,000 records/s for 10,000-record events, and >= 6x the naive way. The S3
PUT is not timed: it is I/O, the same for both ways.

    .venv/bin/python bench/stream_to_parquet.py [--repeat 5] [--seed 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import random
import time
import uuid
from collections.abc import Callable
from typing import Any

import pandas as pd
from boto3.dynamodb.types import TypeDeserializer

from contracts.lake_tables import STREAM_TABLES
from lake import parquet
from lake.writer import split_by_slot
from stream_processor.decoder import decode_records

TARGET_RECORDS_PER_SECOND = 200_000
TARGET_SPEEDUP = 6.0
STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/wallets/stream/2026-11-22T04:00:00.000"
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


@dataclasses.dataclass
class _Wallet:
    wallet_id: str
    user_id: str
    balance: int = 0
    version: int = 0
    updated_at: int = 0


class StreamGenerator:
    """A seeded stream of what the write path's transactions produce."""

    def __init__(self, seed: int, wallets: int = 10_000) -> None:
        self.rng = random.Random(seed)
        self.clock = 1_795_320_000_000
        self.sequence = 10**20
        self.wallets = [
            _Wallet(
                str(uuid.UUID(int=self.rng.getrandbits(128), version=4)),
                str(uuid.UUID(int=self.rng.getrandbits(128), version=4)),
            )
            for _ in range(wallets)
        ]
        self.hot: list[dict[str, Any]] = []  # transaction items, for TTL REMOVEs

    def _uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _record(self, event: str, image: dict[str, Any], **extra: Any) -> dict[str, Any]:
        self.sequence += 1
        change = {
            "ApproximateCreationDateTime": self.clock // 1000,
            "Keys": {"pk": image["pk"]},
            "SequenceNumber": str(self.sequence),
            "SizeBytes": 420,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
            ("OldImage" if event == "REMOVE" else "NewImage"): image,
        }
        return {
            "eventID": self._uuid().replace("-", ""),
            "eventName": event,
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1",
            "dynamodb": change,
            "eventSourceARN": STREAM_ARN,
            **extra,
        }

    def _wallet_image(self, wallet: _Wallet) -> dict[str, Any]:
        return {
            "pk": {"S": f"{wallet.wallet_id}#wallet"},
            "entity": {"S": "wallet"},
            "wallet_id": {"S": wallet.wallet_id},
            "user_id": {"S": wallet.user_id},
            "balance": {"N": str(wallet.balance)},
            "version": {"N": str(wallet.version)},
            "created_at": {"N": "1795300000000"},
            "updated_at": {"N": str(wallet.updated_at)},
        }

    def _move(
        self, wallet: _Wallet, delta: int, entry: dict[str, Any], counterparty: _Wallet | None
    ) -> dict[str, Any]:
        """The wallet MODIFY of one leg: OLD image, then NEW with the ADD applied and the entry."""
        old = self._wallet_image(wallet)
        wallet.balance += delta
        wallet.version += 1
        wallet.updated_at = self.clock
        new = {
            **self._wallet_image(wallet),
            **entry,
            "entry_direction": {"S": "debit" if delta < 0 else "credit"},
        }
        if counterparty is not None:
            new["entry_counterparty_wallet_id"] = {"S": counterparty.wallet_id}
        record = self._record("MODIFY", new)
        record["dynamodb"]["OldImage"] = old
        return record

    def _transaction(self) -> list[dict[str, Any]]:
        """The records of one committed transaction: its wallet MODIFYs, then its INSERT."""
        self.clock += self.rng.randint(1, 3)
        amount = self.rng.randint(1, 50_000_000)
        payer = self.rng.choice(self.wallets)
        transfer = self.rng.random() < 0.7 and payer.balance >= amount
        nonce = self._uuid()
        txn_id = self._uuid()
        image: dict[str, Any] = {
            "pk": {"S": f"{payer.wallet_id}_{nonce}#transaction"},
            "entity": {"S": "transaction"},
            "txn_id": {"S": txn_id},
            "type": {"S": "transfer" if transfer else "deposit"},
            "wallet_id": {"S": payer.wallet_id},
            "amount": {"N": str(amount)},
            "nonce": {"S": nonce},
            "request_hash": {"S": f"{self.rng.getrandbits(256):064x}"},
            "created_at": {"N": str(self.clock)},
            "expires_at": {"N": str(self.clock // 1000 + 28_800)},
        }
        entry = {
            "entry_txn_id": {"S": txn_id},
            "entry_type": image["type"],
            "entry_amount": {"N": str(amount)},
            "entry_nonce": {"S": nonce},
        }
        if transfer:
            payee = self.rng.choice(self.wallets)
            while payee is payer:
                payee = self.rng.choice(self.wallets)
            image["to_wallet_id"] = {"S": payee.wallet_id}
            legs = [self._move(payer, -amount, entry, payee), self._move(payee, amount, entry, payer)]
        else:
            legs = [self._move(payer, amount, entry, None)]
        self.hot.append(image)
        return [*legs, self._record("INSERT", image)]

    def _ttl_remove(self) -> dict[str, Any]:
        image = self.hot.pop(0) if self.hot else self._transaction()[-1]["dynamodb"]["NewImage"]
        return self._record("REMOVE", image, userIdentity=dict(TTL_IDENTITY))

    def event(self, size: int) -> dict[str, Any]:
        """``size`` records in the write path's proportions: per transaction its wallet MODIFYs and
        its INSERT, and (once the table is warm) one TTL REMOVE, about 3.7 records a transaction."""
        records: list[dict[str, Any]] = []
        while len(records) < size:
            records.extend(self._transaction())
            if self.rng.random() < 0.95:
                records.append(self._ttl_remove())
        return {"Records": records[:size]}


def walletlake_path(records: list[dict[str, Any]]) -> tuple[int, int]:
    """The handler's path up to the PUT: decode, split by day and slot, encode; (ledger rows, bytes)."""
    decoded = decode_records(records, ingested_at_ms=int(time.time() * 1000))
    size = 0
    for name, table in decoded.tables().items():
        for part in split_by_slot(table, STREAM_TABLES[name].day_column).values():
            size += len(parquet.encode(part, text_statistics=False))  # as the landing writer
    return decoded.ledger_rows, size


_DESERIALIZER = TypeDeserializer()


def naive_path(records: list[dict[str, Any]]) -> tuple[int, int]:
    """The usual first version: a generic deserializer per record, row dicts, pandas, to_parquet."""
    ingested = pd.Timestamp.now(tz="UTC")
    ledger: list[dict[str, Any]] = []
    wallets: list[dict[str, Any]] = []
    for record in records:
        change = record["dynamodb"]
        name = record["eventName"]
        image_json = change.get("OldImage" if name == "REMOVE" else "NewImage", {})
        item = {key: _DESERIALIZER.deserialize(value) for key, value in image_json.items()}
        if name == "INSERT" and item.get("entity") == "wallet":
            created = pd.Timestamp(int(item["created_at"]), unit="ms", tz="UTC")
            wallets.append(
                {"wallet_id": item["wallet_id"], "user_id": item["user_id"], "created_at": created}
            )
            continue
        if name != "MODIFY" or item.get("entity") != "wallet" or "entry_txn_id" not in item:
            continue
        old = {key: _DESERIALIZER.deserialize(value) for key, value in change["OldImage"].items()}
        amount = int(item["entry_amount"])
        delta = -amount if item["entry_direction"] == "debit" else amount
        if (
            int(item["version"]) != int(old["version"]) + 1
            or int(item["balance"]) != int(old["balance"]) + delta
        ):
            continue
        ledger.append(
            {
                "entry_id": f"{item['entry_txn_id']}:{item['entry_direction']}",
                "txn_id": item["entry_txn_id"],
                "txn_type": item["entry_type"],
                "wallet_id": item["wallet_id"],
                "counterparty_wallet_id": item.get("entry_counterparty_wallet_id"),
                "direction": item["entry_direction"],
                "amount": amount,
                "delta": delta,
                "wallet_version": int(item["version"]),
                "balance_after": int(item["balance"]),
                "nonce": item["entry_nonce"],
                "created_at": pd.Timestamp(int(item["updated_at"]), unit="ms", tz="UTC"),
                "stream_sequence": change["SequenceNumber"],
                "ingested_at": ingested,
            }
        )
    size = 0
    for rows in (ledger, wallets):
        if rows:
            sink = io.BytesIO()
            pd.DataFrame(rows).to_parquet(sink, compression="zstd", index=False)
            size += sink.tell()
    return len(ledger), size


@dataclasses.dataclass
class Figure:
    records: int
    seconds: float
    cpu_seconds: float
    ledger_rows: int
    parquet_bytes: int

    @property
    def cpu_records_per_second(self) -> float:
        """Records per second of this process's own CPU time: what the code costs on a busy machine."""
        return self.records / self.cpu_seconds

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds

    @property
    def microseconds_per_record(self) -> float:
        return self.seconds * 1e6 / self.records


def measure(
    path: Callable[[list[dict[str, Any]]], tuple[int, int]], events: list[dict[str, Any]], repeat: int
) -> Figure:
    """Best of ``repeat`` passes over every event (wall clock and CPU time, each its best)."""
    best = best_cpu = float("inf")
    rows = size = 0
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        rows = size = 0
        for event in events:
            ledger_rows, written = path(event["Records"])
            rows += ledger_rows
            size += written
        best = min(best, time.perf_counter() - started)
        best_cpu = min(best_cpu, time.process_time() - started_cpu)
    return Figure(sum(len(e["Records"]) for e in events), best, best_cpu, rows, size)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repeat", type=int, default=5, help="passes per figure; the best is kept (default 5)"
    )
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--records", type=int, default=50_000, help="records per event size (default 50,000)")
    args = parser.parse_args()

    generator = StreamGenerator(args.seed)
    load = os.getloadavg()[0]
    print(f"load average before: {load:.2f} (2 shared cores; each figure is the best of its passes)")
    print(f"{'event size':>10} | {'path':<10} | {'records/s':>10} | {'us/record':>9} |", end="")
    print(f" {'CPU rec/s':>10} | {'ledger rows':>11} | {'B/ledger row':>12}")
    verdicts = []
    for size in (1_000, 10_000):
        events = [generator.event(size) for _ in range(max(1, args.records // size))]
        ours = measure(walletlake_path, events, args.repeat)
        naive = measure(naive_path, events, max(1, args.repeat // 2))
        for label, figure in (("walletlake", ours), ("naive", naive)):
            per_row = figure.parquet_bytes / max(1, figure.ledger_rows)
            print(
                f"{size:>10,} | {label:<10} | {figure.records_per_second:>10,.0f} |"
                f" {figure.microseconds_per_record:>9.2f} | {figure.cpu_records_per_second:>10,.0f} |"
                f" {figure.ledger_rows:>11,} | {per_row:>12.1f}"
            )
        ratio = ours.records_per_second / naive.records_per_second
        print(f"{size:>10,} | ratio      | {ratio:>9.1f}x faster than the naive way")
        if size == 10_000:
            speed = f"{ours.records_per_second:,.0f} records/s for 10,000-record events"
            verdicts.append(
                (ours.records_per_second >= TARGET_RECORDS_PER_SECOND, f"{speed} (target >= 200,000)")
            )
            verdicts.append(
                (ratio >= TARGET_SPEEDUP, f"{ratio:.1f}x the naive way (target >= {TARGET_SPEEDUP:.0f}x)")
            )
    for passed, text in verdicts:
        print(f"{'PASS' if passed else 'FAIL'}: {text}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
