"""Compaction in units (a table, a day, a run of five-minute slots): bounded, independent, exact.

A day spanning several hours is landed as the consumer lands it (one object per batch and slot),
then compacted unit by unit. Every row must come out exactly once whatever happens: a unit killed
at any step and run again, units meeting at an hour's edge, late rows (and re-delivered copies)
arriving for an hour that was already compacted.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import pytest
from support.ledger_builder import (
    USD,
    Book,
    SimulatedCrashError,
    day_keys,
    put_wallet_items,
    read_partition,
    s3_client,
    write_landing,
)

from contracts.lake_layout import slot_name, slot_of_name
from contracts.settings import Settings
from lake.compaction import read_footer
from lake.compaction_kernel import is_compacted, unit_row_group_rows
from lake.compaction_units import (
    CompactionUnit,
    closed_units,
    compact_day,
    compact_unit,
    group_into_units,
    plan_units,
)
from lake.snapshots import take_snapshot
from queries import run_query
from queries.reconciliation import reconcile
from walletlake.handlers.compaction import plan

DAY = dt.date(2026, 11, 20)


def three_hours(edge_rows: bool = True) -> Book:
    """Deposits and transfers from 00:50 to 02:10, with entries on both sides of each hour's edge."""
    book = Book()
    start = dt.datetime(2026, 11, 20, 0, 50, tzinfo=dt.UTC)
    names = [f"w{i:02d}" for i in range(8)]
    for name in names:
        book.open(name, start)
    clock = start
    for name in names:
        clock += dt.timedelta(seconds=30)
        book.deposit(name, 100 * USD, clock)
    moments = [start + dt.timedelta(minutes=3 * step) for step in range(27)]
    if edge_rows:  # the last millisecond of an hour and the first of the next
        moments += [
            dt.datetime(2026, 11, 20, 0, 59, 59, 999_000, tzinfo=dt.UTC),
            dt.datetime(2026, 11, 20, 1, 0, tzinfo=dt.UTC),
            dt.datetime(2026, 11, 20, 1, 59, 59, 999_000, tzinfo=dt.UTC),
            dt.datetime(2026, 11, 20, 2, 0, tzinfo=dt.UTC),
        ]
    for index, moment in enumerate(sorted(moments)):
        clock = max(clock + dt.timedelta(milliseconds=1), moment)
        book.transfer(names[index % 8], names[(index + 3) % 8], USD, clock)
    return book


def rows_by_entry(settings: Settings) -> Counter[str]:
    return Counter(read_partition(settings, "ledger", DAY).column("entry_id").to_pylist())


# ----------------------------------------------------------------------------------- pure parts


def test_slots_name_five_minutes_of_the_day() -> None:
    assert [slot_name(slot) for slot in (0, 11, 12, 287)] == ["h00m00", "h00m55", "h01m00", "h23m55"]
    assert slot_of_name("h07m05-stream-1.parquet") == 85
    assert slot_of_name("compacted-0123456789abcdef-0000.parquet") is None
    assert slot_of_name("h07m03-odd.parquet") is None  # not a slot boundary
    with pytest.raises(ValueError, match="slot 288"):
        slot_name(288)


def test_units_group_names_by_slot_and_an_unslotted_name_makes_the_day_one_unit() -> None:
    names = ["h00m55-a.parquet", "h01m00-b.parquet", "h01m55-c.parquet", "h01m00-compacted-x-0000.parquet"]
    hourly = group_into_units("ledger", DAY, names, 60)
    assert {(unit.hour, unit.minutes): sorted(owned) for unit, owned in hourly.items()} == {
        (0, 60): ["h00m55-a.parquet"],
        (1, 60): ["h01m00-b.parquet", "h01m00-compacted-x-0000.parquet", "h01m55-c.parquet"],
    }
    fine = group_into_units("ledger", DAY, names, 5)
    assert sorted((unit.hour, unit.minute) for unit in fine) == [(0, 55), (1, 0), (1, 55)]
    whole = group_into_units("ledger", DAY, [*names, "legacy.parquet"], 60)
    assert [(unit.minutes, len(owned)) for unit, owned in whole.items()] == [(1440, 5)]


def test_a_unit_is_json_able_and_checked() -> None:
    unit = CompactionUnit("ledger", DAY, 7, 30, 30)
    assert CompactionUnit.from_dict(unit.to_dict()) == unit
    assert unit.to_dict() == {"table": "ledger", "date": "2026-11-20", "hour": 7, "minute": 30, "minutes": 30}
    assert list(unit.slots) == list(range(90, 96))
    assert unit.end - unit.start == dt.timedelta(minutes=30)
    assert unit.owns("h07m55-x.parquet")
    assert not unit.owns("h08m00-x.parquet")
    assert not unit.owns("legacy.parquet")
    for bad in ({"table": "ledger", "date": "2026-11-20"}, {**unit.to_dict(), "minutes": 7}):
        with pytest.raises(ValueError, match="unit"):
            CompactionUnit.from_dict(bad)
    with pytest.raises(ValueError, match="cannot start at 07:15"):
        CompactionUnit("ledger", DAY, 7, 15, 30)
    with pytest.raises(ValueError, match="landing table"):
        CompactionUnit("reconciliation", DAY, 7)


def test_row_groups_shrink_with_the_unit_to_keep_one_wallet_reads_under_one_percent() -> None:
    assert unit_row_group_rows(100) == 1_024
    assert unit_row_group_rows(1_200_000) == 4_000
    assert unit_row_group_rows(100_000_000) == 32_768
    for rows in (400_000, 1_200_000, 10_000_000):
        assert 2 * unit_row_group_rows(rows) / rows <= 0.01


# ------------------------------------------------------------------------------ on the stack


@pytest.mark.stack
def test_hourly_units_compact_each_hour_on_its_own_and_keep_every_row_once(settings: Settings) -> None:
    # GIVEN three hours of landing files, with rows on both sides of each hour's edge
    book = three_hours()
    write_landing(settings, book.rows)
    # WHEN the day is compacted in hourly units
    report = compact_day(settings, DAY)
    # THEN each hour became its own unit, named after its first slot, holding only its hour's rows
    ledger_units = [summary["unit"] for summary in report.units if summary["unit"]["table"] == "ledger"]
    assert [(unit["hour"], unit["minutes"]) for unit in ledger_units] == [(0, 60), (1, 60), (2, 60)]
    client = s3_client(settings)
    keys = day_keys(settings, DAY)
    assert sorted({key.rsplit("/", 1)[1][:6] for key in keys}) == ["h00m00", "h01m00", "h02m00"]
    for key in keys:
        hour = int(key.rsplit("/", 1)[1][1:3])
        rows = read_partition_key(settings, key)
        assert {row["created_at"].hour for row in rows} == {hour}, key
        assert read_footer(client, settings.bucket, key).num_rows == len(rows)
    # AND every entry is there exactly once, and the report counts the whole day
    assert rows_by_entry(settings) == Counter({row["entry_id"]: 1 for row in book.rows})
    assert report.tables["ledger"].rows_out == len(book.rows)
    # AND running it again changes nothing
    again = compact_day(settings, DAY)
    assert again.units == ()
    assert again.tables["ledger"].already_compact
    assert day_keys(settings, DAY) == keys


def read_partition_key(settings: Settings, key: str) -> list[dict[str, Any]]:
    from lake.objects import get_table

    return list(get_table(s3_client(settings), settings.bucket, key).to_pylist())


@pytest.mark.stack
@pytest.mark.parametrize("stage", ["wrote", "deleting"])
def test_a_unit_killed_at_every_step_is_finished_by_its_rerun(settings: Settings, stage: str) -> None:
    # GIVEN one busy hour split into small files (several outputs, so a kill can fall between them)
    book = three_hours(edge_rows=False)
    write_landing(settings, book.rows, batch_rows=3)
    unit = CompactionUnit("ledger", DAY, 1)
    expected = Counter({row["entry_id"]: 1 for row in book.rows})
    steps = 0
    while True:
        # WHEN the unit is killed at its n-th step of the given kind, then run again from scratch
        seen = 0

        def die(kind: str, _: object, target: int = steps) -> None:
            nonlocal seen
            if kind == stage:
                if seen == target:
                    raise SimulatedCrashError(kind)
                seen += 1

        try:
            compact_unit(settings, unit, target_file_bytes=2_000, row_group_rows=4, on_step=die)
        except SimulatedCrashError:
            # THEN whatever the partition holds mid-way, no row is missing
            assert set(rows_by_entry(settings)) == set(expected)
            steps += 1
            continue
        break
    assert steps >= 1
    compact_day(settings, DAY)
    # AND after the reruns every row is there exactly once, and the hour is one generation
    assert rows_by_entry(settings) == expected
    hour_one = [key for key in day_keys(settings, DAY) if key.rsplit("/", 1)[1].startswith("h01")]
    assert is_compacted(hour_one)


@pytest.mark.stack
def test_late_rows_and_copies_for_a_compacted_hour_are_merged_by_its_next_run(settings: Settings) -> None:
    # GIVEN hours 00-02 compacted
    book = three_hours(edge_rows=False)
    write_landing(settings, book.rows)
    compact_day(settings, DAY)
    # WHEN a late batch for 01:xx lands, with a re-delivered copy of rows already compacted
    copies = [row for row in book.rows if row["created_at"].hour == 1][:3]
    book.open("late", dt.datetime(2026, 11, 20, 1, 30, tzinfo=dt.UTC))
    late = book.deposit("late", 5 * USD, dt.datetime(2026, 11, 20, 1, 31, tzinfo=dt.UTC))
    write_landing(settings, [*late, *copies], batch_rows=100)
    # THEN only hour 01 has work again, and its rerun keeps one copy of everything
    assert [(unit.table, unit.hour) for unit in plan_units(settings, DAY)] == [("ledger", 1)]
    compact_day(settings, DAY)
    assert rows_by_entry(settings) == Counter({row["entry_id"]: 1 for row in book.rows})


@pytest.mark.stack
def test_closed_units_leave_the_open_hour_alone(settings: Settings) -> None:
    book = three_hours(edge_rows=False)
    write_landing(settings, book.rows)
    # WHEN it is 02:04 (hour 01 ended 4 minutes ago: within the grace) or 02:06
    at_0204 = closed_units(settings, dt.datetime(2026, 11, 20, 2, 4, tzinfo=dt.UTC))
    at_0206 = closed_units(settings, dt.datetime(2026, 11, 20, 2, 6, tzinfo=dt.UTC))
    # THEN only the units that have closed (plus the grace) are planned
    assert {(unit.table, unit.hour) for unit in at_0204} == {("ledger", 0)}
    assert {unit.hour for unit in at_0206 if unit.table == "ledger"} == {0, 1}
    # AND the handler's event shapes plan the same
    now = dt.datetime(2026, 11, 20, 2, 6, tzinfo=dt.UTC)
    planned = plan({"closed_hours_of": "today"}, settings, unit_minutes=60, now=now)
    assert planned["units"] == [unit.to_dict() for unit in at_0206]
    dated = plan({"date": DAY.isoformat(), "hours": [2]}, settings, unit_minutes=60, now=now)
    assert [(item["table"], item["hour"]) for item in dated["units"]] == [("ledger", 2)]
    with pytest.raises(ValueError, match="plan needs"):
        plan({}, settings, unit_minutes=60, now=now)


@pytest.mark.stack
def test_queries_and_reconciliation_answer_alike_before_and_after_unit_compaction(
    make_settings: Any,
) -> None:
    # GIVEN the same day landed in two lakes: one compacted in 5-minute units, one left as landed
    book = three_hours()
    compacted, landed = make_settings(), make_settings()
    for settings in (compacted, landed):
        write_landing(settings, book.rows)
    report = compact_day(compacted, DAY, unit_minutes=5, workers=2)
    assert len({summary["unit"]["minute"] for summary in report.units}) > 1
    # WHEN analysts' queries run on both THEN they answer the same
    start, end = f"{DAY.isoformat()}T00:00:00Z", f"{(DAY + dt.timedelta(days=1)).isoformat()}T00:00:00Z"
    wallet = book.rows[-1]["wallet_id"]
    days = {"start_date": DAY.isoformat(), "end_date": DAY.isoformat()}
    for name, params in (  # every ledger query the analysts' notebooks run
        ("daily_volume", days),
        ("top_wallets", {**days, "limit": "5"}),
        ("ingest_lag", days),
        ("money_conservation", {"date": DAY.isoformat()}),
        ("wallet_statement", {"wallet_id": wallet, "start": start, "end": end}),
        ("wallet_versions", {"wallet_id": wallet, **days}),
        ("balance_as_of", {"wallet_id": wallet, "at": f"{DAY.isoformat()}T01:30:00Z"}),
    ):
        left = run_query(name, params, compacted).to_dict("records")
        right = run_query(name, params, landed).to_dict("records")
        assert left == right, name
        assert left, name
    # AND reconciliation against the same snapshot of the same wallets finds the same: all ok
    snapshot_at = dt.datetime(2026, 11, 21, 0, 30, tzinfo=dt.UTC)
    verdicts = []
    for settings in (compacted, landed):
        put_wallet_items(settings, book.wallets.values())
        take_snapshot(settings, now=snapshot_at, max_read_units_per_second=None)
        verdict = reconcile(settings, DAY, now=snapshot_at + dt.timedelta(hours=1))
        verdicts.append((verdict.ok, verdict.counts))
    assert verdicts[0] == verdicts[1]
    assert verdicts[0][0], verdicts
