"""Maintenance of the Iceberg tables: compaction of a day, then (:func:`maintain`) expiry and orphans.

The committer appends the landed files of every interval as they are (:mod:`lake.committer`), so a
day of a busy table is thousands of small files in arrival order: every reader opens them all, and
a one-wallet question reads every one. :func:`compact_day` rewrites such a day into a few files
sorted across the whole day (each holds a range of wallets) in **one** snapshot that removes
exactly its inputs and adds its outputs, while the committer keeps appending. Why that is safe:

- Appends never remove a file, and the compaction removes only the files it read, so a row is in
  the table once before and once after, whatever commits in between. The tables' isolation level
  is ``snapshot``: an append to the same day does not have to abort the compaction.
- pyiceberg's own retry is turned off for the commit (as the committer does): on a refused commit
  the compaction refreshes the table itself and checks that every input is still live. If one is
  gone (another compaction took it), this attempt is abandoned and its output deleted, rather than
  rebased into a snapshot that would hold those rows twice. If all are live, the same output is
  committed again onto the new head (bounded attempts; a refusal by appends alone is not counted
  against them, as the committer does not count one by a compaction).
- A commit whose outcome is unknown (a lost response) is recognised on the next attempt: the
  output is already live, and nothing is committed twice.
- Rows are not deduplicated: the committer appends every landed batch once, so a copy of a row is
  a defect that reconciliation must see, not one that a rewrite may hide: a day holding copies is
  not compacted. A rewrite keeps the table's rows exactly; only their files and order change.
- The committer's progress (table property ``walletlake.committed-through``) is never set here:
  pyiceberg carries properties forward, so a compaction leaves the stream positions as they were.

Snapshot expiry and orphan removal, which :func:`maintain` runs after the compaction, are in
:mod:`lake.iceberg_cleanup`.

pyiceberg 0.12 has no manifest rewrite (Java's ``RewriteManifests``): manifests are merged by the
committer's ``merge_append`` once a table has ``commit.manifest.min-count-to-merge`` of them, which
is what keeps the manifest count bounded.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import boto3
import pyarrow.parquet as pq

from contracts.lake_tables import PARTITION_COLUMN
from lake.compaction_targets import ICEBERG_TARGET_FILE_BYTES
from lake.iceberg_catalog import strict_commits
from lake.iceberg_cleanup import (
    DEFAULT_ORPHAN_AGE_SECONDS,
    DEFAULT_RETAIN_LAST,
    DEFAULT_SNAPSHOT_AGE_SECONDS,
    ExpiryResult,
    OrphanResult,
    expire_snapshots,
    remove_orphan_files,
)
from lake.iceberg_tables import identifier
from lake.objects import delete_keys

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from pyiceberg.catalog import Catalog
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import FileScanTask, Table

    from contracts.settings import Settings

_logger = logging.getLogger(__name__)

#: Snapshot summary key naming what a maintenance commit did (the committer's commits lack it).
OPERATION_PROPERTY: Final = "walletlake.operation"
COMPACTION: Final = "compaction"
#: DuckDB's memory for the day's sort; past it, the sort spills to the scratch folder.
COMPACTION_MEMORY_LIMIT: Final = "1GB"
#: A file at or above this share of the target is left alone: rewriting it gains nothing.
SMALL_FILE_SHARE: Final = 0.75
#: Refusals after which a compaction gives up, counting only those where something other than
#: the committer's appends moved ``main`` (a rewrite, an expiry, an unknown outcome). A refusal by
#: appends alone is committed again without counting, up to :data:`MAX_REFUSALS` in all: each one
#: means the committer made progress, and on a hot table (a commit every interval, the rewrite's
#: commit spanning a good share of one) five in a row is a matter of luck, not of a conflict.
DEFAULT_ATTEMPTS: Final = 5
#: Commit attempts of one compaction in all, whatever refused them (as :mod:`lake.committer`'s).
MAX_REFUSALS: Final = 50

#: Called with the attempt number after the output is written and before each commit: a seam for
#: tests to commit something concurrently at exactly that point.
BeforeCommit = Callable[[int], None]
_READERS: Final = 16


@dataclasses.dataclass(frozen=True, slots=True)
class CompactionResult:
    """What :func:`compact_day` did to one partition.

    ``outcome`` is ``compacted``, ``nothing to compact`` (fewer than two small files) or
    ``abandoned`` (an input was removed concurrently; the output was deleted, nothing committed).
    """

    table: str
    day: str
    outcome: str
    files_in: int = 0
    files_out: int = 0
    rows: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    attempts: int = 0
    snapshot_id: int | None = None
    paths_out: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for logs and JSON."""
        return {**dataclasses.asdict(self), "paths_out": list(self.paths_out)}


@dataclasses.dataclass(frozen=True, slots=True)
class MaintenanceReport:
    """One :func:`maintain` run."""

    compaction: CompactionResult
    expiry: ExpiryResult
    orphans: OrphanResult

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for logs and JSON."""
        return {
            "compaction": self.compaction.as_dict(),
            "expiry": self.expiry.as_dict(),
            "orphans": self.orphans.as_dict(),
        }


def compact_day(
    settings: Settings,
    catalog: Catalog,
    table: str,
    day: str | dt.date,
    *,
    target_file_bytes: int = ICEBERG_TARGET_FILE_BYTES,
    attempts: int = DEFAULT_ATTEMPTS,
    s3: S3Client | None = None,
    before_commit: BeforeCommit | None = None,
) -> CompactionResult:
    """Rewrite one ``dt`` partition into files of at most ``target_file_bytes``, sorted across the day.

    The whole day is sorted as one (``lake.compaction.compact_files``, the DuckDB kernel the plain
    lake's compaction uses, spilling to disk past its memory limit), so each output file holds a
    range of wallets and a one-wallet read opens one or two row groups of the day, not one of
    every file. A day is rewritten when it has two files or more and one of them is small. Copies
    of an entry (which exactly-once commits never make) are not silently dropped: the compaction
    refuses, so reconciliation reports them. See the module docstring for why a concurrent append
    can neither lose nor double a row.
    """

    day_text = day.isoformat() if isinstance(day, dt.date) else day
    ident = identifier(settings.glue_database, table)
    s3 = s3 or boto3.client("s3", region_name=settings.region)
    current = catalog.load_table(ident)
    tasks = plan_day(_day_tasks(current, day_text), target_file_bytes)
    if not tasks:
        return _logged(CompactionResult(table, day_text, "nothing to compact"))
    inputs = [task.file for task in tasks]
    outputs = _rewrite_day(s3, current, table, day_text, inputs, target_file_bytes)
    paths_out = tuple(file.file_path for file in outputs)
    result = CompactionResult(
        table,
        day_text,
        COMPACTION,
        files_in=len(inputs),
        files_out=len(outputs),
        rows=sum(file.record_count for file in outputs),
        bytes_in=sum(file.file_size_in_bytes for file in inputs),
        bytes_out=sum(file.file_size_in_bytes for file in outputs),
        paths_out=paths_out,
    )
    rows_in = sum(file.record_count for file in inputs)
    if result.rows != rows_in:  # the rewrite must hold exactly the rows it read
        _delete_paths(s3, paths_out)
        raise RuntimeError(f"{table} dt={day_text}: compaction read {rows_in} rows but wrote {result.rows}")
    return _commit_compaction(
        catalog, ident, current, result, inputs, outputs, s3, attempts=attempts, before_commit=before_commit
    )


def _commit_compaction(
    catalog: Catalog,
    ident: tuple[str, str],
    current: Table,
    result: CompactionResult,
    inputs: Sequence[DataFile],
    outputs: Sequence[DataFile],
    s3: S3Client,
    *,
    attempts: int,
    before_commit: BeforeCommit | None,
) -> CompactionResult:
    """Commit the written rewrite, checking again after each refusal (the module docstring says
    why each outcome is safe): at most ``attempts`` refusals not explained by appends alone."""
    from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException

    table, day_text, paths_out = result.table, result.day, result.paths_out
    summary = {
        OPERATION_PROPERTY: COMPACTION,
        "walletlake.compaction.day": day_text,
        "walletlake.compaction.files-in": str(len(inputs)),
        "walletlake.compaction.files-out": str(len(outputs)),
    }
    wanted = [file.file_path for file in inputs]
    checked: tuple[int | None, list[DataFile]] | None = None  # (snapshot, inputs) last found live
    refused = conflicts = 0  # conflicts: the refusals not explained by appends alone
    for attempt in range(1, MAX_REFUSALS + 1):
        if attempt > 1:
            current = catalog.load_table(ident)
        if checked is not None and _only_appends_since(current, checked[0]):
            # Refused by appends alone (the committer's): they never remove a file, so the inputs
            # are live and the outputs not committed; commit again at once, without planning the
            # day again and without counting it. A retry that planned the whole day each time
            # spanned the next append too, on a busy table again and again.
            input_files = checked[1]
        else:
            if attempt > 1:
                conflicts += 1
                if conflicts >= attempts:
                    break
            live = _live_files(current, day_text)
            if all(path in live for path in paths_out):
                # An earlier attempt landed though its answer was lost: it is done, not to be redone.
                return _logged(
                    dataclasses.replace(result, attempts=attempt, snapshot_id=_snapshot_id(current))
                )
            gone = [path for path in wanted if path not in live]
            if gone:
                _delete_paths(s3, paths_out)
                _logger.warning(
                    "compaction of %s dt=%s abandoned: %d of its inputs were removed meanwhile (e.g. %s)",
                    table,
                    day_text,
                    len(gone),
                    gone[0],
                )
                return _logged(
                    dataclasses.replace(result, outcome="abandoned", attempts=attempt, paths_out=())
                )
            input_files = [live[path] for path in wanted]
        checked = (_snapshot_id(current), input_files)
        if before_commit is not None:
            before_commit(attempt)
        try:
            committed = _commit_rewrite(current, input_files, outputs, summary)
        except CommitFailedException:
            refused += 1
            _logger.warning(
                "compaction of %s dt=%s refused (a concurrent commit); checking again (%d)",
                table,
                day_text,
                attempt,
            )
            continue
        except CommitStateUnknownException:
            refused += 1
            _logger.warning("compaction of %s dt=%s: commit outcome unknown; checking again", table, day_text)
            checked = None  # the outputs may be live: look
            continue
        return _logged(dataclasses.replace(result, attempts=attempt, snapshot_id=_snapshot_id(committed)))
    # Every attempt lost a race: the output may still be committed by an unknown outcome, so it is
    # left for orphan removal (which deletes it only if no snapshot references it).
    raise RuntimeError(
        f"compaction of {table} dt={day_text} gave up after {refused} refused commits, "
        f"{conflicts} of them by something other than appends"
    )


def plan_day(tasks: Sequence[FileScanTask], target_file_bytes: int) -> list[FileScanTask]:
    """The day's files to rewrite: all of them, when there are two or more and one is small.

    A file with delete files attached leaves the day alone (rewriting it would have to apply them;
    the lake writes none, so this only guards a table changed by another engine).
    """
    if len(tasks) < 2 or any(task.delete_files for task in tasks):
        return []
    if all(task.file.file_size_in_bytes >= target_file_bytes * SMALL_FILE_SHARE for task in tasks):
        return []
    return sorted(tasks, key=lambda task: task.file.file_path)


def _day_tasks(table: Table, day: str) -> list[FileScanTask]:
    from pyiceberg.expressions import EqualTo, Reference
    from pyiceberg.expressions.literals import literal

    if table.current_snapshot() is None:
        return []
    tasks = table.scan(row_filter=EqualTo(term=Reference(PARTITION_COLUMN), value=literal(day))).plan_files()
    # The filter prunes by partition; a file of another day can only pass through missing
    # statistics, so the partition value itself decides.
    return [task for task in tasks if _partition_day(task.file) == day]


def _partition_day(file: DataFile) -> str | None:
    value = file.partition[0] if len(file.partition) else None
    return str(value) if value is not None else None


def _only_appends_since(table: Table, snapshot_id: int | None) -> bool:
    """True when every snapshot of ``main`` after ``snapshot_id`` is an append (adds files, removes
    none); False when one is anything else or ``snapshot_id`` is not among its ancestors."""
    if snapshot_id is None:
        return False
    current = table.current_snapshot()
    while current is not None and current.snapshot_id != snapshot_id:
        if current.summary is None or current.summary.operation.value != "append":
            return False
        parent = current.parent_snapshot_id
        current = table.metadata.snapshot_by_id(parent) if parent is not None else None
    return current is not None


def _live_files(table: Table, day: str) -> dict[str, DataFile]:
    return {task.file.file_path: task.file for task in _day_tasks(table, day)}


def _rewrite_day(
    s3: S3Client,
    table: Table,
    name: str,
    day: str,
    inputs: Sequence[DataFile],
    target_file_bytes: int,
) -> list[DataFile]:
    """Download the day's files, sort and cut them with the DuckDB kernel, upload the outputs into
    the table's ``data/dt=day/`` and describe them (partition from the day: the kernel writes the
    lake schema, without ``dt``)."""
    from lake.compaction import compact_files
    from lake.iceberg_files import partitioned_data_file
    from lake.iceberg_landing import split_bucket_key

    folder = f"{table.location().rstrip('/')}/data/{PARTITION_COLUMN}={day}/"
    generation = uuid.uuid4().hex
    described: list[DataFile] = []

    def put(file_name: str, local: Path) -> None:
        path = folder + file_name
        bucket, key = split_bucket_key(path)
        with local.open("rb") as body:
            s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/vnd.apache.parquet")
        metadata = pq.read_metadata(local)
        described.append(partitioned_data_file(table, path, day, local.stat().st_size, metadata))

    with tempfile.TemporaryDirectory(prefix="walletlake-iceberg-compaction-") as scratch:
        local = _download(s3, [file.file_path for file in inputs], Path(scratch))
        try:
            done = compact_files(
                name,
                local,
                put,
                name=generation,
                target_file_bytes=target_file_bytes,
                row_group_rows=None,
                memory_limit=COMPACTION_MEMORY_LIMIT,
                scratch=Path(scratch),
            )
        except Exception:
            _delete_paths(s3, [file.file_path for file in described])
            raise
    if done.duplicates_dropped:
        _delete_paths(s3, [file.file_path for file in described])
        raise RuntimeError(
            f"{name} dt={day} holds {done.duplicates_dropped} copies of entries: not compacted, so that "
            "reconciliation reports them (docs/operations.md, section 3)"
        )
    return described


def _download(s3: S3Client, paths: Sequence[str], folder: Path) -> list[str]:
    from lake.compaction import download
    from lake.iceberg_landing import split_bucket_key

    def fetch(indexed: tuple[int, str]) -> str:
        index, path = indexed
        bucket, key = split_bucket_key(path)
        target = folder / f"input-{index:06d}.parquet"
        download(s3, bucket, key, target)
        return str(target)

    with ThreadPoolExecutor(max_workers=_READERS) as pool:
        return list(pool.map(fetch, enumerate(paths)))


def _commit_rewrite(
    table: Table, inputs: Sequence[DataFile], outputs: Sequence[DataFile], summary: dict[str, str]
) -> Table:
    """One overwrite snapshot removing ``inputs`` and adding ``outputs``, refused (never rebased)
    when the table moved since ``table`` was loaded."""
    transaction = strict_commits(table).transaction()
    with transaction.update_snapshot(snapshot_properties=summary).overwrite() as rewrite:
        for data_file in inputs:
            rewrite.delete_data_file(data_file)
        for data_file in outputs:
            rewrite.append_data_file(data_file)
    return transaction.commit_transaction()


def _snapshot_id(table: Table) -> int | None:
    snapshot = table.current_snapshot()
    return snapshot.snapshot_id if snapshot is not None else None


def _delete_paths(s3: S3Client, paths: Iterable[str]) -> None:
    from lake.iceberg_landing import split_bucket_key

    for path in paths:
        bucket, key = split_bucket_key(path)
        delete_keys(s3, bucket, [key])


def _logged(result: CompactionResult) -> CompactionResult:
    _logger.info("compaction %s", json.dumps(result.as_dict()))
    return result


def maintain(
    settings: Settings,
    catalog: Catalog,
    table: str,
    day: str | dt.date,
    *,
    target_file_bytes: int = ICEBERG_TARGET_FILE_BYTES,
    snapshot_age_seconds: float = DEFAULT_SNAPSHOT_AGE_SECONDS,
    retain_last: int = DEFAULT_RETAIN_LAST,
    orphan_age_seconds: float = DEFAULT_ORPHAN_AGE_SECONDS,
    s3: S3Client | None = None,
    clock: Callable[[], float] = time.time,
) -> MaintenanceReport:
    """Compact a day, then expire snapshots, then remove orphans: in this order, the inputs the
    compaction replaced leave the table once the snapshots that held them have expired."""
    s3 = s3 or boto3.client("s3", region_name=settings.region)
    compaction = compact_day(settings, catalog, table, day, target_file_bytes=target_file_bytes, s3=s3)
    expiry = expire_snapshots(settings, catalog, table, snapshot_age_seconds, retain_last, clock=clock)
    orphans = remove_orphan_files(settings, catalog, table, orphan_age_seconds, s3=s3, clock=clock)
    report = MaintenanceReport(compaction, expiry, orphans)
    _logger.info("maintenance %s", json.dumps(report.as_dict()))
    return report
