"""Compaction: a day of small landing files rewritten into a few large, sorted, deduplicated ones.

The stream processor lands one object per batch, so a busy day has thousands of small files whose
rows are in arrival order: every file holds every wallet, and a one-wallet question reads all of
them. Compaction rewrites a day of each landing table (``ledger``, ``wallets``, ``quarantine``)
into files of at most ``target_file_bytes`` (one when the day is small), sorted so that row-group
statistics prune (``ledger`` by ``wallet_id``, ``wallet_version``), with no duplicate entry.

Crash safety, and why a rerun is always right
    1. List the partition's Parquet objects: the *inputs* (landing files, and the compacted files
       of an earlier run when late data arrived since).
    2. Name the *generation* from the inputs (a hash of their keys and sizes) and write the
       outputs as ``compacted-<generation>-<n>.parquet``. Output names never collide with an
       input, and the same inputs always give the same names.
    3. Only when every output is written, delete the inputs.

    Every object ever in the partition is either an input still present or an output of a
    generation whose inputs are all still present until its last output exists; so at every
    instant the union of the partition's objects holds every row at least once. A run killed at
    any point leaves a partition the next run merges and deduplicates, losing nothing. A
    partition holding only the files of one generation is compacted: running again changes
    nothing.

    Between the last output's write and the inputs' deletion (seconds, or until a rerun after a
    crash) readers can see rows twice. The analyst queries count an ``entry_id`` once, and
    reconciliation reports the copies as ``duplicate``, which is the state's true name: the
    nightly job then fails and its rerun finishes the compaction. Runs are not meant to overlap
    (one nightly job); two that do can leave two generations side by side, never a lost row, and
    the next run merges them.

Duplicates must agree
    Copies of a row (a re-delivered batch) are identical except for when and from where they
    were ingested. Copies that differ in anything else are not duplicates but a corruption, and
    compaction refuses (:class:`CompactionConflictError`) rather than pick one: reconciliation then
    names the wallet and versions.

Memory and scale
    The day's objects are downloaded to a scratch folder and merged by an in-memory DuckDB, which
    sorts out of core: past ``memory_limit`` it spills to the scratch folder. Outputs are streamed
    one file at a time, so memory stays near ``memory_limit`` plus one output file whatever the
    day's size; the scratch folder needs about twice the day's Parquet size (Lambda's ``/tmp``
    goes to 10 GB). Copies are found before anything is written: one pass groups the rows by key
    and compares a hash of their stable columns (a 64-bit hash: two different copies collide with
    probability 2^-64, and reconciliation would still see them), the sorted pass then drops the
    later copies, which the sort has made neighbours.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import logging
import math
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import boto3
import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from contracts.lake_layout import PARQUET_SUFFIX, partition_prefix
from contracts.lake_tables import STREAM_TABLES, TABLES
from contracts.settings import DEFAULT_COMPACTION_UNIT_MINUTES, Settings
from lake import objects, parquet

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_logger = logging.getLogger(__name__)

#: Athena reads files of 128 MB to 1 GB most efficiently; 256 MB keeps a day of a busy ledger in
#: a handful of files that still spread over Athena's workers.
DEFAULT_TARGET_FILE_BYTES: Final = 256 * 2**20
#: Rows per row group. A one-wallet statement reads the row groups whose ``wallet_id`` range holds
#: the wallet: one, or two when its rows straddle a boundary. With 32,768-row groups a day of 10
#: million rows costs at most 2 x 32,768 / 10,000,000 = 0.66 % of the day's bytes (the target is
#: 1 %), while each group (about 3 MB compressed) stays large enough for Athena to read in one
#: request per column.
DEFAULT_ROW_GROUP_ROWS: Final = 32_768
_PARQUET_TYPE: Final = "application/vnd.apache.parquet"
#: DuckDB's memory for the sort; beyond it, it spills to the scratch folder.
DEFAULT_MEMORY_LIMIT: Final = "2GB"

#: Time columns whose row-group min/max compacted files keep (time-range queries prune on them).
_PRUNING_TIME_COLUMNS: Final = tuple(dict.fromkeys(table.day_column for table in STREAM_TABLES.values()))

_COMPACTED: Final = re.compile(r"compacted-([0-9a-f]{16})-(\d{4})\.parquet$")


class CompactionConflictError(RuntimeError):
    """Copies of the same row disagree; compaction leaves the partition untouched."""


@dataclasses.dataclass(frozen=True, slots=True)
class Merged:
    """A day of one table, deduplicated and sorted (what :func:`merge` returns)."""

    table: pa.Table
    rows_in: int
    duplicates_dropped: int


@dataclasses.dataclass(frozen=True, slots=True)
class TableCompaction:
    """What compaction did to one table's partition."""

    table: str
    files_in: int
    files_out: int
    rows_in: int
    rows_out: int
    duplicates_dropped: int
    bytes_in: int
    bytes_out: int
    already_compact: bool
    keys_out: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {**dataclasses.asdict(self), "keys_out": list(self.keys_out)}


@dataclasses.dataclass(frozen=True, slots=True)
class CompactionReport:
    """Compaction of one day, per table."""

    day: dt.date
    tables: dict[str, TableCompaction]
    #: What each unit that had work did (:func:`lake.compaction_units.unit_summary`).
    units: tuple[dict[str, Any], ...] = ()

    @property
    def rows_out(self) -> int:
        """Ledger rows after compaction (the figure the demo and the nightly job check)."""
        return self.tables["ledger"].rows_out if "ledger" in self.tables else 0

    @property
    def ledger_rows(self) -> int:
        """Same as :attr:`rows_out`."""
        return self.rows_out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "day": self.day.isoformat(),
            "tables": {k: v.to_dict() for k, v in self.tables.items()},
            "units": list(self.units),
        }


#: Called with ``("wrote", key)`` after each output and ``("deleting", keys)`` before the inputs go:
#: a seam to watch progress, and for tests to stop a run at a chosen step.
StepHook = Callable[[str, Any], None]


def compact_day(
    settings: Settings,
    day: dt.date,
    *,
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES,
    row_group_rows: int | None = None,
    tables: Sequence[str] = tuple(STREAM_TABLES),
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    on_step: StepHook | None = None,
    session: boto3.Session | None = None,
    unit_minutes: int | None = None,
    workers: int = 1,
    on_unit: Callable[[dict[str, Any]], None] | None = None,
) -> CompactionReport:
    """Compact what is left of one UTC day, unit by unit; idempotent, and safe to kill and rerun.

    The day is worked as the independent units of :mod:`lake.compaction_units` (an hour each by
    default), ``workers`` at a time; units already compacted (during the day, by the hourly
    schedule) are skipped. The report covers the whole day: rows of skipped units are read from
    their files' footers.

    Examples
    --------
    >>> compact_day(Settings.from_env(), dt.date(2026, 11, 21)).rows_out  # doctest: +SKIP
    1200345
    """
    from lake.compaction_units import plan_units, run_units

    if target_file_bytes <= 0 or (row_group_rows is not None and row_group_rows <= 0):
        raise ValueError("target_file_bytes and row_group_rows must be positive")
    if on_step is not None and workers > 1:
        raise ValueError("on_step watches one process: use workers=1 with it")
    session = session or boto3.Session(region_name=settings.region)
    client: S3Client = session.client("s3")
    units = plan_units(
        settings,
        day,
        unit_minutes=unit_minutes or DEFAULT_COMPACTION_UNIT_MINUTES,
        tables=tables,
        client=client,
    )
    options: dict[str, Any] = {
        "target_file_bytes": target_file_bytes,
        "row_group_rows": row_group_rows,
        "memory_limit": memory_limit,
    }
    if workers <= 1:
        options.update(on_step=on_step, client=client)
    summaries: list[dict[str, Any]] = []

    def done_one(summary: dict[str, Any]) -> None:
        summaries.append(summary)
        if on_unit:
            on_unit(summary)

    results = run_units(settings, units, workers=workers, on_done=done_one, **options)
    report = {
        table: _day_total(
            client, settings, table, day, [done for unit, done in results if unit.table == table]
        )
        for table in tables
    }
    return CompactionReport(day=day, tables=report, units=tuple(summaries))


def _day_total(
    client: S3Client, settings: Settings, table: str, day: dt.date, ran: Sequence[TableCompaction]
) -> TableCompaction:
    """The day's partition after its units ran: what they did plus what they left alone."""
    prefix = partition_prefix(settings.lake_prefix, table, day)
    after = [
        (key, size)
        for key, size in objects.iter_objects(client, settings.bucket, prefix)
        if key.endswith(PARQUET_SUFFIX)
    ]
    written = {key for done in ran for key in done.keys_out}
    untouched = [(key, size) for key, size in after if key not in written]
    rows = sum(read_footer(client, settings.bucket, key).num_rows for key, _ in untouched)
    size = sum(size for _, size in untouched)
    return TableCompaction(
        table=table,
        files_in=len(untouched) + sum(done.files_in for done in ran),
        files_out=len(after),
        rows_in=rows + sum(done.rows_in for done in ran),
        rows_out=rows + sum(done.rows_out for done in ran),
        duplicates_dropped=sum(done.duplicates_dropped for done in ran),
        bytes_in=size + sum(done.bytes_in for done in ran),
        bytes_out=sum(size for _, size in after),
        already_compact=not ran,
        keys_out=tuple(key for key, _ in after),
    )


def merge(table_name: str, parts: Sequence[pa.Table]) -> Merged:
    """A day's parts as one table: one copy of each row (the first ingested), in the table's order.

    The same kernel as :func:`compact_day`, over Arrow tables instead of downloaded objects.
    Raises :class:`CompactionConflictError` when copies of a row differ outside its volatile
    columns.
    """
    schema = TABLES[table_name]
    with _connection(DEFAULT_MEMORY_LIMIT) as connection:
        names = []
        for index, part in enumerate(parts):
            name = f"part_{index}"
            connection.register(name, part.cast(schema))
            names.append(name)
        if not names:
            return Merged(schema.empty_table(), 0, 0)
        source = "(" + " UNION ALL ".join(f"SELECT * FROM {name}" for name in names) + ")"
        kernel = _Kernel(connection, table_name, source)
        batches = list(kernel.batches(DEFAULT_ROW_GROUP_ROWS))
    table = pa.concat_tables(batches) if batches else schema.empty_table()
    return Merged(table, kernel.rows_in, kernel.duplicates)


def rows_per_file(bytes_per_row: float, target_file_bytes: int, row_group_rows: int) -> int:
    """Whole row groups per file, as many as fit ``target_file_bytes`` (at least one group)."""
    if bytes_per_row <= 0:
        return row_group_rows
    groups = max(1, math.floor(target_file_bytes / bytes_per_row / row_group_rows))
    return groups * row_group_rows


def unit_row_group_rows(rows: int) -> int:
    """Row groups for a unit of ``rows``: small enough that a one-wallet read stays under 1 %.

    A day is compacted in units (an hour by default), each sorted by wallet on its own, so a
    one-wallet statement over the day reads one or two row groups *of every unit*: at most
    ``2 x group / unit rows`` of the day. Groups of a three-hundredth of the unit keep that at
    0.67 %; they never grow past :data:`DEFAULT_ROW_GROUP_ROWS` (big units: Athena's sweet spot)
    nor shrink under 1,024 rows (tiny units: a group's fixed costs would dominate).
    """
    return max(1_024, min(DEFAULT_ROW_GROUP_ROWS, rows // 300))


def generation(inputs: Sequence[tuple[str, int]]) -> str:
    """A name for the outputs of a set of inputs: the same inputs, the same names."""
    digest = hashlib.sha256("\n".join(f"{key}\t{size}" for key, size in sorted(inputs)).encode())
    return digest.hexdigest()[:16]


def is_compacted(keys: Sequence[str]) -> bool:
    """Whether a partition's Parquet keys are the complete output of one compaction."""
    generations = {match.group(1) for key in keys if (match := _COMPACTED.search(key))}
    return bool(keys) and len(generations) == 1 and all(_COMPACTED.search(key) for key in keys)


def read_footer(client: S3Client, bucket: str, key: str) -> pq.FileMetaData:
    """A Parquet object's metadata, fetched with two ranged GETs instead of the whole object."""
    tail = client.get_object(Bucket=bucket, Key=key, Range="bytes=-8")["Body"].read()
    if tail[-4:] != b"PAR1":
        raise ValueError(f"{key} is not a Parquet object")
    length = int.from_bytes(tail[:4], "little")
    footer = client.get_object(Bucket=bucket, Key=key, Range=f"bytes=-{length + 8}")["Body"].read()
    return pq.read_metadata(pa.BufferReader(b"PAR1" + footer))


@dataclasses.dataclass(frozen=True, slots=True)
class _Sizing:
    target_file_bytes: int
    row_group_rows: int
    memory_limit: str


class _Kernel:
    """Deduplicate and sort one table's day in DuckDB, streaming the result in batches."""

    def __init__(self, connection: duckdb.DuckDBPyConnection, table_name: str, source: str) -> None:
        self._connection = connection
        self._layout = STREAM_TABLES[table_name].layout
        self._schema = TABLES[table_name]
        self._source = source
        self._table_name = table_name
        self.rows_in = 0
        self.duplicates = 0

    def batches(self, batch_rows: int) -> Iterator[pa.Table]:
        """Sorted rows, one copy of each, cast to the lake schema; checks the copies first."""
        self._check_copies()
        layout = self._layout
        order = ", ".join(_identifier(name) for name in dict.fromkeys((*layout.order, *layout.prefer)))
        columns = ", ".join(_identifier(name) for name in self._schema.names)
        reader = self._connection.sql(
            f"SELECT {columns} FROM {self._source} ORDER BY {order}"
        ).to_arrow_reader(batch_rows)
        previous: pa.Table | None = None
        for batch in reader:
            table = pa.Table.from_batches([batch]).cast(self._schema)
            self.rows_in += table.num_rows
            keys = table.select(list(layout.key))
            joined = pa.concat_tables([previous, keys]) if previous is not None else keys
            repeat = _same_as_previous(joined, layout.key)[joined.num_rows - keys.num_rows :]
            previous = keys.slice(keys.num_rows - 1) if keys.num_rows else previous
            self.duplicates += int(repeat.sum())
            yield table.filter(pa.array(~repeat)) if repeat.any() else table

    def _check_copies(self) -> None:
        layout = self._layout
        key = ", ".join(_identifier(name) for name in layout.key)
        stable = ", ".join(_identifier(n) for n in self._schema.names if n not in layout.volatile)
        rows = self._connection.sql(
            f"SELECT {key}, count(*) AS copies, min(h) <> max(h) AS differ "
            f"FROM (SELECT {key}, hash({stable}) AS h FROM {self._source}) "
            f"GROUP BY {key} HAVING count(*) > 1"
        ).fetchall()
        conflicts = [row[: len(layout.key)] for row in rows if row[-1]]
        if conflicts:
            raise CompactionConflictError(
                f"{self._table_name}: copies of {conflicts[:5]} differ outside "
                f"{list(layout.volatile)}; left untouched"
            )


class _Output:
    """Cuts the sorted stream into files of whole row groups under the size target, and puts them."""

    def __init__(
        self,
        put: Callable[[str, bytes], None],
        name: str,
        rows_per_file: int,
        sizing: _Sizing,
        file_prefix: str = "",
        sort_key: str | None = None,
    ) -> None:
        self._put = put
        self._name = name
        self._file_prefix = file_prefix
        self._sort_key = sort_key
        self._rows_per_file = rows_per_file
        self._sizing = sizing
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self.names: list[str] = []
        self.bytes = 0
        self.rows = 0

    def add(self, table: pa.Table) -> None:
        self._pending.append(table)
        self._pending_rows += table.num_rows
        while self._pending_rows >= self._rows_per_file:
            self._emit()

    def close(self) -> None:
        while self._pending_rows:
            self._emit()
        if not self.names:  # nothing left after all: one empty file keeps the partition's state plain
            self._put_file(pa.concat_tables(self._pending) if self._pending else None)

    def _emit(self) -> None:
        combined = pa.concat_tables(self._pending)
        take = min(self._rows_per_file, combined.num_rows)
        head = combined.slice(0, take).combine_chunks()
        body = self._encode(head)
        if len(body) > self._sizing.target_file_bytes and take > self._sizing.row_group_rows:
            # The estimate from the inputs' size was short (sorted rows can compress worse than
            # arrival order): learn from this file and cut it again.
            self._rows_per_file = rows_per_file(
                len(body) / take, self._sizing.target_file_bytes, self._sizing.row_group_rows
            )
            if self._rows_per_file < take:
                return
        self._store(body, take)
        rest = combined.slice(take)
        self._pending, self._pending_rows = [rest], rest.num_rows

    def _put_file(self, table: pa.Table | None) -> None:
        if table is not None:
            self._store(self._encode(table), table.num_rows)

    def _encode(self, table: pa.Table) -> bytes:
        # Min/max only where a row group's range can prune: the sort key (the first ``order``
        # column) and the time columns (a unit is a few minutes of the day). Every other column's
        # range spans nearly everything in a wallet-sorted group, and would only grow the footer
        # that every reader fetches, many times over with the small groups of a busy day's units.
        if self._sort_key is None or self._sort_key not in table.column_names:
            return parquet.encode(table, row_group_size=self._sizing.row_group_rows)
        return parquet.encode(
            table,
            row_group_size=self._sizing.row_group_rows,
            statistics_columns=[self._sort_key, *_PRUNING_TIME_COLUMNS],
        )

    def _store(self, body: bytes, rows: int) -> None:
        name = f"{self._file_prefix}compacted-{self._name}-{len(self.names):04d}{PARQUET_SUFFIX}"
        self._put(name, body)
        self.names.append(name)
        self.bytes += len(body)
        self.rows += rows


@dataclasses.dataclass(frozen=True, slots=True)
class FilesCompaction:
    """What :func:`compact_files` wrote."""

    names: tuple[str, ...]
    rows_in: int
    rows_out: int
    duplicates_dropped: int
    bytes_out: int


def compact_files(
    table_name: str,
    paths: Sequence[str],
    put: Callable[[str, bytes], None],
    *,
    name: str,
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES,
    row_group_rows: int | None = DEFAULT_ROW_GROUP_ROWS,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    scratch: Path | None = None,
    file_prefix: str = "",
) -> FilesCompaction:
    """Merge local Parquet files of one table into ``{file_prefix}compacted-<name>-<n>.parquet``.

    The storage-free core of :func:`compact_day` (which downloads the inputs, puts the outputs in
    S3 and deletes the inputs): ``put(file_name, body)`` stores each output as it is made.
    ``row_group_rows=None`` sizes row groups for the rows at hand (:func:`unit_row_group_rows`).
    """
    rows = sum(pq.read_metadata(path).num_rows for path in paths)
    size = sum(Path(path).stat().st_size for path in paths)
    groups = unit_row_group_rows(rows) if row_group_rows is None else row_group_rows
    sizing = _Sizing(target_file_bytes, groups, memory_limit)
    output = _Output(
        put,
        name,
        rows_per_file(size / max(rows, 1), target_file_bytes, groups),
        sizing,
        file_prefix,
        sort_key=STREAM_TABLES[table_name].layout.order[0],
    )
    with _connection(memory_limit, scratch) as connection:
        kernel = _Kernel(connection, table_name, f"read_parquet([{', '.join(map(_quote, paths))}])")
        for batch in kernel.batches(groups):
            output.add(batch)
    output.close()
    return FilesCompaction(tuple(output.names), kernel.rows_in, output.rows, kernel.duplicates, output.bytes)


def compact_inputs(
    client: S3Client,
    settings: Settings,
    table_name: str,
    prefix: str,
    inputs: Sequence[tuple[str, int]],
    *,
    file_prefix: str,
    sizing: _Sizing,
    on_step: StepHook | None = None,
) -> TableCompaction:
    """Merge ``inputs`` (keys and sizes under ``prefix``) into compacted files, then delete them.

    The crash-safe protocol of the module docstring, for any set of inputs (a unit's slots, or a
    whole day). Outputs are written with ``If-None-Match: *``: an output is never replaced. A
    rerun of the same inputs (a run killed after some outputs) finds its outputs already there,
    keeps them (same inputs, same generation, same bytes) and goes on.
    """
    keys_in = [key for key, _ in inputs]
    bytes_in = sum(size for _, size in inputs)
    if not inputs or is_compacted(keys_in):
        rows = sum(read_footer(client, settings.bucket, key).num_rows for key in keys_in)
        return TableCompaction(
            table_name, len(inputs), len(inputs), rows, rows, 0, bytes_in, bytes_in, True, tuple(keys_in)
        )
    keys_out: list[str] = []

    def put(name: str, body: bytes) -> None:
        key = prefix + name
        if not objects.put_if_absent(client, settings.bucket, key, body, content_type=_PARQUET_TYPE):
            _logger.info("compaction output %s exists already (an earlier run of the same inputs)", key)
        keys_out.append(key)
        if on_step:
            on_step("wrote", key)

    with tempfile.TemporaryDirectory(prefix="walletlake-compact-") as scratch:
        local = []
        for index, key in enumerate(keys_in):
            path = Path(scratch) / f"input-{index:06d}.parquet"
            client.download_file(settings.bucket, key, str(path))
            local.append(str(path))
        done = compact_files(
            table_name,
            local,
            put,
            name=generation(inputs),
            target_file_bytes=sizing.target_file_bytes,
            row_group_rows=sizing.row_group_rows or None,
            memory_limit=sizing.memory_limit,
            scratch=Path(scratch) / "spill",
            file_prefix=file_prefix,
        )
    stale = [key for key in keys_in if key not in keys_out]
    if on_step:
        on_step("deleting", tuple(stale))
    objects.delete_keys(client, settings.bucket, stale)
    _logger.info(
        "compacted %s%s: %d files, %d rows -> %d files, %d rows (%d duplicates)",
        prefix,
        file_prefix,
        len(inputs),
        done.rows_in,
        len(keys_out),
        done.rows_out,
        done.duplicates_dropped,
    )
    return TableCompaction(
        table=table_name,
        files_in=len(inputs),
        files_out=len(keys_out),
        rows_in=done.rows_in,
        rows_out=done.rows_out,
        duplicates_dropped=done.duplicates_dropped,
        bytes_in=bytes_in,
        bytes_out=done.bytes_out,
        already_compact=False,
        keys_out=tuple(keys_out),
    )


@contextlib.contextmanager
def _connection(memory_limit: str, spill: Path | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A private in-memory DuckDB that spills to ``spill`` (no extension, nothing under ~)."""
    directory = spill or Path(tempfile.gettempdir()) / "walletlake-duckdb" / "spill"
    connection = duckdb.connect(
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "memory_limit": memory_limit,
            "temp_directory": str(directory),
            "home_directory": str(directory.parent),
        }
    )
    try:
        yield connection
    finally:
        connection.close()


def _same_as_previous(table: pa.Table, columns: tuple[str, ...]) -> np.ndarray:
    """Per row: equal to the row before it in every one of ``columns`` (nulls equal nulls)."""
    same = np.zeros(table.num_rows, dtype=bool)
    if table.num_rows < 2:
        return same
    tail = np.ones(table.num_rows - 1, dtype=bool)
    for name in columns:
        column = table.column(name)
        current, previous = column.slice(1), column.slice(0, table.num_rows - 1)
        equal = pc.fill_null(pc.equal(current, previous), False)
        both_null = pc.and_(pc.is_null(current), pc.is_null(previous))
        tail &= pc.or_(equal, both_null).to_numpy(zero_copy_only=False)
    same[1:] = tail
    return same


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
