"""What one TransactWriteItems costs DynamoDB Local, by shape: why ``many wallets`` is near parity.

``bench/hot_wallet.py`` compares the API with seed 000's write pattern on random wallets. The
reference writes three items per transfer (two ``ADD balance`` updates and the nonce's item);
walletlake writes four (the two wallet updates carrying the ledger entry, the hot transaction item,
and the idempotency record that keeps the nonce for issue 27's two-day window), and wins back
round trips by group commit. This script isolates DynamoDB Local from the API: it sends each shape
straight to DynamoDB Local from ``--concurrency`` coroutines for ``--seconds``, ``--rounds`` times
(alternating), and prints transactions, requests and items committed per second (medians):

- ``reference``: seed 000's transfer, 3 items (``hot_wallet.reference_items``);
- ``walletlake, no record``: the store's transfer without the idempotency record, 3 items;
- ``walletlake``: the store's transfer, 4 items (:func:`wallet.write_requests.transaction_request`);
- ``walletlake, group of N``: N transfers on distinct wallets in one transaction, 4N items.

Read the ratios within one run: DynamoDB Local's cost grows with the items a transaction writes,
so the fourth item costs about what it weighs, and only groups win it back.

    .venv/bin/python bench/transaction_shapes.py
    .venv/bin/python bench/transaction_shapes.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hot_wallet import reference_items
from write_path import _default_stack_parent

from contracts.settings import Settings
from wallet.commands import CreateWallet, Deposit, Transfer, request_hash
from wallet.dynamodb import DynamoDBClient, DynamoDBError
from wallet.posting import Posting, post
from wallet.store import WalletStore
from wallet.write_requests import transaction_request
from walletlake.local import EmbeddedStack, patched_environ
from walletlake.local._provision import provision

Shape = Callable[[], tuple[dict[str, Any], int]]


def shapes(settings: Settings, ids: list[str], group: int) -> dict[str, Shape]:
    """Each shape: a payload maker returning (payload, requests it carries)."""
    clock = [time.time_ns() // 1_000_000]

    def postings(count: int) -> list[Posting]:
        chosen = random.sample(ids, 2 * count)
        made = []
        for payer, payee in zip(chosen[::2], chosen[1::2], strict=True):
            clock[0] += 1  # strictly later on every wallet: no write refused by the clock rule
            command = Transfer(payer, payee, 1, uuid.uuid4().hex)
            made.append(
                post(
                    command,
                    now_ms=clock[0],
                    hot_ttl_seconds=settings.hot_ttl_seconds,
                    txn_id=str(uuid.uuid4()),
                    request_hash=request_hash(command),
                    idempotency_window_seconds=settings.idempotency_window_seconds,
                )
            )
        return made

    def reference() -> tuple[dict[str, Any], int]:
        payer, payee = random.sample(ids, 2)
        return {"TransactItems": reference_items(settings.table, payer, payee, 1, uuid.uuid4().hex)}, 1

    def ours(count: int, record: bool) -> tuple[dict[str, Any], int]:
        table = settings.idempotency_table if record else None
        return transaction_request(settings.table, *postings(count), idempotency_table=table), count

    return {
        "reference (3 items)": reference,
        "walletlake, no record (3 items)": lambda: ours(1, record=False),
        "walletlake (4 items)": lambda: ours(1, record=True),
        f"walletlake, group of {group} ({4 * group} items)": lambda: ours(group, record=True),
    }


async def rate(client: DynamoDBClient, make: Shape, concurrency: int, seconds: float) -> tuple[float, float]:
    """Transactions and requests committed per second (a cancelled one counts for nothing)."""
    committed = requests = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal committed, requests
        while time.perf_counter() < deadline:
            payload, carried = make()
            try:
                await client.call("TransactWriteItems", payload)
            except DynamoDBError:  # two coroutines on one wallet, stamped out of order
                continue
            committed += 1
            requests += carried

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return committed / seconds, requests / seconds


async def measure(args: argparse.Namespace) -> dict[str, list[tuple[float, float]]]:
    settings = Settings.from_env()
    provision(settings)
    store = WalletStore(settings)
    ids = [(await store.create_wallet(CreateWallet(str(uuid.uuid4()))))[0] for _ in range(args.wallets)]
    for wallet_id in ids:
        await store.execute(Deposit(wallet_id, 10**12, "fund"))
    client = DynamoDBClient(settings.region)
    made = shapes(settings, ids, args.group)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in made}
    for round_ in range(args.rounds):
        names = list(made)
        names = names[round_ % len(names) :] + names[: round_ % len(names)]  # each round starts elsewhere
        for name in names:
            results[name].append(await rate(client, made[name], args.concurrency, args.seconds))
            print(f"round {round_ + 1}: {name}: {results[name][-1][1]:,.0f} requests/s", flush=True)
    client.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per shape and round (default 8)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating the shapes (default 3)")
    parser.add_argument("--concurrency", type=int, default=8, help="transactions in flight (default 8)")
    parser.add_argument("--group", type=int, default=4, help="transfers in the group shape (default 4)")
    parser.add_argument("--wallets", type=int, default=200, help="wallets (default 200)")
    parser.add_argument("--quick", action="store_true", help="seconds, to check the bench runs")
    parser.add_argument("--stack-parent", default=_default_stack_parent())
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.rounds, args.wallets = 1.0, 1, 40
    with tempfile.TemporaryDirectory(prefix="walletlake-shapes-", dir=args.stack_parent) as tmp:
        print(f"starting the embedded stack under {tmp} ...", flush=True)
        with EmbeddedStack(Path(tmp) / "stack") as stack, patched_environ(stack.environment()):
            results = asyncio.run(measure(args))
    reference = statistics.median(requests for _, requests in results["reference (3 items)"])
    print(f"\n{'shape':<36} {'txn/s':>7} {'requests/s':>10} {'/reference':>10}")
    for name, runs in results.items():
        txns = statistics.median(txn for txn, _ in runs)
        requests = statistics.median(requests for _, requests in runs)
        print(f"{name:<36} {txns:>7,.0f} {requests:>10,.0f} {requests / reference:>9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
