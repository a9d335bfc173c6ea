"""``walletlake demo``: the whole pipeline end to end on the embedded stack (what ``make demo`` runs)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from walletlake.demo_config import DemoConfig

#: The line width of the demo's output when it goes to a file or a pipe.
_PLAIN_WIDTH = 160


def register(subparsers: Any) -> None:
    """Add the ``demo`` parser."""
    defaults = DemoConfig()
    parser = subparsers.add_parser(
        "demo",
        help="run the whole pipeline end to end on the embedded stack",
        description=(
            "Starts the embedded stack (or uses the one the AWS_ENDPOINT_URL_* variables point at), "
            "drives wallets, deposits and transfers through the HTTP API, drains the stream into the "
            "lake, lets TTL expire the hot items, snapshots, compacts, reconciles, runs analyst queries "
            "and writes an HTML report."
        ),
    )
    parser.add_argument("--wallets", type=int, default=defaults.wallets, help="wallets to create")
    parser.add_argument("--transfers", type=int, default=defaults.transfers, help="transfers to attempt")
    parser.add_argument(
        "--concurrency", type=int, default=defaults.concurrency, help="concurrent HTTP clients"
    )
    parser.add_argument(
        "--hot-ttl-seconds",
        type=int,
        default=defaults.hot_ttl_seconds,
        help="shortened hot window for the demo",
    )
    parser.add_argument("--output-dir", type=Path, default=defaults.output_dir, help="where the report goes")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="workload seed")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from walletlake.demo import print_summary, run_demo

    console = Console()
    if not console.is_terminal:
        # Off a terminal rich assumes 80 columns and cuts the summary's tables to fit them.
        console = Console(width=_PLAIN_WIDTH, soft_wrap=True)
    config = DemoConfig(
        wallets=args.wallets,
        transfers=args.transfers,
        concurrency=args.concurrency,
        hot_ttl_seconds=args.hot_ttl_seconds,
        output_dir=args.output_dir,
        seed=args.seed,
    )
    result = run_demo(config, console)
    print_summary(result, console)
    return 0 if result.ok else 1
