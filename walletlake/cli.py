"""The ``walletlake`` command line: one sub-command per module in :mod:`walletlake.commands`.

Every command has ``--help`` and fails with a one-line reason and a non-zero exit code; the
traceback is shown only with ``--debug``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from contracts.settings import ENVIRONMENT_VARIABLES

#: Sub-command modules, in the order ``--help`` lists them. Each has ``register(subparsers)``,
#: which adds its parser and sets ``func(args) -> int`` as the parser's default.
COMMANDS = (
    "local",
    "serve",
    "consume",
    "commit",
    "snapshot",
    "compact",
    "reconcile",
    "query",
    "replay",
    "demo",
)


def build_parser() -> argparse.ArgumentParser:
    """The root parser with every sub-command registered."""
    epilog = "environment:\n" + "\n".join(f"  {k:<30} {v}" for k, v in ENVIRONMENT_VARIABLES.items())
    parser = argparse.ArgumentParser(
        prog="walletlake",
        description="A wallet ledger on DynamoDB and its exact Parquet lake on S3.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show debug logs and tracebacks")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"walletlake.commands.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("walletlake: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if args.debug:
            raise
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        print(f"walletlake {args.command}: error: {reason}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
