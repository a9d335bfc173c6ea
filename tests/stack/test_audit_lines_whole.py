"""Audit lines that stay whole: the security reviewer's requests of issue 44, point 5.

Fields were once bounded in characters before JSON escaping, so a read-only caller's request made a
4,436-byte line (over ``PIPE_BUF``), and with two workers on one pipe other callers' lines tore.
Now a line is bounded after encoding (under 4,096 bytes, its cut fields marked), and a write that
is not whole is counted.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import threading
import uuid
from pathlib import Path

import httpx
import pytest
from support.fresh_resources import write_path_env
from support.lattice_callers import PERSON, SERVICE, caller, role_arn
from support.wallet_http import serve

from contracts.caller_permissions import CallerPermissions
from contracts.settings import AUDIT_LOG_VARIABLE, Settings
from wallet.audit import MAX_LINE_BYTES, TRUNCATED
from walletlake.api_server import ApiServer

pytestmark = pytest.mark.stack

#: A quote costs two bytes encoded, a backslash two, a control character six.
ESCAPE_HEAVY_PATH = "/api/v1/wallets/" + "%22%5C" * 700 + "/balance"
ESCAPE_HEAVY_AGENT = '"\\' * 1_500


def test_a_long_escape_heavy_request_of_a_read_only_caller_leaves_one_whole_line_under_pipe_buf(
    settings: Settings, tmp_path: Path
) -> None:
    deployed = settings.replace(
        trust_front="lattice",
        lattice_service_arn=SERVICE,
        caller_permissions=CallerPermissions.parse(f"{role_arn('support')}=read"),
        caller_session_pattern=PERSON,
        admin_routes=False,
        audit_log=str(tmp_path / "audit.jsonl"),
    )
    with serve(deployed) as api:
        # WHEN a read-only caller sends a path and a user agent that are mostly characters JSON escapes
        answer = api.http.get(
            ESCAPE_HEAVY_PATH, headers={**caller("support"), "user-agent": ESCAPE_HEAVY_AGENT}
        )
    assert answer.status_code == 422
    # THEN its line is one whole JSON line under PIPE_BUF, the fields it cut marked as cut
    (raw,) = (tmp_path / "audit.jsonl").read_bytes().splitlines(keepends=True)
    assert len(raw) <= MAX_LINE_BYTES < 4_096
    line = json.loads(raw)
    assert line["requestPath"].endswith(TRUNCATED)
    assert line["userAgent"].endswith(TRUNCATED)
    assert line["requestPath"].startswith('/api/v1/wallets/"\\"\\')
    assert (line["operation"], line["responseCode"]) == ("read", 422)
    assert line["callerPrincipal"] == caller("support")["x-amzn-lattice-identity"].split(";")[0][10:]


def test_two_workers_on_one_pipe_tear_no_line_however_long_the_requests(
    settings: Settings, tmp_path: Path
) -> None:
    # GIVEN `walletlake serve` with two workers writing their audit lines to one pipe (a FIFO, as
    # the tasks' stdout is a pipe to the log driver), read as it is written
    fifo = tmp_path / "audit.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    holder = os.open(fifo, os.O_WRONLY)  # a writer of the test's own: no end of file before it closes
    os.set_blocking(reader, True)
    received: list[bytes] = []

    def read_all() -> None:
        while chunk := os.read(reader, 65_536):
            received.append(chunk)

    draining = threading.Thread(target=read_all, daemon=True)
    draining.start()
    env = {**write_path_env(settings), AUDIT_LOG_VARIABLE: str(fifo)}
    long_requests, short_requests = 300, 900
    clients: list[httpx.Client] = []
    own = threading.local()
    with ApiServer(env=env, workers=2) as api:

        def http() -> httpx.Client:
            # one client per thread: a pool shared by 16 threads once read a socket another closed
            if not hasattr(own, "client"):
                own.client = httpx.Client(base_url=api.url, timeout=60)
                clients.append(own.client)
            client: httpx.Client = own.client
            return client

        def long_one(_: int) -> int:
            return http().get(ESCAPE_HEAVY_PATH, headers={"user-agent": ESCAPE_HEAVY_AGENT}).status_code

        def short_one(_: int) -> int:
            return http().get(f"/api/v1/wallets/{uuid.uuid4()}/balance").status_code

        # WHEN long, escape-heavy requests and ordinary ones arrive together
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            statuses = list(pool.map(long_one, range(long_requests)))
            statuses += list(pool.map(short_one, range(short_requests)))
        for client in clients:
            client.close()
    os.close(holder)
    draining.join(timeout=60)  # every worker has exited and the holder closed: the pipe ends
    assert not draining.is_alive()
    os.close(reader)
    # THEN every request left exactly one line, and every line is whole JSON
    assert sorted(set(statuses)) == [404, 422]
    lines = b"".join(received).splitlines()
    parsed = [json.loads(line) for line in lines]
    assert len(parsed) == long_requests + short_requests
    assert max(len(line) + 1 for line in lines) <= MAX_LINE_BYTES
    assert sum(1 for line in parsed if line["userAgent"] and line["userAgent"].endswith(TRUNCATED)) == 300
