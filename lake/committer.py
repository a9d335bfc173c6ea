"""The committer: one Iceberg commit per table and interval, exactly once per landed batch.

Every interval it reads the landing log (:mod:`lake.landing_log`) past what each table has
committed and appends the new batches' data files in one commit per table. The table's progress,
per ``stream/shard`` the last sequence number committed, is written **in the same commit**: as the
table property :data:`PROGRESS_PROPERTY` (what the next commit reads) and in the snapshot's summary
(what an auditor reads: which stream positions a snapshot holds, as Flink's checkpoint id and the
Kafka Connect sink's offsets are kept). Because data and progress move in one atomic metadata swap:

- a crash before or during the commit leaves the progress where it was, and the rerun appends the
  same batches once;
- a crash after it (or a lost response) leaves the progress past them, and the rerun skips them;
- a redelivered batch is a landing record inside a committed range, skipped by its key alone;
- two committers at once: the catalog refuses the second commit (its base snapshot moved), which
  is then decided again from the new progress, never re-applied: :func:`_commit_once` turns
  pyiceberg's own retry off for this commit, since a retry rebases the same files onto a snapshot
  that may already hold them.

Nothing per commit grows with the table: the log is listed per shard past the committed key, and
only new records are read; data files are described from their footers (one ranged GET each, in
parallel), never from a scan of committed files. A compaction's commit (ours or Glue's) does not
touch the property, so progress survives it, and it removes only files it rewrote.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

from contracts.lake_tables import STREAM_TABLES
from lake.landing_log import (
    LandingRecord,
    OverlapError,
    keys_after,
    list_sources,
    log_prefix,
    range_of_key,
    read_records,
)
from lake.objects import delete_keys

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

    from contracts.settings import Settings

_logger = logging.getLogger(__name__)

#: Table property (and snapshot summary key) holding ``{"stream/shard": [last_sequence, epoch_s]}``.
PROGRESS_PROPERTY: Final = "walletlake.committed-through"
#: Landing records are kept this long after they landed: past DynamoDB Streams' 24-hour retention
#: no retry can redeliver their records, so the consumer's coverage check no longer needs them.
RECORD_RETENTION_SECONDS: Final = 25 * 3600
#: A shard's progress is forgotten once it has no record left and committed nothing this long.
PROGRESS_RETENTION_SECONDS: Final = 48 * 3600
#: A shard that committed nothing for this long is *quiet* (closed, usually: DynamoDB rolls a
#: stream's shards every few hours); its records are listed only by the full listing below.
QUIET_AFTER_SECONDS: Final = 3600
#: Every this many seconds a cycle lists every shard's records, quiet ones too: a late record of a
#: quiet shard (a retried batch) waits at most this long. Other cycles list active shards only, so
#: a cycle's LISTs follow the shards in use, not the day's shard history.
FULL_LISTING_EVERY_SECONDS: Final = 300
_FOOTER_READERS: Final = 16
_ATTEMPTS: Final = 5


@dataclasses.dataclass(frozen=True, slots=True)
class TableCommit:
    """What one table's commit did."""

    table: str
    batches: int
    files: int
    rows: int
    skipped_batches: int
    snapshot_id: int | None
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for logs and JSON."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class CommitReport:
    """One cycle of the committer."""

    tables: tuple[TableCommit, ...]
    records_deleted: int
    seconds: float

    @property
    def rows(self) -> int:
        """Rows appended in all tables."""
        return sum(table.rows for table in self.tables)

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for logs and JSON."""
        return {
            "tables": [table.as_dict() for table in self.tables],
            "rows": self.rows,
            "records_deleted": self.records_deleted,
            "seconds": round(self.seconds, 3),
        }


Progress = dict[str, list[float]]  # source -> [last sequence, committed at (epoch s)]


def read_progress(table: Table) -> Progress:
    """A table's committed positions, from its property (empty for a table never committed to)."""
    text = table.metadata.properties.get(PROGRESS_PROPERTY)
    return (
        {source: [int(value[0]), float(value[1])] for source, value in json.loads(text).items()}
        if text
        else {}
    )


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


def commit_now(settings: Settings) -> CommitReport:
    """One committer cycle with clients of its own, for a command whose landing must be queryable
    when it returns (``walletlake consume``, ``walletlake replay``, the demo)."""
    import boto3

    from lake.iceberg_catalog import open_catalog

    return commit_landed(settings, boto3.client("s3", region_name=settings.region), open_catalog(settings))


def commit_landed(
    settings: Settings,
    s3: S3Client,
    catalog: Catalog,
    *,
    tables: Iterable[str] = tuple(STREAM_TABLES),
    clock: Callable[[], float] = time.time,
    tidy: bool = False,
) -> CommitReport:
    """One committer cycle: append every newly landed batch to every table (``tidy``: then delete
    landing records past retention, :func:`tidy_log`, which lists the whole log: hourly is enough).

    The log is listed once for all tables, per shard past the lowest position any table holds
    (one LIST per shard, quiet shards only every :data:`FULL_LISTING_EVERY_SECONDS`).
    """
    from lake.iceberg_tables import identifier

    started = time.monotonic()
    names = tuple(tables)
    now = clock()
    positions = [
        read_progress(catalog.load_table(identifier(settings.glue_database, name))) for name in names
    ]
    full = now % FULL_LISTING_EVERY_SECONDS < 2 * settings.commit_interval_seconds
    sources = [
        source
        for source in list_sources(s3, settings.bucket, settings.lake_prefix)
        if full or not _quiet(source, positions, now)
    ]
    records = _new_records(settings, s3, sources, _floor(sources, positions))
    results = [_commit_table(settings, catalog, name, records, clock) for name in names]
    deleted = tidy_log(settings, s3, catalog, tables=names, clock=clock) if tidy else 0
    report = CommitReport(tables=tuple(results), records_deleted=deleted, seconds=time.monotonic() - started)
    _logger.info("commit %s", json.dumps(report.as_dict()))
    return report


def _quiet(source: str, positions: list[Progress], now: float) -> bool:
    """True when every table holds the shard and none committed from it for an hour."""
    return all(
        source in progress and now - progress[source][1] > QUIET_AFTER_SECONDS for progress in positions
    )


def _floor(sources: list[str], positions: list[Progress]) -> dict[str, int | None]:
    """Per shard, the lowest position any table holds (None: some table has none: list it all)."""
    floor: dict[str, int | None] = {}
    for source in sources:
        held = [int(progress[source][0]) if source in progress else None for progress in positions]
        floor[source] = None if None in held else min(position for position in held if position is not None)
    return floor


def _commit_table(
    settings: Settings,
    catalog: Catalog,
    name: str,
    listed: list[LandingRecord],
    clock: Callable[[], float],
) -> TableCommit:
    from pyiceberg.exceptions import CommitFailedException

    from lake.iceberg_tables import identifier

    started = time.monotonic()
    for attempt in range(1, _ATTEMPTS + 1):
        table = catalog.load_table(identifier(settings.glue_database, name))
        progress = read_progress(table)
        # What a listing past this table's own positions would have found: records starting past
        # them (the shared listing starts at the lowest position of all tables).
        records = [r for r in listed if r.source not in progress or r.first > int(progress[r.source][0])]
        chosen, skipped, through = choose(records, progress)
        files = [file for record in chosen for file in record.files_of(name)]
        if not chosen:
            return TableCommit(name, 0, 0, 0, skipped, None, time.monotonic() - started)
        now = clock()
        for source, last in through.items():
            progress[source] = [last, now]
        text = json.dumps({source: [int(v[0]), round(v[1], 3)] for source, v in sorted(progress.items())})
        try:
            snapshot_id = _commit_once(table, files_paths=[file.path for file in files], progress_text=text)
        except CommitFailedException:
            if attempt == _ATTEMPTS:
                raise
            _logger.warning("commit of %s refused (a concurrent commit); deciding again (%d)", name, attempt)
            continue
        return TableCommit(
            name,
            len(chosen),
            len(files),
            sum(file.rows for file in files),
            skipped,
            snapshot_id,
            time.monotonic() - started,
        )
    raise AssertionError("unreachable")


def _commit_once(table: Table, *, files_paths: list[str], progress_text: str) -> int | None:
    """Append the files and set the progress in one commit, refused (never rebased) on a conflict."""
    from pyiceberg.io.pyarrow import parquet_file_to_data_file

    from lake.iceberg_catalog import strict_commits

    strict = strict_commits(table)
    with ThreadPoolExecutor(max_workers=_FOOTER_READERS) as pool:
        data_files = list(
            pool.map(lambda path: parquet_file_to_data_file(table.io, table.metadata, path), files_paths)
        )
    transaction = strict.transaction()
    transaction.set_properties({PROGRESS_PROPERTY: progress_text})
    if not data_files:  # batches without rows for this table: the position moves, no snapshot is made
        committed = transaction.commit_transaction()
        snapshot = committed.current_snapshot()
        return snapshot.snapshot_id if snapshot is not None else None
    with transaction.update_snapshot(
        snapshot_properties={PROGRESS_PROPERTY: progress_text}
    ).merge_append() as append:
        for data_file in data_files:
            append.append_data_file(data_file)
    committed = transaction.commit_transaction()
    snapshot = committed.current_snapshot()
    return snapshot.snapshot_id if snapshot is not None else None


def _new_records(
    settings: Settings, s3: S3Client, sources: list[str], floor: Mapping[str, int | None]
) -> list[LandingRecord]:
    keys = [
        key
        for source in sources
        for key in keys_after(s3, settings.bucket, settings.lake_prefix, source, floor[source])
    ]
    return read_records(s3, settings.bucket, keys)


def tidy_log(
    settings: Settings,
    s3: S3Client,
    catalog: Catalog,
    *,
    tables: Iterable[str] = tuple(STREAM_TABLES),
    clock: Callable[[], float] = time.time,
) -> int:
    """Delete landing records past retention that every table has committed past; returns how many.

    A record's range is committed in a table when the table's position for its shard is at or past
    its last sequence number (a batch without a file for that table still moved the position when
    it was committed with the others).
    """
    from lake.iceberg_tables import identifier

    now = clock()
    positions = [
        read_progress(catalog.load_table(identifier(settings.glue_database, name))) for name in tables
    ]
    doomed: list[str] = []
    for key, modified in iter_modified(s3, settings.bucket, log_prefix(settings.lake_prefix)):
        source = key[len(log_prefix(settings.lake_prefix)) :].rsplit("/", 1)[0]
        _first, last = range_of_key(key)
        committed = all(source in progress and int(progress[source][0]) >= last for progress in positions)
        if committed and now - modified > RECORD_RETENTION_SECONDS:
            doomed.append(key)
    if doomed:
        delete_keys(s3, settings.bucket, doomed)
        _logger.info("deleted %d landing records past retention", len(doomed))
    return len(doomed)


def iter_modified(s3: S3Client, bucket: str, prefix: str) -> Iterable[tuple[str, float]]:
    """``(key, last modified epoch s)`` of the records under ``prefix``."""
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            if item["Key"].endswith(".json"):
                yield item["Key"], item["LastModified"].timestamp()
