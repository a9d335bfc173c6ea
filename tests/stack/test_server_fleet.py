"""``walletlake serve`` fit for a fleet behind a load balancer.

- SIGTERM (how ECS stops a task) while clients keep writing: the listener closes, every request in
  flight is answered, the process exits 0 within ``WALLETLAKE_DRAIN_SECONDS``, and the table holds
  exactly what was answered 204; a request the server could not finish within the bound does not
  hold the exit back.
- Admission control: past ``WALLETLAKE_MAX_REQUESTS_IN_FLIGHT`` requests in flight, 429 with
  ``Retry-After`` at once, DynamoDB untouched.
- A fleet of four processes on one table and one hot pair: only 204 and 429, money conserved,
  versions exact.
- The telemetry as CloudWatch embedded-metric-format lines on each worker's stdout, periodically and
  at shutdown; keep-alive longer than a load balancer's idle timeout; the flags and variables.

Servers in child processes reach DynamoDB Local through :class:`dynamodb_faults.DelayingProxy` when a
test needs requests to be still in flight at a chosen moment (DynamoDB Local answers in milliseconds).
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import signal
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from support.dynamodb_faults import DelayingProxy, ScriptedDynamoDB
from support.emf_lines import emf_documents
from support.fresh_resources import write_path_env
from support.wallet_table import contents

from contracts.api_metrics import PUBLISHED
from contracts.settings import SERVER_VARIABLES, Settings
from contracts.wallets_table import Attr
from wallet.dynamodb import DynamoDBClient
from wallet.store import WalletStore
from walletlake.api_server import ApiFleet, ApiServer, ThreadedApiServer
from walletlake.cli import main
from walletlake.local import EmbeddedStack
from walletlake.server import create_server, request_drain_seconds

pytestmark = pytest.mark.stack

_FUNDING = 1_000_000
#: Seconds before SIGTERM past which a request sent is surely read by the server (see the drain test).
READ_MARGIN = 0.5


def _until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(0.01)


def _create(http: httpx.Client) -> str:
    response = http.post("/api/v1/wallets/", json={"user_id": str(uuid.uuid4())})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _fund(http: httpx.Client, wallet_id: str, amount: int = _FUNDING) -> None:
    response = http.put(f"/api/v1/wallets/{wallet_id}/deposit/", json={"amount": amount, "nonce": "fund"})
    assert response.status_code == 204, response.text


@pytest.fixture
def proxy(stack: EmbeddedStack) -> Iterator[DelayingProxy]:
    with DelayingProxy(stack.environment()["AWS_ENDPOINT_URL_DYNAMODB"]) as delaying:
        yield delaying


# ------------------------------------------------------------------------------------ SIGTERM


@dataclasses.dataclass
class Sent:
    """One request a load client sent, and what became of it."""

    nonce: str
    wallet: str
    target: str | None  # None: a deposit
    amount: int
    sent_at: float
    answered_at: float = 0.0
    status: int | None = None
    retry_after: str | None = None
    failure: str | None = None  # "refused" (no listener) or "closed" (connection closed, no answer)


def _load(url: str, wallets: list[str], seed: int, stop: threading.Event) -> list[Sent]:
    """Deposits and transfers among ``wallets``, one at a time, until the listener refuses or ``stop``."""
    rng = random.Random(seed)
    sent: list[Sent] = []
    with httpx.Client(base_url=url, timeout=60) as http:
        while not stop.is_set():
            wallet, target = rng.sample(wallets, 2)
            request = Sent(
                uuid.uuid4().hex, wallet, target if rng.random() < 0.7 else None, rng.randint(1, 99), 0.0
            )
            path = f"/api/v1/wallets/{wallet}/" + (f"transfer/{target}/" if request.target else "deposit/")
            request.sent_at = time.monotonic()
            try:
                response = http.put(path, json={"amount": request.amount, "nonce": request.nonce})
            except httpx.ConnectError:
                request.failure = "refused"
            except httpx.TransportError:
                request.failure = "closed"
            else:
                request.status = response.status_code
                request.retry_after = response.headers.get("Retry-After")
            request.answered_at = time.monotonic()
            sent.append(request)
            if request.failure == "refused":
                break
    return sent


def _expected(wallets: list[str], answered: list[Sent]) -> tuple[dict[str, int], dict[str, int]]:
    """Balances and versions the wallets must have: funding plus exactly the requests answered 204."""
    balances = dict.fromkeys(wallets, _FUNDING)
    versions = dict.fromkeys(wallets, 1)
    for request in answered:
        balances[request.wallet] += -request.amount if request.target else request.amount
        versions[request.wallet] += 1
        if request.target:
            balances[request.target] += request.amount
            versions[request.target] += 1
    return balances, versions


def _behind(proxy: DelayingProxy, settings: Settings, tmp_path: Path, drain: int) -> ApiServer:
    """`walletlake serve` reaching DynamoDB through ``proxy``, draining within ``drain`` seconds."""
    env = {
        **write_path_env(settings),
        "AWS_ENDPOINT_URL_DYNAMODB": proxy.url,
        "WALLETLAKE_DRAIN_SECONDS": str(drain),
    }
    return ApiServer(env=env, log_path=tmp_path / "api.log")


@pytest.mark.slow
def test_sigterm_during_load_answers_every_request_in_flight_and_exits_0_within_the_drain_bound(
    settings: Settings, proxy: DelayingProxy, tmp_path: Path
) -> None:
    drain = 10
    api = _behind(proxy, settings, tmp_path, drain)
    try:
        # GIVEN `walletlake serve` on a write path where every transaction takes 200 ms, and 4 funded wallets
        api.start()
        with httpx.Client(base_url=api.url, timeout=30) as http:
            wallets = [_create(http) for _ in range(4)]
            for wallet_id in wallets:
                _fund(http, wallet_id)
        proxy.delay = 0.2

        # WHEN 8 clients keep sending deposits and transfers, and SIGTERM arrives mid-load
        stop = threading.Event()
        with ThreadPoolExecutor(8) as pool:
            loads = [pool.submit(_load, api.url, wallets, seed, stop) for seed in range(8)]
            _until(lambda: proxy.writes >= 4 + 24, 30, "24 movements to reach DynamoDB")
            terminated_at = time.monotonic()
            api.terminate()
            code = api.wait(drain + 10)
            exited_at = time.monotonic()
            stop.set()
            sent = [request for load in loads for request in load.result()]
        output = api.output()
    finally:
        api.stop()

    answered = [request for request in sent if request.status is not None]
    ok = [request for request in answered if request.status == 204]
    refused = [request for request in sent if request.failure == "refused"]
    closed = [request for request in sent if request.failure == "closed"]
    # In flight at the signal: what the server had read. It had surely read what was sent well before
    # the signal (READ_MARGIN: uvicorn looks for the signal every 0.1 s, and the event loop of a busy
    # 2-core machine reads a socket late), and it had read whatever reached DynamoDB. A request
    # written on a kept-alive connection in the instant before the signal may meet that connection
    # being closed as idle, unread: HTTP's idle-close race, which a client retries (the nonce makes
    # that safe); such a request must then be applied nowhere (the table check below).
    in_flight = [r for r in sent if r.sent_at < terminated_at - READ_MARGIN or proxy.wrote(r.nonce)]

    # THEN the process exited 0 within the drain bound
    assert code == 0, output[-2000:]
    assert exited_at - terminated_at < drain
    # AND every request sent before the signal was answered, 204 or a deliberate 429/503 with
    # Retry-After; some of them only during the drain (they were in flight at the signal)
    assert all(request.status is not None for request in in_flight), [r for r in in_flight if r.failure]
    assert {request.status for request in answered} <= {204, 429, 503}
    assert all(int(r.retry_after or 0) >= 1 for r in answered if r.status in (429, 503))
    assert any(request.answered_at > terminated_at for request in ok)
    # AND requests without an answer came after the signal, when the listener was closed (refused),
    # or as their idle keep-alive connection was being closed, unread: counted apart, never applied
    assert all(request.sent_at >= terminated_at - READ_MARGIN for request in refused + closed)
    assert not any(proxy.wrote(request.nonce) for request in refused + closed)
    assert len(answered) + len(refused) + len(closed) == len(sent)
    # AND the table holds exactly the 204s: no more (nothing half-applied, nothing unanswered
    # applied), no fewer, with balances and versions as the 204s say
    table = contents(settings)
    assert sorted(t[Attr.NONCE] for t in table.transactions) == sorted(["fund"] * 4 + [r.nonce for r in ok])
    balances, versions = _expected(wallets, ok)
    assert {w: table.wallets[w][Attr.BALANCE] for w in wallets} == balances
    assert {w: table.wallets[w][Attr.VERSION] for w in wallets} == versions
    # AND the metrics line printed at shutdown carries every answer
    lines = emf_documents(output)
    assert lines, "no embedded-metric-format line at shutdown"
    assert sum(line["RequestsSucceeded"] for line in lines) == 4 + 4 + len(ok)  # created, funded, 204s
    print(
        f"drain: {len(in_flight)} sent before SIGTERM, {sum(r.answered_at > terminated_at for r in ok)} "
        f"answered 204 after it; exit {exited_at - terminated_at:.2f} s after SIGTERM (bound {drain} s); "
        f"{len(refused)} refused, {len(closed)} closed unanswered, {len(ok)} x 204"
    )


def test_a_request_stuck_past_the_drain_bound_does_not_hold_the_exit_back(
    settings: Settings, proxy: DelayingProxy, tmp_path: Path
) -> None:
    drain = 3
    api = _behind(proxy, settings, tmp_path, drain)
    try:
        # GIVEN a server whose DynamoDB holds a deposit's write and never answers it
        api.start()
        with httpx.Client(base_url=api.url, timeout=30) as http:
            wallet_id = _create(http)
        proxy.hold = True
        with ThreadPoolExecutor(1) as pool:
            stuck = pool.submit(_load, api.url, [wallet_id, wallet_id], 0, threading.Event())
            _until(lambda: proxy.held == 1, 30, "the deposit to reach DynamoDB")

            # WHEN SIGTERM arrives
            terminated_at = time.monotonic()
            api.terminate()
            code = api.wait(drain + 10)
            exited_at = time.monotonic()
            proxy.release()
            requests = stuck.result()
        output = api.output()
    finally:
        proxy.release()
        api.stop()

    # THEN the process still exited 0 within the bound, and the stuck request got no 204
    assert code == 0, output[-2000:]
    assert exited_at - terminated_at < drain, output[-2000:]
    assert requests[0].status != 204
    assert not contents(settings).transactions
    print(f"stuck request: exit {exited_at - terminated_at:.2f} s after SIGTERM (bound {drain} s)")


# ---------------------------------------------------------------------------- admission control


def test_past_its_bound_of_requests_in_flight_a_server_answers_429_without_touching_dynamodb(
    settings: Settings,
) -> None:
    # GIVEN a server admitting 2 requests at once, whose DynamoDB holds every movement write
    client = ScriptedDynamoDB(DynamoDBClient(settings.region))
    store = WalletStore(settings, dynamodb=cast(DynamoDBClient, client))
    app = create_server(settings.replace(max_requests_in_flight=2), store=store)
    with ThreadedApiServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        a, b = _create(http), _create(http)
        client.gate = threading.Event()
        with ThreadPoolExecutor(2) as pool:
            held = [
                pool.submit(http.put, f"/api/v1/wallets/{w}/deposit/", json={"amount": 5, "nonce": "held"})
                for w in (a, b)
            ]
            _until(lambda: client.held == 2, 30, "two deposits in flight")
            calls = (len(client.writes), len(client.other_calls))

            # WHEN more requests arrive: deposits, a transfer, a balance read
            refused = [
                http.put(f"/api/v1/wallets/{a}/deposit/", json={"amount": 1, "nonce": "d1"}),
                http.put(f"/api/v1/wallets/{b}/deposit", json={"amount": 1, "nonce": "d2"}),
                http.put(f"/api/v1/wallets/{a}/transfer/{b}/", json={"amount": 1, "nonce": "t1"}),
                http.get(f"/api/v1/wallets/{a}/balance"),
            ]
            # THEN each is answered 429 at once, with Retry-After and the API's error body
            assert [response.status_code for response in refused] == [429] * 4
            assert all(int(response.headers["Retry-After"]) >= 1 for response in refused)
            assert all(response.json()["error"] == "throttled" for response in refused)
            assert "requests in flight" in refused[0].json()["detail"]
            # AND DynamoDB was not called for any of them
            assert (len(client.writes), len(client.other_calls)) == calls
            # AND liveness and metrics still answer while the server is full
            assert http.get("/healthz").status_code == 200
            counts = http.get("/metrics").json()
            assert (counts["requests_shed"], counts["requests_throttled"]) == (4, 4)

            # WHEN the held writes complete
            client.gate.set()
            assert [future.result().status_code for future in held] == [204, 204]
        client.gate = None
        # THEN the server admits again
        assert (
            http.put(f"/api/v1/wallets/{a}/deposit/", json={"amount": 1, "nonce": "after"}).status_code == 204
        )

    # AND the table holds only what was admitted
    table = contents(settings)
    assert sorted(t[Attr.NONCE] for t in table.transactions) == ["after", "held", "held"]
    assert (table.wallets[a][Attr.BALANCE], table.wallets[b][Attr.BALANCE]) == (6, 5)


# ----------------------------------------------------------------------------------- the fleet


@pytest.mark.slow
def test_a_fleet_of_four_servers_on_one_hot_pair_answers_only_204_or_429_and_versions_are_exact(
    settings: Settings,
) -> None:
    clients, transfers = 16, 12
    # GIVEN four `walletlake serve` processes on one table, and two funded wallets
    with ApiFleet(4, env=write_path_env(settings)) as fleet:
        with httpx.Client(base_url=fleet.urls[0], timeout=30) as http:
            pair = [_create(http), _create(http)]
            for wallet_id in pair:
                _fund(http, wallet_id)

        # WHEN 16 clients spread over the four send 12 transfers each between the two, each request once
        def send(index: int) -> list[tuple[int, str | None]]:
            payer, payee = pair if index % 2 == 0 else pair[::-1]
            with httpx.Client(base_url=fleet.urls[index % 4], timeout=60) as http:
                answers = []
                for _ in range(transfers):
                    response = http.put(
                        f"/api/v1/wallets/{payer}/transfer/{payee}/",
                        json={"amount": 1 + index, "nonce": uuid.uuid4().hex},
                    )
                    answers.append((response.status_code, response.headers.get("Retry-After")))
                return answers

        with ThreadPoolExecutor(clients) as pool:
            answers = [answer for batch in pool.map(send, range(clients)) for answer in batch]
        logs = "\n".join(f"--- server {i}:\n{server.log_tail(30)}" for i, server in enumerate(fleet.servers))
        codes = fleet.stop()

    statuses = Counter(status for status, _ in answers)
    table = contents(settings)
    # THEN only 204 and 429 (with Retry-After), and every server exited 0 (the servers' own
    # lines say which DynamoDB failure any other answer came from)
    assert set(statuses) <= {204, 429}, f"{statuses}\n{logs}"
    assert all(int(retry_after or 0) >= 1 for status, retry_after in answers if status == 429)
    assert statuses[204] > 0
    assert codes == [0, 0, 0, 0]
    # AND money is conserved, and each wallet's version counts its deposit and every 204
    assert sum(table.wallets[w][Attr.BALANCE] for w in pair) == 2 * _FUNDING
    assert {w: table.wallets[w][Attr.VERSION] for w in pair} == dict.fromkeys(pair, 1 + statuses[204])
    assert len(table.transactions) == 2 + statuses[204]
    print(f"fleet of 4, hot pair: {dict(statuses)}")


# ------------------------------------------------------------------------------ startup heap


def test_a_server_freezes_its_startup_heap_so_full_collections_skip_it(
    settings: Settings, tmp_path: Path
) -> None:
    # GIVEN `walletlake serve`, started
    with ApiServer(env=write_path_env(settings), log_path=tmp_path / "api.log") as api:
        # WHEN its lifespan startup has run (uvicorn answers /healthz only after it)
        with httpx.Client(base_url=api.url, timeout=30) as http:
            wallet_id = _create(http)
            deposit = http.put(f"/api/v1/wallets/{wallet_id}/deposit/", json={"amount": 5, "nonce": "n"})
            balance = http.get(f"/api/v1/wallets/{wallet_id}/balance").json()  # micro-USD
        output = api.output()

    # THEN it says once (its event lines are not printed twice) how many objects it froze: its
    # imports and botocore's data, tens of thousands
    frozen = [int(n) for n in re.findall(r"event=heap_frozen objects=(\d+)", output)]
    assert len(frozen) == 1, output
    assert frozen[0] > 20_000
    # AND it serves as before
    assert deposit.status_code == 204
    assert balance == {"balance": "5"}


# ------------------------------------------------------------------------------------ telemetry


def test_every_worker_prints_its_counts_as_emf_periodically_and_at_shutdown(
    settings: Settings, tmp_path: Path
) -> None:
    # GIVEN `walletlake serve --workers 2 --metrics-interval-seconds 1`
    api = ApiServer(
        env=write_path_env(settings),
        workers=2,
        args=["--metrics-interval-seconds", "1"],
        log_path=tmp_path / "api.log",
    )
    try:
        api.start()
        with httpx.Client(base_url=api.url, timeout=30) as http:
            # WHEN it answers 4 requests successfully and refuses 2
            wallet_id = _create(http)
            for nonce in ("a", "b", "c"):
                assert (
                    http.put(
                        f"/api/v1/wallets/{wallet_id}/deposit/", json={"amount": 1, "nonce": nonce}
                    ).status_code
                    == 204
                )
            assert (
                http.put(
                    f"/api/v1/wallets/{uuid.uuid4()}/deposit/", json={"amount": 1, "nonce": "x"}
                ).status_code
                == 404
            )
            assert (
                http.put(
                    f"/api/v1/wallets/{wallet_id}/deposit/", json={"amount": 0, "nonce": "y"}
                ).status_code
                == 422
            )
        # THEN both workers publish every second, whether they served anything or not
        _until(
            lambda: len({d["pid"] for d in emf_documents(api.output())}) == 2, 30, "lines from both workers"
        )
        _until(
            lambda: sum(d["RequestsSucceeded"] for d in emf_documents(api.output())) == 4,
            30,
            "the 4 successes",
        )
        supervisor = api.pid
        assert api.stop() == 0
    finally:
        api.stop()
    documents = emf_documents((tmp_path / "api.log").read_text())

    # AND every line is valid EMF with every published metric; over the lines (each one what was
    # counted since the worker's previous line), the sums are the counts, once each
    assert all(
        {m["Name"] for m in d["_aws"]["CloudWatchMetrics"][0]["Metrics"]} == set(PUBLISHED.values())
        for d in documents
    )
    assert sum(d["RequestsSucceeded"] for d in documents) == 4
    assert sum(d["RequestsFailed"] for d in documents) == 2
    pids = Counter(d["pid"] for d in documents)
    assert len(pids) == 2
    assert supervisor not in pids
    assert all(count >= 2 for count in pids.values())  # periodic lines, then one at shutdown


# ----------------------------------------------------------------------------------- keep-alive


def _idle_connection(url: str) -> socket.socket:
    """A keep-alive connection that has served one request and is now idle."""
    host, port = url.removeprefix("http://").split(":")
    connection = socket.create_connection((host, int(port)))
    connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
    answer = b""
    while b'{"status":"ok"}' not in answer:
        answer += connection.recv(4096)
    assert answer.startswith(b"HTTP/1.1 200")
    return connection


@pytest.mark.slow
def test_idle_keep_alive_connections_stay_open_as_long_as_configured(settings: Settings) -> None:
    env = write_path_env(settings)
    # GIVEN a server with a keep-alive of 1 s  WHEN a connection idles  THEN the server closes it
    with ApiServer(env=env, args=["--keep-alive-seconds", "1"]) as short:
        connection = _idle_connection(short.url)
        idle_since = time.monotonic()
        connection.settimeout(10)
        assert connection.recv(1) == b""
        assert 0.5 < time.monotonic() - idle_since < 5
        connection.close()
    # GIVEN the default (65 s, longer than ALB's 60 s idle timeout)  THEN the connection is still
    # open after uvicorn's own default of 5 s has passed
    with ApiServer(env=env) as default:
        connection = _idle_connection(default.url)
        connection.settimeout(6)
        with pytest.raises(TimeoutError):
            connection.recv(1)
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
        assert connection.recv(4096).startswith(b"HTTP/1.1 200")
        connection.close()


# -------------------------------------------------------------------------- flags and variables


def test_serve_reads_its_knobs_from_variables_and_flags_and_hands_them_to_uvicorn_and_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import uvicorn

    # GIVEN the container's variables, and a flag overriding one of them
    for name in SERVER_VARIABLES:
        monkeypatch.setenv(name, "")
    monkeypatch.setenv("WALLETLAKE_BIND_HOST", "0.0.0.0")
    monkeypatch.setenv("WALLETLAKE_KEEP_ALIVE_SECONDS", "70")
    monkeypatch.setenv("WALLETLAKE_DRAIN_SECONDS", "40")
    ran: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: ran.update(options, app=app))
    handlers: dict[int, Any] = {}
    monkeypatch.setattr(signal, "signal", lambda signum, handler: handlers.update({signum: handler}))

    # WHEN `walletlake serve --drain-seconds 10 --workers 2` runs
    assert main(["serve", "--drain-seconds", "10", "--workers", "2"]) == 0

    # THEN uvicorn gets the variables' values and the flag's, the graceful-shutdown timeout inside
    # the drain bound, and the app factory of a fleet server
    assert ran["app"] == "walletlake.server:create_server"
    assert (ran["host"], ran["timeout_keep_alive"], ran["workers"]) == ("0.0.0.0", 70, 2)
    assert ran["timeout_graceful_shutdown"] == request_drain_seconds(Settings(drain_seconds=10)) == 8
    assert ran["lifespan"] == "on"
    # AND the workers, which read the environment, see the flag's value
    assert os.environ["WALLETLAKE_DRAIN_SECONDS"] == "10"
    assert os.environ["WALLETLAKE_MAX_REQUESTS_IN_FLIGHT"] == "128"
    # AND SIGTERM, raised again by uvicorn once drained, ends the process with status 0
    with pytest.raises(SystemExit) as exit_:
        handlers[signal.SIGTERM](signal.SIGTERM, None)
    assert exit_.value.code == 0


@pytest.mark.parametrize(
    ("flag", "value", "reason"),
    [
        ("--drain-seconds", "2", "must be an integer in 3..3600, not '2'"),
        ("--keep-alive-seconds", "0", "must be an integer in 1..4000, not '0'"),
        ("--max-requests-in-flight", "many", "must be an integer in 1..100000, not 'many'"),
        ("--metrics-interval-seconds", "-1", "must be an integer in 0..3600, not '-1'"),
        ("--host", "not a host", "must be an IP address or a host name, not 'not a host'"),
    ],
)
def test_a_bad_flag_is_refused_with_its_variables_reason(
    flag: str, value: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["serve", flag, value])
    assert exit_.value.code == 2
    assert f"argument {flag}: {reason}" in capsys.readouterr().err


def test_serve_documents_its_knobs_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = capsys.readouterr().out
    for flag, variable in [
        ("--host", "WALLETLAKE_BIND_HOST"),
        ("--drain-seconds", "WALLETLAKE_DRAIN_SECONDS"),
        ("--keep-alive-seconds", "WALLETLAKE_KEEP_ALIVE_SECONDS"),
        ("--max-requests-in-flight", "WALLETLAKE_MAX_REQUESTS_IN_FLIGHT"),
        ("--metrics-interval-seconds", "WALLETLAKE_METRICS_INTERVAL_SECONDS"),
    ]:
        assert flag in text
        assert variable in " ".join(text.split())
