"""The committer's progress and its decisions: pure functions over landing records and a table's
property, apart from every catalog and S3 call (:mod:`lake.committer` does the I/O).

A table's progress, per *source* (``stream/shard``, or a replay's own source) the last sequence
number committed and when, is the table property :data:`PROGRESS_PROPERTY`, written in the same
commit as the files it covers (docs/architecture.md, "Why exactly once"). Deciding what to commit
from it is pure, so the property tests drive it without a catalog.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Final

from lake.landing_log import LandingRecord, OverlapError, is_permanent

if TYPE_CHECKING:
    from pyiceberg.table import Table

#: Table property holding ``{"stream/shard": [last_sequence, epoch_s]}`` (live sources only).
PROGRESS_PROPERTY: Final = "walletlake.committed-through"
#: Snapshot summary key: the commit's identity, a digest of the landing records it committed.
COMMIT_ID_PROPERTY: Final = "walletlake.commit-id"
#: Snapshot summary key: how many landing records (batches) the commit took.
BATCHES_PROPERTY: Final = "walletlake.batches"
#: A source's progress is forgotten once it has no record left and committed nothing this long.
PROGRESS_RETENTION_SECONDS: Final = 48 * 3600
#: Batches without a row for a table wait at most this long before a property-only commit moves
#: the table's position past them (until then they are skipped, not committed).
EMPTY_COMMIT_AFTER_SECONDS: Final = 300

Progress = dict[str, list[float]]  # source -> [last sequence, committed at (epoch s)]


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """What one table's commit will do, decided from its progress (pure: :func:`decide`)."""

    chosen: tuple[LandingRecord, ...]
    skipped: int
    progress: Progress
    commit: bool

    @property
    def commit_id(self) -> str:
        """The commit's identity: a digest of its records' keys (constant size)."""
        return commit_identity(self.chosen)


def read_progress(table: Table) -> Progress:
    """A table's committed positions, from its property (empty for a table never committed to)."""
    text = table.metadata.properties.get(PROGRESS_PROPERTY)
    return (
        {source: [int(value[0]), float(value[1])] for source, value in json.loads(text).items()}
        if text
        else {}
    )


def progress_text(progress: Mapping[str, list[float]]) -> str:
    """The property's value: sorted, compact."""
    return json.dumps(
        {source: [int(v[0]), round(v[1], 3)] for source, v in sorted(progress.items())}, separators=(",", ":")
    )


def commit_identity(records: Iterable[LandingRecord]) -> str:
    """A digest naming the landing records a commit took, whatever their number.

    Examples
    --------
    >>> len(commit_identity([]))
    32
    """
    digest = hashlib.sha256()
    for key in sorted(record.key or f"{record.source}/{record.first}-{record.last}" for record in records):
        digest.update(key.encode())
        digest.update(b"\n")
    return digest.hexdigest()[:32]


def choose(
    records: Iterable[LandingRecord], progress: Mapping[str, list[float]]
) -> tuple[list[LandingRecord], int, dict[str, int]]:
    """The records to commit, how many are skipped as already committed, and the new positions.

    Pure: records of each source in sequence order; a record starting past the position is taken,
    one ending at or before it is a redelivery; one straddling it breaks the log's invariant.
    """
    chosen: list[LandingRecord] = []
    skipped = 0
    through: dict[str, int] = {}
    for record in sorted(records, key=lambda r: (r.source, r.first, -r.last)):
        position = through.get(record.source)
        if position is None and record.source in progress:
            position = int(progress[record.source][0])
        if position is None or record.first > position:
            chosen.append(record)
            through[record.source] = record.last
        elif record.last <= position:
            skipped += 1
        else:
            raise OverlapError(
                f"{record.key or record.source}: records {record.first}..{record.last} straddle the "
                f"committed position {position}; the landing log's ranges must be disjoint"
            )
    return chosen, skipped, through


def decide(
    table: str,
    records: Iterable[LandingRecord],
    progress: Mapping[str, list[float]],
    *,
    live_sources: Collection[str],
    now: float,
    empty_after_seconds: float = EMPTY_COMMIT_AFTER_SECONDS,
) -> Decision:
    """What to commit to ``table``: pure, from the listed records and the table's progress.

    The new progress holds the chosen positions, less forgotten sources (:func:`prune`). ``commit``
    is False when nothing is chosen, and when no chosen batch has a file for the table and the
    oldest is younger than ``empty_after_seconds`` (an empty commit, skipped).
    """
    chosen, skipped, through = choose(records, progress)
    updated: Progress = {source: list(value) for source, value in progress.items()}
    for source, last in through.items():
        updated[source] = [last, now]
    has_rows = any(record.files_of(table) for record in chosen)
    due = bool(chosen) and min(record.landed_at for record in chosen) <= now - empty_after_seconds
    return Decision(
        chosen=tuple(chosen),
        skipped=skipped,
        progress=prune(updated, live_sources, now),
        commit=bool(chosen) and (has_rows or due),
    )


def progress_moved(table: Table, progress: Mapping[str, list[float]]) -> bool:
    """True when the table's progress is no longer the one a refused commit was decided from."""
    return progress_text(read_progress(table)) != progress_text(progress)


def already_held(listed: Iterable[LandingRecord], progress: Mapping[str, list[float]]) -> int:
    """Listed batches this table's position is already past (redeliveries, or taken by another
    committer): what a commit's ``skipped_batches`` counts."""
    return sum(1 for r in listed if r.source in progress and r.last <= int(progress[r.source][0]))


def prune(progress: Mapping[str, list[float]], live_sources: Collection[str], now: float) -> Progress:
    """Progress without the sources that can never send a record again.

    A source is forgotten when the log holds none of its records (``live_sources``: every source
    with one) and it committed nothing for :data:`PROGRESS_RETENTION_SECONDS`; sources of
    :data:`lake.landing_log.PERMANENT_STREAMS` (exports, quarantine replays) are kept, re-landed
    misfits excepted (:func:`lake.landing_log.is_permanent`).

    Examples
    --------
    >>> prune({"s/a": [5, 0.0], "s/b": [9, 0.0], "export/x": [1, 0.0]}, {"s/b"}, 3e5)
    {'s/b': [9, 0.0], 'export/x': [1, 0.0]}
    >>> prune({"replay/misfit~wallets~f": [1, 0.0]}, set(), 3e5)
    {}
    """
    return {
        source: list(value)
        for source, value in progress.items()
        if source in live_sources or now - value[1] <= PROGRESS_RETENTION_SECONDS or is_permanent(source)
    }
