"""Benchmark of the wallet write path: throughput, latency and the API server's own CPU per request.

Starts its own embedded stack (DynamoDB Local + moto) in a temporary folder and the API as a
child process (``walletlake serve``), funds ``--wallets`` wallets, then runs ``--clients``
concurrent HTTP clients for ``--seconds`` per phase:

- ``transfers``: random transfers between random wallets (the write path: one TransactWriteItems
  per request, no read; requests arriving while the server's transactions are in flight share the
  next one, see ``wallet/commit_queue.py``);
- ``reads``: ``GET .../balance`` (one consistent GetItem per request).

The CPU figure is read from the server process's own counters (user + system, psutil) before and
after each phase, divided by the requests answered, so DynamoDB Local's and the clients' CPU are
excluded. Target (issue 2): <= 1,500 us of API CPU per transfer. ``--profile`` samples the server
with py-spy during one more transfer phase and prints where its CPU goes.

CPU per request depends on how busy the server is: the same code costs more when requests are
sparse and every wake-up finds cold caches, and DynamoDB Local (Java, sharing the two cores)
commits only ~100 transactions/s here, each taking tens of milliseconds (DynamoDB answers in
single-digit milliseconds). Its throwaway database therefore lives on a RAM file system by default
(``--stack-parent``, /dev/shm), where DynamoDB Local commits more transfers per second and the
API's wake-ups come closer together; the closing note has both figures. ``--canned-latency-ms N``
replaces DynamoDB with a canned answerer (every call succeeds after N ms; nothing is stored)
to show the API's own cost without DynamoDB Local, as a function of DynamoDB's latency.

    .venv/bin/python bench/write_path.py --clients 8 --seconds 20 --wallets 1000 --profile
    .venv/bin/python bench/write_path.py --canned-latency-ms 5
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import gc
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import typing
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import psutil
import urllib3

from walletlake.api_server import ApiServer
from walletlake.local import LOCAL_CREDENTIALS, EmbeddedStack, free_port, patched_environ
from walletlake.workload import WalletApiClient

TARGET_US_PER_TRANSFER = 1_500
#: Seconds the idle server is watched before each phase, to tell its background CPU from requests'.
IDLE_SAMPLE_SECONDS = 3.0


@dataclasses.dataclass
class Phase:
    """Figures of one timed phase."""

    name: str
    requests: int
    seconds: float
    latencies_ms: list[float]
    statuses: dict[int, int]
    server_cpu_seconds: float
    idle_cpu_per_second: float
    metrics_delta: dict[str, int]

    @property
    def cpu_us_per_request(self) -> float:
        """All of the server's CPU during the phase, per request answered."""
        return self.server_cpu_seconds / self.requests * 1e6 if self.requests else float("nan")

    @property
    def request_cpu_us(self) -> float:
        """The same less what the idle server burns anyway over the phase (uvicorn's timers)."""
        busy = self.server_cpu_seconds - self.idle_cpu_per_second * self.seconds
        return busy / self.requests * 1e6 if self.requests else float("nan")

    def lines(self) -> list[str]:
        ordered = sorted(self.latencies_ms)
        p50 = statistics.median(ordered) if ordered else float("nan")
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else float("nan")
        return [
            f"[{self.name}] {self.requests} requests in {self.seconds:.1f} s = "
            f"{self.requests / self.seconds:,.0f} requests/s",
            f"[{self.name}] latency p50 {p50:.1f} ms, p99 {p99:.1f} ms; statuses {self.statuses}",
            f"[{self.name}] API server CPU {self.server_cpu_seconds:.2f} s = "
            f"{self.cpu_us_per_request:,.0f} us per request; less the idle server's "
            f"{self.idle_cpu_per_second * 1e3:.1f} ms/s: {self.request_cpu_us:,.0f} us per request",
            f"[{self.name}] server counters: {self.metrics_delta}",
        ]


def server_cpu(pid: int) -> float:
    """User + system CPU seconds of the server and its worker processes."""
    root = psutil.Process(pid)
    total = 0.0
    for process in [root, *root.children(recursive=True)]:
        times = process.cpu_times()
        total += times.user + times.system
    return total


def server_metrics(url: str, headers: dict[str, str] | None = None) -> dict[str, int]:
    """The counters of ``/metrics`` (one worker's, enough with --workers 1)."""
    body = orjson.loads(urllib3.request("GET", url + "/metrics", headers=headers).data)
    return {key: value for key, value in body.items() if isinstance(value, int) and key != "pid"}


def fund(url: str, wallets: int, clients: int, headers: dict[str, str] | None = None) -> list[str]:
    """Create ``wallets`` wallets and give each $1,000,000 (plenty for small random transfers)."""
    client = WalletApiClient(url, max_connections=clients, headers=headers)
    with ThreadPoolExecutor(clients) as pool:
        created = list(pool.map(lambda _: client.create_wallet(str(uuid.uuid4())), range(wallets)))
        ids = [answer.body["id"] for answer in created]
        funded = list(pool.map(lambda w: client.deposit(w, 1_000_000_000_000, "fund"), ids))
    if any(answer.status != 204 for answer in funded):
        raise SystemExit(f"funding failed: {collections.Counter(a.status for a in funded)}")
    client.close()
    return ids


Request = Callable[[urllib3.HTTPConnectionPool, random.Random, str], int]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """This process's garbage collector off while a phase is measured (collected just before).

    The clients' threads live in this process. A full collection here walked the stack's and the
    libraries' objects for 130-175 ms (measured with ``gc.callbacks`` in a probe running
    ``open_loop.py``'s phases), and every request due meanwhile waited for it: a stall of the load
    generator, counted as the server's latency in whichever phase it hit. A phase allocates
    little, and reference counting still frees everything without cycles.
    """
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def run_phase(
    name: str,
    url: str | Sequence[str],
    pid: int | Sequence[int],
    clients: int,
    seconds: float,
    request: Request,
    headers: dict[str, str] | None = None,
) -> Phase:
    """``clients`` threads call ``request(client, rng, counter)`` until the deadline.

    Several ``url``s (a fleet of servers) take the clients in turn, client ``i`` the ``i``-th
    modulo their number; CPU and ``/metrics`` are summed over every server. ``headers`` go with
    the ``/metrics`` reads (a server behind a trusted front answers only a vouched-for caller).
    """
    urls = [url] if isinstance(url, str) else list(url)
    pids = [pid] if isinstance(pid, int) else list(pid)

    def fleet_cpu() -> float:
        return sum(server_cpu(each) for each in pids)

    def fleet_metrics() -> dict[str, int]:
        summed: collections.Counter[str] = collections.Counter()
        for each in urls:
            summed.update(server_metrics(each, headers))
        return dict(summed)

    idle_before = fleet_cpu()
    time.sleep(IDLE_SAMPLE_SECONDS)
    idle_rate = (fleet_cpu() - idle_before) / IDLE_SAMPLE_SECONDS
    before_metrics = fleet_metrics()
    prefix = uuid.uuid4().hex[:8]  # nonces unique across phases
    latencies: list[list[float]] = [[] for _ in range(clients)]
    statuses: list[collections.Counter[int]] = [collections.Counter() for _ in range(clients)]
    start = threading.Barrier(clients + 1)
    stop_at = [0.0]

    def worker(index: int) -> None:
        mine = urllib3.util.parse_url(urls[index % len(urls)])
        pool = urllib3.HTTPConnectionPool(mine.host, mine.port, maxsize=1, retries=False)
        rng = random.Random(index)
        count = 0
        start.wait()
        while True:
            began = time.perf_counter()
            if began >= stop_at[0]:
                return
            count += 1
            status = request(pool, rng, f"{prefix}-{index}-{count}")
            latencies[index].append((time.perf_counter() - began) * 1000)
            statuses[index][status] += 1

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    with collector_paused():
        for thread in threads:
            thread.start()
        cpu_before = fleet_cpu()
        began = time.perf_counter()
        stop_at[0] = began + seconds
        start.wait()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - began
    cpu_after = fleet_cpu()
    after_metrics = fleet_metrics()
    merged: collections.Counter[int] = collections.Counter()
    for counter in statuses:
        merged.update(counter)
    delta = {k: after_metrics[k] - before_metrics.get(k, 0) for k in after_metrics if k != "uptime_seconds"}
    return Phase(
        name=name,
        requests=sum(merged.values()),
        seconds=elapsed,
        latencies_ms=[value for chunk in latencies for value in chunk],
        statuses=dict(sorted(merged.items())),
        server_cpu_seconds=cpu_after - cpu_before,
        idle_cpu_per_second=idle_rate,
        metrics_delta={k: v for k, v in delta.items() if v},
    )


#: Areas of the server's code, tried from the innermost frame of a sample outwards.
PROFILE_AREAS = [
    ("SigV4 signing (botocore.auth, AWSRequest)", ("botocore/auth.py", "botocore/awsrequest.py", "hmac.py")),
    ("DynamoDB client: JSON, HTTP, parsing (wallet/dynamodb.py)", ("wallet/dynamodb.py", "orjson")),
    ("domain: store, posting, validation, telemetry (wallet/)", ("wallet/",)),
    ("FastAPI / Starlette", ("fastapi/", "starlette/")),
    ("uvicorn + httptools (HTTP server)", ("uvicorn/", "httptools")),
    ("asyncio / uvloop", ("asyncio/", "uvloop")),
]


def profile_summary(raw: Path, top: int = 15) -> list[str]:
    """Self-time hot spots and areas from py-spy's collapsed stacks (GIL-holding samples only)."""
    self_time: collections.Counter[str] = collections.Counter()
    areas: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        self_time[frames[-1]] += count
        areas[_area(frames)] += count
    if not total:
        return ["(py-spy recorded no samples)"]
    lines = [f"profile: {total} samples of the API server holding the GIL (py-spy)"]
    lines.append("  by area (the innermost frame that belongs to one):")
    lines += [f"    {100 * n / total:5.1f}%  {label}" for label, n in areas.most_common()]
    lines.append("  top functions by self time:")
    lines += [f"    {100 * n / total:5.1f}%  {frame}" for frame, n in self_time.most_common(top)]
    return lines


def _area(frames: list[str]) -> str:
    for frame in reversed(frames):
        for label, needles in PROFILE_AREAS:
            if any(needle in frame for needle in needles):
                return label
    return "other (stdlib, interpreter)"


#: What the canned DynamoDB answers: every wallet exists, rich, at version 5; every write succeeds.
_CANNED_WALLET = {"balance": {"N": str(10**15)}, "version": {"N": "5"}, "updated_at": {"N": "1"}}


def serve_canned_dynamodb(port: int, latency_ms: float) -> None:
    """A DynamoDB stand-in on loopback answering after ``latency_ms`` (for ``--canned-latency-ms``)."""
    import asyncio

    import httptools

    def answer(target: str, body: dict[str, Any]) -> dict[str, Any]:
        if target == "GetItem":
            return {"Item": {**_CANNED_WALLET, "pk": body["Key"]["pk"]}}
        return {}

    class Canned(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = typing.cast(asyncio.Transport, transport)
            self.parser = httptools.HttpRequestParser(self)
            self.target = ""
            self.body: list[bytes] = []

        def data_received(self, data: bytes) -> None:
            self.parser.feed_data(data)

        def on_header(self, name: bytes, value: bytes) -> None:
            if name.lower() == b"x-amz-target":
                self.target = value.decode().rpartition(".")[2]

        def on_body(self, body: bytes) -> None:
            self.body.append(body)

        def on_message_complete(self) -> None:
            data = orjson.dumps(answer(self.target, orjson.loads(b"".join(self.body))))
            self.body = []
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: %d\r\n\r\n"
            )
            asyncio.get_running_loop().call_later(
                latency_ms / 1000, self.transport.write, head % len(data) + data
            )

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(Canned, "127.0.0.1", port)
        await server.serve_forever()

    asyncio.run(serve())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--clients",
        type=int,
        default=8,
        help=(
            "concurrent HTTP clients (default 8: DynamoDB Local saturates near 100 transactions/s "
            "on two cores; more clients only queue inside it)"
        ),
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="duration of each phase (default 20)")
    parser.add_argument("--wallets", type=int, default=1000, help="wallets to spread transfers over")
    parser.add_argument("--workers", type=int, default=1, help="API worker processes (default 1)")
    parser.add_argument(
        "--profile", action="store_true", help="then py-spy the server during one more transfer phase"
    )
    parser.add_argument(
        "--canned-latency-ms",
        type=float,
        help="instead of DynamoDB Local, a canned DynamoDB answering after this many ms (nothing stored)",
    )
    parser.add_argument(
        "--stack-parent",
        default=_default_stack_parent(),
        help=(
            "folder for the benchmark's throwaway DynamoDB Local database (default /dev/shm, a RAM "
            "file system, when there is one; else the system's temporary folder)"
        ),
    )
    parser.add_argument("--serve-canned-dynamodb", nargs=2, type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_canned_dynamodb:
        serve_canned_dynamodb(int(args.serve_canned_dynamodb[0]), args.serve_canned_dynamodb[1])
        return 0

    with tempfile.TemporaryDirectory(prefix="walletlake-bench-", dir=args.stack_parent) as tmp:
        if args.canned_latency_ms is not None:
            transfers, reads, profile = measure_canned(args, Path(tmp))
        else:
            print(f"starting the embedded stack (its throwaway database under {tmp}) ...", flush=True)
            with EmbeddedStack(Path(tmp) / "stack") as stack, patched_environ(stack.environment()):
                transfers, reads, profile = measure(args, stack.environment(), Path(tmp))

    print()
    for phase in (transfers, reads):
        print("\n".join(phase.lines()))
    if args.canned_latency_ms is not None:
        print(
            f"\n(canned DynamoDB answering after {args.canned_latency_ms:g} ms: no verdict, "
            "DynamoDB Local not used)"
        )
        if profile:
            print("\n" + "\n".join(profile))
        return 0
    verdict = "PASS" if transfers.cpu_us_per_request <= TARGET_US_PER_TRANSFER else "FAIL"
    print(
        f"\n{verdict}: {transfers.cpu_us_per_request:,.0f} us of API CPU per transfer, all server CPU "
        f"counted ({transfers.request_cpu_us:,.0f} us without the idle server's background); "
        f"target <= {TARGET_US_PER_TRANSFER:,} us"
    )
    if profile:
        print("\n" + "\n".join(profile))
    return 0


def _default_stack_parent() -> str | None:
    """/dev/shm when it is a writable folder: DynamoDB Local's SQLite then never waits for the disk."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


@contextlib.contextmanager
def canned_dynamodb(latency_ms: float) -> Iterator[int]:
    """:func:`serve_canned_dynamodb` in a process of its own, on a free loopback port (yielded)."""
    port = free_port()
    canned = subprocess.Popen(
        [sys.executable, __file__, "--serve-canned-dynamodb", str(port), str(latency_ms)]
    )
    try:
        deadline = time.monotonic() + 30
        while not _listening(port):
            if canned.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the canned DynamoDB did not start")
            time.sleep(0.05)
        yield port
    finally:
        canned.terminate()
        canned.wait(10)


def measure_canned(args: argparse.Namespace, tmp: Path) -> tuple[Phase, Phase, list[str]]:
    """The phases against the canned DynamoDB (see ``--canned-latency-ms``)."""
    with canned_dynamodb(args.canned_latency_ms) as port:
        environment = {
            "AWS_ENDPOINT_URL_DYNAMODB": f"http://127.0.0.1:{port}",
            "AWS_DEFAULT_REGION": "us-east-1",
            **LOCAL_CREDENTIALS,
        }
        return measure(args, environment, tmp)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def measure(
    args: argparse.Namespace, environment: dict[str, str], tmp: Path
) -> tuple[Phase, Phase, list[str]]:
    """Start the API, fund wallets, run the phases; the profile (if asked) comes last, unmeasured."""
    with ApiServer(env=environment, workers=args.workers) as api:
        print(f"API at {api.url} (pid {api.pid}, {args.workers} worker(s)); funding ...", flush=True)
        ids = fund(api.url, args.wallets, args.clients)
        print(
            f"{len(ids)} wallets funded; {args.clients} clients, {args.seconds:.0f} s per phase", flush=True
        )
        headers = {"Content-Type": "application/json"}

        def transfer(pool: urllib3.HTTPConnectionPool, rng: random.Random, nonce: str) -> int:
            payer, payee = rng.sample(ids, 2)
            body = orjson.dumps({"amount": str(rng.randint(1, 1_000_000)), "nonce": nonce})
            path = f"/api/v1/wallets/{payer}/transfer/{payee}/"
            return int(pool.urlopen("PUT", path, body=body, headers=headers).status)

        def read(pool: urllib3.HTTPConnectionPool, rng: random.Random, nonce: str) -> int:
            return int(pool.urlopen("GET", f"/api/v1/wallets/{rng.choice(ids)}/balance").status)

        transfers = run_phase("transfers", api.url, api.pid, args.clients, args.seconds, transfer)
        reads = run_phase("reads", api.url, api.pid, args.clients, args.seconds, read)
        profile: list[str] = []
        if args.profile:
            raw = tmp / "profile.txt"
            print("profiling one more transfer phase with py-spy ...", flush=True)
            profiler = subprocess.Popen(
                [
                    str(Path(sys.executable).with_name("py-spy")),
                    *("record", "--pid", str(api.pid), "--subprocesses", "--rate", "250"),
                    *("--nonblocking", "--gil", "--format", "raw"),
                    *("--duration", str(int(args.seconds)), "--output", str(raw)),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            run_phase("profiled transfers", api.url, api.pid, args.clients, args.seconds, transfer)
            profiler.wait(timeout=args.seconds + 60)
            profile = profile_summary(raw) if raw.exists() else ["(py-spy wrote no profile)"]
    return transfers, reads, profile


if __name__ == "__main__":
    sys.exit(main())
