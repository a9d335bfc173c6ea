"""Analyst queries: ``.sql`` files in Athena's dialect and the engines that run them.

Every question is a file under ``queries/sql/`` (Trino SQL with ``:name`` parameters, described by
its header). On AWS, Athena runs it through awswrangler; on the embedded stack, DuckDB runs the
same file, transpiled by sqlglot, over the same Parquet in S3. The nightly reconciliation lives in
:mod:`queries.reconciliation`.

The names below are loaded when first used (PEP 562): the engines bring pandas, pyarrow, boto3 and
sqlglot (half a second), which a ``walletlake`` command that only parses its arguments, lists the
queries or reads :mod:`queries._parameters` must not pay for at every start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from queries._athena_dialect import AthenaDialectError
    from queries._catalog import QueryInfo, QueryParameter, get_query, list_queries
    from queries._engine import QueryEngine, engine_for, run_query
    from queries._parameters import ParameterError, QueryValue
    from queries._reachability import StackNotAnsweringError

__all__ = [
    "AthenaDialectError",
    "ParameterError",
    "QueryEngine",
    "QueryInfo",
    "QueryParameter",
    "QueryValue",
    "StackNotAnsweringError",
    "engine_for",
    "get_query",
    "list_queries",
    "run_query",
]

#: The module each public name is defined in (what the imports above say to the type checker).
_ORIGINS: Final = {
    "AthenaDialectError": "queries._athena_dialect",
    "ParameterError": "queries._parameters",
    "QueryEngine": "queries._engine",
    "QueryInfo": "queries._catalog",
    "QueryParameter": "queries._catalog",
    "QueryValue": "queries._parameters",
    "StackNotAnsweringError": "queries._reachability",
    "engine_for": "queries._engine",
    "get_query": "queries._catalog",
    "list_queries": "queries._catalog",
    "run_query": "queries._engine",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept here for the next."""
    try:
        origin = _ORIGINS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(origin), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
