"""Analyst queries: ``.sql`` files in Athena's dialect and the engines that run them.

Every question is a file under ``queries/sql/`` (Trino SQL with ``:name`` parameters, described by
its header). On AWS, Athena runs it through awswrangler; on the embedded stack, DuckDB runs the
same file, transpiled by sqlglot, over the same Parquet in S3. The nightly reconciliation lives in
:mod:`queries.reconciliation`.
"""

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
