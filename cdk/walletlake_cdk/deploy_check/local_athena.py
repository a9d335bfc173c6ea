"""Athena, played by DuckDB over the same lake: for the state machines and for the functions.

The nightly state machine sends Athena ``UNLOAD (SELECT …) TO 's3://…/' WITH (format = 'PARQUET')``
statements (``startQueryExecution.sync``). Here the very statement the definition carries is split
into its query and its target; the query runs on the project's DuckDB engine (the same Trino →
DuckDB translation every local query uses) and the result is written as Parquet where Athena would
write it. As on Athena, an UNLOAD into a location that already holds objects fails
(``HIVE_PATH_ALREADY_EXISTS``), and a failed query ends as ``FAILED``.

A plain ``SELECT`` (what awswrangler sends from the classify function) is answered as Athena
answers it: the result as one CSV, ``{OutputLocation}{QueryExecutionId}.csv``, every value quoted
and nulls empty, and ``GetQueryResults`` giving the columns' Athena types
(:mod:`~walletlake_cdk.deploy_check.athena_api` serves it over HTTP).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import re
import threading
import uuid
from typing import Any, Final

import boto3
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from contracts.settings import Settings
from queries._duckdb import DuckDBEngine

_UNLOAD: Final = re.compile(
    r"^\s*UNLOAD\s*\((?P<query>.*)\)\s*TO\s*'(?P<location>[^']+)'\s*WITH\s*\((?P<options>[^)]*)\)\s*;?\s*$",
    re.S | re.I,
)
_OPTION: Final = re.compile(r"(\w+)\s*=\s*'([^']*)'")


class AthenaQueryError(RuntimeError):
    """The local engine could not run a statement (Athena's ``FAILED`` state)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Unload:
    """An Athena UNLOAD statement, taken apart."""

    query: str
    location: str
    options: dict[str, str]


def parse_unload(statement: str) -> Unload:
    """The query, target and options of an ``UNLOAD``; anything else is refused."""
    match = _UNLOAD.match(statement)
    if match is None:
        raise AthenaQueryError(f"the local Athena runs UNLOAD statements only, not: {statement[:80]!r}")
    options = {key.lower(): value for key, value in _OPTION.findall(match["options"])}
    return Unload(query=match["query"].strip(), location=match["location"], options=options)


class LocalAthena:
    """``StartQueryExecution`` / ``GetQueryExecution`` for UNLOADs, run by DuckDB on the lake."""

    def __init__(self, settings: Settings, session: boto3.Session, *, s3_endpoint: str | None = None) -> None:
        self.settings = settings.replace(query_engine="duckdb")
        self._session = session
        self._s3_endpoint = s3_endpoint
        self._results: dict[str, pa.Table] = {}
        self._executions: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.statements: list[str] = []

    def _engine(self) -> DuckDBEngine:
        """DuckDB with the stack's session, and for the Iceberg lake a catalog signed with it too:
        the state machines run under moto, whose mock replaces the process's default credentials,
        so nothing here may fall back to them."""
        catalog = None
        if self.settings.lake_format == "iceberg":
            from lake.iceberg_catalog import open_catalog

            catalog = open_catalog(self.settings, self._session)
        return DuckDBEngine(self.settings, session=self._session, catalog=catalog)

    def start_query_execution(self, parameters: dict[str, Any]) -> dict[str, Any]:
        """Run the statement to its end (the caller polls :meth:`get_query_execution`)."""
        statement = str(parameters["QueryString"])
        query_id = str(uuid.uuid4())
        submitted = dt.datetime.now(dt.UTC)
        with self._lock:
            self.statements.append(statement)
        status: dict[str, Any]
        output = parameters.get("OutputLocation")
        try:
            if _UNLOAD.match(statement):
                rows = self._unload(parse_unload(statement), query_id)
            else:
                rows = self._select(statement, query_id, output)
            status = {"State": "SUCCEEDED", "SubmissionDateTime": submitted.timestamp()}
        except Exception as error:  # the query's failure is the execution's state, as on Athena
            rows = 0
            status = {
                "State": "FAILED",
                "StateChangeReason": f"{type(error).__name__}: {error}",
                "SubmissionDateTime": submitted.timestamp(),
            }
        execution: dict[str, Any] = {
            "QueryExecutionId": query_id,
            "Query": statement,
            "StatementType": "DML",
            "WorkGroup": parameters.get("WorkGroup"),
            "QueryExecutionContext": parameters.get("QueryExecutionContext", {}),
            "Status": status,
            "Statistics": {"DataScannedInBytes": 0, "RowsUnloaded": rows},
        }
        if output and not _UNLOAD.match(statement):
            execution["ResultConfiguration"] = {"OutputLocation": f"{output.rstrip('/')}/{query_id}.csv"}
        with self._lock:
            self._executions[query_id] = execution
        return {"QueryExecutionId": query_id}

    def get_query_execution(self, query_id: str) -> dict[str, Any]:
        """``{"QueryExecution": …}`` as Athena answers it."""
        with self._lock:
            return {"QueryExecution": self._executions[query_id]}

    def get_query_results(self, query_id: str, max_results: int = 1000) -> dict[str, Any]:
        """The columns (Athena types) and the first rows of a SELECT's result, header row first."""
        with self._lock:
            table = self._results[query_id]
        columns = [
            {"Name": field.name, "Label": field.name, "Type": athena_type(field.type), "Nullable": "UNKNOWN"}
            for field in table.schema
        ]
        rows = [{"Data": [{"VarCharValue": field.name} for field in table.schema]}]
        for row in table.slice(0, max(0, max_results - 1)).to_pylist():
            rows.append(
                {"Data": [{} if value is None else {"VarCharValue": str(value)} for value in row.values()]}
            )
        return {"ResultSet": {"Rows": rows, "ResultSetMetadata": {"ColumnInfo": columns}}, "UpdateCount": 0}

    def _s3(self) -> Any:
        return self._session.client("s3", endpoint_url=self._s3_endpoint)

    def _select(self, statement: str, query_id: str, output: str | None) -> int:
        if not output:
            raise AthenaQueryError("no output location: the workgroup names none")
        with self._engine() as engine:
            table = engine.arrow(statement, {})
        sink = io.BytesIO()
        pa_csv.write_csv(table, sink, pa_csv.WriteOptions(quoting_style="all_valid"))
        bucket, _, prefix = output.removeprefix("s3://").partition("/")
        self._s3().put_object(Bucket=bucket, Key=f"{prefix.rstrip('/')}/{query_id}.csv", Body=sink.getvalue())
        with self._lock:
            self._results[query_id] = table
        return table.num_rows

    def _unload(self, unload: Unload, query_id: str) -> int:
        if unload.options.get("format", "").upper() != "PARQUET":
            raise AthenaQueryError(
                f"UNLOAD format {unload.options.get('format')!r}: only PARQUET is rendered"
            )
        bucket, _, prefix = unload.location.removeprefix("s3://").partition("/")
        client = self._s3()
        existing = client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
        if existing.get("KeyCount", 0):
            raise AthenaQueryError(
                f"HIVE_PATH_ALREADY_EXISTS: Target directory for table already exists: {unload.location}"
            )
        with self._engine() as engine:
            table = engine.arrow(unload.query, {})
        if table.num_rows == 0:
            return 0  # Athena writes no file for an empty result
        sink = io.BytesIO()
        pq.write_table(table, sink, compression=unload.options.get("compression", "gzip").lower())
        client.put_object(Bucket=bucket, Key=f"{prefix.rstrip('/')}/{query_id}_00000", Body=sink.getvalue())
        return table.num_rows


def athena_type(kind: pa.DataType) -> str:
    """The Athena (Trino) type name ``GetQueryResults`` reports for an Arrow type."""
    if pa.types.is_int64(kind):
        return "bigint"
    if pa.types.is_integer(kind):
        return "integer"
    if pa.types.is_boolean(kind):
        return "boolean"
    if pa.types.is_floating(kind):
        return "double"
    if pa.types.is_timestamp(kind):
        return "timestamp"
    if pa.types.is_date(kind):
        return "date"
    if pa.types.is_decimal(kind):
        return "decimal"
    return "varchar"
