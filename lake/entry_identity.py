"""What makes a lake row the same row, wherever it came from: pure decisions, no I/O.

A replay (an export, a stream range, a dead-lettered batch, a quarantine replay, a re-landed
misfit) can bring back a row the table already holds, or one a stream batch still on its way also
carries. Names of sources cannot tell: an export holds every unexpired transaction and every live
wallet, whatever reached the lake before. So the committer decides by the row's **identity**, the
key compaction already finds copies by (:class:`contracts.lake_tables.CompactionLayout`'s ``key``:
``entry_id`` for the ledger, ``wallet_id`` for wallets), and appends only rows the table does not
hold (:mod:`lake.identity_guard` reads the table; this module decides).

Checking every stream batch that way would read the table at every commit. It is not needed: a
copy of a row carries the row's own time (``created_at``), so a stream batch whose earliest row is
later than every row a replay ever committed (the table's **replay horizon**,
:data:`REPLAY_HORIZON_PROPERTY`, moved in the same commit as the replayed files) cannot hold a
copy of one. Only replayed batches, and stream batches at or below the horizon (the catch-up after
a backfill), are checked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from contracts.lake_layout import LATE_SOURCE_MARK
from contracts.lake_tables import STREAM_TABLES

#: Table property: the latest time-column value (epoch ms) of any row a replayed batch committed.
REPLAY_HORIZON_PROPERTY: Final = "walletlake.replay-horizon-ms"
#: The streams (a source's first part) that are replays, never a DynamoDB stream's shards.
REPLAY_STREAMS: Final = frozenset({"export", "replay"})


def identity_columns(table: str) -> tuple[str, ...]:
    """The columns naming a row of a stream table (its compaction key: one definition).

    Examples
    --------
    >>> identity_columns("ledger"), identity_columns("wallets")
    (('entry_id',), ('wallet_id',))
    """
    return STREAM_TABLES[table].layout.key


def is_replay(stream: str, shard: str) -> bool:
    """True for a batch landed by a replay: an export, a replay source, a late (dead-lettered)
    batch of a shard that went on without it.

    Examples
    --------
    >>> is_replay("export", "01772-abc"), is_replay("wallets-2026", "shard-1")
    (True, False)
    >>> is_replay("wallets-2026", "shard-1~late-100")
    True
    """
    return stream in REPLAY_STREAMS or LATE_SOURCE_MARK in shard


def read_horizon(properties: Mapping[str, str]) -> int | None:
    """The table's replay horizon (epoch ms), None when no replay ever committed."""
    text = properties.get(REPLAY_HORIZON_PROPERTY)
    return int(text) if text else None


def needs_check(*, replay: bool, earliest_ms: int | None, horizon_ms: int | None) -> bool:
    """Whether a file's rows must be checked against the table before they are appended.

    A replayed file always is; a stream file only when its earliest row is at or before the
    horizon (or its earliest row is unknown: a record of an older walletlake).

    Examples
    --------
    >>> needs_check(replay=False, earliest_ms=2_000, horizon_ms=1_000)
    False
    >>> needs_check(replay=False, earliest_ms=1_000, horizon_ms=1_000)
    True
    >>> needs_check(replay=True, earliest_ms=2_000, horizon_ms=None)
    True
    """
    if replay:
        return True
    if horizon_ms is None:
        return False
    return earliest_ms is None or earliest_ms <= horizon_ms


def moved_horizon(horizon_ms: int | None, latest_ms: Iterable[int]) -> int | None:
    """The horizon after a commit of replayed files whose latest rows are ``latest_ms``.

    >>> moved_horizon(None, [5, 9]), moved_horizon(12, [5, 9]), moved_horizon(None, [])
    (9, 12, None)
    """
    values = [*([horizon_ms] if horizon_ms is not None else []), *latest_ms]
    return max(values) if values else None


def identity_keys(rows: pa.Table, columns: tuple[str, ...]) -> pa.ChunkedArray | pa.Array:
    """One value per row naming it: the column itself, or the columns joined by a separator no
    identity holds (a unit separator)."""
    if len(columns) == 1:
        return rows.column(columns[0]).cast(pa.string())
    parts = [rows.column(name).cast(pa.string()) for name in columns]
    return pc.binary_join_element_wise(*parts, "\x1f")


@dataclasses.dataclass(frozen=True, slots=True)
class Kept:
    """The rows of a file not already held, and how many were."""

    rows: pa.Table
    held: int


def keep_new(rows: pa.Table, columns: tuple[str, ...], held: pa.Array | pa.ChunkedArray) -> Kept:
    """The rows whose identity is not in ``held`` (and the first of rows repeated within ``rows``).

    Examples
    --------
    >>> rows = pa.table({"entry_id": ["a", "b", "c", "b"]})
    >>> kept = keep_new(rows, ("entry_id",), pa.array(["c"]))
    >>> kept.rows.column("entry_id").to_pylist(), kept.held
    (['a', 'b'], 2)
    >>> keep_new(pa.table({"entry_id": [None, None]}), ("entry_id",), pa.array([], pa.string())).held
    0
    """
    keys = identity_keys(rows, columns)
    fresh = pc.invert(
        pc.is_in(keys, value_set=pa.array(held, pa.string()) if len(held) else pa.array([], pa.string()))
    )
    # a key twice in one file: only its first row
    indices = pc.indices_nonzero(fresh).to_pylist()
    seen: set[str] = set()
    keep: list[int] = []
    as_list = keys.to_pylist()
    for index in indices:
        key = as_list[index]
        if key is None:  # a null identity (a quarantined record without a sequence) matches nothing
            keep.append(index)
        elif key not in seen:
            seen.add(key)
            keep.append(index)
    return Kept(rows=rows.take(pa.array(keep, pa.int64())), held=rows.num_rows - len(keep))
