"""``walletlake serve``: the wallet write path's HTTP API under uvicorn.

uvicorn with ``uvicorn[standard]`` runs on uvloop and httptools, the cheapest event loop and HTTP
parser available to it; access logs are off by default because formatting a line per request costs
more CPU than the request's own routing (``--access-log`` turns them on). Each worker process
builds its own app from the environment (:func:`wallet.api.create_service` is the factory), so
``--workers N`` scales across cores with no shared state: wallets live in DynamoDB.
"""

from __future__ import annotations

import argparse
import copy
from typing import Any

#: The ASGI app factory every worker imports.
APP_FACTORY = "wallet.api:create_service"


def register(subparsers: Any) -> None:
    """Add ``serve`` and its options."""
    parser = subparsers.add_parser(
        "serve",
        help="run the wallet HTTP API (FastAPI under uvicorn)",
        description=(
            "Serves the wallet API of seed 000 (create wallet, deposit, transfer, balance) against the "
            "DynamoDB table named by WALLETLAKE_TABLE, found through the AWS SDK's own configuration "
            "(AWS_ENDPOINT_URL_DYNAMODB points it at the embedded stack). OpenAPI at /openapi.json, "
            "liveness at /healthz, counters at /metrics."
        ),
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
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

    from walletlake.settings import Settings

    Settings.from_env()  # fail here, with the reason, rather than in every worker
    log_config = copy.deepcopy(LOGGING_CONFIG)
    # Let the write path's own event lines (throttles, DynamoDB failures) reach the same stream.
    for name in ("wallet", "walletlake"):
        log_config["loggers"][name] = {"handlers": ["default"], "level": args.log_level.upper()}
    uvicorn.run(
        APP_FACTORY,
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=args.log_level,
        log_config=log_config,
        access_log=args.access_log,
        server_header=False,
    )
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
