"""The committer: one Iceberg commit per table and interval, exactly once per landed batch.

Every interval it reads the landing log (:mod:`lake.landing_log`) past what each table has
committed and appends the new batches' data files in one commit per table. The table's progress,
per *source* (``stream/shard``, or a replay's own source) the last sequence number committed and
when, is the table property :data:`PROGRESS_PROPERTY`, written **in the same commit** as the files.
Why every landed batch is in a table exactly once (docs/architecture.md, "The lake"):

- **Atomic.** Files and progress move in one metadata swap: a crash before or during the commit
  leaves the progress where it was and the rerun appends the same batches once; a crash after it
  (or a lost response) leaves the progress past them and the rerun skips them.
- **Validated against what it was decided from.** Every commit, a property-only one included,
  asserts that the ``main`` branch still points at the snapshot the progress was read with
  (Iceberg's ``assert-ref-snapshot-id`` requirement, which the REST protocol makes every catalog
  check). Any other commit that added rows since (another committer, ``walletlake consume`` or
  ``replay``, a compaction) moved ``main``, so this one is refused and decided again from the new
  progress, never re-applied: pyiceberg's own retry is off (:func:`lake.iceberg_catalog.strict_commits`),
  since a retry rebases the same files onto a snapshot that may already hold them. Two
  property-only commits decided from one snapshot may both pass; they carry no rows, so the worst
  is a position moved back over batches with no file for the table, which commit nothing again.
- **Disjoint ranges per source.** A shard's records are disjoint ranges landed in sequence order
  (:mod:`lake.landing_log`), so one number per source says what is committed: a redelivered batch
  is a record at or below it. A *late* batch (dead-lettered, replayed after later batches of its
  shard were committed) is landed as a source of its own (``{shard}~late-{first}``, less what
  the shard's records cover: :func:`lake.iceberg_landing.land_batch`), so it is never mistaken
  for a redelivery.

What a commit writes does not grow with history:

- the snapshot's summary carries a constant-size commit identity (:data:`COMMIT_ID_PROPERTY`, a
  digest of the landing records committed, and their count), as Flink's checkpoint id: never the
  per-source map;
- the property holds live sources only: a source with no record left in the log whose last
  commit is older than :data:`PROGRESS_RETENTION_SECONDS` is forgotten (no record of it can come
  back: the stream keeps 24 hours, the tidy deletes records after 25, and a replay of an expired
  range is refused). Sources of exports and quarantine replays, few and re-runnable at any time,
  are never forgotten;
- an interval with batches but no row for a table makes no commit for it (most intervals of the
  quarantine table): the position moves only with rows, or, when only empty batches wait, once
  they are :data:`EMPTY_COMMIT_AFTER_SECONDS` old (Flink's ``max-continuous-empty-commits``), so
  the log listed past the positions stays a few minutes long;
- the log is listed per shard past the committed key and records (immutable) are read once per
  process; data files are described from their footers, never from a scan of committed files.

A compaction's commit (ours or Glue's) does not touch the property, so progress survives it, and
it removes only files it rewrote.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

from contracts.lake_layout import misfits_location, tidy_cursor_key
from contracts.lake_tables import STREAM_TABLES
from lake.landing_log import (
    PERMANENT_STREAMS,
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
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table

    from contracts.settings import Settings

_logger = logging.getLogger(__name__)

#: Table property holding ``{"stream/shard": [last_sequence, epoch_s]}`` (live sources only).
PROGRESS_PROPERTY: Final = "walletlake.committed-through"
#: Snapshot summary key: the commit's identity, a digest of the landing records it committed.
COMMIT_ID_PROPERTY: Final = "walletlake.commit-id"
#: Snapshot summary key: how many landing records (batches) the commit took.
BATCHES_PROPERTY: Final = "walletlake.batches"
#: Landing records are kept this long after they landed: past DynamoDB Streams' 24-hour retention
#: no retry can redeliver their records, so the consumer's coverage check no longer needs them.
RECORD_RETENTION_SECONDS: Final = 25 * 3600
#: A source's progress is forgotten once it has no record left and committed nothing this long.
PROGRESS_RETENTION_SECONDS: Final = 48 * 3600
#: Batches without a row for a table wait at most this long before a property-only commit moves
#: the table's position past them (until then they are skipped, not committed).
EMPTY_COMMIT_AFTER_SECONDS: Final = 300
#: A shard that committed nothing for this long is *quiet* (closed, usually: DynamoDB rolls a
#: stream's shards every few hours); its records are listed only by the full listing below.
QUIET_AFTER_SECONDS: Final = 3600
#: Every this many seconds a cycle lists every shard's records, quiet ones too: a late record of a
#: quiet shard (a retried batch) waits at most this long. Other cycles list active shards only, so
#: a cycle's LISTs follow the shards in use, not the day's shard history.
FULL_LISTING_EVERY_SECONDS: Final = 300
#: Landing-log keys one tidy run examines; the next run goes on from where this one stopped.
TIDY_KEYS_PER_RUN: Final = 100_000
#: Folder of a table's location where landed files that do not fit it are kept, with a reason.
MISFITS_FOLDER: Final = "misfits"
_FOOTER_READERS: Final = 16
_ATTEMPTS: Final = 5


@dataclasses.dataclass(frozen=True, slots=True)
class TableCommit:
    """What one table's commit did (``deferred``: batches without rows for it, left for later;
    ``misfit_files``: landed files that did not fit the table, quarantined and left out)."""

    table: str
    batches: int
    files: int
    rows: int
    skipped_batches: int
    snapshot_id: int | None
    seconds: float
    deferred_batches: int = 0
    attempts: int = 0
    misfit_files: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for logs and JSON."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class CommitReport:
    """One cycle of the committer."""

    tables: tuple[TableCommit, ...]
    records_deleted: int
    seconds: float
    snapshots_expired: int = 0

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
            "snapshots_expired": self.snapshots_expired,
            "seconds": round(self.seconds, 3),
        }


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


def prune(progress: Mapping[str, list[float]], live_sources: Collection[str], now: float) -> Progress:
    """Progress without the sources that can never send a record again.

    A source is forgotten when the log holds none of its records (``live_sources``: every source
    with one) and it committed nothing for :data:`PROGRESS_RETENTION_SECONDS`; sources of
    :data:`lake.landing_log.PERMANENT_STREAMS` (exports, quarantine replays) are kept.

    Examples
    --------
    >>> prune({"s/a": [5, 0.0], "s/b": [9, 0.0], "export/x": [1, 0.0]}, {"s/b"}, 3e5)
    {'s/b': [9, 0.0], 'export/x': [1, 0.0]}
    """
    return {
        source: list(value)
        for source, value in progress.items()
        if source in live_sources
        or now - value[1] <= PROGRESS_RETENTION_SECONDS
        or source.split("/", 1)[0] in PERMANENT_STREAMS
    }


def commit_now(settings: Settings) -> CommitReport:
    """One committer cycle with clients of its own, for a command whose landing must be queryable
    when it returns (``walletlake consume``, ``walletlake replay``, the demo): batches without
    rows are committed at once there (``empty_after_seconds=0``)."""
    import boto3

    from lake.iceberg_catalog import open_catalog

    return commit_landed(
        settings,
        boto3.client("s3", region_name=settings.region),
        open_catalog(settings),
        empty_after_seconds=0,
    )


def commit_landed(
    settings: Settings,
    s3: S3Client,
    catalog: Catalog,
    *,
    tables: Iterable[str] = tuple(STREAM_TABLES),
    clock: Callable[[], float] = time.time,
    tidy: bool = False,
    empty_after_seconds: float = EMPTY_COMMIT_AFTER_SECONDS,
) -> CommitReport:
    """One committer cycle: append every newly landed batch to every table (``tidy``: then delete
    landing records past retention, :func:`tidy_log`, a bounded slice of the log per call). A
    table's snapshots past retention are expired (:mod:`lake.snapshot_expiry`) with ``tidy`` or
    once :data:`lake.snapshot_expiry.EXPIRE_AT_LEAST` of them wait.

    The log is listed once for all tables, per shard past the lowest position any table holds
    (one LIST per shard, quiet shards only every :data:`FULL_LISTING_EVERY_SECONDS`).
    """
    from lake.iceberg_tables import identifier

    started = time.monotonic()
    names = tuple(tables)
    now = clock()
    loaded = [catalog.load_table(identifier(settings.glue_database, name)) for name in names]
    positions = [read_progress(table) for table in loaded]
    full = now % FULL_LISTING_EVERY_SECONDS < 2 * settings.commit_interval_seconds
    live = list_sources(s3, settings.bucket, settings.lake_prefix)
    sources = [source for source in live if full or not _quiet(source, positions, now)]
    records = _new_records(settings, s3, sources, _floor(sources, positions))
    results = [
        commit_table(
            catalog,
            identifier(settings.glue_database, name),
            records,
            live_sources=frozenset(live),
            clock=clock,
            empty_after_seconds=empty_after_seconds,
            misfits_root=misfits_location(settings.bucket, settings.lake_prefix),
        )
        for name in names
    ]
    deleted = tidy_log(settings, s3, catalog, tables=names, clock=clock) if tidy else 0
    expired = 0
    from lake.snapshot_expiry import EXPIRE_AT_LEAST, expirable, expire_snapshots

    for name, table in zip(names, loaded, strict=True):
        # hourly, or as soon as enough snapshots are past retention: the cycle's cost grows with
        # the snapshots kept (lake.snapshot_expiry)
        if tidy or len(expirable(table.metadata, now)) >= EXPIRE_AT_LEAST:
            expired += expire_snapshots(catalog.load_table(identifier(settings.glue_database, name)), clock())
    report = CommitReport(
        tables=tuple(results),
        records_deleted=deleted,
        seconds=time.monotonic() - started,
        snapshots_expired=expired,
    )
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


def commit_table(
    catalog: Catalog,
    table_id: tuple[str, str],
    listed: list[LandingRecord],
    *,
    live_sources: Collection[str],
    clock: Callable[[], float] = time.time,
    empty_after_seconds: float = EMPTY_COMMIT_AFTER_SECONDS,
    on_step: Callable[[str], None] | None = None,
    misfits_root: str | None = None,
) -> TableCommit:
    """One table's commit of the listed records: load, decide, commit; on a refusal (``main``
    moved since the load) load and decide again, at most :data:`_ATTEMPTS` times.

    ``on_step`` is called with ``"load"``, ``"decide"`` and ``"commit"`` before each step: a seam
    for tests that interleave committers at every step. ``misfits_root``: where files that do not
    fit the table are kept (:func:`misfit_location`).
    """
    from pyiceberg.exceptions import CommitFailedException

    step = on_step or (lambda _name: None)
    name = table_id[-1]
    started = time.monotonic()
    for attempt in range(1, _ATTEMPTS + 1):
        step("load")
        table = catalog.load_table(table_id)
        step("decide")
        progress = read_progress(table)
        # What a listing past this table's own positions would have found: records starting past
        # them (the shared listing starts at the lowest position of all tables).
        records = [r for r in listed if r.source not in progress or r.first > int(progress[r.source][0])]
        decision = decide(
            name,
            records,
            progress,
            live_sources=live_sources,
            now=clock(),
            empty_after_seconds=empty_after_seconds,
        )
        files = [file for record in decision.chosen for file in record.files_of(name)]
        if not decision.commit:
            return TableCommit(
                name,
                0,
                0,
                0,
                decision.skipped,
                None,
                time.monotonic() - started,
                deferred_batches=len(decision.chosen),
                attempts=attempt - 1,
            )
        step("commit")
        try:
            snapshot_id, misfits = commit_decision(
                table, decision, [file.path for file in files], misfits_root=misfits_root
            )
        except CommitFailedException:
            if attempt == _ATTEMPTS:
                raise
            _logger.warning("commit of %s refused (a concurrent commit); deciding again (%d)", name, attempt)
            continue
        return TableCommit(
            name,
            len(decision.chosen),
            len(files),
            sum(file.rows for file in files),
            decision.skipped,
            snapshot_id,
            time.monotonic() - started,
            attempts=attempt,
            misfit_files=misfits,
        )
    raise AssertionError("unreachable")


def commit_decision(
    table: Table, decision: Decision, file_paths: list[str], *, misfits_root: str | None = None
) -> tuple[int | None, int]:
    """Append the files and set the progress in one commit, valid only while ``main`` is still the
    snapshot ``table`` was loaded at; refused (never rebased) otherwise. Returns the snapshot id
    and how many files were quarantined as misfits.

    ``table`` must be the one the decision was made from: its current snapshot is what the commit
    asserts. A decision without files sets the property alone (no snapshot is made), under the
    same assertion. A file that does not fit the table (a column it lacks, a type it cannot read)
    is quarantined (:func:`quarantine_misfit`) and left out: the rest of the batch, the later
    batches and the other tables commit as usual.
    """
    from pyiceberg.table.update import AssertRefSnapshotId

    from lake.iceberg_catalog import strict_commits

    strict = strict_commits(table)
    with ThreadPoolExecutor(max_workers=_FOOTER_READERS) as pool:
        described = list(pool.map(lambda path: _describe(table, path), file_paths))
    data_files = [data_file for data_file, _ in described if data_file is not None]
    misfits = [(path, reason) for path, (_, reason) in zip(file_paths, described, strict=True) if reason]
    for path, reason in misfits:
        quarantine_misfit(table, path, reason, misfits_root)
    transaction = strict.transaction()
    main = table.metadata.refs.get("main")
    expected = AssertRefSnapshotId(snapshot_id=main.snapshot_id if main else None, ref="main")  # type: ignore[call-arg]
    transaction._stage((), (expected,))
    transaction.set_properties({PROGRESS_PROPERTY: progress_text(decision.progress)})
    if data_files:
        summary = {COMMIT_ID_PROPERTY: decision.commit_id, BATCHES_PROPERTY: str(len(decision.chosen))}
        with transaction.update_snapshot(snapshot_properties=summary).merge_append() as append:
            for data_file in data_files:
                append.append_data_file(data_file)
    committed = transaction.commit_transaction()
    snapshot = committed.current_snapshot()
    return (snapshot.snapshot_id if snapshot is not None else None), len(misfits)


def _describe(table: Table, path: str) -> tuple[DataFile | None, str]:
    """A file's Iceberg description from its footer, or why it does not fit the table."""
    from pyiceberg.io.pyarrow import parquet_file_to_data_file

    try:
        return parquet_file_to_data_file(table.io, table.metadata, path), ""
    except (ValueError, TypeError) as error:
        return None, f"{type(error).__name__}: {error}"


def misfit_location(table: Table, path: str, root: str | None = None) -> str:
    """Where a misfit data file is kept: ``{root}/{table}/{file name}``, the lake bucket's
    ``{lake_prefix}/_misfits/`` for the committer (:func:`contracts.lake_layout.misfits_location`:
    a table bucket takes only the table's own files), or without a root
    ``{table location}/misfits/{file name}``; never under ``data/``, which orphan removal cleans."""
    name = path.rsplit("/", 1)[-1]
    if root is not None:
        return f"{root.rstrip('/')}/{table.name()[-1]}/{name}"
    return f"{table.location().rstrip('/')}/{MISFITS_FOLDER}/{name}"


def quarantine_misfit(table: Table, path: str, reason: str, root: str | None = None) -> str:
    """Copy a landed file that does not fit its table to :func:`misfit_location`, with a
    ``.reason.json`` beside it (the file, the table, why); returns where. Idempotent."""
    target = misfit_location(table, path, root)
    with table.io.new_input(path).open() as source:
        body = source.read()
    with table.io.new_output(target).create(overwrite=True) as sink:
        sink.write(body)
    note = json.dumps({"table": table.name()[-1], "landed_path": path, "reason": reason}).encode()
    with table.io.new_output(f"{target}.reason.json").create(overwrite=True) as sink:
        sink.write(note)
    _logger.warning("quarantined %s (does not fit %s): %s -> %s", path, table.name()[-1], reason, target)
    return target


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
    max_keys: int = TIDY_KEYS_PER_RUN,
) -> int:
    """Delete landing records past retention that every table has committed past; returns how many.

    Bounded and resumable: one call examines at most ``max_keys`` keys, starting after the key the
    previous call stopped at (kept in the object :func:`contracts.lake_layout.tidy_cursor_key`), and
    starts over from the beginning once it reached the end. A record's range is committed in a
    table when the table's position for its shard is at or past its last sequence number (a batch
    without a file for a table moves the position too, at most :data:`EMPTY_COMMIT_AFTER_SECONDS` later).
    """
    from lake.iceberg_tables import identifier

    now = clock()
    positions = [
        read_progress(catalog.load_table(identifier(settings.glue_database, name))) for name in tables
    ]
    prefix = log_prefix(settings.lake_prefix)
    cursor_key = tidy_cursor_key(settings.lake_prefix)
    start_after = _read_cursor(s3, settings.bucket, cursor_key)
    doomed: list[str] = []
    listed, next_cursor = list_page(s3, settings.bucket, prefix, start_after, max_keys)
    for key, modified in listed:
        source = key[len(prefix) :].rsplit("/", 1)[0]
        _first, last = range_of_key(key)
        committed = all(source in progress and int(progress[source][0]) >= last for progress in positions)
        if committed and now - modified > RECORD_RETENTION_SECONDS:
            doomed.append(key)
    if doomed:
        delete_keys(s3, settings.bucket, doomed)
        _logger.info("deleted %d landing records past retention", len(doomed))
    s3.put_object(Bucket=settings.bucket, Key=cursor_key, Body=next_cursor.encode())
    _logger.info(
        "tidy examined %d keys after %r; next run starts after %r", len(listed), start_after, next_cursor
    )
    return len(doomed)


def list_page(
    s3: S3Client, bucket: str, prefix: str, start_after: str, max_keys: int
) -> tuple[list[tuple[str, float]], str]:
    """At most ``max_keys`` ``(record key, last modified)`` after ``start_after``, and where the next
    page starts (``""``: the listing reached the end, start over)."""
    kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    if start_after:
        kwargs["StartAfter"] = start_after
    listed: list[tuple[str, float]] = []
    last_key = ""
    for page in s3.get_paginator("list_objects_v2").paginate(**kwargs):
        for item in page.get("Contents", []):
            last_key = item["Key"]
            if last_key.endswith(".json"):
                listed.append((last_key, item["LastModified"].timestamp()))
        if len(listed) >= max_keys:
            return listed, last_key
        if not page.get("IsTruncated"):
            break
    return listed, ""


def _read_cursor(s3: S3Client, bucket: str, key: str) -> str:
    try:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
    except s3.exceptions.NoSuchKey:
        return ""


def iter_modified(s3: S3Client, bucket: str, prefix: str) -> Iterable[tuple[str, float]]:
    """``(key, last modified epoch s)`` of the records under ``prefix``."""
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            if item["Key"].endswith(".json"):
                yield item["Key"], item["LastModified"].timestamp()
