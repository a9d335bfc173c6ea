"""The compaction kernel on local files, with no server: one copy of each row, in the table's order,
conflicting copies refused, exact counts, and the sizing and naming rules of the outputs.

Inputs are the rows the stream would land (:class:`ledger_builder.Book` for the ledger, hand-made
rows for ``wallets`` and ``quarantine``), written as local Parquet files, so every figure asserted
here is known by construction.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.ledger_builder import Book, ledger_table
from support.ledger_builder import busy_day as shared_busy_day

from contracts.lake_tables import STREAM_TABLES, TABLES
from lake.compaction_kernel import (
    DEFAULT_ROW_GROUP_ROWS,
    MIN_UNIT_ROW_GROUP_ROWS,
    CompactionConflictError,
    MergeCounts,
    Sizing,
    compacted_name,
    generation,
    is_compacted,
    merge_files,
    unit_row_group_rows,
)

T0 = dt.datetime(2026, 11, 20, 8, tzinfo=dt.UTC)


def busy_day(wallets: int = 4, rounds: int = 2) -> Book:
    """Every wallet's entries spread over the day, arriving out of wallet order."""
    return shared_busy_day(T0, wallets=wallets, rounds=rounds, deposit_order_reversed=True)


def later_copies(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same rows landed again an hour later (a re-delivered batch): only volatile columns differ."""
    return [
        {**row, "ingested_at": row["ingested_at"] + dt.timedelta(hours=1), "stream_sequence": "9"}
        for row in rows
    ]


def write(folder: Path, name: str, table: pa.Table) -> str:
    path = folder / name
    pq.write_table(table, path)
    return str(path)


def table_of(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=TABLES[name])


def merged(
    table_name: str, paths: list[str], batch_rows: int = DEFAULT_ROW_GROUP_ROWS
) -> tuple[list[dict[str, Any]], MergeCounts, list[pa.Table]]:
    """The kernel's output as rows, its counts, and the batches the sink was handed."""
    batches: list[pa.Table] = []
    counts = merge_files(table_name, paths, batches.append, batch_rows=batch_rows)
    rows = pa.concat_tables(batches).to_pylist() if batches else []
    return rows, counts, batches


def by(columns: tuple[str, ...]) -> Any:
    return lambda row: tuple(row[column] for column in columns)


# ------------------------------------------------------------------------------ merging


@pytest.mark.parametrize("batch_rows", [1, 2, 7, DEFAULT_ROW_GROUP_ROWS])
def test_copies_are_merged_into_the_first_ingested_and_sorted_by_the_table_order(
    tmp_path: Path, batch_rows: int
) -> None:
    # GIVEN a day in arrival order, and a late copy of its second half in a file listed first
    rows = busy_day().rows
    again = later_copies(rows[6:])
    paths = [
        write(tmp_path, "a-late.parquet", ledger_table(again)),
        write(tmp_path, "b.parquet", ledger_table(rows)),
    ]
    # WHEN merged, in batches small enough that copies fall in different batches
    out, counts, batches = merged("ledger", paths, batch_rows)
    # THEN each entry once, the first ingested copy whichever file held it, and exact counts
    assert (counts.rows_in, counts.rows_out, counts.duplicates_dropped) == (
        len(rows) + len(again),
        len(rows),
        len(again),
    )
    assert sum(batch.num_rows for batch in batches) == counts.rows_out
    assert out == sorted(rows, key=by(("wallet_id", "wallet_version")))
    assert all(row["stream_sequence"] != "9" for row in out)
    # AND in the ledger's order: its compaction layout, of which its declared sort order is a prefix
    ledger = STREAM_TABLES["ledger"]
    assert ledger.layout.order[: len(ledger.sort_order)] == ledger.sort_order
    assert out == sorted(out, key=by(ledger.layout.order))
    # AND every batch has the lake schema
    assert all(batch.schema == TABLES["ledger"] for batch in batches)


def test_every_copy_but_one_is_dropped_and_a_day_without_copies_is_kept_whole(tmp_path: Path) -> None:
    rows = busy_day(wallets=3, rounds=1).rows
    first = write(tmp_path, "first.parquet", ledger_table(rows))
    # three landings of one entry: two dropped
    _, counts, _ = merged(
        "ledger",
        [first, write(tmp_path, "x.parquet", ledger_table(rows[:1] * 2))],
        batch_rows=1,
    )
    assert (counts.rows_in, counts.rows_out, counts.duplicates_dropped) == (len(rows) + 2, len(rows), 2)
    # no copies: nothing dropped
    out, counts, _ = merged("ledger", [first])
    assert counts == MergeCounts(rows_in=len(rows), rows_out=len(rows))
    assert counts.duplicates_dropped == 0
    assert sorted(row["entry_id"] for row in out) == sorted(row["entry_id"] for row in rows)


def test_no_input_hands_on_nothing() -> None:
    out, counts, batches = merged("ledger", [])
    assert (out, counts, batches) == ([], MergeCounts(0, 0), [])


def test_copies_that_differ_outside_the_volatile_columns_are_refused(tmp_path: Path) -> None:
    # GIVEN an entry landed twice with a different amount (a corruption, not a re-delivery)
    rows = busy_day(wallets=3, rounds=1).rows
    forged = {**rows[4], "amount": rows[4]["amount"] + 1}
    paths = [
        write(tmp_path, "a.parquet", ledger_table(rows)),
        write(tmp_path, "b.parquet", ledger_table([forged])),
    ]
    handed: list[pa.Table] = []
    # WHEN merged THEN the kernel refuses, naming the entry, before handing on any row
    with pytest.raises(CompactionConflictError, match=forged["entry_id"]):
        merge_files("ledger", paths, handed.append)
    assert handed == []


def test_wallets_copies_merge_and_sort_by_wallet(tmp_path: Path) -> None:
    created = T0
    wallets = [{"wallet_id": f"w{i}", "user_id": f"u{i}", "created_at": created} for i in (3, 0, 4, 1, 2)]
    paths = [
        write(tmp_path, "a.parquet", table_of("wallets", wallets[:3])),
        write(tmp_path, "b.parquet", table_of("wallets", wallets[2:])),
    ]
    out, counts, _ = merged("wallets", paths, batch_rows=2)
    assert [row["wallet_id"] for row in out] == ["w0", "w1", "w2", "w3", "w4"]
    assert (counts.rows_in, counts.rows_out, counts.duplicates_dropped) == (6, 5, 1)
    # a wallet whose stable columns differ between copies is a conflict too
    other_user = [{**wallets[0], "user_id": "someone-else"}]
    with pytest.raises(CompactionConflictError, match="w3"):
        merged("wallets", [*paths, write(tmp_path, "c.parquet", table_of("wallets", other_user))])


def test_quarantine_keeps_the_earliest_copy_and_treats_missing_sequences_as_equal(tmp_path: Path) -> None:
    # GIVEN bad records quarantined twice (the later copy listed first), one without a sequence
    bad: list[dict[str, Any]] = [
        {"reason": "undecodable", "raw": "{}", "stream_sequence": "7", "quarantined_at": T0},
        {"reason": "unknown type", "raw": '{"x": 1}', "stream_sequence": None, "quarantined_at": T0},
        {"reason": "undecodable", "raw": "[]", "stream_sequence": "5", "quarantined_at": T0},
    ]
    later = [{**row, "quarantined_at": T0 + dt.timedelta(minutes=1)} for row in bad[:2]]
    paths = [
        write(tmp_path, "a.parquet", table_of("quarantine", later)),
        write(tmp_path, "b.parquet", table_of("quarantine", bad)),
    ]
    # WHEN merged, one row per batch
    out, counts, _ = merged("quarantine", paths, batch_rows=1)
    # THEN one copy of each, the earliest, in the layout's order (nulls sort last in DuckDB)
    assert (counts.rows_in, counts.rows_out, counts.duplicates_dropped) == (5, 3, 2)
    assert [row["stream_sequence"] for row in out] == ["5", "7", None]
    assert all(row["quarantined_at"] == T0 for row in out)


def test_one_differing_copy_among_many_agreeing_ones_is_refused(tmp_path: Path) -> None:
    # GIVEN a day landed twice (a re-delivery: every key repeated, the copies agreeing) and one
    # entry landed a third time with another amount
    rows = busy_day(wallets=3, rounds=2).rows
    forged = {**rows[5], "amount": rows[5]["amount"] + 1}
    paths = [
        write(tmp_path, "a.parquet", ledger_table(rows)),
        write(tmp_path, "b.parquet", ledger_table(later_copies(rows))),
        write(tmp_path, "c.parquet", ledger_table([forged])),
    ]
    # WHEN merged THEN refused, naming that entry alone, before any row is handed on
    handed: list[pa.Table] = []
    with pytest.raises(CompactionConflictError) as refused:
        merge_files("ledger", paths, handed.append)
    assert forged["entry_id"] in str(refused.value)
    assert all(row["entry_id"] not in str(refused.value) for row in rows if row is not rows[5])
    assert handed == []
    # and without the forged copy the same inputs merge into one copy of each
    out, counts, _ = merged("ledger", paths[:2])
    assert len(out) == len(rows)
    assert (counts.rows_in, counts.rows_out) == (2 * len(rows), len(rows))


def test_merging_only_takes_the_stream_tables(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="landing table"):
        merge_files("reconciliation", [], lambda _: None)
    with pytest.raises(ValueError, match="batch_rows"):
        merge_files("ledger", [], lambda _: None, batch_rows=0)


# ------------------------------------------------------------------------------ sizing


def test_unit_row_groups_are_a_three_hundredth_of_the_unit_between_the_bounds() -> None:
    assert (MIN_UNIT_ROW_GROUP_ROWS, DEFAULT_ROW_GROUP_ROWS) == (1_024, 32_768)
    # floor: tiny units
    assert unit_row_group_rows(0) == 1_024
    assert unit_row_group_rows(300 * 1_024) == 1_024
    assert unit_row_group_rows(300 * 1_024 + 299) == 1_024
    assert unit_row_group_rows(300 * 1_025) == 1_025
    # in between
    assert unit_row_group_rows(1_200_000) == 4_000
    # ceiling: big units
    assert unit_row_group_rows(300 * 32_768 - 1) == 32_767
    assert unit_row_group_rows(300 * 32_768) == 32_768
    assert unit_row_group_rows(10**10) == 32_768
    # wherever the floor does not bind, a one-wallet read (two groups) stays under 1 % of the unit
    for rows in (300 * 1_025, 1_200_000, 10_000_000, 10**10):
        assert 2 * unit_row_group_rows(rows) / rows <= 0.01


def test_sizing_takes_its_row_groups_from_the_rows_at_hand_unless_given() -> None:
    assert Sizing(1_000).group_rows(1_200_000) == 4_000
    assert Sizing(1_000, row_group_rows=10).group_rows(1_200_000) == 10
    with pytest.raises(ValueError, match="positive"):
        Sizing(0)
    with pytest.raises(ValueError, match="positive"):
        Sizing(1, row_group_rows=0)


# ------------------------------------------------------------------------------ naming


def test_a_generation_is_named_by_its_inputs_whatever_their_order() -> None:
    inputs = [("a.parquet", 10), ("b.parquet", 20), ("c.parquet", 30)]
    name = generation(inputs)
    assert re.fullmatch(r"[0-9a-f]{16}", name)
    # the same inputs in any order: the same name, run after run
    assert generation(list(reversed(inputs))) == generation(inputs[1:] + inputs[:1]) == name
    # a different size, key or set: another name
    assert generation([("a.parquet", 10), ("b.parquet", 20), ("c.parquet", 31)]) != name
    assert generation([("a.parquet", 10), ("b.parquet", 20), ("d.parquet", 30)]) != name
    assert generation(inputs[:2]) != name
    # sizes are paired with their keys, not pooled
    assert generation([("a", 1), ("b", 2)]) != generation([("a", 2), ("b", 1)])


def test_a_partition_is_compacted_when_it_holds_exactly_one_generations_files() -> None:
    folder = "lake/ledger/dt=2026-11-20/"
    one, other = generation([("a", 1)]), generation([("b", 1)])
    first, second = folder + compacted_name(one, 0), folder + compacted_name(one, 1)
    assert first == f"{folder}compacted-{one}-0000.parquet"
    assert is_compacted([first, second])
    assert is_compacted([first])
    # a unit's outputs carry its first slot before the name
    assert is_compacted(
        [folder + compacted_name(one, 0, "h01m00-"), folder + compacted_name(one, 1, "h01m00-")]
    )
    # two generations side by side (overlapping runs), a landing file left, or nothing: work left
    assert not is_compacted([first, folder + compacted_name(other, 0)])
    assert not is_compacted([first, folder + "h01m00-batch-1.parquet"])
    assert not is_compacted([])
    # a name that is not a generation's (another kernel's caller, or a hand-made file) is not one
    assert not is_compacted([folder + compacted_name("f" * 32, 0)])


@pytest.mark.parametrize("old_first", [True, False])
def test_files_written_before_a_column_was_added_merge_with_it_as_null(
    tmp_path: Path, old_first: bool
) -> None:
    # GIVEN a day whose first half was written before `extra_attributes` existed (the upgrade day)
    rows = busy_day().rows
    half = len(rows) // 2
    new_rows = [{**row, "extra_attributes": '{"tier":{"S":"gold"}}'} for row in rows[half:]]
    old = write(tmp_path, "old.parquet", ledger_table(rows[:half]).drop_columns(["extra_attributes"]))
    new = write(tmp_path, "new.parquet", ledger_table(new_rows))

    # WHEN merged, whichever file the kernel reads first
    out, counts, _ = merged("ledger", [old, new] if old_first else [new, old])

    # THEN every row is kept, the old ones with the column null and the new ones with their value
    assert counts.rows_out == len(rows)
    extras = {row["entry_id"]: row["extra_attributes"] for row in out}
    assert all(extras[row["entry_id"]] is None for row in rows[:half])
    assert all(extras[row["entry_id"]] == '{"tier":{"S":"gold"}}' for row in rows[half:])
