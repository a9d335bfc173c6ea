"""The committer's protocol on a catalog that checks exactly what a commit asks it to check.

pyiceberg's SQL catalog (SQLite here) applies a commit when the requirements it carries hold and
refuses it otherwise, as the Iceberg REST protocol asks of every catalog (Glue's too): the
committer is exactly once only if its own requirements make it so.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from support.sql_lake import NAMESPACE, column, record, sql_catalog

from lake.committer import (
    COMMIT_ID_PROPERTY,
    PROGRESS_PROPERTY,
    PROGRESS_RETENTION_SECONDS,
    commit_table,
    decide,
    prune,
    read_progress,
)
from lake.iceberg_tables import identifier
from lake.landing_log import LandingRecord

STEPS = ("load", "decide", "commit")


class Interleaving:
    """Lets two committers through their steps in one given order: a step is granted when it is
    first in the order, and counts as done when its committer reaches its next step (or returns).
    A step not in the order (a retry after a refusal) runs freely once its committer's steps in
    the order are used up."""

    def __init__(self, order: Sequence[tuple[str, str]]) -> None:
        self.order = list(order)
        self.running: str | None = None
        self.condition = threading.Condition()

    def _finish_step(self, who: str) -> None:
        if self.running == who:
            self.order.pop(0)
            self.running = None
            self.condition.notify_all()

    def hook(self, who: str) -> Callable[[str], None]:
        def at(step: str) -> None:
            with self.condition:
                self._finish_step(who)
                while self.order and self.order[0] != (who, step) and any(w == who for w, _ in self.order):
                    if not self.condition.wait(timeout=30):
                        raise TimeoutError(f"{who} waited at {step} for {self.order}")
                if self.order and self.order[0] == (who, step):
                    self.running = who

        return at

    def done(self, who: str) -> None:
        with self.condition:
            self._finish_step(who)
            self.order = [(w, s) for w, s in self.order if w != who]
            self.condition.notify_all()


def interleavings() -> list[tuple[tuple[str, str], ...]]:
    """Every order of A's and B's three steps that keeps each committer's own order (20)."""
    orders = []
    for positions in itertools.combinations(range(6), 3):
        a, b = iter(STEPS), iter(STEPS)
        orders.append(tuple(("A", next(a)) if i in positions else ("B", next(b)) for i in range(6)))
    return orders


def run_two(
    catalog: object,
    table: str,
    listed_a: list[LandingRecord],
    listed_b: list[LandingRecord],
    order: Sequence[tuple[str, str]],
) -> None:
    gate = Interleaving(order)
    errors: list[BaseException] = []

    def committer(who: str, listed: list[LandingRecord]) -> None:
        try:
            commit_table(
                catalog,  # type: ignore[arg-type]
                identifier(NAMESPACE, table),
                listed,
                live_sources={r.source for r in listed},
                clock=lambda: 10_000.0,
                empty_after_seconds=0,  # property-only commits at once: the case that once lost progress
                on_step=gate.hook(who),
            )
        except BaseException as error:
            errors.append(error)
        finally:
            gate.done(who)

    threads = [
        threading.Thread(target=committer, args=("A", listed_a)),
        threading.Thread(target=committer, args=("B", listed_b)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors


@pytest.mark.parametrize("order", interleavings(), ids=lambda o: "-".join(f"{w}{s[0]}" for w, s in o))
def test_two_committers_interleaved_at_every_step_commit_every_row_once(
    tmp_path: Path, order: tuple[tuple[str, str], ...]
) -> None:
    # GIVEN batches of one shard: the first without a wallet (a property-only commit for wallets),
    # later ones with wallets and entries; committer A listed before the later ones landed
    catalog = sql_catalog(tmp_path)
    early = [record(tmp_path, entries=["t1:credit"]), record(tmp_path)]
    late = [
        record(tmp_path, wallets=["w1", "w2"], entries=["t2:credit"]),
        record(tmp_path, wallets=["w3"]),
        record(tmp_path, shard="shard-2", wallets=["w4"], entries=["t3:credit", "t4:credit"]),
    ]

    # WHEN A (listed early) and B (listed all) commit each table, interleaved at every step,
    # then one more cycle runs with everything listed (as the next scheduled cycle would)
    for table in ("wallets", "ledger"):
        run_two(catalog, table, early, early + late, order)
        commit_table(
            catalog,
            identifier(NAMESPACE, table),
            early + late,
            live_sources={"stream/shard-1", "stream/shard-2"},
            clock=lambda: 10_000.0,
            empty_after_seconds=0,
        )

    # THEN every wallet and every entry is in the lake once
    assert sorted(column(catalog, "wallets", "wallet_id")) == ["w1", "w2", "w3", "w4"]
    assert sorted(column(catalog, "ledger", "entry_id")) == [
        "t1:credit",
        "t2:credit",
        "t3:credit",
        "t4:credit",
    ]


def test_snapshot_summary_holds_a_constant_size_identity_not_the_progress(tmp_path: Path) -> None:
    # GIVEN batches of 40 shards
    catalog = sql_catalog(tmp_path)
    listed = [record(tmp_path, shard=f"shard-{n}", wallets=[f"w{n}"]) for n in range(40)]

    # WHEN they are committed
    commit_table(catalog, identifier(NAMESPACE, "wallets"), listed, live_sources={r.source for r in listed})

    # THEN the snapshot's summary names the commit, not the 40 positions (which the property holds)
    table = catalog.load_table(identifier(NAMESPACE, "wallets"))
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert PROGRESS_PROPERTY not in summary.additional_properties
    assert len(summary[COMMIT_ID_PROPERTY]) == 32
    assert len(read_progress(table)) == 40


def test_batches_without_rows_make_no_commit_until_they_are_old() -> None:
    # GIVEN a chosen batch without a wallet file, landed 10 s ago
    batch = LandingRecord("stream", "shard-1", 10, 15, (), landed_at=990.0)

    # THEN no commit is made for it now, and one (property-only) once it is 5 minutes old
    young = decide("wallets", [batch], {}, live_sources={"stream/shard-1"}, now=1_000.0)
    old = decide("wallets", [batch], {}, live_sources={"stream/shard-1"}, now=1_300.0)
    assert (young.commit, old.commit) == (False, True)
    assert old.progress == {"stream/shard-1": [15, 1_300.0]}


def test_a_retired_shard_is_forgotten_once_its_records_are_gone() -> None:
    now = 10 * PROGRESS_RETENTION_SECONDS
    progress = {
        "stream/retired": [5, now - PROGRESS_RETENTION_SECONDS - 1],  # no record left, quiet for 48 h
        "stream/listed": [7, 0.0],  # still has records in the log
        "stream/recent": [9, now - 60],  # no record left, but committed a minute ago
        "export/e-1": [1, 0.0],  # exports are never forgotten
    }
    assert sorted(prune(progress, {"stream/listed"}, now)) == ["export/e-1", "stream/listed", "stream/recent"]


def test_a_file_that_does_not_fit_is_quarantined_and_the_rest_commits(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lake.committer import misfit_location
    from lake.landing_log import LandedFile

    # GIVEN a batch whose wallets file has a column the table lacks, and a later good batch
    catalog = sql_catalog(tmp_path)
    good = record(tmp_path, wallets=["w1"])
    bad_path = tmp_path / "warehouse" / "wallets" / "data" / "bad.parquet"
    pq.write_table(pa.table({"wallet_id": ["w9"], "surprise": ["?"]}), bad_path)
    size = bad_path.stat().st_size  # as its landing record states it (a file of another size is torn)
    bad = LandingRecord(
        "stream", "shard-9", 1, 2, (LandedFile("wallets", f"file://{bad_path}", 1, size),), landed_at=0.0
    )
    table_id = identifier(NAMESPACE, "wallets")

    # WHEN the committer commits both
    done = commit_table(catalog, table_id, [bad, good], live_sources={bad.source, good.source})

    # THEN the good rows are in, the misfit is kept with its reason, and both batches are past
    assert done.misfit_files == 1
    assert column(catalog, "wallets", "wallet_id") == ["w1"]
    table = catalog.load_table(table_id)
    kept = Path(misfit_location(table, f"file://{bad_path}").removeprefix("file://"))
    assert kept.exists()
    assert "surprise" in Path(f"{kept}.reason.json").read_text()
    assert sorted(read_progress(table)) == ["stream/shard-1", "stream/shard-9"]
