"""The compaction kernel: one table's rows with one copy of each, in the table's order, and the rules
that size and name the files they are cut into.

Pure: local Parquet files and parameters in, Arrow tables and numbers out; no S3, no settings. The
plain lake's compaction (:mod:`lake.compaction`, which brings the inputs from S3 and puts the
outputs back under its crash-safe protocol), the Iceberg lake's maintenance and the benchmarks run
this same code, and its rules are tested without a server (``tests/unit/test_compaction_kernel.py``).

Duplicates must agree
    Copies of a row (a re-delivered batch) are identical except for when and from where they were
    ingested (the layout's ``volatile`` columns, :class:`contracts.lake_tables.CompactionLayout`).
    Copies that differ in anything else are not duplicates but a corruption, and the kernel refuses
    (:class:`CompactionConflictError`) rather than pick one: the partition is then left as it is,
    and reconciliation names the wallet and versions.

Memory and scale
    The rows are merged by a private in-memory DuckDB that sorts out of core: past ``memory_limit``
    it spills to a local folder. The result is handed on one batch at a time, so memory stays near
    ``memory_limit`` plus what the caller keeps of the batches, whatever the input's size; the spill
    folder needs about the inputs' Parquet size again. Copies are found before any row is handed
    on: one pass groups the rows by key and compares a hash of their stable columns (a 64-bit hash:
    two different copies collide with probability 2^-64, and reconciliation would still see them);
    the sorted pass then drops the later copies, which the sort has made neighbours.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from contracts.lake_layout import PARQUET_SUFFIX
from contracts.lake_tables import STREAM_TABLES, TABLES

#: Rows per row group. A one-wallet statement reads the row groups whose ``wallet_id`` range holds
#: the wallet: one, or two when its rows straddle a boundary. With 32,768-row groups a day of 10
#: million rows costs at most 2 x 32,768 / 10,000,000 = 0.66 % of the day's bytes (the target is
#: 1 %), while each group (about 3 MB compressed) stays large enough for Athena to read in one
#: request per column.
DEFAULT_ROW_GROUP_ROWS: Final = 32_768
#: DuckDB's memory for the sort; beyond it, it spills to the spill folder.
DEFAULT_MEMORY_LIMIT: Final = "2GB"
#: Smallest row group :func:`unit_row_group_rows` picks: below it a group's fixed costs (its
#: footer entry, one request per column) outweigh what pruning saves.
MIN_UNIT_ROW_GROUP_ROWS: Final = 1_024

#: Output names: ``[file_prefix]compacted-<generation>-<nnnn>.parquet`` (:func:`compacted_name`).
_COMPACTED: Final = re.compile(r"compacted-([0-9a-f]{16})-(\d{4})\.parquet$")


class CompactionConflictError(RuntimeError):
    """Copies of the same row disagree; compaction leaves the partition untouched."""


@dataclasses.dataclass(frozen=True, slots=True)
class Sizing:
    """How large compaction's outputs are, and how much memory the sort may take.

    ``row_group_rows=None`` sizes row groups for the rows at hand (:func:`unit_row_group_rows`):
    what a unit of a day wants, since each unit is sorted on its own.
    """

    target_file_bytes: int
    row_group_rows: int | None = None
    memory_limit: str = DEFAULT_MEMORY_LIMIT

    def __post_init__(self) -> None:
        # Checked here, before any listing or download, so a bad option fails at once.
        if self.target_file_bytes <= 0 or (self.row_group_rows is not None and self.row_group_rows <= 0):
            raise ValueError("target_file_bytes and row_group_rows must be positive")

    def group_rows(self, rows: int) -> int:
        """Rows per row group for an input of ``rows`` rows."""
        return unit_row_group_rows(rows) if self.row_group_rows is None else self.row_group_rows


@dataclasses.dataclass(frozen=True, slots=True)
class MergeCounts:
    """What :func:`merge_files` read and handed on."""

    rows_in: int
    rows_out: int

    @property
    def duplicates_dropped(self) -> int:
        """Copies of a row dropped (all but the first ingested of each)."""
        return self.rows_in - self.rows_out


def merge_files(
    table_name: str,
    paths: Sequence[str | Path],
    sink: Callable[[pa.Table], None],
    *,
    batch_rows: int = DEFAULT_ROW_GROUP_ROWS,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    spill: Path | None = None,
) -> MergeCounts:
    """Hand ``sink`` the rows of the Parquet files ``paths``, one copy of each, in the table's order.

    The order is the table's compaction layout: ``order`` then ``prefer``, so the copy kept is the
    first ingested. ``sink`` gets tables of the lake schema, in order, in batches of up to about
    ``batch_rows`` rows (fewer where copies were dropped), so the caller can cut files without
    holding the whole result. Raises :class:`CompactionConflictError` when copies of a row differ
    outside the layout's ``volatile`` columns; then ``sink`` has seen no row.
    """
    if table_name not in STREAM_TABLES:
        raise ValueError(f"{table_name!r} is not a landing table ({', '.join(STREAM_TABLES)})")
    if batch_rows <= 0:
        raise ValueError("batch_rows must be positive")
    if not paths:
        return MergeCounts(0, 0)
    # union_by_name: files written before a column was added lack it (read as null), whichever
    # file comes first
    source = f"read_parquet([{', '.join(_quote(str(path)) for path in paths)}], union_by_name = true)"
    with _connection(memory_limit, spill) as connection:
        _check_copies(connection, table_name, source)
        rows_in = rows_out = 0
        for table, repeat in _sorted_batches(connection, table_name, source, batch_rows):
            rows_in += table.num_rows
            kept = table.filter(pa.array(~repeat)) if repeat.any() else table
            rows_out += kept.num_rows
            sink(kept)
    return MergeCounts(rows_in, rows_out)


def unit_row_group_rows(rows: int) -> int:
    """Row groups for a unit of ``rows``: small enough that a one-wallet read stays under 1 %.

    A day is compacted in units (an hour by default), each sorted by wallet on its own, so a
    one-wallet statement over the day reads one or two row groups *of every unit*: at most
    ``2 x group / unit rows`` of the day. Groups of a three-hundredth of the unit keep that at
    0.67 %; they never grow past :data:`DEFAULT_ROW_GROUP_ROWS` (big units: Athena's sweet spot)
    nor shrink under :data:`MIN_UNIT_ROW_GROUP_ROWS` (tiny units: a group's fixed costs would
    dominate).
    """
    return max(MIN_UNIT_ROW_GROUP_ROWS, min(DEFAULT_ROW_GROUP_ROWS, rows // 300))


def generation(inputs: Sequence[tuple[str, int]]) -> str:
    """A name for the outputs of a set of inputs (keys and sizes): the same inputs, the same name.

    The order of ``inputs`` does not matter (a listing's order is no part of what was merged).
    Because the name depends only on the inputs, a rerun over the inputs a killed run left finds
    the outputs it already wrote under the same names and keeps them; and because an output's name
    never equals an input's, writing one never replaces a row's only copy.
    """
    digest = hashlib.sha256("\n".join(f"{key}\t{size}" for key, size in sorted(inputs)).encode())
    return digest.hexdigest()[:16]


def compacted_name(name: str, index: int, file_prefix: str = "") -> str:
    """The file name of output ``index`` of generation ``name`` (what :func:`is_compacted` reads)."""
    return f"{file_prefix}compacted-{name}-{index:04d}{PARQUET_SUFFIX}"


def is_compacted(keys: Sequence[str]) -> bool:
    """Whether a partition's (or a unit's) Parquet keys are the complete output of one compaction.

    Exactly one generation and nothing else: any landing file, or a second generation (two runs
    that overlapped, or one killed before deleting its inputs), means there is work left.
    """
    generations = {match.group(1) for key in keys if (match := _COMPACTED.search(key))}
    return bool(keys) and len(generations) == 1 and all(_COMPACTED.search(key) for key in keys)


def _check_copies(connection: duckdb.DuckDBPyConnection, table_name: str, source: str) -> None:
    """Raise :class:`CompactionConflictError` if copies of a row differ in a stable column.

    A pass of its own, before the sorted one: a conflict found half way through the sorted pass
    would come after the caller had written outputs. It reads the key columns alone to find the
    keys held more than once (none, on a lake committed exactly once), and hashes the stable
    columns of those rows only: hashing every column of every row, as it first did, decoded the
    whole day a second time (a sixth of a 1 % day's compaction).
    """
    layout = STREAM_TABLES[table_name].layout
    key = ", ".join(_identifier(name) for name in layout.key)
    connection.execute(
        f"CREATE OR REPLACE TEMPORARY TABLE repeated_keys AS "
        f"SELECT {key} FROM {source} GROUP BY {key} HAVING count(*) > 1"
    )
    repeated = connection.sql("SELECT count(*) FROM repeated_keys").fetchone()
    if not repeated or not repeated[0]:
        return
    # nulls equal nulls, as in the GROUP BY that found the keys
    on = " AND ".join(f"s.{_identifier(n)} IS NOT DISTINCT FROM r.{_identifier(n)}" for n in layout.key)
    keys = ", ".join(f"s.{_identifier(name)}" for name in layout.key)
    stable = ", ".join(f"s.{_identifier(n)}" for n in TABLES[table_name].names if n not in layout.volatile)
    rows = connection.sql(
        f"SELECT {key}, count(*) AS copies, min(h) <> max(h) AS differ "
        f"FROM (SELECT {keys}, hash({stable}) AS h FROM {source} AS s SEMI JOIN repeated_keys AS r ON {on}) "
        f"GROUP BY {key}"
    ).fetchall()
    conflicts = [row[: len(layout.key)] for row in rows if row[-1]]
    if conflicts:
        raise CompactionConflictError(
            f"{table_name}: copies of {conflicts[:5]} differ outside {list(layout.volatile)}; left untouched"
        )


def _sorted_batches(
    connection: duckdb.DuckDBPyConnection, table_name: str, source: str, batch_rows: int
) -> Iterator[tuple[pa.Table, np.ndarray]]:
    """Every row in the table's order, cast to the lake schema, with a mask of the later copies.

    A row is a later copy when its key equals the row before it, which may be the last row of the
    previous batch: the sort makes copies neighbours, not batch-mates.
    """
    layout = STREAM_TABLES[table_name].layout
    schema = TABLES[table_name]
    order = ", ".join(_identifier(name) for name in dict.fromkeys((*layout.order, *layout.prefer)))
    columns = ", ".join(_identifier(name) for name in schema.names)
    reader = connection.sql(f"SELECT {columns} FROM {source} ORDER BY {order}").to_arrow_reader(batch_rows)
    previous: pa.Table | None = None
    for batch in reader:
        table = pa.Table.from_batches([batch]).cast(schema)
        keys = table.select(list(layout.key))
        joined = pa.concat_tables([previous, keys]) if previous is not None else keys
        repeat = _same_as_previous(joined, layout.key)[joined.num_rows - keys.num_rows :]
        previous = keys.slice(keys.num_rows - 1) if keys.num_rows else previous
        yield table, repeat


def _same_as_previous(table: pa.Table, columns: tuple[str, ...]) -> np.ndarray:
    """Per row: equal to the row before it in every one of ``columns`` (nulls equal nulls, as in
    the ``GROUP BY`` of :func:`_check_copies`)."""
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


@contextlib.contextmanager
def _connection(memory_limit: str, spill: Path | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A private in-memory DuckDB that spills to ``spill``.

    No extension is installed or loaded (reading Parquet needs none, and a download would make
    the run depend on the network) and nothing is written under the user's home (a Lambda's file
    system is read-only outside ``/tmp``).
    """
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


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
