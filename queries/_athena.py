"""The Athena engine: the ``.sql`` files as they are, run by awswrangler in the project's workgroup.

``ctas_approach=False`` keeps queries read-only (no temporary Glue tables, no extra permissions);
results come back through the workgroup's result location. Parameters go to awswrangler in its
``named`` style, which renders them client-side exactly as :mod:`queries._parameters` does for
DuckDB.
"""

from __future__ import annotations

from collections.abc import Mapping

import boto3
import pandas as pd
import pyarrow as pa

from contracts.settings import Settings
from queries._lake_views import lake_views, with_views
from queries._parameters import QueryValue, render
from queries.time_travel import LakeVersions, pin_versions


class AthenaEngine:
    """Runs Trino SQL on Athena against the Glue database of the lake."""

    name = "athena"

    def __init__(
        self,
        settings: Settings,
        *,
        session: boto3.Session | None = None,
        versions: LakeVersions | None = None,
    ) -> None:
        self.database = settings.glue_database
        self.workgroup = settings.athena_workgroup
        self.versions = dict(versions or {})
        self._session = session or boto3.Session(region_name=settings.region)

    def run(self, sql: str, params: Mapping[str, QueryValue]) -> pd.DataFrame:
        """Run one query and return its rows (pandas nullable dtypes); pinned tables are read
        ``FOR VERSION AS OF`` their recorded snapshot (:mod:`queries.time_travel`)."""
        import awswrangler as wr  # imported on use: it is slow to import and only AWS runs need it

        if any(view in sql for view in lake_views()):
            # A view every engine offers by name (balance_snapshots_latest) joins as a WITH entry.
            sql, params = with_views(render(sql, params)), {}
        if self.versions:
            sql, params = pin_versions(render(sql, params), self.versions), {}
        frame = wr.athena.read_sql_query(
            sql,
            database=self.database,
            workgroup=self.workgroup,
            ctas_approach=False,
            params=dict(params),
            paramstyle="named",
            boto3_session=self._session,
            dtype_backend="numpy_nullable",
        )
        assert isinstance(frame, pd.DataFrame)  # chunksize is not used, so never an iterator
        return frame

    def arrow(self, sql: str, params: Mapping[str, QueryValue]) -> pa.Table:
        """Run one query and return its rows as Arrow (awswrangler reads them into pandas first)."""
        return pa.Table.from_pandas(self.run(sql, params), preserve_index=False)

    def close(self) -> None:
        """Nothing to release (each query is its own Athena execution)."""
