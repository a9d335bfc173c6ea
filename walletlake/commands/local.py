"""``walletlake local up``: the embedded stack in the foreground; ``walletlake local env``: its exports again.

``local up > .walletlake.env &`` typed twice empties the file (the second start fails on its busy ports
after the shell truncated it), so a running stack also keeps its exports in its data folder
(``exports.env``, removed when it stops) and ``walletlake local env`` prints them again.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any, Final

from contracts.settings import Settings
from walletlake.refusals import STACK_NOT_ANSWERING, RefusalError
from walletlake.stack_probe import not_answering_message, silent_endpoint

#: Every listener `local up` exports has a fixed default port, so that a restart leaves a shell's
#: exports right; the Iceberg REST catalog's is the one its clients conventionally use.
DEFAULT_ICEBERG_PORT: Final = 8181
#: The running stack's exports, in its data folder.
EXPORTS_FILE: Final = "exports.env"
_DATA_DIR_HELP: Final = "where DynamoDB Local and SeaweedFS keep their data (default .walletlake)"


def register(subparsers: Any) -> None:
    """Add ``local`` and its ``up`` action."""
    parser = subparsers.add_parser("local", help="run the embedded AWS stand-ins on this machine")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser(
        "up",
        help="start DynamoDB Local, SeaweedFS (S3) and moto (Glue), provision them, stay in the foreground",
        description=(
            "Starts DynamoDB Local and SeaweedFS (S3), both keeping their data under --data-dir, and a "
            "moto server (Glue's metadata, rebuilt at every start), all on loopback; creates every "
            "resource the pipeline needs, prints the variables that point the AWS SDK at them, and "
            "runs until Ctrl-C or SIGTERM. A restart on the same --data-dir keeps the table, the "
            "consumer's checkpoints and the lake."
        ),
    )
    up.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    up.add_argument("--dynamodb-port", type=int, default=8000, help="DynamoDB Local's port (default 8000)")
    up.add_argument("--aws-port", type=int, default=5000, help="moto server's port for Glue (default 5000)")
    up.add_argument("--s3-port", type=int, default=8333, help="SeaweedFS's S3 port (default 8333)")
    up.add_argument(
        "--iceberg-port",
        type=int,
        default=None,
        help=(
            f"SeaweedFS's Iceberg REST catalog port (default {DEFAULT_ICEBERG_PORT}, or the tenth port "
            "from --seaweedfs-port-base when that is given)"
        ),
    )
    up.add_argument(
        "--seaweedfs-port-base",
        type=int,
        default=None,
        help=(
            "first of the 9 consecutive ports SeaweedFS uses inside (master, volume, filer, admin; HTTP "
            "and gRPC), never exported to clients; default: free ports chosen at start"
        ),
    )
    up.add_argument("--data-dir", type=Path, default=Path(".walletlake"), help=_DATA_DIR_HELP)
    up.set_defaults(func=_up)
    env = actions.add_parser(
        "env",
        help="print again the exports of the stack running from --data-dir (local env > .walletlake.env)",
        description=(
            "Prints the export lines `walletlake local up` printed when it started, for the stack running "
            "from --data-dir, so a shell (or a .walletlake.env file) can get them again: "
            "walletlake local env > .walletlake.env. One line and exit 4 when no stack runs from there."
        ),
    )
    env.add_argument("--data-dir", type=Path, default=Path(".walletlake"), help=_DATA_DIR_HELP)
    env.set_defaults(func=_env)


def export_lines(environment: dict[str, str]) -> list[str]:
    """The shell lines that point the AWS SDK and walletlake at the stack."""
    return [f"export {key}={value}" for key, value in environment.items()]


def _env(args: argparse.Namespace) -> int:
    path = args.data_dir / EXPORTS_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise RefusalError(
            f"no embedded stack is running from {args.data_dir}: start it with `walletlake local up`",
            STACK_NOT_ANSWERING,
        ) from None
    exports = dict(line.removeprefix("export ").split("=", 1) for line in lines if line.startswith("export "))
    silent = silent_endpoint(exports)
    if silent is not None:
        raise RefusalError(not_answering_message(silent), STACK_NOT_ANSWERING)
    print("\n".join(lines))
    return 0


def _up(args: argparse.Namespace) -> int:
    from walletlake.local import EmbeddedStack  # boto3, pyarrow: not for `local env` nor `--help`

    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    stack = EmbeddedStack(
        args.data_dir,
        host=args.host,
        dynamodb_port=args.dynamodb_port,
        aws_port=args.aws_port,
        s3_port=args.s3_port,
        seaweedfs_port_base=args.seaweedfs_port_base,
        iceberg_port=(
            args.iceberg_port
            if args.iceberg_port is not None or args.seaweedfs_port_base is not None
            else DEFAULT_ICEBERG_PORT
        ),
        settings=Settings.from_env(),
    )
    print("starting DynamoDB Local, SeaweedFS and moto server ...", file=sys.stderr, flush=True)
    with stack:
        for line in stack.provisioned:
            print(f"  {line}", file=sys.stderr)
        if stack.footprint is not None:
            print(f"  {stack.footprint.describe()}", file=sys.stderr)
        print("# point the AWS SDK and walletlake at the embedded stack:")
        lines = export_lines(stack.environment())
        print("\n".join(lines))
        exports = args.data_dir / EXPORTS_FILE
        exports.write_text("\n".join(lines) + "\n", encoding="utf-8")
        # Last line on stdout, after the exports, so a reader of stdout knows the stack is ready.
        print("# running; Ctrl-C or SIGTERM stops every server", flush=True)
        # And on the terminal, which stays with the user when standard output goes to a file.
        print(
            "running: source the exports (Ctrl-C or SIGTERM stops every server)", file=sys.stderr, flush=True
        )
        try:
            stop.wait()
        finally:
            exports.unlink(missing_ok=True)
    print("stopped", file=sys.stderr)
    return 0
