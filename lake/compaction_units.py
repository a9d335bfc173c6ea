"""Compaction in bounded, independent units: a table, a UTC day and a run of five-minute slots.

Why units
    At the seed's load (20,000 transactions/s) a day is ~2.9 billion ledger rows, ~300 GB of
    Parquet: no one function (15 minutes, 10 GB of ``/tmp``) can rewrite it, and waiting for the
    night leaves analysts a day of millions of small files. A unit is the rows of a few minutes,
    found by the slot prefix every landing object carries (:mod:`contracts.lake_layout`), so its size is set
    by configuration (``unit_minutes``: 60 by default, down to 5) times the load, never by the
    day's volume; at the seed's load 5-minute units hold ~10 million rows (``bench/capacity.py``).

    Units are compacted as soon as their slots close (the hourly schedule in AWS, ``walletlake
    compact --closed-hours`` locally: :func:`closed_units`, then :func:`run_units`), so today's
    partition holds compacted files for the closed hours and landing files for the open one.
    Each unit runs the crash-safe protocol of
    :func:`lake.compaction.compact_inputs` on its own inputs only: units never share an object,
    so they run in parallel (a Step Functions Distributed Map in AWS, a process pool locally) and a
    failed one is simply run again. :func:`compact_day` plans a day's units and runs them: what
    the nightly job and ``walletlake compact`` call.

Why slices of time, not ranges of wallet_id
    A unit must find its inputs without reading them. Landing objects are cut by the batch and by
    time (a batch spans seconds), never by wallet, so a key-range unit would read every landing
    object of its hour and could not delete one until every range of the hour was done: units
    would no longer be independent. Time slots make a unit's inputs a prefix listing, and late
    rows for a closed hour land under that hour's slots, where the same unit finds them again.

    The price is pruning: each unit's output is sorted by ``wallet_id`` on its own, so a one-wallet
    statement over a day reads a row group or two *per unit*. Row groups are therefore sized per
    unit (:func:`lake.compaction_kernel.unit_row_group_rows`) to keep that read under 1 % of the day.

A partition holding an object without a slot in its name (an older layout, or a file put there
by hand) cannot be split by time without reading it: its rows may belong to any hour, and copies of
a row must meet in one unit to be merged. Such a day is compacted as one whole-day unit
(``minutes=1440``), as before units existed, and its outputs carry no slot either.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime as dt
import logging
import multiprocessing
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import boto3

from contracts.lake_layout import PARQUET_SUFFIX, SLOT_MINUTES, partition_prefix, slot_name, slot_of_name
from contracts.lake_tables import STREAM_TABLES
from contracts.settings import COMPACTION_UNIT_MINUTES_CHOICES, DEFAULT_COMPACTION_UNIT_MINUTES, Settings
from lake import objects
from lake.compaction import StepHook, TableCompaction, compact_inputs, read_footer
from lake.compaction_kernel import DEFAULT_MEMORY_LIMIT, Sizing, is_compacted
from lake.compaction_targets import PLAIN_TARGET_FILE_BYTES

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_logger = logging.getLogger(__name__)

#: A whole day as one unit: only for a partition with objects named without a slot.
WHOLE_DAY_MINUTES: Final = 24 * 60
#: How long after a unit's end its slots may still receive rows in the normal course: the
#: consumer's batching window (30 s in the CDK app) plus delivery and retries. Later rows are
#: still safe, just compacted by the unit's next run.
DEFAULT_CLOSE_GRACE: Final = dt.timedelta(minutes=5)


@dataclasses.dataclass(frozen=True, slots=True)
class CompactionUnit:
    """The rows of one table in ``minutes`` minutes from ``hour:minute`` of a UTC ``day``.

    JSON-able (:meth:`to_dict`) so Step Functions can hand one to each function of a Map.
    """

    table: str
    day: dt.date
    hour: int
    minute: int = 0
    minutes: int = DEFAULT_COMPACTION_UNIT_MINUTES

    def __post_init__(self) -> None:
        if self.table not in STREAM_TABLES:
            raise ValueError(f"{self.table!r} is not a landing table ({', '.join(STREAM_TABLES)})")
        if self.minutes not in (*COMPACTION_UNIT_MINUTES_CHOICES, WHOLE_DAY_MINUTES):
            raise ValueError(
                f"a unit is one of {COMPACTION_UNIT_MINUTES_CHOICES} minutes, not {self.minutes}"
            )
        start = self.hour * 60 + self.minute
        if not 0 <= self.hour < 24 or start % self.minutes:
            raise ValueError(
                f"a {self.minutes}-minute unit cannot start at {self.hour:02d}:{self.minute:02d}"
            )

    @property
    def first_slot(self) -> int:
        """The unit's first slot of the day (its outputs are named after it)."""
        return (self.hour * 60 + self.minute) // SLOT_MINUTES

    @property
    def slots(self) -> range:
        """Every slot of the day the unit covers."""
        return range(self.first_slot, self.first_slot + self.minutes // SLOT_MINUTES)

    @property
    def start(self) -> dt.datetime:
        """When the unit's first slot begins (UTC)."""
        return dt.datetime.combine(self.day, dt.time(self.hour, self.minute), tzinfo=dt.UTC)

    @property
    def end(self) -> dt.datetime:
        """When the unit's last slot ends (UTC): after it, the unit is closed."""
        return self.start + dt.timedelta(minutes=self.minutes)

    @property
    def whole_day(self) -> bool:
        """The whole-day unit of a partition holding objects named without a slot."""
        return self.minutes == WHOLE_DAY_MINUTES

    @property
    def file_prefix(self) -> str:
        """What the unit's outputs are named with: its first slot (none for a whole day)."""
        return "" if self.whole_day else f"{slot_name(self.first_slot)}-"

    def owns(self, name: str) -> bool:
        """Whether an object name (inside the day's partition) is one of this unit's inputs."""
        if self.whole_day:
            return True
        slot = slot_of_name(name)
        return slot is not None and slot in self.slots

    def to_dict(self) -> dict[str, Any]:
        """The unit as a Map item."""
        return {
            "table": self.table,
            "date": self.day.isoformat(),
            "hour": self.hour,
            "minute": self.minute,
            "minutes": self.minutes,
        }

    @classmethod
    def from_dict(cls, item: dict[str, Any]) -> CompactionUnit:
        """A unit from :meth:`to_dict`'s shape (ValueError on anything else)."""
        try:
            return cls(
                table=str(item["table"]),
                day=dt.date.fromisoformat(str(item["date"])),
                hour=int(item["hour"]),
                minute=int(item.get("minute", 0)),
                minutes=int(item.get("minutes", DEFAULT_COMPACTION_UNIT_MINUTES)),
            )
        except KeyError as missing:
            raise ValueError(f"a compaction unit needs {missing}") from None

    def __str__(self) -> str:
        return f"{self.table} {self.day} {self.hour:02d}:{self.minute:02d}+{self.minutes}m"


def unit_of_slot(table: str, day: dt.date, slot: int, unit_minutes: int) -> CompactionUnit:
    """The unit of ``unit_minutes`` that holds ``slot``."""
    per_unit = unit_minutes // SLOT_MINUTES
    first = slot - slot % per_unit
    minute = first * SLOT_MINUTES
    return CompactionUnit(table, day, minute // 60, minute % 60, unit_minutes)


def group_into_units(
    table: str, day: dt.date, names: Iterable[str], unit_minutes: int
) -> dict[CompactionUnit, list[str]]:
    """Pure: the partition's object names by the unit that owns them.

    One name without a slot makes the whole day one unit (see the module docstring).
    """
    names = list(names)
    slots = [slot_of_name(name) for name in names]
    if any(slot is None for slot in slots):
        return {CompactionUnit(table, day, 0, 0, WHOLE_DAY_MINUTES): names} if names else {}
    grouped: dict[CompactionUnit, list[str]] = defaultdict(list)
    for name, slot in zip(names, slots, strict=True):
        assert slot is not None
        grouped[unit_of_slot(table, day, slot, unit_minutes)].append(name)
    return dict(grouped)


def plan_units(
    settings: Settings,
    day: dt.date,
    *,
    hours: Sequence[int] | None = None,
    unit_minutes: int = DEFAULT_COMPACTION_UNIT_MINUTES,
    tables: Sequence[str] = tuple(STREAM_TABLES),
    closed_before: dt.datetime | None = None,
    s3: S3Client | None = None,
) -> list[CompactionUnit]:
    """The units of ``day`` with work to do: inputs that are not already one unit's compaction.

    One listing per table. ``hours`` keeps the units starting in those hours; ``closed_before``
    keeps the units that ended by then (the open hour's landing files are left alone).
    """
    if unit_minutes not in COMPACTION_UNIT_MINUTES_CHOICES:
        raise ValueError(f"unit_minutes must be one of {COMPACTION_UNIT_MINUTES_CHOICES}, not {unit_minutes}")
    s3 = s3 or boto3.client("s3", region_name=settings.region)
    planned: list[CompactionUnit] = []
    for table in tables:
        prefix = partition_prefix(settings.lake_prefix, table, day)
        names = [
            key.removeprefix(prefix)
            for key, _ in objects.iter_objects(s3, settings.bucket, prefix)
            if key.endswith(PARQUET_SUFFIX) and "/" not in key.removeprefix(prefix)
        ]
        for unit, owned in sorted(
            group_into_units(table, day, names, unit_minutes).items(), key=lambda item: item[0].first_slot
        ):
            if is_compacted(owned):
                continue
            if hours is not None and unit.hour not in hours:
                continue
            if closed_before is not None and unit.end > closed_before:
                continue
            planned.append(unit)
    return planned


def compact_unit(
    settings: Settings,
    unit: CompactionUnit,
    *,
    target_file_bytes: int = PLAIN_TARGET_FILE_BYTES,
    row_group_rows: int | None = None,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    on_step: StepHook | None = None,
    s3: S3Client | None = None,
) -> TableCompaction:
    """Compact one unit: idempotent, safe to kill and rerun, independent of every other unit.

    ``row_group_rows=None`` sizes row groups for the unit
    (:func:`lake.compaction_kernel.unit_row_group_rows`).
    """
    sizing = Sizing(target_file_bytes, row_group_rows, memory_limit)
    s3 = s3 or boto3.client("s3", region_name=settings.region)
    prefix = partition_prefix(settings.lake_prefix, unit.table, unit.day)
    if unit.whole_day:
        listed = list(objects.iter_objects(s3, settings.bucket, prefix))
    else:
        listed = [
            item
            for slot in unit.slots
            for item in objects.iter_objects(s3, settings.bucket, f"{prefix}{slot_name(slot)}-")
        ]
    inputs = [
        (key, size)
        for key, size in listed
        if key.endswith(PARQUET_SUFFIX) and unit.owns(key.removeprefix(prefix))
    ]
    return compact_inputs(
        s3,
        settings,
        unit.table,
        prefix,
        inputs,
        file_prefix=unit.file_prefix,
        sizing=sizing,
        on_step=on_step,
    )


def unit_summary(unit: CompactionUnit, done: TableCompaction, seconds: float) -> dict[str, Any]:
    """What a unit did, as the Lambda handler returns it and the CLI prints it."""
    return {
        "unit": unit.to_dict(),
        "rows_in": done.rows_in,
        "rows_out": done.rows_out,
        "files_in": done.files_in,
        "files_out": done.files_out,
        "bytes_out": done.bytes_out,
        "duplicates_dropped": done.duplicates_dropped,
        "already_compact": done.already_compact,
        "seconds": round(seconds, 3),
    }


def _run_unit(
    settings: Settings, item: dict[str, Any], options: dict[str, Any]
) -> tuple[dict[str, Any], Any]:
    """One unit in a worker process (picklable arguments only)."""
    unit = CompactionUnit.from_dict(item)
    started = time.perf_counter()
    done = compact_unit(settings, unit, **options)
    return unit_summary(unit, done, time.perf_counter() - started), done


def run_units(
    settings: Settings,
    units: Sequence[CompactionUnit],
    *,
    workers: int = 1,
    on_done: Callable[[dict[str, Any]], None] | None = None,
    **options: Any,
) -> list[tuple[CompactionUnit, TableCompaction]]:
    """Compact ``units``, ``workers`` at a time (a process pool: each unit sorts on its own core).

    The first failure is raised after the other units have finished: they are independent, and
    what they did stands; rerunning the failed one is enough.
    """
    results: list[tuple[CompactionUnit, TableCompaction]] = []
    failures: list[BaseException] = []
    if workers <= 1 or len(units) <= 1:
        for unit in units:
            summary, done = _run_unit(settings, unit.to_dict(), options)
            results.append((unit, done))
            if on_done:
                on_done(summary)
        return results
    context = multiprocessing.get_context("spawn")  # no fork of a process holding DuckDB or sockets
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(_run_unit, settings, unit.to_dict(), options): unit for unit in units}
        for future in concurrent.futures.as_completed(futures):
            try:
                summary, done = future.result()
            except Exception as error:
                _logger.error("compaction unit %s failed: %s", futures[future], error)
                failures.append(error)
                continue
            results.append((futures[future], done))
            if on_done:
                on_done(summary)
    if failures:
        raise failures[0]
    results.sort(key=lambda pair: (pair[0].table, pair[0].first_slot))
    return results


@dataclasses.dataclass(frozen=True, slots=True)
class CompactionReport:
    """Compaction of one day, per table."""

    day: dt.date
    tables: dict[str, TableCompaction]
    #: What each unit that had work did (:func:`unit_summary`).
    units: tuple[dict[str, Any], ...] = ()

    @property
    def rows_out(self) -> int:
        """Ledger rows after compaction (the figure the demo and the nightly job check)."""
        return self.tables["ledger"].rows_out if "ledger" in self.tables else 0

    @property
    def ledger_rows(self) -> int:
        """Same as :attr:`rows_out`."""
        return self.rows_out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "day": self.day.isoformat(),
            "tables": {k: v.to_dict() for k, v in self.tables.items()},
            "units": list(self.units),
        }


def compact_day(
    settings: Settings,
    day: dt.date,
    *,
    target_file_bytes: int = PLAIN_TARGET_FILE_BYTES,
    row_group_rows: int | None = None,
    tables: Sequence[str] = tuple(STREAM_TABLES),
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    on_step: StepHook | None = None,
    s3: S3Client | None = None,
    unit_minutes: int | None = None,
    workers: int = 1,
    on_unit: Callable[[dict[str, Any]], None] | None = None,
) -> CompactionReport:
    """Compact what is left of one UTC day, unit by unit; idempotent, and safe to kill and rerun.

    The day is worked as independent units (an hour each by default), ``workers`` at a time;
    units already compacted (during the day, by the hourly schedule) are skipped. The report
    covers the whole day: rows of skipped units are read from their files' footers. With
    ``workers > 1`` each worker process makes its own S3 client (a client cannot cross a
    process), so ``s3`` serves the planning and the report only, and ``on_step`` is refused.

    Examples
    --------
    >>> compact_day(Settings.from_env(), dt.date(2026, 11, 21)).rows_out  # doctest: +SKIP
    1200345
    """
    Sizing(target_file_bytes, row_group_rows, memory_limit)  # a bad option fails before any listing
    if on_step is not None and workers > 1:
        raise ValueError("on_step watches one process: use workers=1 with it")
    s3 = s3 or boto3.client("s3", region_name=settings.region)
    units = plan_units(
        settings,
        day,
        unit_minutes=unit_minutes or DEFAULT_COMPACTION_UNIT_MINUTES,
        tables=tables,
        s3=s3,
    )
    options: dict[str, Any] = {
        "target_file_bytes": target_file_bytes,
        "row_group_rows": row_group_rows,
        "memory_limit": memory_limit,
    }
    if workers <= 1:
        options.update(on_step=on_step, s3=s3)
    summaries: list[dict[str, Any]] = []

    def done_one(summary: dict[str, Any]) -> None:
        summaries.append(summary)
        if on_unit:
            on_unit(summary)

    results = run_units(settings, units, workers=workers, on_done=done_one, **options)
    report = {
        table: _day_total(s3, settings, table, day, [done for unit, done in results if unit.table == table])
        for table in tables
    }
    return CompactionReport(day=day, tables=report, units=tuple(summaries))


def _day_total(
    s3: S3Client, settings: Settings, table: str, day: dt.date, ran: Sequence[TableCompaction]
) -> TableCompaction:
    """The day's partition after its units ran: what they did plus what they left alone."""
    prefix = partition_prefix(settings.lake_prefix, table, day)
    after = [
        (key, size)
        for key, size in objects.iter_objects(s3, settings.bucket, prefix)
        if key.endswith(PARQUET_SUFFIX)
    ]
    written = {key for done in ran for key in done.keys_out}
    untouched = [(key, size) for key, size in after if key not in written]
    rows = sum(read_footer(s3, settings.bucket, key).num_rows for key, _ in untouched)
    size = sum(size for _, size in untouched)
    return TableCompaction(
        table=table,
        files_in=len(untouched) + sum(done.files_in for done in ran),
        files_out=len(after),
        rows_in=rows + sum(done.rows_in for done in ran),
        rows_out=rows + sum(done.rows_out for done in ran),
        duplicates_dropped=sum(done.duplicates_dropped for done in ran),
        bytes_in=size + sum(done.bytes_in for done in ran),
        bytes_out=sum(size for _, size in after),
        already_compact=not ran,
        keys_out=tuple(key for key, _ in after),
    )


def closed_units(
    settings: Settings,
    now: dt.datetime,
    *,
    unit_minutes: int = DEFAULT_COMPACTION_UNIT_MINUTES,
    grace: dt.timedelta = DEFAULT_CLOSE_GRACE,
    s3: S3Client | None = None,
) -> list[CompactionUnit]:
    """Units closed by ``now - grace`` with work to do: yesterday's left-overs and today's closed ones.

    What the hourly schedule compacts. Yesterday is included because its last hour closes after
    midnight (and the nightly job may not have run yet).
    """
    s3 = s3 or boto3.client("s3", region_name=settings.region)
    cutoff = now.astimezone(dt.UTC) - grace
    days = sorted({(cutoff - dt.timedelta(days=1)).date(), cutoff.date()})
    return [
        unit
        for day in days
        for unit in plan_units(settings, day, unit_minutes=unit_minutes, closed_before=cutoff, s3=s3)
    ]
