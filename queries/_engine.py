"""One interface over both engines, and the entry point that runs a named query."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import pandas as pd
import pyarrow as pa

from contracts.settings import Settings
from queries._catalog import get_query
from queries._parameters import QueryValue
from queries._reachability import check_answering


class QueryEngine(Protocol):
    """Runs Athena (Trino) SQL with ``:name`` parameters and returns a frame.

    ``params`` hold typed values (see :mod:`queries._parameters`); integer columns come out as
    pandas ``Int64`` (int64 with nulls), so money stays exact.
    """

    name: str

    def run(self, sql: str, params: Mapping[str, QueryValue]) -> pd.DataFrame:
        """Run one query."""
        ...

    def arrow(self, sql: str, params: Mapping[str, QueryValue]) -> pa.Table:
        """Run one query and return Arrow: what batch jobs (the reconciliation) read, with no pandas
        conversion of a million-row result; integers as ``int64``."""
        ...

    def close(self) -> None:
        """Release what the engine holds."""
        ...


def engine_for(settings: Settings, *, versions: Mapping[str, int | None] | None = None) -> QueryEngine:
    """The engine ``settings.query_engine`` names: DuckDB on the embedded stack, Athena on AWS.

    ``versions`` pins Iceberg tables to snapshots (:mod:`queries.time_travel`): every query of the
    engine reads them as of those snapshots. Raises :class:`queries.StackNotAnsweringError` (one
    line) when the embedded stack the SDK points at is not answering.
    """
    if settings.query_engine == "duckdb":
        from queries._duckdb import DuckDBEngine

        check_answering(settings)  # one line for a stopped stack, not the SDK's retries and traceback

        return DuckDBEngine(settings, versions=dict(versions) if versions else None)
    from queries._athena import AthenaEngine

    return AthenaEngine(settings, versions=versions)


def run_query(
    name: str, params: Mapping[str, str], settings: Settings, engine: QueryEngine | None = None
) -> pd.DataFrame:
    """Run the named ``.sql`` file with textual parameters (parsed by their declared types).

    Examples
    --------
    >>> run_query("daily_volume", {"start_date": "2026-11-01", "end_date": "2026-11-30"},
    ...           Settings.from_env())  # doctest: +SKIP
    """
    query = get_query(name)
    values = query.bind(params)
    if engine is not None:
        return engine.run(query.sql, values)
    owned = engine_for(settings)
    try:
        return owned.run(query.sql, values)
    finally:
        owned.close()
