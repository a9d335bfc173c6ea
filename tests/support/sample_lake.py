"""A small, fully known lake written straight into S3 through the lake's own schemas and adapter.

Notebook and query tests need a lake whose every figure they can compute by hand: a few wallets,
deposits and transfers over a few UTC days, a snapshot, closing balances and a reconciliation run,
all consistent with one another (versions 1..N, running balances, money conserved). It is built in
plain Python from a seed, then written as the pipeline would write it (one object per table and
day, lake encoding), so queries see exactly what they see in production.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
from collections import defaultdict
from typing import Any

import boto3
import pyarrow as pa

from contracts.lake_layout import partition_prefix
from contracts.lake_tables import STREAM_TABLES, TABLES
from contracts.settings import Settings
from lake.objects import put_table

USD = 1_000_000


@dataclasses.dataclass
class SampleLake:
    """What was written, for the tests' expected values."""

    days: list[dt.date]
    ledger: list[dict[str, Any]]
    wallets: list[dict[str, Any]]
    snapshots: list[dict[str, Any]]
    daily_balances: list[dict[str, Any]]
    reconciliation: list[dict[str, Any]]
    quarantine: list[dict[str, Any]]
    run_at: dt.datetime

    def ledger_on(self, day: dt.date) -> list[dict[str, Any]]:
        return [row for row in self.ledger if row["created_at"].date() == day]

    def balances(self) -> dict[str, int]:
        """Final balance of every wallet, from the ledger."""
        final: dict[str, int] = {}
        for row in sorted(self.ledger, key=lambda r: (r["wallet_id"], r["wallet_version"])):
            final[row["wallet_id"]] = row["balance_after"]
        return final


def make_sample(
    *, first_day: dt.date, days: int = 3, wallets: int = 8, transactions_per_day: int = 12, seed: int = 7
) -> SampleLake:
    """Deterministic ledger history; every wallet gets a first deposit on day one."""
    rng = random.Random(seed)
    start = dt.datetime.combine(first_day, dt.time(1, 0), tzinfo=dt.UTC)
    wallet_ids = [f"w{index:02d}-{rng.randrange(16**6):06x}" for index in range(wallets)]
    balance = dict.fromkeys(wallet_ids, 0)
    version = dict.fromkeys(wallet_ids, 0)
    ledger: list[dict[str, Any]] = []
    wallet_rows = [
        {"wallet_id": w, "user_id": f"user-{w}", "created_at": start + dt.timedelta(seconds=i)}
        for i, w in enumerate(wallet_ids)
    ]
    sequence = 1000
    counter = 0

    def entry(
        txn_id: str,
        txn_type: str,
        wallet: str,
        other: str | None,
        direction: str,
        amount: int,
        at: dt.datetime,
    ) -> dict[str, Any]:
        nonlocal sequence
        delta = amount if direction == "credit" else -amount
        balance[wallet] += delta
        version[wallet] += 1
        sequence += 1
        return {
            "entry_id": f"{txn_id}:{direction}",
            "txn_id": txn_id,
            "txn_type": txn_type,
            "wallet_id": wallet,
            "counterparty_wallet_id": other,
            "direction": direction,
            "amount": amount,
            "delta": delta,
            "wallet_version": version[wallet],
            "balance_after": balance[wallet],
            "nonce": f"n{counter}",
            "created_at": at,
            "stream_sequence": str(sequence),
            "ingested_at": at + dt.timedelta(seconds=1 + counter % 5),
        }

    for day_index in range(days):
        moment = start + dt.timedelta(days=day_index, minutes=5)
        plan: list[str] = ["deposit"] * wallets if day_index == 0 else []
        plan += ["deposit" if rng.random() < 0.3 else "transfer" for _ in range(transactions_per_day)]
        for slot, kind in enumerate(plan):
            counter += 1
            at = moment + dt.timedelta(minutes=7 * slot)
            txn_id = f"t{counter:04d}"
            if kind == "deposit":
                wallet = wallet_ids[slot % wallets] if day_index == 0 else rng.choice(wallet_ids)
                amount = rng.randrange(1, 500) * USD + rng.randrange(USD)
                ledger.append(entry(txn_id, "deposit", wallet, None, "credit", amount, at))
                continue
            payer, payee = rng.sample(wallet_ids, 2)
            if balance[payer] < 2:
                continue
            amount = rng.randrange(1, balance[payer] // 2 + 1)
            ledger.append(entry(txn_id, "transfer", payer, payee, "debit", amount, at))
            ledger.append(entry(txn_id, "transfer", payee, payer, "credit", amount, at))

    last_day = first_day + dt.timedelta(days=days - 1)
    snapshot_at = dt.datetime.combine(last_day + dt.timedelta(days=1), dt.time(0, 5), tzinfo=dt.UTC)
    last_change: dict[str, dt.datetime] = {row["wallet_id"]: row["created_at"] for row in wallet_rows}
    for row in ledger:
        last_change[row["wallet_id"]] = row["created_at"]
    snapshots = [
        {
            "wallet_id": w,
            "balance": balance[w],
            "version": version[w],
            "updated_at": last_change[w],
            "snapshot_at": snapshot_at,
        }
        for w in wallet_ids
    ]
    daily: list[dict[str, Any]] = []
    closing: dict[str, tuple[int, int]] = {}
    for day_index in range(days):
        day = first_day + dt.timedelta(days=day_index)
        per_wallet: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in ledger:
            if row["created_at"].date() == day:
                per_wallet[row["wallet_id"]].append(row)
        for w in wallet_ids:
            rows = sorted(per_wallet.get(w, []), key=lambda r: r["wallet_version"])
            if rows:
                closing[w] = (rows[-1]["balance_after"], rows[-1]["wallet_version"])
            if w not in closing:
                continue
            daily.append(
                {
                    "dt": day,
                    "wallet_id": w,
                    "closing_balance": closing[w][0],
                    "closing_version": closing[w][1],
                    "entries": len(rows),
                    "net_delta": sum(r["delta"] for r in rows),
                }
            )
    run_at = snapshot_at + dt.timedelta(minutes=10)
    reconciliation = [
        {
            "wallet_id": w,
            "status": "ok",
            "expected": version[w],
            "actual": version[w],
            "detail": "",
            "run_at": run_at,
        }
        for w in wallet_ids
    ]
    # One older, failed run of the last day: the notebooks must pick the latest run.
    reconciliation.append(
        {
            "wallet_id": wallet_ids[0],
            "status": "missing",
            "expected": version[wallet_ids[0]],
            "actual": version[wallet_ids[0]] - 1,
            "detail": "an earlier run, before the consumer caught up",
            "run_at": run_at - dt.timedelta(hours=1),
        }
    )
    quarantine = [
        {
            "reason": "REMOVE of a transaction item not made by TTL",
            "raw": json.dumps({"eventName": "REMOVE", "dynamodb": {"SequenceNumber": "999"}}),
            "stream_sequence": "999",
            "quarantined_at": start + dt.timedelta(hours=2),
        }
    ]
    return SampleLake(
        days=[first_day + dt.timedelta(days=offset) for offset in range(days)],
        ledger=ledger,
        wallets=wallet_rows,
        snapshots=snapshots,
        daily_balances=daily,
        reconciliation=reconciliation,
        quarantine=quarantine,
        run_at=run_at,
    )


def write_sample(settings: Settings, sample: SampleLake) -> list[dt.datetime]:
    """Write every table of ``sample`` as the settings' lake keeps it; returns the commit times.

    The plain-Parquet lake: one object per table and day. The Iceberg lake: the stream's tables
    landed and committed a day at a time, as the consumer and the committer would (one commit per
    day, so an as-of query between two of them sees the earlier days only), the nightly outputs as
    Parquet objects.
    """
    s3 = boto3.client("s3", region_name=settings.region)
    iceberg = settings.lake_format == "iceberg"
    commits = _commit_sample(settings, sample) if iceberg else []
    last_day = sample.days[-1]
    tables: dict[str, list[tuple[dt.date, dict[str, Any]]]] = {
        "ledger": [(row["created_at"].date(), row) for row in sample.ledger],
        "wallets": [(row["created_at"].date(), row) for row in sample.wallets],
        "balance_snapshots": [(row["snapshot_at"].date(), row) for row in sample.snapshots],
        "daily_balances": [(row["dt"], row) for row in sample.daily_balances],
        "reconciliation": [(last_day, row) for row in sample.reconciliation],
        "quarantine": [(row["quarantined_at"].date(), row) for row in sample.quarantine],
    }
    for table, dated in tables.items():
        if iceberg and table in STREAM_TABLES:
            continue
        schema = TABLES[table]
        by_day: dict[dt.date, list[dict[str, Any]]] = defaultdict(list)
        for day, row in dated:
            by_day[day].append({name: row.get(name) for name in schema.names})
        for day, rows in by_day.items():
            key = f"{partition_prefix(settings.lake_prefix, table, day)}sample-{day.isoformat()}.parquet"
            put_table(s3, settings.bucket, key, pa.Table.from_pylist(rows, schema=schema))
    return commits


def _commit_sample(settings: Settings, sample: SampleLake) -> list[dt.datetime]:
    from lake.committer import commit_landed
    from lake.iceberg_catalog import open_catalog
    from lake.iceberg_landing import land_batch

    s3 = boto3.client("s3", region_name=settings.region)
    catalog = open_catalog(settings)
    stream = "arn:aws:dynamodb:us-east-1:123456789012:table/sample/stream/2026-01-01T00:00:00.000"
    commits = []
    for index, day in enumerate(sample.days):
        rows = {
            table: pa.Table.from_pylist(
                [
                    {name: row.get(name) for name in TABLES[table].names}
                    for row in source
                    if row[column].date() == day
                ],
                schema=TABLES[table],
            )
            for table, source, column in (
                ("ledger", sample.ledger, "created_at"),
                ("wallets", sample.wallets, "created_at"),
                ("quarantine", sample.quarantine, "quarantined_at"),
            )
        }
        records = [{"dynamodb": {"SequenceNumber": str(1000 * (index + 1) + offset)}} for offset in range(2)]
        land_batch(
            s3, settings, records, lambda _pending, rows=rows: rows, event_source_arn=stream, shard="sample"
        )
        commit_landed(settings, s3, catalog)
        commits.append(dt.datetime.now(dt.UTC))
    return commits
