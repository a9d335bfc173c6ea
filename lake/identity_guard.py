"""The committer's check that a file appends only rows the table does not already hold.

:mod:`lake.entry_identity` decides which files are checked and what a row's identity is; this
module does the reading and writing: the table's identities in the file's days and time range (one
pruned scan of the key and time columns at the snapshot the commit asserts, so nothing can slip in
between), and, when some rows are held, a new file with the rest next to the landed one (the landed
file is never rewritten: a retry of the landing may still name it; it becomes an orphan once the
commit moves past its record). Replays are rare and each file is a bounded unit (a batch, an
export chunk of at most 10,000 records sorted by time), so a check reads the table's files of a
narrow time range of one or two days; stream files are checked only in the catch-up after a replay.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from contracts.lake_tables import PARTITION_COLUMN, STREAM_TABLES
from lake.entry_identity import (
    identity_columns,
    identity_keys,
    keep_new,
    moved_horizon,
    needs_check,
    read_horizon,
)
from lake.iceberg_data_files import data_file_of, describe_written
from lake.parquet import encode

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table

_logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Checked:
    """One checked file: what to append instead (None: every row was held), how many rows were
    held, and its rows' latest time (epoch ms; None for a file without rows)."""

    data_file: DataFile | None
    rows: int
    held: int
    latest_ms: int | None


def time_bounds_ms(table: Table, data_file: DataFile) -> tuple[int | None, int | None]:
    """A data file's earliest and latest time-column value (epoch ms) from its description's
    bounds, without reading it; None where the description has no bound."""
    from pyiceberg.conversions import from_bytes
    from pyiceberg.types import PrimitiveType

    name = table.name()[-1]
    field = table.schema().find_field(STREAM_TABLES[name].day_column)
    bounds = []
    for side in (data_file.lower_bounds, data_file.upper_bounds):
        raw = (side or {}).get(field.field_id)
        kind = field.field_type
        assert isinstance(kind, PrimitiveType)  # a time column
        bounds.append(None if raw is None else int(from_bytes(kind, raw)) // 1000)
    return bounds[0], bounds[1]


def read_rows(table: Table, path: str) -> pa.Table:
    """A data file's rows, as written (field ids kept)."""
    with table.io.new_input(path).open() as stream:
        return pq.read_table(stream)


def held_in_table(table: Table, rows: pa.Table) -> pa.Array:
    """The identities of ``rows`` the table already holds, at its current snapshot: one scan of
    the identity columns, pruned to the rows' days and time range (a copy of a row carries the
    row's own time)."""
    from pyiceberg.expressions import (
        And,
        BooleanExpression,
        GreaterThanOrEqual,
        In,
        LessThanOrEqual,
        Reference,
    )
    from pyiceberg.expressions.literals import literal

    name = table.name()[-1]
    columns = identity_columns(name)
    if rows.num_rows == 0 or table.current_snapshot() is None:
        return pa.array([], pa.string())
    time_column = STREAM_TABLES[name].day_column
    times = pc.min_max(rows.column(time_column).cast(pa.timestamp("us", tz="UTC")))
    lowest = times["min"].as_py()
    highest = times["max"].as_py()
    days = (
        sorted(set(rows.column(PARTITION_COLUMN).to_pylist()))
        if PARTITION_COLUMN in rows.column_names
        else []
    )
    condition: BooleanExpression = And(
        GreaterThanOrEqual(term=Reference(time_column), value=literal(lowest.isoformat())),
        LessThanOrEqual(term=Reference(time_column), value=literal(highest.isoformat())),
    )
    if days:
        condition = And(
            In(term=Reference(PARTITION_COLUMN), values={literal(str(d)) for d in days}), condition
        )
    found = table.scan(row_filter=condition, selected_fields=columns).to_arrow()
    mine = pa.array(identity_keys(rows, columns), pa.string())
    theirs = identity_keys(found, columns)
    return pc.filter(mine, pc.is_in(mine, value_set=pa.array(theirs, pa.string())))


def check_file(table: Table, data_file: DataFile, taken: set[str]) -> Checked:
    """The file less the rows the table holds and the rows already ``taken`` by earlier files of
    this commit (whose identities it then adds); a new file is written only when some are held."""
    name = table.name()[-1]
    columns = identity_columns(name)
    rows = read_rows(table, data_file.file_path)
    held = pa.concat_arrays([held_in_table(table, rows), pa.array(sorted(taken), pa.string())])
    kept = keep_new(rows, columns, held)
    taken.update(str(key) for key in identity_keys(kept.rows, columns).to_pylist())
    latest = _latest_ms(rows, STREAM_TABLES[name].day_column)
    if kept.held == 0:
        return Checked(data_file, rows.num_rows, 0, latest)
    if kept.rows.num_rows == 0:
        _logger.info(
            "%s: all %d rows of %s are already in the table", name, rows.num_rows, data_file.file_path
        )
        return Checked(None, rows.num_rows, kept.held, latest)
    path = _kept_path(data_file.file_path)
    body = encode(kept.rows, text_statistics=True)
    with table.io.new_output(path).create(overwrite=False) as out:
        out.write(body)
    partition = {PARTITION_COLUMN: _day_of(kept.rows)}
    description = describe_written(body, partition)
    if description is None:  # written from rows with field ids, so never; a loud failure if so
        raise ValueError(f"{path}: the kept rows lost their field ids")
    _logger.info(
        "%s: %d of %d rows of %s are already in the table; the other %d appended from %s",
        name,
        kept.held,
        rows.num_rows,
        data_file.file_path,
        kept.rows.num_rows,
        path,
    )
    return Checked(
        data_file_of(table.metadata, path, len(body), description), rows.num_rows, kept.held, latest
    )


def check_identities(
    table: Table, data_files: Sequence[DataFile], replayed: Collection[str]
) -> tuple[list[DataFile], int, int | None]:
    """The files to append, less every row the table already holds (:mod:`lake.entry_identity`):
    replayed files always checked, stream files only at or below the replay horizon (moved first by
    this commit's replayed files). Stream files are checked before replayed ones, so of a row both
    bring the stream's copy is kept. Returns the files, the rows held back and the new horizon
    (None: unchanged)."""
    horizon = read_horizon(table.metadata.properties)
    replays = [data_file for data_file in data_files if data_file.file_path in replayed]
    if not replays and horizon is None:
        return list(data_files), 0, None
    column = STREAM_TABLES[table.name()[-1]].day_column
    latest: list[int] = []
    for f in replays:  # a file without bounds (an older walletlake's) is read for its latest row
        upper = time_bounds_ms(table, f)[1]
        if upper is None:
            upper = _latest_ms(read_rows(table, f.file_path), column)
        if upper is not None:
            latest.append(upper)
    moved = moved_horizon(horizon, latest)
    streams = [f for f in data_files if f.file_path not in replayed]
    checked_streams = [
        f
        for f in streams
        if needs_check(replay=False, earliest_ms=time_bounds_ms(table, f)[0], horizon_ms=moved)
    ]
    checked_paths = {f.file_path for f in checked_streams}
    kept = [f for f in streams if f.file_path not in checked_paths]
    taken: set[str] = set()
    held = 0
    for data_file in [*checked_streams, *replays]:
        result = check_file(table, data_file, taken)
        held += result.held
        if result.data_file is not None:
            kept.append(result.data_file)
    return kept, held, moved if moved != horizon else None


def _latest_ms(rows: pa.Table, column: str) -> int | None:
    if rows.num_rows == 0:
        return None
    latest = pc.max(rows.column(column).cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())).as_py()
    return int(latest) if latest is not None else None


def _day_of(rows: pa.Table) -> str:
    days: Sequence[str] = sorted(set(rows.column(PARTITION_COLUMN).to_pylist()))
    if len(days) != 1:
        raise ValueError(f"a landed file holds one day, this one {len(days)}")
    return str(days[0])


def _kept_path(path: str) -> str:
    folder, _, name = path.rpartition("/")
    return f"{folder}/{name.removesuffix('.parquet')}-kept-{uuid.uuid4().hex[:8]}.parquet"
