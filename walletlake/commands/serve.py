"""``walletlake serve``: the wallet write path's HTTP API under uvicorn, fit for a fleet.

uvicorn with ``uvicorn[standard]`` runs on uvloop and httptools, the cheapest event loop and HTTP
parser available to it; access logs are off by default because formatting a line per request costs
more CPU than the request's own routing (``--access-log`` turns them on). Each worker process
builds its own app from the environment (:func:`walletlake.server.create_server` is the factory), so
``--workers N`` scales across cores with no shared state: wallets live in DynamoDB.

The server knobs are ``WALLETLAKE_*`` variables (:data:`contracts.settings.SERVER_VARIABLES`: how
a container is configured) and flags of this command with the variables as their defaults (how a
person at a shell is); a flag given is written back to its variable before the workers start, so
every worker reads the one value. Behind a load balancer:

- ``--host`` / ``WALLETLAKE_BIND_HOST``: 127.0.0.1 by default, 0.0.0.0 in the container;
- ``--keep-alive-seconds``: longer than the balancer's idle timeout (65 s against ALB's 60 s);
- ``--drain-seconds``: on SIGTERM, stop accepting, answer every request in flight, finish the
  commit queue, print the last metrics line and exit 0, all within it (25 s by default; the
  deregistration delay and the container's stop timeout must be longer, e.g. 30 s);
- ``--max-requests-in-flight``: past it, 429 with ``Retry-After`` (admission control);
- ``--metrics-interval-seconds``: CloudWatch embedded-metric-format lines on stdout;
- ``--tls`` / ``WALLETLAKE_TLS``: HTTPS with a key and certificate made at start (``self-signed``:
  behind VPC Lattice, which validates no target certificate) or read from ``--tls-cert-file`` and
  ``--tls-key-file`` (``files``: e.g. issued by ACM Private CA); ``/healthz`` is served over the
  same HTTPS, so the target group's and the container's health checks speak it too
  (:mod:`walletlake.tls`).
"""

from __future__ import annotations

import argparse
import copy
import os
import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

from contracts.settings import (
    BIND_HOST_VARIABLE,
    DRAIN_SECONDS_VARIABLE,
    KEEP_ALIVE_SECONDS_VARIABLE,
    MAX_REQUESTS_IN_FLIGHT_VARIABLE,
    METRICS_INTERVAL_SECONDS_VARIABLE,
    SERVER_VARIABLES,
    TLS_CERT_FILE_VARIABLE,
    TLS_KEY_FILE_VARIABLE,
    TLS_VARIABLE,
    VARIABLES,
    SettingsError,
    Variable,
)

#: The ASGI app factory every worker imports.
APP_FACTORY = "walletlake.server:create_server"

#: The flag of each server variable (its ``dest`` is the Settings field).
_FLAGS = {
    BIND_HOST_VARIABLE: "--host",
    DRAIN_SECONDS_VARIABLE: "--drain-seconds",
    KEEP_ALIVE_SECONDS_VARIABLE: "--keep-alive-seconds",
    MAX_REQUESTS_IN_FLIGHT_VARIABLE: "--max-requests-in-flight",
    METRICS_INTERVAL_SECONDS_VARIABLE: "--metrics-interval-seconds",
    TLS_VARIABLE: "--tls",
    TLS_CERT_FILE_VARIABLE: "--tls-cert-file",
    TLS_KEY_FILE_VARIABLE: "--tls-key-file",
}


def register(subparsers: Any) -> None:
    """Add ``serve`` and its options."""
    parser = subparsers.add_parser(
        "serve",
        help="run the wallet HTTP API (FastAPI under uvicorn)",
        description=(
            "Serves the wallet API of seed 000 (create wallet, deposit, transfer, balance) against the "
            "DynamoDB table named by WALLETLAKE_TABLE, found through the AWS SDK's own configuration "
            "(AWS_ENDPOINT_URL_DYNAMODB points it at the embedded stack). OpenAPI at /openapi.json, "
            "liveness at /healthz, counters at /metrics and as CloudWatch embedded-metric-format lines "
            "on stdout. SIGTERM drains: every request in flight is answered before the process exits 0. "
            "With --tls it speaks HTTPS only (health checks included)."
        ),
    )
    for variable in _server_variables():
        parser.add_argument(
            _FLAGS[variable.name],
            dest=variable.field,
            type=_checked(variable),
            default=None,
            help=f"{variable.meaning}; sets {variable.name}",
        )
    parser.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
    parser.add_argument(
        "--workers", type=_positive, default=1, help="worker processes, e.g. one per core (default 1)"
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=("critical", "error", "warning", "info", "debug"),
        help="server log level (default info; request-level events are warnings)",
    )
    parser.add_argument("--access-log", action="store_true", help="log one line per request (costs CPU)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    from contracts.settings import Settings
    from walletlake.server import request_drain_seconds
    from walletlake.tls import server_certificate

    # Fail here, with the reason, rather than in every worker; then hand the flags to the workers.
    flags = {
        variable.field: getattr(args, variable.field)
        for variable in _server_variables()
        if getattr(args, variable.field) is not None
    }
    settings = Settings.from_env().replace(**flags)
    os.environ.update(settings.to_env(SERVER_VARIABLES))
    log_config = copy.deepcopy(LOGGING_CONFIG)
    # Let the write path's own event lines (throttles, DynamoDB failures) reach the same stream,
    # once: the CLI's root handler would print each a second time (two lines, two counts in Logs
    # Insights).
    for name in ("wallet", "walletlake"):
        log_config["loggers"][name] = {
            "handlers": ["default"],
            "level": args.log_level.upper(),
            "propagate": False,
        }
    # uvicorn drains on SIGTERM, then raises the signal again under the handler it found: this one
    # makes that an exit with status 0 (and a SIGTERM before uvicorn listens, a plain exit).
    signal.signal(signal.SIGTERM, _exit_cleanly)
    with server_certificate(settings) as certificate:
        uvicorn.run(
            APP_FACTORY,
            factory=True,
            host=settings.bind_host,
            port=args.port,
            workers=args.workers,
            log_level=args.log_level,
            log_config=log_config,
            access_log=args.access_log,
            server_header=False,
            lifespan="on",
            timeout_keep_alive=settings.keep_alive_seconds,
            timeout_graceful_shutdown=request_drain_seconds(settings),
            # Both None without TLS: plain HTTP, as before.
            ssl_certfile=str(certificate.cert_file) if certificate else None,
            ssl_keyfile=str(certificate.key_file) if certificate else None,
        )
    return 0


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _server_variables() -> list[Variable]:
    return [variable for variable in VARIABLES if variable.name in SERVER_VARIABLES]


def _checked(variable: Variable) -> Callable[[str], object]:
    """An argparse type reading a flag as its variable is read, refused with the same reason."""

    def parse(text: str) -> object:
        try:
            return variable.read(text)
        except SettingsError as error:
            raise argparse.ArgumentTypeError(str(error).removeprefix(f"{variable.name} ")) from None

    return parse


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
