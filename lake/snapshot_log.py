"""Which snapshot a table had at an instant, or a refusal: time travel that never guesses.

A table's snapshot log says which snapshot became ``main`` when. When snapshots are expired, the
Iceberg spec says "all entries before a snapshot that has expired should be removed", and
Iceberg's Java library does so (``TableMetadata``'s ``updateSnapshotLog``: any entry whose
snapshot is gone clears the history before it): otherwise an instant inside the removed stretch
would be answered with the newest surviving entry before it, another snapshot than the one
current then. No client can do it through a catalog: the REST protocol's table updates
(``open-api/rest-catalog-open-api.yaml``, ``TableUpdate``) have ``remove-snapshots`` but no
update of the log, which is the catalog's to keep; pyiceberg's own application of
``remove-snapshots`` (0.12, ``pyiceberg/table/update/__init__.py``, used by its SQL catalog)
drops only the removed snapshots' entries, and leaves the gap (``tests/unit/test_snapshot_log.py``
holds both facts). So the log is **read** as the Java library keeps it (:func:`retained_log`):
from the last removed stretch on, found by the sequence numbers (every commit of a format-2 table
takes the next one, so two neighbouring entries that are not consecutive lost something between
them). An instant before it is refused (:class:`NotRetainedError`, one line naming the retention
and the tags nearest the instant: a tag keeps a snapshot for audits, read by its id); a catalog
that clears the log (one built on the Java library) and one that leaves gaps (pyiceberg's) answer
alike.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyiceberg.table.metadata import SnapshotLogEntry, TableMetadata


class NotRetainedError(ValueError):
    """The snapshot current at an instant is no longer known (expired, or before the table's log)."""


def retained_log(metadata: TableMetadata) -> list[SnapshotLogEntry]:
    """The snapshot log as Iceberg's Java library keeps it after expiry: the entries after the
    last one whose snapshot is gone, or after the last break in the sequence numbers (pure).

    Examples
    --------
    >>> from pyiceberg.table.metadata import SnapshotLogEntry as E
    >>> class M:  # the two fields read: entries (id, ms), and each snapshot's sequence number
    ...     snapshot_log = [E(snapshot_id=1, timestamp_ms=10), E(snapshot_id=3, timestamp_ms=30),
    ...                     E(snapshot_id=4, timestamp_ms=40)]
    ...     snapshots = [type("S", (), {"snapshot_id": i, "sequence_number": i})() for i in (1, 3, 4)]
    >>> [entry.snapshot_id for entry in retained_log(M())]  # snapshot 2 was removed
    [3, 4]
    """
    log = sorted(metadata.snapshot_log, key=lambda entry: entry.timestamp_ms)
    sequence = {snapshot.snapshot_id: snapshot.sequence_number or 0 for snapshot in metadata.snapshots}
    start = 0
    for index, entry in enumerate(log):
        if entry.snapshot_id not in sequence:
            start = index + 1
        elif (
            index > start and sequence[entry.snapshot_id] != sequence.get(log[index - 1].snapshot_id, -1) + 1
        ):
            start = index
    return log[start:]


def snapshot_at(
    metadata: TableMetadata, at_ms: int, *, table: str = "", retention_hours: float = 0
) -> int | None:
    """The id of the snapshot that was ``main`` at ``at_ms`` (None: the table had none yet).

    Pure. Exact or refused: answered from :func:`retained_log` only; raises
    :class:`NotRetainedError` when the instant falls before it and something before it was
    removed (its first entry is not the table's first commit).
    """
    log = retained_log(metadata)
    sequence = {snapshot.snapshot_id: snapshot.sequence_number or 0 for snapshot in metadata.snapshots}
    before = [entry for entry in log if entry.timestamp_ms <= at_ms]
    if before:
        return before[-1].snapshot_id
    if log and sequence[log[0].snapshot_id] <= 1:
        return None  # the whole history is there: the table had no snapshot yet
    if not log and not metadata.snapshot_log:
        return None  # never committed to
    known_from = log[0].timestamp_ms if log else at_ms
    raise NotRetainedError(_refusal(metadata, at_ms, table, retention_hours, known_from))


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
