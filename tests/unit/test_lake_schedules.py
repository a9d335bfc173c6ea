"""Random schedules of the lake's writers on pyiceberg's SQL catalog (hypothesis): every entry is
in the lake exactly once, and every instant reads exactly what was committed then, or is refused.

A schedule (hypothesis: 60 of up to 20 steps, and one written out: a tag, commits, an expiry)
mixes stream batches, late (dead-lettered) batches, export chunks, quarantine replays, a misfit
and its re-land, reruns of landed batches, two committers listing the log at different moments,
crashes before any step of a commit, expiries (also between a committer's decision and its
commit), nightly tags and a type promotion (the ledger created when ``wallet_version`` was an
``int``, promoted to ``long`` by provisioning mid-schedule; refusals have their own tests,
``tests/unit/test_type_changes.py``).
"""

from __future__ import annotations

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
from lake.commit_progress import read_progress
from lake.committer import commit_table
from lake.iceberg_tables import SNAPSHOT_RETENTION_HOURS, ensure_tables, identifier
from lake.landing_log import LandedFile, LandingRecord
from lake.misfits import reland_source
from lake.snapshot_expiry import expire_snapshots
from lake.snapshot_log import NotRetainedError, snapshot_at

TABLES = ("ledger", "wallets")
CONTRACT = lake.iceberg_tables.iceberg_arrow_schema
_names = itertools.count(1)


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

    def tag(self) -> None:
        table = self.catalog.load_table(identifier(NAMESPACE, "ledger"))
        snapshot = table.current_snapshot()
        if snapshot is not None:
            with table.manage_snapshots() as manage:
                manage.create_tag(snapshot.snapshot_id, f"night-{next(_names)}")


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
    st.tuples(st.just("tag"), st.none()),
    st.tuples(st.just("promote"), st.none()),
)


def int_wallet_version(table: str) -> pa.Schema:
    """The contract as it was: the ledger's ``wallet_version`` an ``int``."""
    schema = CONTRACT(table)
    if table != "ledger":
        return schema
    index = schema.get_field_index("wallet_version")
    return schema.set(index, schema.field(index).with_type(pa.int32()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(
    schedule=[
        ("land-and-commit", None),
        ("tag", None),
        ("land-and-commit", None),
        ("land-and-commit", None),
        ("expire", None),
        ("promote", None),
        ("land-and-commit", None),
    ]
)
@given(schedule=st.lists(OPERATIONS, min_size=4, max_size=20))
def test_any_schedule_commits_every_entry_once_and_reads_every_instant_exactly_or_refuses(
    tmp_path_factory: Any, schedule: list[tuple[str, Any]]
) -> None:
    old_contract = pytest.MonkeyPatch()
    old_contract.setattr(lake.iceberg_tables, "iceberg_arrow_schema", int_wallet_version)
    try:
        the_lake = run(tmp_path_factory, schedule, old_contract)
    finally:
        old_contract.undo()
    check(the_lake)


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
        elif operation == "promote":
            old_contract.undo()  # the contract's int64 deployed: provisioning promotes the column
            ensure_tables(lake.catalog, NAMESPACE)
            lake.promoted = True
        else:
            lake.tag()
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
    refused = exact = 0
    for at_ms in sorted({ms + delta for ms, _, _ in lake.history for delta in (-1, 0, 1)}):
        committed = [entries for ms, _, entries in lake.history if ms <= at_ms]
        expected = committed[-1] if committed else frozenset()
        try:
            snapshot_id = snapshot_at(metadata, at_ms)
        except NotRetainedError:
            refused += 1
            continue
        read = (
            frozenset(ledger.scan(snapshot_id=snapshot_id).to_arrow().column("entry_id").to_pylist())
            if snapshot_id is not None
            else frozenset()
        )
        assert read == expected, at_ms
        exact += 1
    event(f"instants refused: {'some' if refused else 'none'}; exact: {'some' if exact else 'none'}")
