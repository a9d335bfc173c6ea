"""Child processes of the embedded stack: ports, start, readiness, stop."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil

_logger = logging.getLogger(__name__)


class StackError(RuntimeError):
    """The embedded stack cannot start; the message says what to do about it."""


class ServerExitedError(StackError):
    """A server died while starting, for example because a port it was given got taken first.

    A port chosen by :func:`free_port` is free when chosen, not when the server binds it: any
    process on the machine may take it in between as the local end of a connection. A stack that
    chose the server's ports itself can start it again on other ones; a stack told a port cannot.
    """

    def __init__(self, what: str, code: int) -> None:
        super().__init__(f"{what} exited with code {code} while starting; see its log")
        self.what = what


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def ensure_port_free(host: str, port: int, flag: str) -> None:
    """Fail with a one-line reason when something already listens on ``host:port``.

    ``SO_REUSEADDR`` as the servers themselves bind: connections of a stopped (or killed) stack
    that linger in TIME_WAIT do not block the port, a process listening on it does.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            raise StackError(
                f"port {port} on {host} is busy: stop what uses it or pass another {flag}"
            ) from None


def wait_until(
    ready: Callable[[], bool], *, timeout: float, what: str, process: subprocess.Popen[bytes]
) -> None:
    """Poll ``ready`` until it is true, the process dies, or the deadline passes."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerExitedError(what, process.returncode)
        with contextlib.suppress(Exception):
            if ready():
                return
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    raise StackError(f"{what} did not become ready within {timeout:.0f} s; see its log")


class ManagedProcess:
    """A server child process with its output in a log file, stopped with SIGTERM then SIGKILL."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, cwd: Path | None = None) -> None:
        self.name = name
        self.log_path = log_path
        self.argv = list(argv)
        self.cwd = cwd
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("ab")
        self.process = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        _logger.debug("starting %s: %s", self.name, " ".join(self.argv))
        argv, name, cwd = self.argv, self.name, self.cwd
        try:
            return subprocess.Popen(
                list(argv),
                stdout=self._log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,  # noqa: PLW1509
            )
        except FileNotFoundError as error:
            self._log.close()
            raise StackError(f"cannot start {name}: {error.filename} not found") from error

    def restart(self) -> None:
        """Start the same command again once the process is gone (fault-injection tests kill it)."""
        if self.process.poll() is None:
            raise StackError(f"{self.name} is still running (pid {self.process.pid})")
        self.process = self._spawn()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the process and wait for it; idempotent."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        self._log.close()


def _die_with_parent() -> None:
    """In the child: ask Linux to SIGTERM it when the stack's process dies, even by SIGKILL.

    Without it a killed ``walletlake local up`` would leave its servers running, holding their
    ports and SeaweedFS's and DynamoDB Local's data dirs, and the next start would fail.
    """
    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def resident_bytes(pid: int) -> int:
    """Resident memory of a process and its children (0 when it is gone)."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            total += process.memory_info().rss
    return total


def disk_bytes(folder: Path) -> int:
    """Bytes the files under ``folder`` take on disk (allocated blocks: sparse files count as used)."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).stat().st_blocks * 512
    return total
