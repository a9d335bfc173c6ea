"""Random schedules of the lake's writers on pyiceberg's SQL catalog (hypothesis): every entry is
in the lake exactly once, every instant reads exactly what was committed then, or is refused, and
every night planned replays exactly what it pinned, or is refused once its tags expired.

A schedule (hypothesis: 40 of up to 20 steps, and ones written out: a night, commits, an expiry)
mixes stream batches, late (dead-lettered) batches, export chunks, quarantine replays, a misfit
and its re-land, reruns of landed batches, two committers listing the log at different moments,
crashes before any step of a commit, expiries (also between a committer's decision and its
commit, and past the tags' retention), a night's planning (its snapshots pinned and tagged by
:func:`queries.time_travel.pin_night`) and its classification's tag, and a type promotion (the
ledger created when ``wallet_version`` was an ``int``, promoted to ``long`` by provisioning
mid-schedule; refusals have their own tests, ``tests/unit/test_type_changes.py``). Every instant
is also read from the log as a catalog applying Iceberg's Java rule would have cleared it
(:func:`lake.snapshot_log.retained_log`): both answer alike.

The run prints what it did (schedules, steps, nights, instants); the same figures every time with
a fixed seed: ``.venv/bin/pytest -q -n0 tests/unit/test_lake_schedules.py --hypothesis-seed=0``.
"""

from __future__ import annotations

import collections
import datetime as dt
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from support.sql_lake import NAMESPACE, ledger_rows, sql_catalog, wallet_rows, write_file

import lake.iceberg_tables
from contracts.settings import Settings
from lake.commit_progress import read_progress
from lake.committer import commit_table
from lake.iceberg_tables import SNAPSHOT_RETENTION_HOURS, ensure_tables, identifier
from lake.landing_log import LandedFile, LandingRecord
from lake.misfits import reland_source
from lake.snapshot_expiry import expire_snapshots
from lake.snapshot_log import NotRetainedError, retained_log, snapshot_at
from lake.snapshot_tags import DAY_MS, SnapshotGoneError
from queries.time_travel import gone_versions, pin_night, tag_versions

TABLES = ("ledger", "wallets")
CONTRACT = lake.iceberg_tables.iceberg_arrow_schema
_names = itertools.count(1)
SETTINGS = Settings(glue_database=NAMESPACE)
#: What the schedules did, printed at the end of the run.
COUNTS: collections.Counter[str] = collections.Counter()


class CrashError(Exception):
    """A committer killed before one of its steps."""


@dataclass
class Lake:
    """The log, what the lake must hold once everything is committed, and what each ledger
    snapshot held when it was committed."""

    folder: Path
    catalog: Any
    log: list[LandingRecord] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)
    wallets: list[str] = field(default_factory=list)
    misfits: list[tuple[str, str]] = field(default_factory=list)  # (misfit path, wallet)
    relanded: set[str] = field(default_factory=set)
    positions: dict[str, int] = field(default_factory=dict)
    history: list[tuple[int, int, frozenset[str]]] = field(default_factory=list)  # (ms, id, entries)
    promoted: bool = False
    #: Nights planned: (day, pinned ledger snapshot, what it held, planned before the last
    #: expiry past the tags' retention)
    nights: list[tuple[dt.date, int, frozenset[str]]] = field(default_factory=list)
    years_passed_after: int = 0  # how many nights were planned before the last such expiry

    def land(self, stream: str, shard: str, *, misfit: bool = False, wallet: bool = True) -> None:
        n = next(_names)
        entry, wallet_id = f"t{n}:credit", f"w{n}"
        files = [write_file(self.folder, "ledger", ledger_rows([entry]))]
        if misfit:
            path = self.folder / "warehouse" / "wallets" / "data" / f"misfit-{n}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table({"wallet_id": [wallet_id], "surprise": ["?"]}), path)
            files.append(LandedFile("wallets", f"file://{path}", 1, path.stat().st_size))
            self.misfits.append((f"file://{path}", wallet_id))
        elif wallet:
            files.append(write_file(self.folder, "wallets", wallet_rows([wallet_id])))
            self.wallets.append(wallet_id)
        first = self.positions.get(f"{stream}/{shard}", 0) + 10
        self.positions[f"{stream}/{shard}"] = first + 5
        self.log.append(LandingRecord(stream, shard, first, first + 5, tuple(files), landed_at=0.0))
        self.entries.append(entry)

    def reland(self) -> None:
        for path, wallet_id in self.misfits:
            if path in self.relanded:
                continue
            good = write_file(self.folder, "wallets", wallet_rows([wallet_id]))
            self.log.append(
                LandingRecord("replay", reland_source("wallets", path), 1, 1, (good,), landed_at=0.0)
            )
            self.relanded.add(path)
            self.wallets.append(wallet_id)
            return

    def rerun(self, index: int) -> None:
        """A landing run again after its record was tidied: the same range with new files."""
        if not self.log:
            return
        original = self.log[index % len(self.log)]
        tables = [self.catalog.load_table(identifier(NAMESPACE, name)) for name in TABLES]
        if not all(int(read_progress(t).get(original.source, [0])[0]) >= original.last for t in tables):
            return  # its record is still in the log: the landing would find it and land nothing
        files = tuple(
            write_file(self.folder, f.table, ledger_rows([f"t{next(_names)}:dup"]))
            if f.table == "ledger"
            else f
            for f in original.files
            if f.table == "ledger"
        )
        self.log.append(
            LandingRecord(
                original.stream, original.shard, original.first, original.last, files, landed_at=0.0
            )
        )

    def commit(self, listed: int, crash_at: str | None, expire_between: bool) -> None:
        records = self.log[:listed]
        for name in TABLES:

            def step(name_of_step: str, table: str = name) -> None:
                if name_of_step == crash_at:
                    raise CrashError(name_of_step)
                if expire_between and name_of_step == "commit":
                    self.expire()

            try:
                done = commit_table(
                    self.catalog,
                    identifier(NAMESPACE, name),
                    records,
                    live_sources={r.source for r in self.log},
                    clock=lambda: 10_000.0,
                    empty_after_seconds=0,
                    on_step=step,
                )
            except CrashError:
                return
            if name == "ledger" and done.snapshot_id is not None:
                table = self.catalog.load_table(identifier(NAMESPACE, "ledger"))
                snapshot = table.current_snapshot()
                held = frozenset(table.scan().to_arrow().column("entry_id").to_pylist())
                self.history.append((snapshot.timestamp_ms, snapshot.snapshot_id, held))

    def expire(self) -> None:
        for name in TABLES:
            table = self.catalog.load_table(identifier(NAMESPACE, name))
            # keeping the last one only (the lake keeps 10): short schedules reach the gaps too
            expire_snapshots(table, time.time() + (SNAPSHOT_RETENTION_HOURS + 1) * 3600, keep=1)

    def years(self) -> None:
        """An expiry past the tags' retention: every night planned so far may lose its snapshots."""
        for name in TABLES:
            table = self.catalog.load_table(identifier(NAMESPACE, name))
            later = time.time() + (SETTINGS.audit_tag_retention_days + 1) * 86_400
            retention = SETTINGS.audit_tag_retention_days * DAY_MS
            expire_snapshots(table, later, keep=1, tag_retention_ms=retention)
        self.years_passed_after = len(self.nights)

    def night(self) -> None:
        """A night's planning: the tables' snapshots pinned and tagged before anything reads them."""
        day = dt.date(2026, 3, 1) + dt.timedelta(days=len(self.nights))
        versions = pin_night(SETTINGS, day, self.catalog)
        pinned = versions["ledger"]
        if pinned is not None:
            table = self.catalog.load_table(identifier(NAMESPACE, "ledger"))
            held = frozenset(table.scan(snapshot_id=pinned).to_arrow().column("entry_id").to_pylist())
            self.nights.append((day, pinned, held))

    def classify(self) -> None:
        """The last night's classification: its day tagged ``reconciled-{day}`` as well."""
        if self.nights:
            day, pinned, _ = self.nights[-1]
            try:
                tag_versions(SETTINGS, {"ledger": pinned}, f"reconciled-{day.isoformat()}", self.catalog)
            except SnapshotGoneError:
                # refused, never tagged onto another snapshot: only a night planned before an
                # expiry past the tags' retention may have lost its snapshot
                assert len(self.nights) <= self.years_passed_after
                assert ledger_refs(self.catalog).get(f"reconciled-{day.isoformat()}") is None
                COUNTS["classifications refused (tags expired)"] += 1


def ledger_refs(catalog: Any) -> dict[str, Any]:
    return dict(catalog.load_table(identifier(NAMESPACE, "ledger")).metadata.refs)


COMMIT = st.tuples(
    st.just("commit"),
    st.tuples(
        st.integers(0, 3),  # records left out of the listing (a committer that listed earlier)
        st.sampled_from([None, None, None, "load", "decide", "commit"]),
        st.booleans(),  # an expiry between its decision and its commit
    ),
)
LAND = st.tuples(st.just("land"), st.sampled_from(["shard-1", "shard-2"]))
OPERATIONS = st.one_of(
    LAND,
    COMMIT,
    st.tuples(st.just("land-and-commit"), st.none()),
    st.tuples(st.just("expire"), st.none()),
    st.tuples(st.just("late"), st.none()),
    st.tuples(st.just("export"), st.none()),
    st.tuples(st.just("quarantine"), st.none()),
    st.tuples(st.just("misfit"), st.none()),
    st.tuples(st.just("reland"), st.none()),
    st.tuples(st.just("rerun"), st.integers(0, 20)),
    st.tuples(st.just("night"), st.none()),
    st.tuples(st.just("classify"), st.none()),
    st.tuples(st.just("years"), st.none()),
    st.tuples(st.just("promote"), st.none()),
)


def int_wallet_version(table: str) -> pa.Schema:
    """The contract as it was: the ledger's ``wallet_version`` an ``int``."""
    schema = CONTRACT(table)
    if table != "ledger":
        return schema
    index = schema.get_field_index("wallet_version")
    return schema.set(index, schema.field(index).with_type(pa.int32()))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(
    schedule=[
        ("land-and-commit", None),
        ("night", None),
        ("land-and-commit", None),
        ("land-and-commit", None),
        ("expire", None),
        ("classify", None),
        ("promote", None),
        ("land-and-commit", None),
    ]
)
@example(  # a night whose tags outlive nothing: its snapshot goes with them, and it is refused
    schedule=[
        ("land-and-commit", None),
        ("night", None),
        ("land-and-commit", None),
        ("years", None),
        ("night", None),
        ("land-and-commit", None),
    ]
)
@example(  # a night classified after its tags (and snapshot) expired: refused, nothing tagged
    schedule=[
        ("land-and-commit", None),
        ("night", None),
        ("land-and-commit", None),
        ("years", None),
        ("classify", None),
    ]
)
@given(schedule=st.lists(OPERATIONS, min_size=4, max_size=20))
def schedules(tmp_path_factory: Any, schedule: list[tuple[str, Any]]) -> None:
    """One schedule, run and checked."""
    old_contract = pytest.MonkeyPatch()
    old_contract.setattr(lake.iceberg_tables, "iceberg_arrow_schema", int_wallet_version)
    try:
        the_lake = run(tmp_path_factory, schedule, old_contract)
    finally:
        old_contract.undo()
    check(the_lake)
    COUNTS["schedules"] += 1
    COUNTS["steps"] += len(schedule) + 1  # and the closing cycle
    COUNTS.update(f"step:{operation}" for operation, _ in schedule)


def test_any_schedule_commits_every_entry_once_and_reads_every_instant_and_night_exactly_or_refuses(
    tmp_path_factory: Any, capsys: pytest.CaptureFixture[str], record_property: Any
) -> None:
    COUNTS.clear()
    schedules(tmp_path_factory=tmp_path_factory)
    # THEN the schedules reached what they are for: nights replayed, refusals, both logs compared
    reaches = (
        "schedules",
        "nights exact",
        "nights refused (tags expired)",
        "classifications refused (tags expired)",
        "instants exact",
        "instants refused",
    )
    for reached in reaches:
        assert COUNTS[reached] > 0, (reached, dict(COUNTS))
    line = ", ".join(f"{name}: {count}" for name, count in sorted(COUNTS.items()))
    for name, count in COUNTS.items():
        record_property(name, count)
    with capsys.disabled():
        print(f"\nlake schedules: {line}")


def run(tmp_path_factory: Any, schedule: list[tuple[str, Any]], old_contract: pytest.MonkeyPatch) -> Lake:
    """Run a schedule, then the next cycle with everything listed, as the scheduled committer does."""
    lake = Lake(folder := tmp_path_factory.mktemp("lake"), sql_catalog(folder))
    late = itertools.count()
    for operation, argument in schedule:
        if operation == "land":
            lake.land("stream", argument)
        elif operation == "land-and-commit":
            lake.land("stream", "shard-1")
            lake.commit(len(lake.log), None, False)
        elif operation == "late":
            lake.land("stream", f"shard-1~late-{next(late)}")
        elif operation == "export":
            lake.land("export", "E1")
        elif operation == "quarantine":
            lake.land("replay", f"quarantine-{next(late)}")
        elif operation == "misfit":
            lake.land("stream", "shard-1", misfit=True)
        elif operation == "reland":
            lake.reland()
        elif operation == "rerun":
            lake.rerun(argument)
        elif operation == "commit":
            left_out, crash_at, expire_between = argument
            lake.commit(max(0, len(lake.log) - left_out), crash_at, expire_between)
        elif operation == "expire":
            lake.expire()
        elif operation == "night":
            lake.night()
        elif operation == "classify":
            lake.classify()
        elif operation == "years":
            lake.years()
        elif operation == "promote":
            old_contract.undo()  # the contract's int64 deployed: provisioning promotes the column
            ensure_tables(lake.catalog, NAMESPACE)
            lake.promoted = True
    lake.commit(len(lake.log), None, False)
    return lake


def check(lake: Lake) -> None:
    """Every entry once; every instant of the ledger's history exact or refused."""

    # every entry and every wallet is in the lake once, no rerun's copy, no misfit unrelanded
    ledger = lake.catalog.load_table(identifier(NAMESPACE, "ledger"))
    wallets = lake.catalog.load_table(identifier(NAMESPACE, "wallets"))
    entries = ledger.scan().to_arrow().column("entry_id").to_pylist() if ledger.current_snapshot() else []
    held = wallets.scan().to_arrow().column("wallet_id").to_pylist() if wallets.current_snapshot() else []
    assert sorted(entries) == sorted(lake.entries)
    assert sorted(held) == sorted(lake.wallets)

    # the promotion took, whatever was landed or committed before it
    promoted = ledger.schema().find_field("wallet_version").field_type
    assert str(promoted) == ("long" if lake.promoted else "int")
    event(f"promoted: {lake.promoted}")
    # every instant of the ledger's history reads what was committed then, or is refused
    metadata = ledger.metadata
    # the same table as a catalog applying Iceberg's Java rule (history cleared before a removed
    # entry) would have written it: every instant answers alike
    cleared = metadata.model_copy(update={"snapshot_log": retained_log(metadata)})
    refused = exact = 0
    for at_ms in sorted({ms + delta for ms, _, _ in lake.history for delta in (-1, 0, 1)}):
        committed = [entries for ms, _, entries in lake.history if ms <= at_ms]
        expected = committed[-1] if committed else frozenset()
        try:
            snapshot_id = snapshot_at(metadata, at_ms)
        except NotRetainedError:
            refused += 1
            with pytest.raises(NotRetainedError):
                snapshot_at(cleared, at_ms)
            continue
        assert snapshot_at(cleared, at_ms) == snapshot_id
        read = (
            frozenset(ledger.scan(snapshot_id=snapshot_id).to_arrow().column("entry_id").to_pylist())
            if snapshot_id is not None
            else frozenset()
        )
        assert read == expected, at_ms
        exact += 1
    event(f"instants refused: {'some' if refused else 'none'}; exact: {'some' if exact else 'none'}")
    COUNTS["instants exact"] += exact
    COUNTS["instants refused"] += refused

    # every night planned replays exactly what it pinned, as long as its tags live; one whose
    # tags expired (planned before an expiry past the retention) is refused, never read as another
    for index, (_, pinned, held) in enumerate(lake.nights):
        if gone_versions(SETTINGS, {"ledger": pinned}, lake.catalog):
            assert index < lake.years_passed_after, "a night lost its snapshot while its tags lived"
            COUNTS["nights refused (tags expired)"] += 1
            continue
        assert frozenset(ledger.scan(snapshot_id=pinned).to_arrow().column("entry_id").to_pylist()) == held
        COUNTS["nights exact"] += 1
