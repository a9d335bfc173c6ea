"""``walletlake reconcile``: placeholder until its issue lands."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    """Add the sub-command's parser."""
    parser = subparsers.add_parser("reconcile", help="(not built yet)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    raise NotImplementedError("walletlake reconcile is not built yet")
