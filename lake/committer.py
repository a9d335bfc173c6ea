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
import json
import logging
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

from contracts.lake_layout import misfits_location
from contracts.lake_tables import STREAM_TABLES
from lake.commit_progress import (
    BATCHES_PROPERTY,
    COMMIT_ID_PROPERTY,
    EMPTY_COMMIT_AFTER_SECONDS,
    PROGRESS_PROPERTY,
    PROGRESS_RETENTION_SECONDS,
    Decision,
    Progress,
    already_held,
    choose,
    commit_identity,
    decide,
    progress_moved,
    progress_text,
    prune,
    read_progress,
)
from lake.entry_identity import REPLAY_HORIZON_PROPERTY, is_replay
from lake.file_presence import FilePresence
from lake.identity_guard import check_identities
from lake.landing_log import LandedFile, LandingRecord, list_sources, records_after
from lake.landing_tidy import (
    RECORD_RETENTION_SECONDS,
    TIDY_KEYS_PER_RUN,
    iter_modified,
    list_page,
    tidy_log,
    tidy_pass,
    tidy_pending,
)
from lake.misfits import MISFITS_FOLDER, misfit_location, note_missing, quarantine_batch, quarantine_misfit

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from pyiceberg.catalog import Catalog
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table

    from contracts.settings import Settings

__all__ = [
    "BATCHES_PROPERTY",
    "COMMIT_ID_PROPERTY",
    "EMPTY_COMMIT_AFTER_SECONDS",
    "FULL_LISTING_EVERY_SECONDS",
    "MISFITS_FOLDER",
    "PROGRESS_PROPERTY",
    "PROGRESS_RETENTION_SECONDS",
    "QUIET_AFTER_SECONDS",
    "RECORD_RETENTION_SECONDS",
    "TIDY_KEYS_PER_RUN",
    "CommitReport",
    "Decision",
    "Progress",
    "TableCommit",
    "choose",
    "commit_decision",
    "commit_identity",
    "commit_landed",
    "commit_now",
    "commit_table",
    "decide",
    "iter_modified",
    "list_page",
    "misfit_location",
    "progress_text",
    "prune",
    "quarantine_misfit",
    "read_progress",
    "tidy_log",
]

_logger = logging.getLogger(__name__)

#: A shard that committed nothing for this long is *quiet* (closed, usually: DynamoDB rolls a
#: stream's shards every few hours); its records are listed only by the full listing below.
QUIET_AFTER_SECONDS: Final = 3600
#: Every this many seconds a cycle lists every shard's records, quiet ones too: a late record of a
#: quiet shard (a retried batch) waits at most this long. Other cycles list active shards only, so
#: a cycle's LISTs follow the shards in use, not the day's shard history.
FULL_LISTING_EVERY_SECONDS: Final = 300
_FILE_CHECKERS: Final = 16
#: Refusals after which a table's commit gives up for this cycle, counting only refusals where the
#: table's progress changed (another committer took batches); a refusal by a commit that left the
#: progress alone (a compaction, an expiry) is decided again without counting, up to
#: :data:`_MAX_REFUSALS` in all.
_ATTEMPTS: Final = 5
_MAX_REFUSALS: Final = 50
#: Why a file present in storage is left out: a file of its batch is gone (the batch goes whole).
_BATCH_LEFT_OUT: Final = "its batch is left out"


@dataclasses.dataclass(frozen=True, slots=True)
class TableCommit:
    """What one table's commit did.

    ``rows``: rows appended (a misfit's rows are not); ``skipped_batches``: listed batches the
    table had already committed (redeliveries, or batches another committer took first);
    ``deferred_batches``: batches without rows for it, left for later; ``misfit_files``: landed
    files that did not fit the table, quarantined and left out; ``missing_files``: landed files
    gone from storage; ``quarantined_batches``: batches left out whole because a file of theirs
    (in any table) is gone, each noted with why; ``blocked``: why the table was not
    committed to at all (a type change it cannot take), empty when it was; ``held_rows``: rows of
    replayed (or catch-up) files left out because the table already held them, by identity
    (:mod:`lake.entry_identity`).
    """

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
    missing_files: int = 0
    quarantined_batches: int = 0
    blocked: str = ""
    held_rows: int = 0

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
    #: Tidy passes in a row that stopped short of the log's end (0: caught up or not tidying).
    tidy_behind: int = 0

    @property
    def rows(self) -> int:
        """Rows appended in all tables."""
        return sum(table.rows for table in self.tables)

    @property
    def misfit_files(self) -> int:
        """Landed files quarantined as misfits in all tables (the ``MisfitFiles`` metric)."""
        return sum(table.misfit_files for table in self.tables)

    @property
    def missing_files(self) -> int:
        """Landed files gone from storage in all tables (the ``MissingFiles`` metric)."""
        return sum(table.missing_files for table in self.tables)

    @property
    def quarantined_batches(self) -> int:
        """Batches left out whole for a missing file (each table's commit finds the same: the most)."""
        return max((table.quarantined_batches for table in self.tables), default=0)

    @property
    def held_rows(self) -> int:
        """Rows left out because the table already held them (by identity), in all tables."""
        return sum(table.held_rows for table in self.tables)

    @property
    def blocked_tables(self) -> int:
        """Tables held by a type change they cannot take (the ``BlockedTables`` metric)."""
        return sum(1 for table in self.tables if table.blocked)

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for logs and JSON."""
        return {
            "tables": [table.as_dict() for table in self.tables],
            "rows": self.rows,
            "misfit_files": self.misfit_files,
            "missing_files": self.missing_files,
            "quarantined_batches": self.quarantined_batches,
            "held_rows": self.held_rows,
            "blocked_tables": self.blocked_tables,
            "records_deleted": self.records_deleted,
            "snapshots_expired": self.snapshots_expired,
            "tidy_behind": self.tidy_behind,
            "seconds": round(self.seconds, 3),
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
    landing records past retention, :func:`lake.landing_tidy.tidy_pass`, a bounded slice of the
    log per call; done at every cycle, ``tidy`` or not, while the last pass stopped short). A
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
    io = loaded[0].io if loaded else None  # pyarrow's S3 client: botocore's GETs cost more CPU
    records = records_after(s3, settings.bucket, settings.lake_prefix, _floor(sources, positions), io)
    presence = FilePresence(s3)  # one HEAD per landed file this cycle, whatever the tables naming it
    results = [
        commit_table(
            catalog,
            identifier(settings.glue_database, name),
            records,
            live_sources=frozenset(live),
            clock=clock,
            empty_after_seconds=empty_after_seconds,
            misfits_root=misfits_location(settings.bucket, settings.lake_prefix),
            presence=presence,
        )
        for name in names
    ]
    # hourly, and at every cycle after a pass that stopped short of the log's end (catching up)
    tidied = (
        tidy_pass(settings, s3, catalog, tables=names, clock=clock)
        if tidy or tidy_pending(s3, settings)
        else None
    )
    expired = 0
    from lake.snapshot_expiry import EXPIRE_AT_LEAST, expirable, expire_snapshots
    from lake.snapshot_tags import DAY_MS

    for name, table in zip(names, loaded, strict=True):
        # hourly, or as soon as enough snapshots are past retention: the cycle's cost grows with
        # the snapshots kept (lake.snapshot_expiry)
        if tidy or len(expirable(table.metadata, now)) >= EXPIRE_AT_LEAST:
            expired += expire_snapshots(
                catalog.load_table(identifier(settings.glue_database, name)),
                clock(),
                tag_retention_ms=settings.audit_tag_retention_days * DAY_MS,
            )
    report = CommitReport(
        tables=tuple(results),
        records_deleted=tidied.deleted if tidied is not None else 0,
        seconds=time.monotonic() - started,
        snapshots_expired=expired,
        tidy_behind=tidied.behind if tidied is not None else 0,
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
    presence: FilePresence | None = None,
) -> TableCommit:
    """One table's commit of the listed records: load, decide, commit; on a refusal (``main``
    moved since the load) load and decide again: at most :data:`_ATTEMPTS` times when the
    progress changed meanwhile, freely (up to :data:`_MAX_REFUSALS`) when it did not (a compaction
    or an expiry moved ``main``: the decision is the same, so there is nothing to give up on).

    A table whose schema cannot take the contract's types (a type change Iceberg refuses:
    :func:`lake.iceberg_tables.blocking_changes`) is not committed to at all: its position
    stays, the landed batches wait, and the report says why (``blocked``), which alarms.

    ``on_step`` is called with ``"load"``, ``"decide"`` and ``"commit"`` before each step: a seam
    for tests that interleave committers at every step. ``misfits_root``: where files that do not
    fit the table are kept (:func:`lake.misfits.misfit_location`). ``presence``: the cycle's
    answers on which landed files exist, shared by its tables (one HEAD per file per cycle).
    """
    from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException

    from lake.iceberg_schema_changes import refused_message
    from lake.iceberg_tables import blocking_changes

    step = on_step or (lambda _name: None)
    name = table_id[-1]
    started = time.monotonic()
    attempt = refusals = conflicts = 0
    while True:
        attempt += 1
        step("load")
        table = catalog.load_table(table_id)
        step("decide")
        blocked = blocking_changes(name, table.schema())
        if blocked:
            message = refused_message(name, blocked)
            _logger.error("commit of %s held: %s", name, message)
            return TableCommit(name, 0, 0, 0, 0, None, time.monotonic() - started, blocked=message)
        progress = read_progress(table)
        # What a listing past this table's own positions would have found: records starting past
        # them (the shared listing starts at the lowest position of all tables); the others are
        # batches this table already holds.
        records = [r for r in listed if r.source not in progress or r.first > int(progress[r.source][0])]
        decision = decide(
            name,
            records,
            progress,
            live_sources=live_sources,
            now=clock(),
            empty_after_seconds=empty_after_seconds,
        )
        skipped = already_held(listed, progress) + decision.skipped
        files = [file for record in decision.chosen for file in record.files_of(name)]
        if not decision.commit:
            return TableCommit(
                name,
                0,
                0,
                0,
                skipped,
                None,
                time.monotonic() - started,
                deferred_batches=len(decision.chosen),
                attempts=attempt - 1,
            )
        step("commit")
        try:
            snapshot_id, aside, quarantined, held = commit_decision(
                table, decision, files, misfits_root=misfits_root, presence=presence
            )
        except CommitStateUnknownException as error:
            landed = committed_snapshot(catalog.load_table(table_id), decision.commit_id)
            if landed is not None:
                # The catalog applied it and the answer was lost (the REST spec's "commit state
                # unknown"): the commit-id in a snapshot summary says so; nothing to redo.
                _logger.warning("commit of %s answered %s but landed as %d", name, error, landed)
                return TableCommit(
                    name,
                    len(decision.chosen),
                    len(files),
                    sum(file.rows for file in files),
                    skipped,
                    landed,
                    time.monotonic() - started,
                    attempts=attempt,
                )
            conflicts += 1
            if conflicts >= _ATTEMPTS:
                raise
            continue
        except CommitFailedException:
            refusals += 1
            if progress_moved(catalog.load_table(table_id), progress):
                conflicts += 1
            if conflicts >= _ATTEMPTS or refusals >= _MAX_REFUSALS:
                raise
            _logger.warning("commit of %s refused (a concurrent commit); deciding again (%d)", name, attempt)
            continue
        left_out = {file.path for file, _, _ in aside}
        return TableCommit(
            name,
            len(decision.chosen),
            len(files) - len(aside),
            sum(file.rows for file in files if file.path not in left_out) - held,
            skipped,
            snapshot_id,
            time.monotonic() - started,
            attempts=attempt,
            held_rows=held,
            misfit_files=sum(1 for _, why, missing in aside if not missing and why != _BATCH_LEFT_OUT),
            missing_files=sum(1 for _, _, missing in aside if missing),
            quarantined_batches=quarantined,
        )


def committed_snapshot(table: Table, commit_id: str) -> int | None:
    """The snapshot whose summary carries ``commit_id`` (:data:`COMMIT_ID_PROPERTY`), newest
    first, or None: how a committer whose commit failed or went unanswered learns whether it
    landed, as Flink's committer reads its checkpoint id back from the table."""
    for snapshot in sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms, reverse=True):
        summary = snapshot.summary
        if summary is not None and summary.additional_properties.get(COMMIT_ID_PROPERTY) == commit_id:
            return snapshot.snapshot_id
    return None


def commit_decision(
    table: Table,
    decision: Decision,
    files: Sequence[LandedFile],
    *,
    misfits_root: str | None = None,
    presence: FilePresence | None = None,
) -> tuple[int | None, list[tuple[LandedFile, str, bool]], int, int]:
    """Append the files and set the progress in one commit, valid only while ``main`` is still the
    snapshot ``table`` was loaded at; refused (never rebased) otherwise. Returns the snapshot id,
    the files set aside (with why and whether the file was missing) and how many batches were
    left out whole.

    ``table`` must be the one the decision was made from: its current snapshot is what the commit
    asserts. A decision without files sets the property alone (no snapshot is made), under the
    same assertion. Files are described from their landing records
    (:mod:`lake.iceberg_data_files`: no footer read; records of an older walletlake, from their
    footers). A file that does not fit the table (a column it lacks, a type it cannot read) is
    quarantined (:func:`lake.misfits.quarantine_misfit`) and left out, the rest of its batch, the
    later batches and the other tables committing as usual. A batch with a file gone from storage
    (in any table) is left out **whole**, in every table, and noted once with why
    (:func:`lake.misfits.quarantine_batch`): its rows reach no table, so a replay of its range
    brings it back whole; the later batches and the other tables commit as usual.
    """
    from pyiceberg.table.update import AssertRefSnapshotId

    from lake.iceberg_catalog import strict_commits
    from lake.iceberg_transaction import StagedMetadataTransaction

    strict = strict_commits(table)
    every = [file for record in decision.chosen for file in record.files]
    # every file of every chosen batch, whatever its table, asked once per cycle (``presence``
    # is shared by the cycle's tables): a batch with a file gone is left out whole, here and in
    # every other table's commit (each finds the same files gone)
    presence = presence or FilePresence()
    stored = presence.of(table.io, [f.path for f in every])
    # a file of another size or checksum than its landing record says is torn: as good as gone
    torn = {f.path: why for f in every if stored[f.path] and (why := presence.torn(f.path, f.size, f.crc32))}
    present = {path: here and path not in torn for path, here in stored.items()}
    broken = [record for record in decision.chosen if not all(present[f.path] for f in record.files)]
    left_out = {file.path for record in broken for file in record.files}
    taken = [file for file in files if file.path not in left_out]
    with ThreadPoolExecutor(max_workers=_FILE_CHECKERS) as pool:
        described = list(pool.map(lambda file: _describe(table, file, present[file.path]), taken))
    for record in broken:
        quarantine_batch(
            table,
            record,
            {f.path for f in record.files if not present[f.path]},
            misfits_root,
            torn={path: why for path, why in torn.items() if any(f.path == path for f in record.files)},
        )
    data_files = [data_file for data_file, _, _ in described if data_file is not None]
    replayed = {
        file.path
        for record in decision.chosen
        if is_replay(record.stream, record.shard)
        for file in record.files
    }
    data_files, held, horizon = check_identities(table, data_files, replayed)
    aside = [
        (file, reason, missing) for file, (_, reason, missing) in zip(taken, described, strict=True) if reason
    ]
    for file, reason, missing in aside:
        if missing:
            note_missing(table, file.path, reason, misfits_root)
        else:
            quarantine_misfit(table, file.path, reason, misfits_root)
    # the table's own files of a batch left out whole: counted as missing when gone, else only left out
    aside += [(file, _BATCH_LEFT_OUT, not present[file.path]) for file in files if file.path in left_out]
    transaction = StagedMetadataTransaction(strict)  # pyiceberg's rebuilds metadata at every read
    main = table.metadata.refs.get("main")
    expected = AssertRefSnapshotId(snapshot_id=main.snapshot_id if main else None, ref="main")  # type: ignore[call-arg]
    transaction._stage((), (expected,))
    properties = {PROGRESS_PROPERTY: progress_text(decision.progress)}
    if horizon is not None:
        properties[REPLAY_HORIZON_PROPERTY] = str(horizon)
    transaction.set_properties(properties)
    if data_files:
        summary = {COMMIT_ID_PROPERTY: decision.commit_id, BATCHES_PROPERTY: str(len(decision.chosen))}
        with transaction.update_snapshot(snapshot_properties=summary).merge_append() as append:
            for data_file in data_files:
                append.append_data_file(data_file)
    committed = transaction.commit_transaction()
    snapshot = committed.current_snapshot()
    return (snapshot.snapshot_id if snapshot is not None else None), aside, len(broken), held


def _describe(table: Table, file: LandedFile, present: bool) -> tuple[DataFile | None, str, bool]:
    """A file's Iceberg description, or why it is set aside (and whether because it is missing).

    ``present``: the cycle's HEAD of it (:class:`lake.file_presence.FilePresence`); its description
    from the landing record when it has one (checked against the table's schema:
    :func:`lake.iceberg_data_files.fit_problem`), from its footer otherwise.
    """
    from pyiceberg.io.pyarrow import parquet_file_to_data_file

    from lake.iceberg_data_files import data_file_of, fit_problem

    gone = f"missing: {file.path} is not in storage (removed since it landed)"
    if not present:
        return None, gone, True
    if file.description is not None and all(
        field.name in file.description.get("partition", {}) for field in table.metadata.spec().fields
    ):
        problem = fit_problem(table.schema(), file.description["fields"])
        if problem:
            return None, f"does not fit: {problem}", False
        return data_file_of(table.metadata, file.path, file.size, file.description), "", False
    try:
        return parquet_file_to_data_file(table.io, table.metadata, file.path), "", False
    except FileNotFoundError:
        return None, gone, True
    except (ValueError, TypeError) as error:
        return None, f"{type(error).__name__}: {error}", False
