"""DynamoDB Local's CPU with the JVM's default tiered JIT against C1 only, on the same workload.

A test session's stacks serve minutes of light load, where C2's compiling may cost more CPU than
its faster code gives back; a stack kept up, or measured for throughput, runs long enough for C2
to pay. This script starts a fresh DynamoDB Local (in memory, as the session's stacks run it, with
the argv :func:`walletlake.local._tools.dynamodb_local_argv` builds) once per JIT per round,
alternating, and drives it with the same boto3 workload: ``--transactions`` two-item transactions
(a conditional put and a counter update, as a deposit's shape) and a consistent read every fifth.
It prints, per JIT, the medians over rounds of the time to readiness, the whole run's wall time
and the java process's CPU seconds, and the ratios C1 / default.

    .venv/bin/python bench/dynamodb_jit.py --transactions 1500 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import boto3
import psutil

from walletlake.local import LOCAL_CREDENTIALS
from walletlake.local._servers import free_port, wait_until
from walletlake.local._tools import (
    DYNAMODB_LOCAL_LAUNCHER,
    compiled_launcher,
    dynamodb_local_argv,
    dynamodb_local_dir,
    find_java,
)

_TABLE = "bench-jit"
JITS = {"default": False, "c1": True}


def run_once(quick_jit: bool, transactions: int, scratch: Path) -> tuple[float, float, float]:
    """(seconds to readiness, seconds in all, java CPU-seconds) of one fresh server."""
    java = find_java()
    jar_dir = dynamodb_local_dir()
    port = free_port()
    argv = dynamodb_local_argv(
        java,
        jar_dir,
        port,
        scratch / "db",
        "127.0.0.1",
        DYNAMODB_LOCAL_LAUNCHER,
        compiled_launcher(java, jar_dir, DYNAMODB_LOCAL_LAUNCHER),
        in_memory=True,
        quick_jit=quick_jit,
    )
    started = time.monotonic()
    server = subprocess.Popen(argv, cwd=jar_dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = boto3.client(
            "dynamodb",
            endpoint_url=f"http://127.0.0.1:{port}",
            region_name="us-east-1",
            aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )
        wait_until(
            lambda: "TableNames" in client.list_tables(), timeout=60, what="DynamoDB Local", process=server
        )
        ready = time.monotonic() - started
        client.create_table(
            TableName=_TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        for n in range(transactions):
            client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": _TABLE,
                            "Item": {"pk": {"S": f"entry-{n}"}, "amount": {"N": str(n)}},
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                    {
                        "Update": {
                            "TableName": _TABLE,
                            "Key": {"pk": {"S": "wallet"}},
                            "UpdateExpression": "ADD balance :one",
                            "ExpressionAttributeValues": {":one": {"N": "1"}},
                        }
                    },
                ]
            )
            if n % 5 == 0:
                client.get_item(TableName=_TABLE, Key={"pk": {"S": "wallet"}}, ConsistentRead=True)
        total = time.monotonic() - started
        times = psutil.Process(server.pid).cpu_times()
        return ready, total, times.user + times.system
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in JITS}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(1, args.rounds + 1):
            for name, quick in JITS.items():
                results[name].append(run_once(quick, args.transactions, Path(scratch)))
                ready, total, cpu = results[name][-1]
                print(f"round {round_} {name}: ready {ready:.2f} s, run {total:.2f} s, java {cpu:.2f} CPU-s")
    medians = {
        name: [statistics.median(run[i] for run in runs) for i in range(3)] for name, runs in results.items()
    }
    for name, (ready, total, cpu) in medians.items():
        print(f"{name:8s} median: ready {ready:.2f} s, run {total:.2f} s, java {cpu:.2f} CPU-s")
    base, quick = medians["default"], medians["c1"]
    ratios = [q / b for q, b in zip(quick, base, strict=True)]
    print(f"c1 / default: ready {ratios[0]:.2f}, run {ratios[1]:.2f}, java CPU {ratios[2]:.2f}")


if __name__ == "__main__":
    main()
