"""Moving the plain-Parquet lake into the Iceberg tables without moving a byte of it.

The plain lake's compacted files already are valid Iceberg data files for the tables of
:mod:`lake.iceberg_tables` (same columns, millisecond timestamps that Iceberg readers take as they
are, ``dt`` given by the partition value rather than a column), so migrating is a metadata
operation: each file is *registered* where it lies (``s3://{bucket}/{lake_prefix}/{table}/dt=.../``)
with a DataFile built from its footer, and the table's partition value for it set from its key.
Nothing is read beyond footers, nothing is written to the data location, and rolling back is
choosing the previous snapshot.

What may be registered, and why only that
    A partition of the plain lake is in one of three states (:mod:`lake.compaction`): landing
    objects only, landing objects next to compacted files holding some of the same rows (a
    compaction between writing its outputs and deleting its inputs, or killed there), or compacted
    files only. Only the last is known to hold each row once without reading the rows, so a day
    is migrated only when every five-minute slot of it holds the complete output of one compaction
    (:func:`lake.compaction.is_compacted`, per slot, so days compacted with units of any length
    qualify); any other day is *refused*, and the operator runs ``walletlake compact`` for it.
    Refusals are decided for every table and day before the first commit, so a refused run
    commits nothing.

Never registering a row twice
    Idempotence comes from the table itself: the paths of the data files the current snapshot
    references are read from its manifests once per run (a one-off operation, so a full listing is
    affordable, and it is the only record that cannot disagree with what readers see; a table
    property listing migrated days could, after an expired or rolled-back snapshot). A file whose
    path is already referenced is not registered again, so a second run, or a run after one killed
    between two commits, registers only what is missing.

    A day whose partition in the table already holds files that are *not* plain-lake paths got
    its rows another way: from the stream's committer (the day the stream switched to Iceberg) or
    from a rewrite of migrated files by Iceberg maintenance. Registering the plain files there
    could double rows, so such a day is skipped and reported, unless the operator, having checked
    that the two sets of rows are disjoint, names it in ``include_days``. A day whose registered
    plain files have since left the plain lake (it was compacted again after migrating) is
    refused: its new files would repeat rows the table already holds.

Commits
    One fast append per table and batch of at most ``files_per_commit`` files, each snapshot's
    summary marked ``walletlake.operation=migration`` (with the days it covers), so an auditor
    can tell migrated snapshots from the stream's. Fast appends write one manifest per commit and
    never rewrite existing ones: a commit stays small whatever the table already holds.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from contracts.lake_layout import PARQUET_SUFFIX, SLOT_MINUTES, partition_day, partition_prefix, table_prefix
from contracts.lake_tables import PARTITION_COLUMN, STREAM_TABLES
from lake import objects
from lake.compaction import read_footer
from lake.compaction_kernel import is_compacted
from lake.iceberg_files import partitioned_data_file
from lake.iceberg_tables import iceberg_arrow_schema, identifier
from lake.migration_commits import DAYS_PROPERTY, DEFAULT_FILES_PER_COMMIT, OPERATION, OPERATION_PROPERTY

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from pyiceberg.catalog import Catalog
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table

    from contracts.settings import Settings

_logger = logging.getLogger(__name__)

_FOOTER_READERS: Final = 16

DayState = Literal["register", "done", "skipped"]


class MigrationRefusedError(RuntimeError):
    """Some day cannot be migrated as it is; nothing was committed."""

    def __init__(self, refusals: Sequence[str]) -> None:
        self.refusals = tuple(refusals)
        more = f" (and {len(refusals) - 1} more)" if len(refusals) > 1 else ""
        super().__init__(f"migration refused, nothing committed: {refusals[0]}{more}")


@dataclasses.dataclass(frozen=True, slots=True)
class DayMigration:
    """One table's day: what the migration registers (or would), or why it leaves it alone.

    ``state`` is ``register`` (files to register), ``done`` (every plain file already
    registered) or ``skipped`` (the table holds other files for the day; ``reason`` says which).
    """

    table: str
    day: dt.date
    state: DayState
    paths: tuple[str, ...] = ()
    rows: int = 0
    bytes: int = 0
    already_registered: int = 0
    reason: str = ""

    def describe(self, *, dry_run: bool) -> str:
        """One progress line."""
        head = f"{self.table:<11} {self.day}"
        if self.state == "skipped":
            return f"{head}: skipped, {self.reason}"
        if self.state == "done":
            return f"{head}: already migrated ({self.already_registered} files)"
        verb = "would register" if dry_run else "registering"
        also = f" ({self.already_registered} already registered)" if self.already_registered else ""
        return f"{head}: {verb} {len(self.paths)} files, {self.rows:,} rows, {self.bytes:,} bytes{also}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {**dataclasses.asdict(self), "day": self.day.isoformat(), "paths": list(self.paths)}


@dataclasses.dataclass(frozen=True, slots=True)
class TableMigration:
    """What the migration did to one table."""

    table: str
    days: tuple[DayMigration, ...]
    snapshot_ids: tuple[int, ...] = ()

    @property
    def files_registered(self) -> int:
        """Files registered by this run (to be registered, in a dry run)."""
        return sum(len(day.paths) for day in self.days if day.state == "register")

    @property
    def rows_registered(self) -> int:
        """Rows those files hold."""
        return sum(day.rows for day in self.days if day.state == "register")

    @property
    def skipped(self) -> tuple[DayMigration, ...]:
        """Days left alone because the table already holds other files for them."""
        return tuple(day for day in self.days if day.state == "skipped")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "table": self.table,
            "files_registered": self.files_registered,
            "rows_registered": self.rows_registered,
            "snapshot_ids": list(self.snapshot_ids),
            "days": [day.to_dict() for day in self.days],
        }


@dataclasses.dataclass(frozen=True, slots=True)
class MigrationReport:
    """A migration run, per table."""

    tables: dict[str, TableMigration]
    dry_run: bool

    @property
    def files_registered(self) -> int:
        """Files registered by this run, every table."""
        return sum(table.files_registered for table in self.tables.values())

    @property
    def rows_registered(self) -> int:
        """Rows of those files."""
        return sum(table.rows_registered for table in self.tables.values())

    @property
    def skipped(self) -> tuple[DayMigration, ...]:
        """Every skipped day."""
        return tuple(day for table in self.tables.values() for day in table.skipped)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "dry_run": self.dry_run,
            "files_registered": self.files_registered,
            "rows_registered": self.rows_registered,
            "skipped_days": [f"{day.table} {day.day}" for day in self.skipped],
            "tables": {name: table.to_dict() for name, table in self.tables.items()},
        }


@dataclasses.dataclass(slots=True)
class _TablePlan:
    table: Table
    days: list[DayMigration]
    files: dict[str, DataFile]


def migrate(
    settings: Settings,
    catalog: Catalog,
    s3: S3Client,
    *,
    tables: Sequence[str] = tuple(STREAM_TABLES),
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
    include_days: Collection[dt.date] = (),
    files_per_commit: int = DEFAULT_FILES_PER_COMMIT,
) -> MigrationReport:
    """Register every compacted file of the plain lake in its Iceberg table; idempotent.

    Plans every table first (listing, footers, checks) and raises :class:`MigrationRefusedError`
    before any commit when a day cannot be migrated as it is. ``include_days`` registers days the
    table already holds other files for (see the module docstring); ``progress`` receives one line
    per table and day, and one per commit.
    """
    if files_per_commit < 1:
        raise ValueError("files_per_commit must be at least 1")
    say = progress or (lambda line: None)
    refusals: list[str] = []
    plans: dict[str, _TablePlan] = {}
    for name in tables:
        table = catalog.load_table(identifier(settings.glue_database, name))
        plans[name] = _plan_table(settings, s3, table, name, include_days, refusals, say, dry_run)
    if refusals:
        raise MigrationRefusedError(refusals)
    done: dict[str, TableMigration] = {}
    for name, plan in plans.items():
        snapshot_ids: list[int] = []
        if not dry_run:
            snapshot_ids = _commit(plan, files_per_commit, say, name)
        done[name] = TableMigration(name, tuple(plan.days), tuple(snapshot_ids))
    return MigrationReport(done, dry_run)


def check_file_schema(table: str, schema: pa.Schema) -> str | None:
    """Why a plain-lake file cannot join ``table`` unchanged, or None when it can.

    Its columns must be the table's (``dt`` aside: it comes from the partition value, and a file
    carrying its own could contradict it), of the same types, timestamps in milliseconds or
    microseconds (Iceberg readers take either), and never nullable where the table's are required
    (readers would trust the table and meet nulls).
    """
    expected = {field.name: field for field in iceberg_arrow_schema(table) if field.name != PARTITION_COLUMN}
    names = set(schema.names)
    if PARTITION_COLUMN in names:
        return f"it has a {PARTITION_COLUMN!r} column of its own"
    missing = sorted(set(expected) - names)
    extra = sorted(names - set(expected))
    if missing or extra:
        return f"its columns differ from the table's (missing {missing}, unknown {extra})"
    for field in schema:
        want = expected[field.name]
        if _normalized(field.type) != _normalized(want.type):
            return f"column {field.name} is {field.type}, the table's is {want.type}"
        if field.nullable and not want.nullable:
            return f"column {field.name} is nullable, the table's is required"
    return None


def registered_files(table: Table) -> dict[str, str | None]:
    """``{path: dt}`` of every data file the table's current snapshot references.

    Reads every manifest of the snapshot: proportional to the table's size, which is why
    :func:`migrate` calls it once per table and run.
    """
    from pyiceberg.manifest import ManifestContent

    snapshot = table.current_snapshot()
    if snapshot is None:
        return {}
    found: dict[str, str | None] = {}
    for manifest in snapshot.manifests(table.io):
        if manifest.content != ManifestContent.DATA:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            partition = entry.data_file.partition
            found[entry.data_file.file_path] = partition[0] if len(partition) else None
    return found


def _normalized(kind: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(kind) and kind.unit in ("ms", "us"):
        return pa.timestamp("us", tz=kind.tz)
    return kind


def _plan_table(
    settings: Settings,
    s3: S3Client,
    table: Table,
    name: str,
    include_days: Collection[dt.date],
    refusals: list[str],
    say: Callable[[str], None],
    dry_run: bool,
) -> _TablePlan:
    if "schema.name-mapping.default" not in table.metadata.properties:
        refusals.append(
            f"{name}: the table has no schema.name-mapping.default property, so files without Iceberg "
            "field ids (every plain-lake file) would read as nulls; recreate it with walletlake's schema"
        )
        return _TablePlan(table, [], {})
    registered = registered_files(table)
    by_day = _plain_objects(settings, s3, name)
    plan = _TablePlan(table, [], {})
    for day, found in sorted(by_day.items()):
        day_plan = _plan_day(settings, name, day, found, registered, include_days, refusals)
        if day_plan is None:
            continue
        if day_plan.state == "register":
            files, problems = _data_files(settings, s3, table, name, day, found, day_plan.paths)
            if problems:
                refusals.extend(problems)
                continue
            plan.files.update(files)
            day_plan = dataclasses.replace(day_plan, rows=sum(f.record_count for f in files.values()))
        plan.days.append(day_plan)
        say(day_plan.describe(dry_run=dry_run))
    return plan


def _plain_objects(settings: Settings, s3: S3Client, name: str) -> dict[dt.date, dict[str, int]]:
    """``{day: {key: size}}`` of the table's Parquet objects directly inside a ``dt=`` partition."""
    found: dict[dt.date, dict[str, int]] = defaultdict(dict)
    for key, size in objects.iter_objects(s3, settings.bucket, table_prefix(settings.lake_prefix, name)):
        day = partition_day(key)
        if day is None or not key.endswith(PARQUET_SUFFIX):
            continue
        if "/" in key.removeprefix(partition_prefix(settings.lake_prefix, name, day)):
            continue  # not a partition's own object: readers of the plain lake's layout ignore it too
        found[day][key] = size
    return found


def _plan_day(
    settings: Settings,
    name: str,
    day: dt.date,
    found: Mapping[str, int],
    registered: Mapping[str, str | None],
    include_days: Collection[dt.date],
    refusals: list[str],
) -> DayMigration | None:
    """The day's plan, or None after adding why it is refused to ``refusals``."""
    prefix = partition_prefix(settings.lake_prefix, name, day)
    problem = _uncompacted(name, day, [key.removeprefix(prefix) for key in found])
    if problem:
        refusals.append(problem)
        return None
    plain_root = f"s3://{settings.bucket}/{prefix}"
    paths = {f"s3://{settings.bucket}/{key}": key for key in found}
    in_day = [path for path, part in registered.items() if part == day.isoformat()]
    gone = sorted(path for path in in_day if path.startswith(plain_root) and path not in paths)
    if gone:
        refusals.append(
            f"{name} {day}: {len(gone)} registered file(s) are no longer in the plain lake "
            f"(e.g. {gone[0]}): the day was compacted again after it was migrated, and its new files "
            "would repeat rows the table holds; roll the table back or migrate that day by hand"
        )
        return None
    others = [path for path in in_day if not path.startswith(plain_root)]
    already = sum(1 for path in paths if path in registered)
    todo = tuple(sorted(path for path in paths if path not in registered))
    if others and todo and day not in include_days:
        return DayMigration(
            name,
            day,
            "skipped",
            already_registered=already,
            reason=(
                f"the table already holds {len(others)} file(s) of this day from elsewhere (the stream's "
                f"committer, or a rewrite), e.g. {others[0]}; check the rows are disjoint and rerun with "
                f"--include-day {day}"
            ),
        )
    if not todo:
        return DayMigration(name, day, "done", already_registered=already)
    size = sum(found[paths[path]] for path in todo)
    return DayMigration(name, day, "register", paths=todo, bytes=size, already_registered=already)


def _uncompacted(name: str, day: dt.date, names: Iterable[str]) -> str | None:
    """Why a day's objects are not the finished output of compaction, or None when they are.

    Grouped by five-minute slot (objects without a slot make one whole-day group, as compaction
    groups them): each group must be one compaction's complete output, whatever unit length
    wrote it, since a unit's outputs all carry its first slot.
    """
    from lake.compaction_units import group_into_units

    groups = group_into_units(name, day, names, SLOT_MINUTES)
    for unit, owned in sorted(groups.items(), key=lambda item: item[0].first_slot):
        if is_compacted(owned):
            continue
        landing = sorted(n for n in owned if "compacted-" not in n)
        if landing:
            return (
                f"{name} {day}: {len(landing)} landing object(s) not compacted yet (e.g. {landing[0]}); "
                f"run `walletlake compact --date {day}` first"
            )
        return (
            f"{name} {day}: two compactions' files side by side in {unit} (an interrupted or "
            f"overlapping compaction); run `walletlake compact --date {day}` first"
        )
    return None


def _data_files(
    settings: Settings,
    s3: S3Client,
    table: Table,
    name: str,
    day: dt.date,
    found: Mapping[str, int],
    paths: Sequence[str],
) -> tuple[dict[str, DataFile], list[str]]:
    """DataFiles of a day's files, from their footers, or why some cannot join the table."""
    prefix = f"s3://{settings.bucket}/"

    def footer(path: str) -> pq.FileMetaData:
        return read_footer(s3, settings.bucket, path.removeprefix(prefix))

    with ThreadPoolExecutor(max_workers=_FOOTER_READERS) as pool:
        footers = dict(zip(paths, pool.map(footer, paths), strict=True))
    problems = []
    files: dict[str, DataFile] = {}
    for path, metadata in footers.items():
        problem = check_file_schema(name, metadata.schema.to_arrow_schema())
        if problem:
            problems.append(f"{name} {day}: {path} cannot join the table as it is: {problem}")
            continue
        files[path] = partitioned_data_file(table, path, day, found[path.removeprefix(prefix)], metadata)
    return files, problems


def _commit(plan: _TablePlan, files_per_commit: int, say: Callable[[str], None], name: str) -> list[int]:
    """Fast-append the plan's files in batches; the snapshot ids made."""
    ordered = [
        (day.day, plan.files[path]) for day in plan.days if day.state == "register" for path in day.paths
    ]
    snapshot_ids: list[int] = []
    for start in range(0, len(ordered), files_per_commit):
        batch = ordered[start : start + files_per_commit]
        days = f"{batch[0][0]}..{batch[-1][0]}"
        summary = {OPERATION_PROPERTY: OPERATION, DAYS_PROPERTY: days}
        transaction = plan.table.transaction()
        with transaction.update_snapshot(snapshot_properties=summary).fast_append() as append:
            for _, data_file in batch:
                append.append_data_file(data_file)
        transaction.commit_transaction()
        snapshot = plan.table.current_snapshot()
        assert snapshot is not None
        snapshot_ids.append(snapshot.snapshot_id)
        say(f"{name:<11} committed {len(batch)} files of {days} (snapshot {snapshot.snapshot_id})")
        _logger.info("migration of %s: %d files of %s committed", name, len(batch), days)
    return snapshot_ids
