"""The ``walletlake`` command line: one sub-command per module in :mod:`walletlake.commands`.

Every command has ``--help`` and fails with a one-line reason and a non-zero exit code; the
traceback is shown only with ``--debug``.

Building the parser imports every command's module, so none of them imports pandas, pyarrow,
DuckDB, sqlglot, pyiceberg or boto3 before its command runs: a process pays only for what its
command uses (``tests/unit/test_cli_imports.py``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence

from contracts.settings import ENVIRONMENT_VARIABLES
from queries import ParameterError
from walletlake.refusals import BAD_INPUT, STACK_NOT_ANSWERING, RefusalError
from walletlake.stack_probe import ENDPOINT_VARIABLES, not_answering_message, silent_endpoint

#: Commands that run without the stack (``local`` starts it).
_STACKLESS = frozenset({"local"})

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
    "lake",
    "query",
    "sql",
    "replay",
    "repair",
    "restore",
    "demo",
)


def build_parser() -> argparse.ArgumentParser:
    """The root parser with every sub-command registered."""
    epilog = "environment:\n" + "\n".join(f"  {k:<30} {v}" for k, v in ENVIRONMENT_VARIABLES.items())
    parser = argparse.ArgumentParser(
        prog="walletlake",
        description="A wallet ledger on DynamoDB and its exact Apache Iceberg lake on S3.",
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
        if _needs_stack(args):
            silent = silent_endpoint()
            if silent is not None:
                raise RefusalError(not_answering_message(silent), STACK_NOT_ANSWERING)
        return int(args.func(args))
    except KeyboardInterrupt:
        print("walletlake: interrupted", file=sys.stderr)
        return 130
    except (RefusalError, ParameterError) as error:
        if args.debug:
            raise
        print(f"walletlake {args.command}: error: {_one_line(error)}", file=sys.stderr)
        return error.exit_code if isinstance(error, RefusalError) else BAD_INPUT
    except Exception as error:
        if args.debug:
            raise
        from botocore.exceptions import NoCredentialsError  # only now: botocore costs every start

        if isinstance(error, NoCredentialsError):
            print(f"walletlake {args.command}: error: {credentials_hint(os.environ)}", file=sys.stderr)
            return 1
        from walletlake.gone_files import gone_file_refusal

        refusal = gone_file_refusal(error, day=getattr(args, "date", None))
        if refusal is not None:
            print(f"walletlake {args.command}: error: {refusal}", file=sys.stderr)
            return refusal.exit_code
        print(f"walletlake {args.command}: error: {_one_line(error)}", file=sys.stderr)
        return 1


def credentials_hint(environ: Mapping[str, str]) -> str:
    """The line for "Unable to locate credentials": usually a shell that never sourced the stack's exports,
    so the command went to AWS. Names the endpoint variables that are missing."""
    missing = [name for name in ENDPOINT_VARIABLES if not environ.get(name)]
    if not missing:
        return "Unable to locate credentials: set AWS credentials (the stack's exports set test ones)"
    return (
        f"Unable to locate credentials, and {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not "
        "set, so this went to AWS: for the embedded stack, `source .walletlake.env` (or "
        '`eval "$(walletlake local env)"`); for AWS, configure credentials'
    )


def _needs_stack(args: argparse.Namespace) -> bool:
    return args.command not in _STACKLESS and not getattr(args, "list", False)


def _one_line(error: BaseException) -> str:
    """The error's first line, never its repr (a ``KeyError`` prints its message quoted)."""
    text = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


if __name__ == "__main__":
    sys.exit(main())
