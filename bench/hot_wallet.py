"""Benchmark of busy wallets: walletlake against the seed's write pattern, in one run, alternating.

Starts its own embedded stack (DynamoDB Local + moto) on a RAM folder when there is one, the API
(``walletlake serve``) and, as the reference, seed 000's write pattern in a few lines
(:func:`reference_app`: one conditional TransactWriteItems per transfer, no read, no versions:
``ADD balance`` under ``balance >= :amount`` on the payer, ``attribute_exists`` on both wallets,
``attribute_not_exists`` on the nonce item), served by the same uvicorn stack and the same lean
DynamoDB client so only the write pattern differs. For each load, the two servers run one after
the other, ``--rounds`` times (alternating, each round starting with the next system, so machine
drift and warm-up hit all alike):

- ``many``: transfers between random wallets among ``--wallets``;
- ``hot pair``: transfers between one pair of wallets, half the clients in each direction.

With ``--processes N`` (N > 1) a third system, ``fleet`` (N ``walletlake serve`` processes on the
same table, the clients spread over them, as the ECS service's tasks share it), runs beside the
single process and the reference, and its answers are checked: only 204 and 429.

Each phase prints throughput, p50/p99 latency, answers by status and the API server's CPU per
request (the pieces of ``bench/write_path.py``: psutil counters of the server process only).
Targets (issue 13): hot pair throughput >= the reference's, no 503, p99 <= 1.5x the reference's;
many wallets no slower than the reference; API CPU per transfer not above today's.

    .venv/bin/python bench/hot_wallet.py --clients 8 --seconds 15 --rounds 2
    .venv/bin/python bench/hot_wallet.py --processes 4 --clients 16   # the fleet beside one process
    git worktree add ../walletlake-before COMMIT  # then, before and after in one run:
    .venv/bin/python bench/hot_wallet.py --baseline ../walletlake-before

It ends with one PASS/FAIL line per target (ratios of medians within the run) and exits 1 if any
fails.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import urllib3

sys.path.insert(0, str(Path(__file__).resolve().parent))

from write_path import Phase, _default_stack_parent, _listening, fund, run_phase

from contracts.settings import Settings
from walletlake.api_server import ApiFleet, ApiServer
from walletlake.local import EmbeddedStack, free_port, patched_environ


def reference_items(table: str, payer: str, payee: str, amount: int, nonce: str) -> list[dict[str, Any]]:
    """Seed 000's transfer: three items (two ``ADD balance`` updates, the nonce's item), no versions."""
    from contracts.wallets_table import transaction_key, wallet_key

    exists = "attribute_exists(pk)"
    return [
        {
            "Update": {
                "TableName": table,
                "Key": {"pk": {"S": wallet_key(payer)}},
                "UpdateExpression": "ADD balance :minus",
                "ConditionExpression": f"{exists} AND balance >= :amount",
                "ExpressionAttributeValues": {":minus": {"N": f"-{amount}"}, ":amount": {"N": str(amount)}},
            }
        },
        {
            "Update": {
                "TableName": table,
                "Key": {"pk": {"S": wallet_key(payee)}},
                "UpdateExpression": "ADD balance :amount",
                "ConditionExpression": exists,
                "ExpressionAttributeValues": {":amount": {"N": str(amount)}},
            }
        },
        {
            "Put": {
                "TableName": table,
                "Item": {
                    "pk": {"S": transaction_key(payer, nonce + "-ref", None)},
                    "amount": {"N": str(amount)},
                },
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        },
    ]


def reference_app(table: str, region: str) -> Any:
    """Seed 000's write pattern as a bare ASGI app: one TransactWriteItems, no read, no versions."""
    from wallet.dynamodb import DynamoDBClient, DynamoDBError

    client: DynamoDBClient | None = None

    async def respond(send: Any, status: int, body: bytes = b"") -> None:
        headers = [(b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def app(scope: Any, receive: Any, send: Any) -> None:
        nonlocal client
        if scope["type"] != "http":
            return
        parts = scope["path"].strip("/").split("/")
        if scope["path"] in ("/metrics", "/healthz"):
            await respond(send, 200, b"{}")
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        payer, payee = parts[3], parts[5]
        request = orjson.loads(body)
        client = client or DynamoDBClient(region)
        items = reference_items(table, payer, payee, int(request["amount"]), request["nonce"])
        try:
            await client.call("TransactWriteItems", {"TransactItems": items})
        except DynamoDBError as error:
            codes = [r.get("Code") for r in error.body.get("CancellationReasons", [])]
            busy = "TransactionConflict" in codes or error.throttled
            await respond(send, 429 if busy else 409, b"{}")
            return
        await respond(send, 204)

    return app


def serve_reference(port: int, table: str, region: str) -> None:
    """Serve :func:`reference_app` with uvicorn as ``walletlake serve`` does (one worker)."""
    import uvicorn

    uvicorn.run(reference_app(table, region), host="127.0.0.1", port=port, log_level="warning")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=8, help="concurrent HTTP clients (default 8)")
    parser.add_argument("--seconds", type=float, default=15.0, help="duration of each phase (default 15)")
    parser.add_argument("--wallets", type=int, default=200, help="wallets of the 'many' load (default 200)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (default 2)")
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="also run a fleet of this many `walletlake serve` processes on one table (default 1: none)",
    )
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="a checkout of an earlier walletlake (git worktree add DIR COMMIT), served as a third "
        "system, 'before', from the same virtualenv: the before/after figures of one run",
    )
    parser.add_argument("--stack-parent", default=_default_stack_parent())
    parser.add_argument("--serve-reference", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_reference:
        serve_reference(int(args.serve_reference[0]), args.serve_reference[1], args.serve_reference[2])
        return 0
    with tempfile.TemporaryDirectory(prefix="walletlake-hot-", dir=args.stack_parent) as tmp:
        print(f"starting the embedded stack under {tmp} ...", flush=True)
        with EmbeddedStack(Path(tmp) / "stack") as stack, patched_environ(stack.environment()):
            phases = measure(args, stack.environment())
    print()
    for runs in phases.values():
        for phase in runs:
            print("\n".join(phase.lines()))
    print("\nmedians over rounds:")
    print(
        f"{'load':<10} {'system':<11} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'CPU us/req':>10}  statuses"
    )
    for (load, system), runs in phases.items():
        rate = statistics.median(p.requests / p.seconds for p in runs)
        p50 = statistics.median(_percentile(p, 0.5) for p in runs)
        p99 = statistics.median(_percentile(p, 0.99) for p in runs)
        cpu = statistics.median(p.cpu_us_per_request for p in runs)
        statuses: dict[int, int] = {}
        for p in runs:
            for status, count in p.statuses.items():
                statuses[status] = statuses.get(status, 0) + count
        print(f"{load:<10} {system:<11} {rate:>7,.0f} {p50:>7.1f} {p99:>7.1f} {cpu:>10,.0f}  {statuses}")
    print()
    verdicts = targets(phases)
    for line in verdicts:
        print(line)
    return 0 if all(line.startswith("PASS") for line in verdicts) else 1


def _median(runs: list[Phase], figure: Any) -> float:
    return float(statistics.median(figure(p) for p in runs))


def targets(phases: dict[tuple[str, str], list[Phase]]) -> list[str]:
    """Issue 13's targets as PASS/FAIL lines: ratios of medians within this one run."""

    def rate(load: str, system: str) -> float:
        return _median(phases[(load, system)], lambda p: p.requests / p.seconds)

    def p99(load: str, system: str) -> float:
        return _median(phases[(load, system)], lambda p: _percentile(p, 0.99))

    def cpu(load: str, system: str) -> float:
        return _median(phases[(load, system)], lambda p: p.cpu_us_per_request)

    lines = []

    def check(ok: bool, text: str) -> None:
        lines.append(f"{'PASS' if ok else 'FAIL'}  {text}")

    hot_ratio = rate("hot pair", "walletlake") / rate("hot pair", "reference")
    check(hot_ratio >= 1.0, f"hot pair throughput {hot_ratio:.2f}x the reference's (target >= 1)")
    unavailable = sum(p.statuses.get(503, 0) for p in phases[("hot pair", "walletlake")])
    check(unavailable == 0, f"hot pair 503 answers: {unavailable} (target 0)")
    p99_ratio = p99("hot pair", "walletlake") / p99("hot pair", "reference")
    check(p99_ratio <= 1.5, f"hot pair p99 {p99_ratio:.2f}x the reference's (target <= 1.5)")
    many_ratio = rate("many", "walletlake") / rate("many", "reference")
    check(many_ratio >= 1.0, f"many wallets throughput {many_ratio:.2f}x the reference's (target >= 1)")
    if ("hot pair", "fleet") in phases:
        answers: dict[int, int] = {}
        for phase in phases[("hot pair", "fleet")] + phases[("many", "fleet")]:
            for status, count in phase.statuses.items():
                answers[status] = answers.get(status, 0) + count
        check(set(answers) <= {204, 429}, f"fleet answers {answers} (target: only 204 and 429)")
        ratio = rate("hot pair", "fleet") / rate("hot pair", "walletlake")
        lines.append(f"INFO  fleet hot pair {ratio:.2f}x one process's")
    if ("many", "before") in phases:
        cpu_ratio = cpu("many", "walletlake") / cpu("many", "before")
        check(
            cpu_ratio <= 1.0,
            f"API CPU per transfer {cpu('many', 'walletlake'):,.0f} us, {cpu_ratio:.2f}x before's "
            f"{cpu('many', 'before'):,.0f} us (target <= 1)",
        )
    return lines


def _percentile(phase: Phase, q: float) -> float:
    ordered = sorted(phase.latencies_ms)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


def measure(args: argparse.Namespace, environment: dict[str, str]) -> dict[tuple[str, str], list[Phase]]:
    """Fund wallets through walletlake, then alternate the two servers on each load."""
    settings = Settings.from_env(environment)
    table, region = settings.table, settings.region
    port = free_port()
    reference = subprocess.Popen(
        [sys.executable, __file__, "--serve-reference", str(port), table, region], env=None
    )
    phases: dict[tuple[str, str], list[Phase]] = {}
    before = (
        # `python -m` imports from its working directory first: the checkout's own code is served
        ApiServer(env=environment, cwd=Path(args.baseline).resolve())
        if args.baseline
        else contextlib.nullcontext()
    )
    fleet = ApiFleet(args.processes, env=environment) if args.processes > 1 else contextlib.nullcontext()
    try:
        with ApiServer(env=environment) as api, before as baseline, fleet as servers:
            deadline = time.monotonic() + 30
            while not _listening(port):
                if reference.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the reference server did not start")
                time.sleep(0.05)
            ref_url = f"http://127.0.0.1:{port}"
            ids = fund(api.url, args.wallets, args.clients)
            pair = ids[:2]
            headers = {"Content-Type": "application/json"}
            loads = {
                "many": lambda rng, index: rng.sample(ids, 2),
                "hot pair": lambda rng, index: pair if int(index.split("-")[1]) % 2 == 0 else pair[::-1],
            }
            systems: dict[str, tuple[Any, Any]] = {
                "walletlake": (api.url, api.pid),
                "reference": (ref_url, reference.pid),
            }
            if servers is not None:
                systems["fleet"] = (servers.urls, [server.pid for server in servers.servers])
            if baseline is not None:
                systems["before"] = (baseline.url, baseline.pid)
            order = list(systems.items())
            for round_index in range(args.rounds):
                # each round starts with the next system, so none always runs first (DynamoDB
                # Local's JIT warming up, or the machine's drift) and phases are not biased by order
                shift = round_index % len(order)
                for load, choose in loads.items():
                    for system, (url, pid) in order[shift:] + order[:shift]:

                        def transfer(
                            pool: urllib3.HTTPConnectionPool, rng: Any, nonce: str, c: Any = choose
                        ) -> int:
                            payer, payee = c(rng, nonce)
                            body = orjson.dumps({"amount": str(rng.randint(1, 1_000)), "nonce": nonce})
                            path = f"/api/v1/wallets/{payer}/transfer/{payee}/"
                            return int(pool.urlopen("PUT", path, body=body, headers=headers).status)

                        print(f"{load} / {system} ...", flush=True)
                        phase = run_phase(f"{load} {system}", url, pid, args.clients, args.seconds, transfer)
                        phases.setdefault((load, system), []).append(phase)
    finally:
        reference.terminate()
        reference.wait(10)
    return phases


if __name__ == "__main__":
    sys.exit(main())
