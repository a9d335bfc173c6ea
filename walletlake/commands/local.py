"""``walletlake local up``: the embedded stack in the foreground until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any, Final

from contracts.settings import Settings
from walletlake.local import EmbeddedStack

#: Every listener `local up` exports has a fixed default port, so that a restart leaves a shell's
#: exports right; the Iceberg REST catalog's is the one its clients conventionally use.
DEFAULT_ICEBERG_PORT: Final = 8181


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
    up.add_argument(
        "--data-dir",
        type=Path,
        default=Path(".walletlake"),
        help="where DynamoDB Local and SeaweedFS keep their data (default .walletlake)",
    )
    up.set_defaults(func=_up)


def _up(args: argparse.Namespace) -> int:
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
        for key, value in stack.environment().items():
            print(f"export {key}={value}")
        # Last line on stdout, after the exports, so a reader of stdout knows the stack is ready.
        print("# running; Ctrl-C or SIGTERM stops every server", flush=True)
        # And on the terminal, which stays with the user when standard output goes to a file.
        print(
            "running: source the exports (Ctrl-C or SIGTERM stops every server)", file=sys.stderr, flush=True
        )
        stop.wait()
    print("stopped", file=sys.stderr)
    return 0
