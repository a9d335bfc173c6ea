"""``walletlake sql``: an analyst's own SELECT against the lake's tables, as Athena names them.

The statement is Athena's dialect (Trino) whatever the engine: locally DuckDB runs it, transpiled
by sqlglot, over the lake's tables (the Iceberg ones at their current snapshot, or ``--as-of`` a
snapshot or an instant; ``FOR VERSION AS OF`` and ``FOR TIMESTAMP AS OF`` per table); with
``--engine athena`` Athena runs it in the workgroup. Only one read-only query is accepted: the
local engine holds the lake's S3 credentials, and an ad hoc ``COPY`` must not write to the lake.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from contracts.settings import Settings
from walletlake.refusals import RefusalError
from walletlake.result_formats import FORMATS, render


def register(subparsers: Any) -> None:
    """Add the sub-command's parser."""
    parser = subparsers.add_parser(
        "sql",
        help="run your own SELECT (Athena's SQL) against the lake's tables, on DuckDB or Athena",
        description=(
            "Runs one SELECT in Athena's dialect against the lake's tables by their Glue names (ledger, "
            "wallets, quarantine, balance_snapshots, daily_balances, reconciliation; walletlake.ledger "
            "works too). The statement is the argument, --file's contents, or standard input. Iceberg "
            "tables are read at their current snapshot, at --as-of, or per table with FOR VERSION AS OF "
            "<snapshot id> / FOR TIMESTAMP AS OF <timestamp>. Bad SQL is one line on standard error and "
            "exit status 2."
        ),
    )
    parser.add_argument("statement", nargs="?", metavar="SQL", help="the statement ('-': standard input)")
    parser.add_argument("--file", "-f", type=Path, help="read the statement from this file")
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format")
    parser.add_argument("--engine", choices=("duckdb", "athena"), help="override WALLETLAKE_QUERY_ENGINE")
    parser.add_argument(
        "--as-of",
        metavar="SNAPSHOT_OR_INSTANT",
        help=(
            "read every Iceberg table as of a snapshot id (that table at it, the others as they were "
            "while it was current) or an ISO-8601 instant (2026-11-22T09:00:00Z)"
        ),
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    # Here, not above: DuckDB, sqlglot and the engines cost every other command's start.
    import duckdb
    from sqlglot.errors import SqlglotError

    from queries import engine_for
    from queries.as_of import lake_versions_at, parse_point

    statement = _statement(args)
    _check_read_only(statement)
    settings = Settings.from_env()
    if args.engine:
        settings = settings.replace(query_engine=args.engine)
    pins = None
    if args.as_of:
        try:
            point = parse_point(args.as_of)
        except ValueError as error:
            raise RefusalError(str(error)) from None
        if settings.lake_format != "iceberg":
            raise RefusalError("--as-of reads Iceberg snapshots; this lake's format is not iceberg")
        try:
            pins = lake_versions_at(settings, point)
        except ValueError as error:
            raise RefusalError(str(error)) from None
    engine = engine_for(settings, versions=pins)
    try:
        frame = engine.run(statement, {})
    except (duckdb.Error, SqlglotError, ValueError, OSError) as error:  # AthenaDialectError is a ValueError
        from walletlake.gone_files import gone_file_refusal

        gone = gone_file_refusal(error)
        if gone is not None:  # not bad input: the lake lost a file
            raise gone from None
        if isinstance(error, OSError):
            raise
        raise RefusalError(_first_line(error)) from None
    finally:
        engine.close()
    print(render(frame, args.format), end="")
    return 0


def _statement(args: argparse.Namespace) -> str:
    if args.file is not None and args.statement is not None:
        raise RefusalError("give the statement as an argument or with --file, not both")
    if args.file is not None:
        try:
            text = args.file.read_text(encoding="utf-8")
        except OSError as error:
            raise RefusalError(f"cannot read {args.file}: {error.strerror}") from None
    elif args.statement is None or args.statement == "-":
        if sys.stdin.isatty():
            raise RefusalError("give a statement: as an argument, with --file, or on standard input")
        text = sys.stdin.read()
    else:
        text = args.statement
    text = text.strip().rstrip(";").strip()
    if not text:
        raise RefusalError("the statement is empty")
    return text


def _check_read_only(statement: str) -> None:
    """One query (SELECT, WITH, set operations, VALUES), else a one-line refusal."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        trees = [tree for tree in sqlglot.parse(statement, read="trino") if tree is not None]
    except SqlglotError as error:
        raise RefusalError(_first_line(error)) from None
    if len(trees) != 1:
        raise RefusalError(f"one statement at a time, found {len(trees)}")
    if not isinstance(trees[0], exp.Query | exp.Values):
        raise RefusalError(f"only queries run here (SELECT, WITH …), not {trees[0].key.upper()}")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
