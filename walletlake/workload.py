"""A seeded, concurrent workload driven through the real wallet HTTP API.

Used by ``walletlake demo``, the bank test and the benchmark. Each request is an HTTP call to a
running server (threads sharing one pooled urllib3 client); the report records what the server
*answered*, from which it derives what the table and the lake must contain: every 204 deposit or
transfer is one committed transaction (a ledger entry, or two for a transfer), every refusal none.

Clients behave as seed 000 recommends: a 5xx, a 429 or a lost answer is retried with the same
nonce (idempotency makes that safe; a retry of a request that had in fact committed answers 204
without moving money again), a bounded number of times.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any, Final

import orjson
import urllib3

from contracts.money import MAX_AMOUNT

#: Statuses a client retries with the same nonce (seed 000: "retry while response code is 5xx").
RETRYABLE: Final = frozenset({429, 500, 502, 503, 504})
_MAX_DEPOSIT: Final = 1_000_000_000  # $1,000 in micro-USD


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """One API answer: status and decoded JSON body (None for 204 or a lost answer)."""

    status: int
    body: Any
    attempts: int


class WalletApiClient:
    """Thread-safe client of the wallet API over one keep-alive connection pool.

    ``status`` 0 in an :class:`Answer` means no answer arrived (connection refused, timeout).
    """

    def __init__(
        self,
        base_url: str,
        *,
        max_connections: int = 16,
        timeout: float = 30.0,
        retries: int = 6,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        #: Sent with every request (urllib3 replaces, not merges, a pool's headers with a request's).
        self.headers = dict(headers or {})
        self._pool = urllib3.PoolManager(
            maxsize=max_connections,
            block=False,
            retries=False,
            timeout=urllib3.Timeout(connect=5.0, read=timeout),
        )

    def create_wallet(self, user_id: str) -> Answer:
        """``POST /api/v1/wallets/``."""
        return self.send("POST", "/api/v1/wallets/", {"user_id": user_id})

    def deposit(self, wallet_id: str, amount: int | str, nonce: str) -> Answer:
        """``PUT /api/v1/wallets/{id}/deposit/``."""
        return self.send(
            "PUT", f"/api/v1/wallets/{wallet_id}/deposit/", {"amount": str(amount), "nonce": nonce}
        )

    def transfer(self, wallet_id: str, target_id: str, amount: int | str, nonce: str) -> Answer:
        """``PUT /api/v1/wallets/{id}/transfer/{target}/``."""
        return self.send(
            "PUT",
            f"/api/v1/wallets/{wallet_id}/transfer/{target_id}/",
            {"amount": str(amount), "nonce": nonce},
        )

    def balance(self, wallet_id: str) -> Answer:
        """``GET /api/v1/wallets/{id}/balance``."""
        return self.send("GET", f"/api/v1/wallets/{wallet_id}/balance", None)

    def send(self, method: str, path: str, body: dict[str, Any] | None) -> Answer:
        """One request, retried with the same body on 429/5xx/no answer (jittered backoff)."""
        payload = orjson.dumps(body) if body is not None else None
        headers = {**self.headers, **({"Content-Type": "application/json"} if payload is not None else {})}
        attempt = 0
        while True:
            attempt += 1
            status, decoded, retry_after = self._once(method, path, payload, headers)
            if (status not in RETRYABLE and status != 0) or attempt > self.retries:
                return Answer(status, decoded, attempt)
            backoff = random.uniform(0, min(1.0, 0.02 * 2**attempt))
            time.sleep(max(backoff, min(retry_after, 2.0)))

    def _once(
        self, method: str, path: str, payload: bytes | None, headers: dict[str, str] | None
    ) -> tuple[int, Any, float]:
        try:
            response = self._pool.request(method, self.base_url + path, body=payload, headers=headers)
        except urllib3.exceptions.HTTPError:
            return 0, None, 0.0
        data = response.data
        decoded = orjson.loads(data) if data else None
        retry_after = float(response.headers.get("Retry-After") or 0)
        return response.status, decoded, retry_after

    def close(self) -> None:
        """Close the pooled connections."""
        self._pool.clear()


@dataclasses.dataclass
class WorkloadReport:
    """What the server answered, and what the table and lake must therefore hold.

    ``expected_versions`` / ``expected_balances`` are per wallet: one version per committed deposit
    or transfer leg, and the money that moved. ``unresolved`` counts requests still without a
    definite answer after every retry (their effect is unknown), ``unexpected`` any other refusal
    than insufficient funds (a bug in client or server); a healthy run has 0 of both.
    """

    wallet_ids: list[str]
    wallets_created: int
    deposits_ok: int
    transfers_ok: int
    transfers_refused: int
    replays: int
    total_deposited: int
    ledger_entries_expected: int
    requests: int
    seconds: float
    requests_per_second: float
    expected_versions: dict[str, int]
    expected_balances: dict[str, int]
    replay_mismatches: int = 0
    unresolved: int = 0
    unexpected: int = 0
    statuses: dict[int, int] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (without the per-wallet maps)."""
        summary = dataclasses.asdict(self)
        for bulky in ("wallet_ids", "expected_versions", "expected_balances"):
            summary.pop(bulky)
        summary["wallets"] = len(self.wallet_ids)
        return summary


@dataclasses.dataclass(frozen=True, slots=True)
class _Movement:
    kind: str  # "deposit" or "transfer"
    wallet_id: str
    amount: int
    nonce: str
    to_wallet_id: str | None = None
    replay: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class _Result:
    movement: _Movement
    status: int
    error: str | None
    requests: int
    replay_status: int | None = None


def run_workload(
    base_url: str,
    *,
    wallets: int,
    deposits_per_wallet: int,
    transfers: int,
    concurrency: int,
    seed: int,
    replay_fraction: float = 0.05,
    overdraft_fraction: float = 0.05,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> WorkloadReport:
    """Create wallets, fund them, then run random transfers, with ``concurrency`` clients.

    The seed fixes every amount, pair, overdraft and replay; wallet and user ids are fresh UUIDs,
    so two runs against one table never collide. Overdrafts ask for 10^15 micro-USD (refused with
    409 unless a wallet holds that much); a replay re-sends a transfer that just succeeded, with the
    same nonce, and must answer 204 without moving money (``replay_mismatches`` counts violations).

    ``on_progress(stage, done, total)`` is called from the calling thread for the stages
    ``"wallets"``, ``"deposits"`` and ``"transfers"``.
    """
    if wallets < 2 and transfers:
        raise ValueError("transfers need at least two wallets")
    rng = random.Random(seed)
    progress = on_progress or (lambda stage, done, total: None)
    client = WalletApiClient(base_url, max_connections=max(concurrency, 1))
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    started = time.perf_counter()
    requests = 0

    def tally(answer: Answer) -> None:
        with lock:
            statuses[answer.status] += 1

    with ThreadPoolExecutor(max_workers=max(concurrency, 1), thread_name_prefix="workload") as pool:
        # 1. wallets
        user_ids = [str(uuid.uuid4()) for _ in range(wallets)]
        created: list[Answer] = _run_stage(
            "wallets", pool, progress, [_creation(client, user_id) for user_id in user_ids]
        )
        wallet_ids = [_wallet_id(answer) for answer in created]
        for answer in created:
            tally(answer)
            requests += answer.attempts
        wallets_created = sum(1 for answer in created if answer.status == 201)

        # 2. deposits
        deposits = [
            _Movement("deposit", wallet_id, rng.randint(1, _MAX_DEPOSIT), f"dep-{index}")
            for index in range(deposits_per_wallet)
            for wallet_id in wallet_ids
        ]
        deposit_results = list(
            _run_stage("deposits", pool, progress, [_task(client, tally, m) for m in deposits])
        )

        # 3. transfers
        typical = max(1, _MAX_DEPOSIT * max(deposits_per_wallet, 1) // 8)
        planned: list[_Movement] = []
        for index in range(transfers):
            payer, payee = rng.sample(wallet_ids, 2)
            overdraft = rng.random() < overdraft_fraction
            amount = MAX_AMOUNT if overdraft else rng.randint(1, typical)
            replay = rng.random() < replay_fraction
            planned.append(_Movement("transfer", payer, amount, f"xfer-{index}", payee, replay))
        transfer_results = list(
            _run_stage("transfers", pool, progress, [_task(client, tally, m) for m in planned])
        )
    client.close()

    seconds = time.perf_counter() - started
    report = _summarise(deposit_results + transfer_results, wallet_ids)
    report.wallets_created = wallets_created
    report.requests += requests
    report.seconds = round(seconds, 3)
    report.requests_per_second = report.requests / seconds if seconds > 0 else 0.0
    report.statuses = dict(sorted(statuses.items()))
    return report


def _summarise(results: list[_Result], wallet_ids: list[str]) -> WorkloadReport:
    """What the answers imply: committed movements, per-wallet versions and balances."""
    versions: Counter[str] = Counter()
    balances: Counter[str] = Counter()
    report = WorkloadReport(
        wallet_ids=wallet_ids,
        wallets_created=0,
        deposits_ok=0,
        transfers_ok=0,
        transfers_refused=0,
        replays=0,
        total_deposited=0,
        ledger_entries_expected=0,
        requests=0,
        seconds=0.0,
        requests_per_second=0.0,
        expected_versions={},
        expected_balances={},
    )
    for result in results:
        report.requests += result.requests
        movement = result.movement
        if result.status == 204:
            versions[movement.wallet_id] += 1
            if movement.kind == "deposit":
                report.deposits_ok += 1
                report.total_deposited += movement.amount
                balances[movement.wallet_id] += movement.amount
            else:
                assert movement.to_wallet_id is not None
                report.transfers_ok += 1
                versions[movement.to_wallet_id] += 1
                balances[movement.wallet_id] -= movement.amount
                balances[movement.to_wallet_id] += movement.amount
            if result.replay_status is not None:
                report.replays += 1
                report.replay_mismatches += result.replay_status != 204
        elif result.error == "insufficient_funds":
            report.transfers_refused += 1
        elif result.status in RETRYABLE or result.status == 0:
            report.unresolved += 1
        else:
            report.unexpected += 1
    report.ledger_entries_expected = report.deposits_ok + 2 * report.transfers_ok
    report.expected_versions = {wallet_id: versions[wallet_id] for wallet_id in wallet_ids}
    report.expected_balances = {wallet_id: balances[wallet_id] for wallet_id in wallet_ids}
    return report


def _creation(client: WalletApiClient, user_id: str) -> Callable[[], Answer]:
    return lambda: client.create_wallet(user_id)


def _task(
    client: WalletApiClient, tally: Callable[[Answer], None], movement: _Movement
) -> Callable[[], _Result]:
    def run() -> _Result:
        if movement.kind == "deposit":
            answer = client.deposit(movement.wallet_id, movement.amount, movement.nonce)
        else:
            assert movement.to_wallet_id is not None
            answer = client.transfer(
                movement.wallet_id, movement.to_wallet_id, movement.amount, movement.nonce
            )
        tally(answer)
        requests = answer.attempts
        replay_status = None
        if movement.replay and answer.status == 204:
            assert movement.to_wallet_id is not None
            again = client.transfer(
                movement.wallet_id, movement.to_wallet_id, movement.amount, movement.nonce
            )
            tally(again)
            requests += again.attempts
            replay_status = again.status
        error = answer.body.get("error") if isinstance(answer.body, dict) else None
        return _Result(movement, answer.status, error, requests, replay_status)

    return run


def _run_stage(
    stage: str,
    pool: ThreadPoolExecutor,
    progress: Callable[[str, int, int], None],
    tasks: Iterable[Callable[[], Any]],
) -> list[Any]:
    """Run tasks concurrently; results in task order; progress reported as they complete."""
    futures: list[Future[Any]] = [pool.submit(task) for task in tasks]
    total = len(futures)
    progress(stage, 0, total)
    step = max(1, total // 100)
    for done, _ in enumerate(as_completed(futures), start=1):
        if done % step == 0 or done == total:
            progress(stage, done, total)
    return [future.result() for future in futures]


def _wallet_id(answer: Answer) -> str:
    if answer.status not in (200, 201) or not isinstance(answer.body, dict) or "id" not in answer.body:
        raise RuntimeError(f"creating a wallet failed: HTTP {answer.status} {answer.body!r}")
    return str(answer.body["id"])
