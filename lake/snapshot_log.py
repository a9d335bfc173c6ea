"""Which snapshot a table had at an instant, or a refusal: time travel that never guesses.

A table's snapshot log says which snapshot became ``main`` when. Expiry removes snapshots past
retention (:mod:`lake.snapshot_expiry`), and pyiceberg drops only the removed snapshots' own log
entries, leaving gaps: pyiceberg's ``snapshot_as_of_timestamp`` then answers an instant inside a
gap with the newest surviving entry before it (last night's tag, or nothing), which is another
snapshot than the one current then. Iceberg's Java, Rust and C++ libraries clear the whole log
before the last removed entry for this reason. Here the log is read as they would keep it: an
instant is answered only where the log is whole, that is where the entry after the answer names
it as its parent (nothing was removed between them); elsewhere :class:`NotRetainedError` is raised, in
one line naming the retention and the tags nearest the instant (a tag keeps a snapshot for audits).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata


class NotRetainedError(ValueError):
    """The snapshot current at an instant is no longer known (expired, or before the table's log)."""


def snapshot_at(
    metadata: TableMetadata, at_ms: int, *, table: str = "", retention_hours: float = 0
) -> int | None:
    """The id of the snapshot that was ``main`` at ``at_ms`` (None: the table had none yet).

    Pure. Exact or refused: raises :class:`NotRetainedError` when the instant falls before the
    oldest entry of a log whose history was removed, or between two entries a removed snapshot
    separated. Removed snapshots are seen in the sequence numbers (every commit of a format-2
    table takes the next one; pyiceberg's expiry also clears a kept snapshot's parent), so a log
    whose neighbouring entries are not consecutive lost something between them.
    """
    log = sorted(metadata.snapshot_log, key=lambda entry: entry.timestamp_ms)
    sequence = {snapshot.snapshot_id: snapshot.sequence_number or 0 for snapshot in metadata.snapshots}
    before = [entry for entry in log if entry.timestamp_ms <= at_ms]
    if not before:
        if log and sequence.get(log[0].snapshot_id, 0) > 1:
            raise NotRetainedError(_refusal(metadata, at_ms, table, retention_hours, log[0].timestamp_ms))
        return None
    found = before[-1]
    if found.snapshot_id not in sequence:
        raise NotRetainedError(_refusal(metadata, at_ms, table, retention_hours, found.timestamp_ms))
    later = log[len(before)] if len(before) < len(log) else None
    if later is not None and sequence.get(later.snapshot_id, 0) != sequence[found.snapshot_id] + 1:
        raise NotRetainedError(_refusal(metadata, at_ms, table, retention_hours, later.timestamp_ms))
    return found.snapshot_id


def _refusal(
    metadata: TableMetadata, at_ms: int, table: str, retention_hours: float, known_from_ms: int
) -> str:
    tags = sorted(
        (
            (metadata.snapshot_by_id(ref.snapshot_id).timestamp_ms, name)  # type: ignore[union-attr]
            for name, ref in metadata.refs.items()
            if ref.snapshot_ref_type == "tag" and metadata.snapshot_by_id(ref.snapshot_id) is not None
        ),
    )
    earlier = [f"{name} ({_text(ms)})" for ms, name in tags if ms <= at_ms][-1:]
    newer = [f"{name} ({_text(ms)})" for ms, name in tags if ms > at_ms][:1]
    nearest = ", ".join(earlier + newer) or "none"
    kept = f"snapshots are kept {retention_hours:g} hours" if retention_hours else "its snapshots expired"
    return (
        f"{table or 'table'}: no snapshot is known at {_text(at_ms)} ({kept}; the next one known is of "
        f"{_text(known_from_ms)}); nearest tags: {nearest}"
    )


def _text(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
