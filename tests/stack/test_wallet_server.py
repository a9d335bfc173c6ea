"""``walletlake serve`` as a child process (ApiServer) and the workload driving it."""

from __future__ import annotations

import socket
import urllib.request

import httpx
import orjson
import psutil
import pytest
from support.fresh_resources import write_path_env

from contracts.settings import Settings
from walletlake.api_server import ApiServer
from walletlake.cli import main
from walletlake.local import StackError
from walletlake.workload import run_workload

pytestmark = pytest.mark.stack


def test_serve_answers_health_and_the_api_then_stops(settings: Settings) -> None:
    # GIVEN `walletlake serve` with two workers on a free port
    with ApiServer(env=write_path_env(settings), workers=2) as api:
        pid = api.pid
        with httpx.Client(base_url=api.url, timeout=30) as http:
            # THEN it is healthy, documents itself and serves the wallet API
            assert http.get("/healthz").json() == {"status": "ok"}
            assert "/api/v1/wallets/{wallet_id}/balance" in http.get("/openapi.json").json()["paths"]
            wallet_id = http.post(
                "/api/v1/wallets/", json={"user_id": "6F9619FF-8B86-D011-B42D-00CF4FC964FF"}
            )
            wallet = wallet_id.json()["id"]
            assert (
                http.put(f"/api/v1/wallets/{wallet}/deposit/", json={"amount": "7", "nonce": "a"}).status_code
                == 204
            )
            assert http.get(f"/api/v1/wallets/{wallet}/balance").json() == {"balance": "7"}
        assert len(psutil.Process(pid).children()) >= 2  # the workers (and multiprocessing's tracker)
    # WHEN the context ends THEN the server process is gone
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_busy_port_is_a_startup_error_with_the_servers_own_words() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(StackError, match="exited with code") as error, ApiServer(port=port):
            pass
    assert "address already in use" in str(error.value).lower()


def test_serve_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--help"])
    assert exit_.value.code == 0
    assert "--workers" in capsys.readouterr().out


def test_the_workload_reports_progress_and_what_it_committed(settings: Settings) -> None:
    # GIVEN a running API  WHEN a small seeded workload runs with a progress callback
    seen: list[tuple[str, int, int]] = []
    with ApiServer(env=write_path_env(settings)) as api:
        report = run_workload(
            api.url,
            wallets=4,
            deposits_per_wallet=2,
            transfers=12,
            concurrency=3,
            seed=3,
            replay_fraction=0.5,
            overdraft_fraction=0.25,
            on_progress=lambda stage, done, total: seen.append((stage, done, total)),
        )
        metrics = orjson.loads(urllib.request.urlopen(api.url + "/metrics").read())
    # THEN the stages ran in order, each to completion
    stages = [stage for stage, _, _ in seen]
    assert sorted(set(stages), key=stages.index) == ["wallets", "deposits", "transfers"]
    assert ("wallets", 4, 4) in seen
    assert ("deposits", 8, 8) in seen
    assert ("transfers", 12, 12) in seen
    # and the report adds up
    assert report.wallets_created == 4
    assert report.deposits_ok == 8
    assert report.transfers_ok + report.transfers_refused == 12
    assert report.ledger_entries_expected == report.deposits_ok + 2 * report.transfers_ok
    assert sum(report.expected_balances.values()) == report.total_deposited
    assert sum(report.expected_versions.values()) == report.ledger_entries_expected
    assert report.requests == metrics["requests_succeeded"] + metrics["requests_failed"]
    assert report.replays == metrics["idempotent_replays"]
    assert report.requests_per_second > 0
