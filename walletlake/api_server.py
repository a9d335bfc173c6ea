"""The wallet API as a child process: what tests, benchmarks and the demo drive over real HTTP.

Running the server in its own process (``python -m walletlake.cli serve``, exactly what an operator
runs) keeps its CPU counters separate from the client's, which is how the benchmark measures the
API's own cost per request, and tests the real command line rather than an in-process shortcut.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from contracts.settings import Settings
from walletlake.local import StackError, free_port

#: The flag of ``walletlake serve`` that turns HTTPS on (its variable: ``WALLETLAKE_TLS``).
TLS_FLAG = "--tls"

#: Seconds :meth:`ApiServer.stop` waits beyond the server's drain bound before it kills it.
STOP_MARGIN_SECONDS = 5.0


class ApiServer:
    """Start ``walletlake serve`` on a free loopback port, wait until ``/healthz`` answers, stop on exit.

    Parameters
    ----------
    env:
        Variables set for the server on top of this process's environment (``WALLETLAKE_TABLE``,
        ``AWS_ENDPOINT_URL_DYNAMODB``...).
    host, port:
        Where it listens; ``port=None`` picks a free one.
    workers:
        uvicorn worker processes.
    startup_timeout:
        Seconds to wait for ``/healthz`` before giving up (the log's tail is in the error).
    log_path:
        Where the server's output goes (by default a temporary file, removed by :meth:`stop`).
    cwd:
        The server's working directory (this one by default). ``python -m`` imports from it
        first, so a checkout of another version serves its own code (``bench/hot_wallet.py``).
    args:
        More ``walletlake serve`` flags (``["--drain-seconds", "10"]``). With ``--tls`` (or
        ``WALLETLAKE_TLS`` in ``env``) other than ``off`` the server speaks HTTPS only: :attr:`url`
        is ``https://`` and the readiness probe goes over TLS without checking the certificate,
        as VPC Lattice does (:mod:`walletlake.tls`).

    Examples
    --------
    >>> with ApiServer(env={"WALLETLAKE_TABLE": "wallets"}) as api:  # doctest: +SKIP
    ...     urllib.request.urlopen(api.url + "/healthz").status
    200
    """

    def __init__(
        self,
        env: dict[str, str] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        workers: int = 1,
        *,
        startup_timeout: float = 60.0,
        log_path: Path | None = None,
        cwd: Path | None = None,
        args: Sequence[str] = (),
    ) -> None:
        self.env = dict(env or {})
        self.args = list(args)
        self.cwd = cwd
        self.host = host
        self.port = port
        self.workers = workers
        self.startup_timeout = startup_timeout
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._terminated = False
        self._owns_log = False
        self._scheme = "http"

    @property
    def tls(self) -> bool:
        """Whether the server speaks HTTPS: its ``--tls`` flag (the last one), else its environment's."""
        flagged = [self.args[index + 1] for index, arg in enumerate(self.args[:-1]) if arg == TLS_FLAG]
        mode = flagged[-1] if flagged else Settings.from_env({**os.environ, **self.env}).tls
        return mode != "off"

    @property
    def url(self) -> str:
        """Base URL of the running server, e.g. ``http://127.0.0.1:41234`` (``https://`` with TLS)."""
        if self.port is None or self._process is None:
            raise StackError("the API server is not started")
        return f"{self._scheme}://{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        """Process id of the server (uvicorn's supervisor when ``workers > 1``)."""
        if self._process is None:
            raise StackError("the API server is not started")
        return self._process.pid

    def start(self) -> str:
        """Start the server and return its URL once ``/healthz`` answers 200."""
        if self.port is None:
            self.port = free_port(self.host)
        self._scheme = "https" if self.tls else "http"
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="walletlake-api-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
            self._owns_log = True
        argv = [
            sys.executable,
            "-m",
            "walletlake.cli",
            "serve",
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--workers",
            str(self.workers),
            *self.args,
        ]
        with self.log_path.open("ab") as log:
            # The child keeps its own copy of the log descriptor.
            self._process = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
                cwd=self.cwd,
                start_new_session=True,
            )
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self.url

    @property
    def running(self) -> bool:
        """True from :meth:`start` until :meth:`stop` (even once the process has exited)."""
        return self._process is not None

    @property
    def drain_seconds(self) -> int:
        """The server's drain bound (``WALLETLAKE_DRAIN_SECONDS`` of its environment)."""
        return Settings.from_env({**os.environ, **self.env}).drain_seconds

    def terminate(self) -> None:
        """Send SIGTERM, as ECS does to stop a task, and return at once (see :meth:`wait`)."""
        if self._process is None:
            raise StackError("the API server is not started")
        if not self._terminated:
            self._process.terminate()
            self._terminated = True

    def wait(self, timeout: float) -> int:
        """The server's exit code, once it has exited (:class:`StackError` if not within ``timeout``)."""
        if self._process is None:
            raise StackError("the API server is not started")
        try:
            return self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise StackError(f"the API server did not exit within {timeout:.1f} s") from None

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM (graceful: in-flight requests finish), SIGKILL if still running after ``timeout``.

        ``timeout`` defaults to the server's drain bound plus :data:`STOP_MARGIN_SECONDS`. Returns
        the exit code (None if it was not running); idempotent.
        """
        timeout = self.drain_seconds + STOP_MARGIN_SECONDS if timeout is None else timeout
        process, self._process = self._process, None
        code = None
        if process is not None:
            if process.poll() is None and not self._terminated:
                process.terminate()
            self._terminated = False
            try:
                code = process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                code = process.wait(10)
        if self._owns_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
            self.log_path, self._owns_log = None, False
        return code

    def output(self) -> str:
        """Everything the server printed so far (stdout and stderr)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int = 20) -> str:
        """The last lines the server printed (for error messages)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def _wait_healthy(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout
        delay = 0.05
        url = f"{self._scheme}://{self.host}:{self.port}/healthz"
        # Its own certificate, made at its start: nothing to check it against (as VPC Lattice).
        context = _unverified_context() if self._scheme == "https" else None
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                raise StackError(f"the API server exited with code {code} while starting:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=1, context=context) as response:  # noqa: S310
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)
        raise StackError(
            f"the API server did not answer {url} within {self.startup_timeout:.0f} s:\n{self.log_tail()}"
        )

    def __enter__(self) -> ApiServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _unverified_context() -> ssl.SSLContext:
    """A client context that encrypts and checks no certificate: what VPC Lattice sends a target."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class ApiFleet:
    """Several ``walletlake serve`` processes on one table: a fleet behind a load balancer, locally.

    Each process is an :class:`ApiServer` on its own port with the same environment; they start
    together (in parallel) and stop together. Clients spread themselves over :attr:`urls`.

    Examples
    --------
    >>> with ApiFleet(4, env={"WALLETLAKE_TABLE": "wallets"}) as fleet:  # doctest: +SKIP
    ...     len(fleet.urls)
    4
    """

    def __init__(self, processes: int, env: dict[str, str] | None = None, **options: Any) -> None:
        if processes < 1:
            raise ValueError("a fleet needs at least one process")
        self.servers = [ApiServer(env=env, **options) for _ in range(processes)]

    @property
    def urls(self) -> list[str]:
        """Base URL of every process, in order."""
        return [server.url for server in self.servers]

    def start(self) -> list[str]:
        """Start every process at once; return their URLs once each answers ``/healthz``."""
        failures: list[BaseException] = []

        def start(server: ApiServer) -> None:
            try:
                server.start()
            except BaseException as error:
                failures.append(error)

        threads = [threading.Thread(target=start, args=(server,)) for server in self.servers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            self.stop()
            raise failures[0]
        return self.urls

    def stop(self) -> list[int | None]:
        """SIGTERM every process at once, then wait for each; their exit codes."""
        for server in self.servers:
            if server.running:
                server.terminate()
        return [server.stop() for server in self.servers]

    def __enter__(self) -> ApiFleet:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class ThreadedApiServer:
    """Serve an already-built ASGI app with uvicorn in a thread of this process, on a free port.

    For tests that must reach inside the app, e.g. a :class:`~wallet.store.WalletStore` with a
    skewed clock or a DynamoDB endpoint that injects faults; clients still talk to it over real
    HTTP, and it still reaches DynamoDB over HTTP. Same ``url`` and context-manager protocol as
    :class:`ApiServer`.
    """

    def __init__(
        self, app: Any, host: str = "127.0.0.1", port: int | None = None, timeout: float = 30.0
    ) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.timeout = timeout
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL of the running server."""
        if self._thread is None:
            raise StackError("the API server is not started")
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        """Start serving and return the URL once uvicorn reports it is listening."""
        import uvicorn

        if self.port is None:
            self.port = free_port(self.host)
        config = uvicorn.Config(self.app, host=self.host, port=self.port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="api-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise StackError(f"uvicorn did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        """Ask uvicorn to exit and wait for its thread; idempotent."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(self.timeout)
        self._server, self._thread = None, None

    def __enter__(self) -> ThreadedApiServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
