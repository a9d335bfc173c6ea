"""A day holding copies of an entry is repaired to one copy, the right one, in one commit.

On pyiceberg's SQL catalog (no server); the copies are made as the protocol never makes them now:
the same entries landed under two stream sources (before the identity check, or by a hand).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support.sql_lake import DAY, NAMESPACE, column, ledger_rows, record, sql_catalog, write_file

from lake.committer import commit_table
from lake.entry_repair import RepairRefusedError, choose_copies, repair_day
from lake.iceberg_tables import identifier
from lake.landing_log import LandingRecord


def commit(catalog: object, records: list[LandingRecord]) -> None:
    commit_table(
        catalog,  # type: ignore[arg-type]
        identifier(NAMESPACE, "ledger"),
        records,
        live_sources={r.source for r in records},
        clock=lambda: 1_000.0,
    )


def test_copies_of_entries_are_replaced_by_one_each_in_one_commit(tmp_path: Path) -> None:
    # GIVEN a day whose entries b and c are held twice (two sources carried them)
    catalog = sql_catalog(tmp_path)
    commit(
        catalog,
        [record(tmp_path, entries=["a", "b", "c"]), record(tmp_path, shard="s2", entries=["a", "b", "c"])],
    )
    assert sorted(column(catalog, "ledger", "entry_id")) == ["a", "a", "b", "b", "c", "c"]
    before = len(catalog.load_table(identifier(NAMESPACE, "ledger")).snapshots())
    # WHEN the day is repaired
    report = repair_day(catalog, identifier(NAMESPACE, "ledger"), DAY)
    # THEN each entry is there once, and the table moved by one atomic commit
    assert sorted(column(catalog, "ledger", "entry_id")) == ["a", "b", "c"]
    assert (report.copied_entries, report.rows_removed) == (3, 3)
    table = catalog.load_table(identifier(NAMESPACE, "ledger"))
    assert len(table.snapshots()) - before in (
        1,
        2,
    )  # pyiceberg's overwrite: a delete and an append, one swap
    # AND a second repair finds nothing to do
    assert repair_day(catalog, identifier(NAMESPACE, "ledger"), DAY).copied_entries == 0


def test_of_copies_that_disagree_the_one_the_chain_agrees_with_is_kept(tmp_path: Path) -> None:
    # GIVEN entry b (version 2) held twice, one copy with an altered balance
    catalog = sql_catalog(tmp_path)
    good = ledger_rows(["a", "b", "c"])
    bad = ledger_rows(["a", "b", "c"]).slice(1, 1)
    bad = bad.set_column(
        bad.schema.get_field_index("balance_after"), "balance_after", pa.array([99], pa.int64())
    )
    first = record(tmp_path, entries=["x"])  # a batch whose files we replace by ours
    files = (write_file(tmp_path, "ledger", bad), write_file(tmp_path, "ledger", good))
    commit(
        catalog, [LandingRecord(first.stream, first.shard, first.first, first.last, files, 0.0, first.key)]
    )
    # WHEN the day is repaired
    repair_day(catalog, identifier(NAMESPACE, "ledger"), DAY)
    # THEN b's copy with the chain's balance (2) is the one kept
    rows = catalog.load_table(identifier(NAMESPACE, "ledger")).scan().to_arrow()
    b = rows.filter(pc.equal(rows.column("entry_id"), "b"))
    assert b.column("balance_after").to_pylist() == [2]


def test_copies_that_disagree_with_no_chain_to_tell_are_refused_naming_the_entry() -> None:
    row = ledger_rows(["a"]).to_pylist()[0]
    altered = {**row, "amount": 5}
    with pytest.raises(RepairRefusedError, match="entry a: its 2 copies disagree"):
        choose_copies([row, altered])
