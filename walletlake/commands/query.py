"""``walletlake query``: run a named ``.sql`` file and print its rows; ``--list`` shows them all."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from contracts.settings import Settings
from walletlake.refusals import RefusalError
from walletlake.result_formats import FORMATS, render


def register(subparsers: Any) -> None:
    """Add the sub-command's parser."""
    parser = subparsers.add_parser(
        "query",
        help="run an analyst query (a .sql file) on Athena or DuckDB and print its rows",
        description=(
            "Runs queries/sql/NAME.sql with its parameters on the configured engine (DuckDB over the "
            "embedded stack's S3, or Athena). In json output, integers (micro-USD amounts, versions, "
            "counts) are strings of digits, so no JSON reader rounds them."
        ),
    )
    parser.add_argument("name", nargs="?", metavar="NAME", help="the query (see --list)")
    parser.add_argument("--list", action="store_true", help="list the queries and their parameters")
    parser.add_argument(
        "--param", "-p", action="append", default=[], metavar="KEY=VALUE", help="a parameter (repeatable)"
    )
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format")
    parser.add_argument("--engine", choices=("duckdb", "athena"), help="override WALLETLAKE_QUERY_ENGINE")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.list:
        print(_listing())
        return 0
    if not args.name:
        raise ValueError("name a query, or use --list to see them")
    # Here, not above: the engines load pandas, pyarrow, boto3 and sqlglot; --list needs none of them.
    from queries import engine_for, get_query, run_query

    get_query(args.name)  # fails early, naming the known queries
    params = dict(_pair(text) for text in args.param)
    settings = Settings.from_env()
    if args.engine:
        settings = settings.replace(query_engine=args.engine)
    engine = engine_for(settings)
    try:
        frame = run_query(args.name, params, settings, engine)
    finally:
        engine.close()
    note = get_query(args.name).empty_answer(params)
    if frame.empty and note:
        raise RefusalError(note)
    print(render(frame, args.format), end="")
    return 0


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"--param takes KEY=VALUE, not {text!r}")
    return key.strip(), value


def _listing() -> str:
    from queries import list_queries

    blocks = []
    for query in list_queries():
        lines = [f"{query.name}({query.signature()})"]
        lines += textwrap.wrap(query.description, width=96, initial_indent="    ", subsequent_indent="    ")
        lines += [f"    --param {p.name}=<{p.type}>  {p.description}".rstrip() for p in query.parameters]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
