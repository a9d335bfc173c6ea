"""``walletlake local up`` as a user runs it: a foreground process that prints exports and stops cleanly."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from walletlake.local import free_port

pytestmark = pytest.mark.stack

WALLETLAKE = [sys.executable, "-m", "walletlake.cli"]


def _read_exports(process: subprocess.Popen[str], timeout: float = 90.0) -> dict[str, str]:
    """Collect ``export K=V`` lines from stdout until the stack says, last, that it is running."""
    lines: queue.Queue[str] = queue.Queue()
    stdout = process.stdout
    assert stdout is not None
    threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()
    exports: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if process.poll() is not None:
                pytest.fail(f"local up exited early with code {process.returncode}")
            continue
        if line.startswith("export "):
            key, value = line.removeprefix("export ").strip().split("=", 1)
            exports[key] = value
        if "running" in line:
            return exports
    pytest.fail("local up did not report running before the deadline")


@pytest.fixture
def local_up(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, str], Path]]:
    data_dir = tmp_path / "data"
    argv = [
        *WALLETLAKE,
        "local",
        "up",
        "--dynamodb-port",
        str(free_port()),
        "--aws-port",
        str(free_port()),
        "--s3-port",
        str(free_port()),
        "--iceberg-port",
        str(free_port()),
    ]
    process = subprocess.Popen(
        [*argv, "--data-dir", str(data_dir)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        yield process, _read_exports(process), data_dir
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM first so `local up` stops its servers; SIGKILL would orphan them."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _port_is_free(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.socket() as probe:
        # SO_REUSEADDR: connections in TIME_WAIT do not count, a listener still does.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, int(port)))
        except OSError:
            return False
    return True


def test_local_up_prints_sdk_exports_and_stops_on_sigterm(
    local_up: tuple[subprocess.Popen[str], dict[str, str], Path],
) -> None:
    # GIVEN a running `walletlake local up`
    process, exports, data_dir = local_up
    # THEN it printed the SDK's endpoint variables, and the stack answers at them
    for key in (
        "AWS_ENDPOINT_URL_DYNAMODB",
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
        "AWS_ENDPOINT_URL_S3",
        "AWS_ENDPOINT_URL_GLUE",
    ):
        assert exports[key].startswith("http://127.0.0.1:")
    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=exports["AWS_ENDPOINT_URL_DYNAMODB"],
        region_name=exports["AWS_DEFAULT_REGION"],
        aws_access_key_id=exports["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=exports["AWS_SECRET_ACCESS_KEY"],
    )
    assert "wallets" in dynamodb.list_tables()["TableNames"]
    # AND `walletlake local env` prints the same exports again (a .walletlake.env emptied by a second
    # `local up > .walletlake.env &` is written again with it)
    again = _local_env(data_dir)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [f"export {key}={value}" for key, value in exports.items()]
    # WHEN it gets SIGTERM
    process.send_signal(signal.SIGTERM)
    # THEN it exits 0 and both servers are gone
    assert process.wait(30) == 0
    assert _port_is_free(exports["AWS_ENDPOINT_URL_DYNAMODB"])
    assert _port_is_free(exports["AWS_ENDPOINT_URL_S3"])
    # AND `local env` then says in one line that no stack runs there (exit 4)
    gone = _local_env(data_dir)
    assert gone.returncode == 4
    assert gone.stdout == ""
    assert gone.stderr.strip() == (
        f"walletlake local: error: no embedded stack is running from {data_dir}: "
        "start it with `walletlake local up`"
    )


def _local_env(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*WALLETLAKE, "local", "env", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_restart_keeps_the_wallets_on_disk_and_the_exports_right(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    # Every listener the exports name on a port of its own flag: a restart on the same flags (what a
    # user does: `walletlake local up` again, defaults included) gives the same exports.
    ports = [
        flag_and_port
        for flag in ("--dynamodb-port", "--aws-port", "--s3-port", "--iceberg-port")
        for flag_and_port in (flag, str(free_port()))
    ]

    def up() -> tuple[subprocess.Popen[str], dict[str, str]]:
        process = subprocess.Popen(
            [*WALLETLAKE, "local", "up", *ports, "--data-dir", str(data_dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        return process, _read_exports(process)

    def client(exports: dict[str, str]) -> Any:
        return boto3.client(
            "dynamodb",
            endpoint_url=exports["AWS_ENDPOINT_URL_DYNAMODB"],
            region_name=exports["AWS_DEFAULT_REGION"],
            aws_access_key_id=exports["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=exports["AWS_SECRET_ACCESS_KEY"],
        )

    def in_shell(exports: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*WALLETLAKE, *argv],
            env={**os.environ, **exports},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    # GIVEN an item written to a first run, and a shell holding its exports
    first, exports = up()
    stopped = False
    try:
        client(exports).put_item(TableName="wallets", Item={"pk": {"S": "w1#wallet"}, "balance": {"N": "5"}})
        first.send_signal(signal.SIGTERM)
        stopped = first.wait(30) == 0
    finally:
        _stop(first)
    assert stopped
    # WHEN that shell runs a command while the stack is down
    stale = in_shell(exports, "sql", "SELECT count(*) AS n FROM wallets")
    # THEN it says in one line what to do, at once, with its own exit code
    assert stale.returncode == 4
    assert stale.stderr == (
        f"walletlake sql: error: the embedded stack at {exports['AWS_ENDPOINT_URL_DYNAMODB']} is not "
        "answering: start `walletlake local up` and source its exports\n"
    )
    # WHEN the stack is started again on the same data dir
    second, again = up()
    try:
        item = client(exports).get_item(
            TableName="wallets", Key={"pk": {"S": "w1#wallet"}}, ConsistentRead=True
        )
        # THEN the same shell works again: every exported endpoint (the catalog's too) is the same
        assert again == exports
        answered = in_shell(exports, "sql", "SELECT count(*) AS n FROM wallets", "--format", "csv")
    finally:
        _stop(second)
    # AND the item is still there
    assert item["Item"]["balance"] == {"N": "5"}
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.splitlines()[0] == "n"


def test_missing_java_is_a_one_line_error(tmp_path: Path) -> None:
    # GIVEN a PATH with python but without java
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = {**os.environ, "PATH": str(bin_dir)}
    # WHEN local up starts
    result = subprocess.run(
        [
            *WALLETLAKE,
            "local",
            "up",
            "--dynamodb-port",
            str(free_port()),
            "--aws-port",
            str(free_port()),
            "--s3-port",
            str(free_port()),
            "--data-dir",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    # THEN it exits 1 with one line that says what to do
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if "error" in line]
    assert lines == [
        "walletlake local: error: java not found: DynamoDB Local needs a Java 17+ JDK on PATH "
        "(apt-get install openjdk-17-jdk)"
    ]


def test_busy_port_is_a_one_line_error(tmp_path: Path) -> None:
    # GIVEN something listening on the port asked for
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        # WHEN local up is asked to use it
        result = subprocess.run(
            [
                *WALLETLAKE,
                "local",
                "up",
                "--dynamodb-port",
                str(port),
                "--aws-port",
                str(free_port()),
                "--s3-port",
                str(free_port()),
                "--iceberg-port",
                str(free_port()),
                "--data-dir",
                str(tmp_path / "d"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    # THEN it exits 1 naming the port and the flag
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"walletlake local: error: port {port} on 127.0.0.1 is busy: "
        "stop what uses it or pass another --dynamodb-port"
    )


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    from walletlake.cli import COMMANDS, main

    # The entry point as typed, in a process of its own, lists every command
    result = subprocess.run([*WALLETLAKE, "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert all(command in result.stdout for command in COMMANDS)
    # and each command's help is its parser's (in this process: one interpreter per command cost 15 s)
    for command in COMMANDS:
        with pytest.raises(SystemExit) as exited:
            main([command, "--help"])
        assert exited.value.code == 0, command
        assert f"usage: walletlake {command}" in capsys.readouterr().out


def test_shutil_finds_java_here() -> None:
    # The suite's other stack tests need java; say so plainly if the machine lacks it.
    assert shutil.which("java"), "java is required for the embedded stack"
