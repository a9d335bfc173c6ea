"""The DuckDB engine: the embedded stack's Athena, reading the same Parquet from the same S3 endpoint.

How it stays faithful to Athena:

- **Same files, same names.** Each lake table is a view named as in Glue over
  ``read_parquet('s3://{bucket}/{prefix}/{table}/*/*.parquet', hive_partitioning)``, so ``dt`` is a
  string column exactly as Glue's projected partition key, and a ``dt`` predicate prunes files.
  Columns are cast to the Glue types (a nightly Parquet table's ``timestamp`` is UTC wall-clock
  without a zone, as Athena reads a Hive ``timestamp``). A table with no object yet is an empty view
  with the same columns, where Athena would return no rows.
- **Same SQL.** The ``.sql`` file is rendered with the parameters exactly as awswrangler renders
  them for Athena (:mod:`queries._parameters`), then parsed as Trino, refused where Athena refuses
  and transpiled to DuckDB with Trino's function results (:mod:`queries._athena_dialect`). Views
  every engine offers (``balance_snapshots_latest``) join the statement as ``WITH`` entries
  (:mod:`queries._lake_views`); Athena's Iceberg metadata tables (``"ledger$snapshots"``…) are
  built from the table's metadata (:mod:`queries._metadata_tables`).
- **Same types out.** Trino's ``sum(bigint)`` is a ``bigint`` (and fails on overflow); DuckDB's is a
  ``HUGEINT``, so 128-bit results are cast back to ``BIGINT`` (failing on overflow too). Frames
  use pandas' nullable dtypes, as awswrangler's ``numpy_nullable`` backend does.
- **Iceberg, when the lake is.** With ``lake_format = "iceberg"`` the stream's tables (ledger,
  wallets, quarantine) are views over ``iceberg_scan`` of the table's current metadata file, asked
  of the catalog on each run, with the same casts and columns (the Iceberg ``dt`` column is the
  same string); a table without a snapshot is the same empty view. Their timestamps stay zoned
  (``TIMESTAMP WITH TIME ZONE``, UTC, microseconds), as Athena reads an Iceberg ``timestamptz``:
  ``AT TIME ZONE``, ``date(…)`` and comparisons give Athena's answers. Snapshots can be pinned for a
  rerun of a past night (:mod:`queries._iceberg_views`).
- **Same endpoint and credentials as the SDK.** httpfs (and, for Iceberg, avro and iceberg) is
  loaded from the PyPI packages ``duckdb-extension-{name}`` (pinned with DuckDB; never downloaded,
  autoinstall off). Its S3 secret takes the endpoint boto3 resolved for S3 (``AWS_ENDPOINT_URL_S3``
  and the rest of botocore's configuration chain) and the credentials of boto3's session.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import boto3
import duckdb
import pandas as pd
import pyarrow as pa
import sqlglot
from sqlglot import exp

from contracts.audit_log import AUDIT_TABLE
from contracts.aws_endpoints import configured_endpoint_url, is_aws_host
from contracts.lake_tables import PARTITION_COLUMN, TABLES, glue_type
from contracts.settings import Settings
from lake.iceberg_catalog import load_table
from queries._athena_dialect import MACROS, AthenaDialectError, lake_schema, local_gap, to_duckdb
from queries._audit_view import audit_schema, audit_view
from queries._iceberg_views import Snapshots, check_pins, is_iceberg_view, resolve
from queries._lake_views import with_views
from queries._metadata_tables import METADATA_TABLES, metadata_table, split_name
from queries._parameters import QueryValue, render
from queries._table_clauses import split_table_clauses

if TYPE_CHECKING:
    from pyiceberg.catalog.rest import RestCatalog

_logger = logging.getLogger(__name__)

#: DuckDB's spelling of each Glue type the lake uses.
_DUCKDB_TYPES: Final = {"string": "VARCHAR", "bigint": "BIGINT", "timestamp": "TIMESTAMP"}
#: How a Parquet column becomes its Glue type. Lake timestamps are UTC-adjusted, which DuckDB reads
#: as TIMESTAMPTZ; rebuilding the naive UTC value from its epoch microseconds is exact and avoids
#: ICU's per-value calendar conversion (ten times slower on a day of ledger).
_CASTS: Final = {
    "VARCHAR": "CAST({} AS VARCHAR)",
    "BIGINT": "CAST({} AS BIGINT)",
    "TIMESTAMP": "make_timestamp(epoch_us({}))",
    "TIMESTAMPTZ": "CAST({} AS TIMESTAMPTZ)",
}
#: An Iceberg ``timestamptz`` stays zoned (iceberg_scan reads it as TIMESTAMPTZ: the cast is free).
_ICEBERG_TYPES: Final = {**_DUCKDB_TYPES, "timestamp": "TIMESTAMPTZ"}
#: Result types that Trino would have returned as ``bigint``.
_WIDE_INTEGERS: Final = frozenset({"HUGEINT", "UHUGEINT", "DECIMAL(38,0)"})
_PANDAS_TYPES: Final[dict[pa.DataType, Any]] = {
    pa.int8(): pd.Int64Dtype(),
    pa.int16(): pd.Int64Dtype(),
    pa.int32(): pd.Int64Dtype(),
    pa.int64(): pd.Int64Dtype(),
    pa.string(): pd.StringDtype("pyarrow"),
    pa.large_string(): pd.StringDtype("pyarrow"),
    pa.string_view(): pd.StringDtype("pyarrow"),
    pa.bool_(): pd.BooleanDtype(),
    pa.float64(): pd.Float64Dtype(),
}


#: Extensions loaded into every connection, and those the Iceberg views need (avro first: the
#: iceberg extension reads manifests with it).
BASE_EXTENSIONS: Final = ("httpfs",)
ICEBERG_EXTENSIONS: Final = ("avro", "iceberg")


@functools.cache
def extension_path(name: str) -> Path:
    """The ``{name}`` extension file shipped by the ``duckdb-extension-{name}`` wheel.

    The wheel is pinned with DuckDB; the file for DuckDB's own version is preferred.
    """
    package = f"duckdb-extension-{name}"
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the {package} package is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "extensions"
    exact = folder / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if exact.is_file():
        return exact
    found = sorted(folder.glob(f"*/{name}.duckdb_extension"))
    if not found:
        raise RuntimeError(f"no {name}.duckdb_extension under {folder}; reinstall {package}")
    return found[-1]


def scratch_directory() -> Path:
    """Where DuckDB may keep extensions and spill files: the temp dir, never the home folder."""
    path = Path(tempfile.gettempdir()) / "walletlake-duckdb"
    path.mkdir(parents=True, exist_ok=True)
    return path


#: DuckDB's memory for one engine; past it, sorts, joins and windows spill to the scratch folder.
#: DuckDB's own default is 80 % of the machine, which a nightly reconciliation of a busy day
#: (29 million rows at 1 % of the seed's load: ``bench/nightly_scale.py``) would take, beside the
#: stack's servers and the compaction workers.
DEFAULT_MEMORY_LIMIT: Final = "2GB"


def connect(
    session: boto3.Session | None = None,
    region: str = "us-east-1",
    *,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    iceberg: bool = False,
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with httpfs loaded and an S3 secret from the SDK's configuration.

    With ``session=None`` no S3 secret is made (for lakes on the local file system). With
    ``iceberg``, the avro and iceberg extensions are loaded too (for ``iceberg_scan``).
    """
    scratch = scratch_directory()
    connection = duckdb.connect(
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "extension_directory": str(scratch / "extensions"),
            "home_directory": str(scratch),
            "temp_directory": str(scratch / "spill"),
            "memory_limit": memory_limit,
        }
    )
    connection.execute("SET TimeZone = 'UTC'")
    for macro in MACROS:
        connection.execute(macro)
    for name in (*BASE_EXTENSIONS, *(ICEBERG_EXTENSIONS if iceberg else ())):
        connection.execute(f"LOAD {_quote(str(extension_path(name)))}")
    if session is not None:
        connection.execute(s3_secret_sql(session, region))
    return connection


def s3_secret_sql(session: boto3.Session, region: str) -> str:
    """``CREATE SECRET`` for the endpoint and credentials boto3 would use for S3."""
    endpoint = configured_endpoint_url(session, "s3")
    options = {"TYPE": "s3", "REGION": _quote(session.region_name or region)}
    credentials = session.get_credentials()
    if credentials is not None:
        frozen = credentials.get_frozen_credentials()
        options["KEY_ID"] = _quote(frozen.access_key or "")
        options["SECRET"] = _quote(frozen.secret_key or "")
        if frozen.token:
            options["SESSION_TOKEN"] = _quote(frozen.token)
    if endpoint is not None and not is_aws_host(endpoint):
        # A custom endpoint (moto, MinIO, a VPC endpoint...): path-style, as botocore uses for them.
        parts = urlsplit(endpoint)
        options["ENDPOINT"] = _quote(parts.netloc)
        options["URL_STYLE"] = "'path'"
        options["USE_SSL"] = "true" if parts.scheme == "https" else "false"
    body = ", ".join(f"{key} {value}" for key, value in options.items())
    return f"CREATE OR REPLACE SECRET walletlake_s3 ({body})"


class DuckDBEngine:
    """Runs the ``.sql`` files on DuckDB over the lake's Parquet (S3 or a local folder) or Iceberg.

    Parameters
    ----------
    settings:
        Names the bucket, prefix and region, and the lake's format: with ``lake_format="iceberg"``
        the stream's tables (ledger, wallets, quarantine) are read from their Iceberg tables
        (:mod:`queries._iceberg_views`), the others from Parquet as ever.
    location:
        Root of the lake's Parquet, ``s3://{bucket}/{prefix}`` by default. A local folder laid out
        the same way (``{location}/{table}/dt=YYYY-MM-DD/*.parquet``) works too; the benchmark uses it.
    session:
        boto3 session whose S3 endpoint and credentials DuckDB uses.
    versions:
        Iceberg snapshot ids to read instead of the current ones, per table, as the Athena engine
        takes them (:func:`queries.time_travel.current_versions` recorded them); ``None`` for a table that
        had no snapshot (its view is empty). Tables not named read their current snapshot. Only
        with ``lake_format="iceberg"``.
    catalog:
        The Iceberg catalog (the process's cached one by default).

    Examples
    --------
    >>> with DuckDBEngine(settings) as engine:  # doctest: +SKIP
    ...     engine.run("SELECT count(*) AS n FROM ledger WHERE dt = :d", {"d": "2026-11-22"})
    """

    name = "duckdb"

    def __init__(
        self,
        settings: Settings,
        *,
        location: str | None = None,
        session: boto3.Session | None = None,
        versions: Snapshots | None = None,
        catalog: RestCatalog | None = None,
    ) -> None:
        iceberg = settings.lake_format == "iceberg"
        if versions and not iceberg:
            raise ValueError("snapshots can only be pinned when lake_format is iceberg")
        self.settings = settings
        self.versions = check_pins(versions or {})
        self.location = (location or f"s3://{settings.bucket}/{settings.lake_prefix}").rstrip("/")
        on_s3 = self.location.startswith("s3://")
        if session is None and (on_s3 or iceberg):
            session = boto3.Session(region_name=settings.region)
        self._session = session
        self._catalog = catalog
        self._connection = connect(session if on_s3 or iceberg else None, settings.region, iceberg=iceberg)
        self._lock = threading.Lock()

    def as_of(self, versions: Snapshots) -> DuckDBEngine:
        """A new engine over the same lake, reading these Iceberg snapshots too (close it too)."""
        return DuckDBEngine(
            self.settings,
            location=self.location,
            session=self._session,
            versions={**self.versions, **versions},
            catalog=self._catalog,
        )

    def close(self) -> None:
        """Release the DuckDB connection."""
        self._connection.close()

    def __enter__(self) -> DuckDBEngine:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def table_glob(self, table: str) -> str:
        """The Parquet glob a table's view reads (for a table read from Parquet)."""
        return f"{self.location}/{table}/*/*.parquet"

    def translate(self, sql: str, params: Mapping[str, QueryValue]) -> str:
        """The DuckDB SQL a Trino query with parameters becomes (``AthenaDialectError``: refused)."""
        iceberg = frozenset(table for table in TABLES if is_iceberg_view(self.settings, table))
        return to_duckdb(render(sql, params), {**lake_schema(iceberg), **audit_schema()})

    def arrow(self, sql: str, params: Mapping[str, QueryValue]) -> pa.Table:
        """Run a Trino query and return its result as Arrow, integers as ``int64``.

        A table the statement reads ``FOR VERSION AS OF`` a snapshot (as Athena runs the AWS
        nightly's UNLOADs) is read at that snapshot for this statement; ``FOR TIMESTAMP AS OF`` an
        instant, at the snapshot that was current then (an empty table before its first commit).
        Tables may be named as Athena names them (``walletlake.ledger``).
        """
        clauses = split_table_clauses(with_views(render(sql, params)), self.settings.glue_database)
        query = self.translate(clauses.sql, {})
        with self._lock:
            named: dict[str, int | None] = {**clauses.versions}
            for table, moment in clauses.timestamps.items():
                named[table] = self._snapshot_at(table, moment)
            tables = _referenced_tables(query)
            lake_tables = tables - METADATA_TABLES - {AUDIT_TABLE}
            self._refresh_views(lake_tables, check_pins(named) if named else None)
            self._register_metadata(tables & METADATA_TABLES)
            if AUDIT_TABLE in tables:
                self._connection.execute(
                    f"CREATE OR REPLACE TEMP VIEW {AUDIT_TABLE} AS {audit_view(self.settings.audit_log)}"
                )
            try:
                relation = self._connection.sql(query)
            except duckdb.CatalogException as error:
                gap = local_gap(error)
                if gap is None:
                    raise
                raise AthenaDialectError(gap) from None
            wide = [
                name
                for name, kind in zip(relation.columns, relation.types, strict=True)
                if str(kind) in _WIDE_INTEGERS
            ]
            if wide:
                projection = ", ".join(
                    f"CAST({_identifier(name)} AS BIGINT) AS {_identifier(name)}"
                    if name in wide
                    else _identifier(name)
                    for name in relation.columns
                )
                relation = relation.project(projection)
            return relation.to_arrow_table()

    def _snapshot_at(self, table: str, moment: str) -> int | None:
        """The snapshot of ``table`` current at a Trino timestamp expression, evaluated by DuckDB."""
        if not is_iceberg_view(self.settings, table):
            raise ValueError(f"{table} is not an Iceberg table: it has no history to read at a timestamp")
        instant = self.translate(f"SELECT {moment} AS instant", {})
        row = self._connection.execute(
            f"SELECT epoch_ms(CAST(instant AS TIMESTAMPTZ)) FROM ({instant}) AS moment"
        ).fetchone()
        if row is None or row[0] is None:
            raise ValueError(f"FOR TIMESTAMP AS OF {moment}: not an instant")
        from lake.iceberg_tables import SNAPSHOT_RETENTION_HOURS
        from lake.snapshot_log import snapshot_at

        metadata = load_table(self.settings, table, self._catalog).metadata
        # exact or refused (lake.snapshot_log): never the newest survivor of an expired stretch
        return snapshot_at(metadata, int(row[0]), table=table, retention_hours=SNAPSHOT_RETENTION_HOURS)

    def run(self, sql: str, params: Mapping[str, QueryValue]) -> pd.DataFrame:
        """Run a Trino query with parameters; the frame uses pandas' nullable dtypes."""
        return self.arrow(sql, params).to_pandas(types_mapper=_PANDAS_TYPES.get)

    def _refresh_views(self, tables: Iterable[str], pins: Mapping[str, int | None] | None = None) -> None:
        # Re-made on every run: a table that had no object (or no snapshot) at the last query may
        # have one now, and an Iceberg table's current snapshot moves with every commit.
        versions = {**self.versions, **(pins or {})}
        for table in sorted(tables):
            self._connection.execute(
                f"CREATE OR REPLACE TEMP VIEW {_identifier(table)} AS {self._view(table, versions)}"
            )

    def _register_metadata(self, names: Iterable[str]) -> None:
        """Athena's ``"{table}$…"`` metadata tables the statement reads, as of the table's metadata now."""
        for name in sorted(names):
            split = split_name(name)
            if split is None or not is_iceberg_view(self.settings, split[0]):
                raise AthenaDialectError(f"{name}: only the lake's Iceberg tables have metadata tables")
            rows = metadata_table(load_table(self.settings, split[0], self._catalog), split[1])
            self._connection.register(name, rows)

    def _view(self, table: str, versions: Mapping[str, int | None]) -> str:
        types = _ICEBERG_TYPES if is_iceberg_view(self.settings, table) else _DUCKDB_TYPES
        columns = [(field.name, types[glue_type(field.type)]) for field in TABLES[table]]
        source = self._source(table, versions)
        if source is None:
            empty = ", ".join(f"CAST(NULL AS {kind}) AS {_identifier(name)}" for name, kind in columns)
            return f"SELECT {empty}, CAST(NULL AS VARCHAR) AS {PARTITION_COLUMN} WHERE false"
        cast = ", ".join(
            f"{_CASTS[kind].format(_identifier(name))} AS {_identifier(name)}" for name, kind in columns
        )
        # dt is a VARCHAR in both sources (hive_types, the Iceberg string column): kept bare, so a
        # dt predicate reaches the scan and prunes files (partitions, or Iceberg manifests).
        return f"SELECT {cast}, {PARTITION_COLUMN} FROM {source}"

    def _source(self, table: str, versions: Mapping[str, int | None]) -> str | None:
        """The table function a view reads, or None when there is nothing to read yet."""
        if is_iceberg_view(self.settings, table):
            found = resolve(self.settings, table, versions, self._session)
            if found.snapshot_id is None:
                return None
            return (
                f"iceberg_scan({_quote(found.metadata_location)}, "
                f"snapshot_from_id => {int(found.snapshot_id)})"
            )
        pattern = self.table_glob(table)
        (present,) = self._connection.execute(
            f"SELECT count(*) > 0 FROM glob({_quote(pattern)})"
        ).fetchone() or (False,)
        if not present:
            return None
        return (
            f"read_parquet({_quote(pattern)}, "
            f"hive_partitioning = true, hive_types = {{'{PARTITION_COLUMN}': 'VARCHAR'}}, "
            # a day mixing files written before and after a column was added reads by name
            "union_by_name = true)"
        )


def _referenced_tables(query: str) -> set[str]:
    """Lake tables (and metadata tables) a query reads (CTE names are not tables)."""
    tree = sqlglot.parse_one(query, read="duckdb")
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    return {
        table.name
        for table in tree.find_all(exp.Table)
        if (table.name in TABLES or table.name in METADATA_TABLES or table.name == AUDIT_TABLE)
        and table.name not in ctes
    }


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
