"""Child processes of the embedded stack: ports, start, readiness, stop."""

from __future__ import annotations

import contextlib
import logging
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

_logger = logging.getLogger(__name__)


class StackError(RuntimeError):
    """The embedded stack cannot start; the message says what to do about it."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def ensure_port_free(host: str, port: int, flag: str) -> None:
    """Fail with a one-line reason when something already listens on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
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
            raise StackError(f"{what} exited with code {process.returncode} while starting; see its log")
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
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("ab")
        _logger.debug("starting %s: %s", name, " ".join(argv))
        try:
            self.process = subprocess.Popen(
                list(argv), stdout=self._log, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True
            )
        except FileNotFoundError as error:
            self._log.close()
            raise StackError(f"cannot start {name}: {error.filename} not found") from error

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
