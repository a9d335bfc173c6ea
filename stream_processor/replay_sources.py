"""The Iceberg lake's replay sources, named by what they replay, so no rerun lands anything twice.

A replay lands through the landing log as a source of its own (:func:`lake.iceberg_landing.land_rows`)
in a permanent stream (``replay``, ``export``: :data:`lake.landing_log.PERMANENT_STREAMS`), and
the committer takes each source's ranges once. What makes a rerun safe is the *name*:

- **Quarantine** (:func:`assign_sources`): each recovered record is given, once, the source that
  lands it, written down before anything lands (an assignment object
  ``{lake_prefix}/_replayed/quarantine/{record identity}/{source}``, :data:`ASSIGNMENTS_FOLDER`).
  A rerun in any state (before the landing, between the landing and the commit, between the
  commit and the deletion from the quarantine table) finds every record it already assigned and
  lands that source only if it is neither landed nor committed, with the same records; only
  records never assigned get a new source. Once the recovered rows are deleted from the
  quarantine table, their assignments are deleted too.
- **Export** (:func:`export_position`): one source per export, ``export/{export id}``, each data
  file's chunks at positions of their own (the file's index in the export's sorted listing, then
  the chunk), so the committer's progress holds one entry per export whatever its file count,
  and a chunk at or below the committed position, or landed, is not landed again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from lake.objects import delete_keys, iter_objects

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from pyiceberg.catalog import Catalog

    from contracts.settings import Settings

#: Where a recovered quarantine record's source is written down before it lands.
ASSIGNMENTS_FOLDER: Final = "_replayed/quarantine"
#: Positions of one export data file's chunks: file ``i`` has ``i * N + 1 ..`` (a file of an export
#: is at most a few GB: far fewer than N chunks of 10,000 records).
EXPORT_POSITIONS_PER_FILE: Final = 1_000_000


def record_identity(raw: str) -> str:
    """A quarantined record's identity: a digest of its stream record's JSON (the same record
    quarantined again has the same identity).

    Examples
    --------
    >>> record_identity('{"eventID": "1"}') == record_identity('{"eventID": "1"}')
    True
    >>> len(record_identity("x"))
    24
    """
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def assign_sources(
    identities: Sequence[str], assigned: Mapping[str, Collection[str]], done: Collection[str]
) -> tuple[list[str], str | None]:
    """The recovered records a replay must land, and the source that lands them (pure).

    A record is *settled* when a source it was assigned to is landed or committed (``done``): its
    rows are in that source, whatever became of the run that landed it. Every other record is
    landed now, all of them in one new source named by their identities (an assignment whose
    source never landed binds nothing: nothing of it is in the lake).

    Examples
    --------
    >>> assign_sources(["a", "b", "c"], {"a": {"quarantine-1"}, "b": {"quarantine-2"}}, {"quarantine-1"})
    (['b', 'c'], 'quarantine-6c516cfc306e')
    >>> assign_sources(["a"], {"a": {"quarantine-1"}}, {"quarantine-1"})
    ([], None)
    """
    fresh = sorted(
        {identity for identity in identities if not any(s in done for s in assigned.get(identity, ()))}
    )
    if not fresh:
        return [], None
    return fresh, f"quarantine-{hashlib.sha256(chr(10).join(fresh).encode()).hexdigest()[:12]}"


def export_position(file_index: int, chunk: int) -> int:
    """A chunk's position in its export's one source: ordered by file, then chunk (pure).

    Examples
    --------
    >>> export_position(0, 0), export_position(0, 1), export_position(2, 0)
    (1, 2, 2000001)
    """
    return file_index * EXPORT_POSITIONS_PER_FILE + chunk + 1


def assignments_prefix(lake_prefix: str) -> str:
    """Key prefix of the quarantine replay's assignments, ending in ``/``."""
    prefix = lake_prefix.strip("/")
    return f"{prefix}/{ASSIGNMENTS_FOLDER}/" if prefix else f"{ASSIGNMENTS_FOLDER}/"


def read_assignments(s3: S3Client, bucket: str, lake_prefix: str) -> dict[str, set[str]]:
    """``{record identity: sources}`` of every recovered record not yet cleared (one LIST)."""
    root = assignments_prefix(lake_prefix)
    assigned: dict[str, set[str]] = {}
    for key, _ in iter_objects(s3, bucket, root):
        identity, _, source = key[len(root) :].partition("/")
        if source:
            assigned.setdefault(identity, set()).add(source)
    return assigned


def write_assignments(
    s3: S3Client, bucket: str, lake_prefix: str, identities: Iterable[str], source: str
) -> None:
    """Write down that ``source`` lands these records (empty objects: the key says it all),
    before anything of it lands."""
    root = assignments_prefix(lake_prefix)
    for identity in identities:
        s3.put_object(Bucket=bucket, Key=f"{root}{identity}/{source}", Body=b"")


def clear_assignments(
    s3: S3Client, bucket: str, lake_prefix: str, assigned: Mapping[str, Collection[str]]
) -> None:
    """Delete the assignments of records no longer in the quarantine table."""
    root = assignments_prefix(lake_prefix)
    delete_keys(s3, bucket, [f"{root}{i}/{source}" for i, sources in assigned.items() for source in sources])


def done_positions(
    s3: S3Client,
    settings: Settings,
    progresses: Sequence[Mapping[str, list[float]]],
    stream: str,
    source: str,
) -> tuple[list[tuple[int, int]], int]:
    """What of ``stream/source`` is already in hand: the ranges its landing records cover, and the
    position every table has committed (0: none; a record is tidied only once all tables are past
    it, so a position is done when a range covers it or it is at or below the committed one)."""
    from lake.landing_log import landed_ranges

    ranges = landed_ranges(s3, settings.bucket, settings.lake_prefix, stream, source)
    key = f"{stream}/{source}"
    committed = min((int(p[key][0]) if key in p else 0 for p in progresses), default=0)
    return ranges, committed


def is_done(position: int, ranges: Iterable[tuple[int, int]], committed: int) -> bool:
    """True when ``position`` is landed or committed (pure: :func:`done_positions`'s answer).

    Examples
    --------
    >>> is_done(3, [(1, 1), (3, 3)], 0), is_done(2, [(3, 3)], 2), is_done(4, [(3, 3)], 2)
    (True, True, False)
    """
    return position <= committed or any(first <= position <= last for first, last in ranges)


def table_progresses(settings: Settings, catalog: Catalog) -> list[dict[str, list[float]]]:
    """Every stream table's committed progress (:func:`lake.commit_progress.read_progress`)."""
    from contracts.lake_tables import STREAM_TABLES
    from lake.commit_progress import read_progress
    from lake.iceberg_tables import identifier

    return [
        read_progress(catalog.load_table(identifier(settings.glue_database, name))) for name in STREAM_TABLES
    ]
