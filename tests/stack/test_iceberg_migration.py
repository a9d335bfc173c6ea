"""Migrating the plain-Parquet lake into Iceberg: the same rows, registered in place, once."""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support.ledger_builder import USD, Book, read_partition, s3_client, write_landing
from support.sample_lake import make_sample, write_sample

from contracts.lake_layout import partition_prefix
from contracts.lake_tables import STREAM_TABLES, TABLES
from contracts.settings import Settings
from lake import objects
from lake.compaction_units import compact_day
from lake.iceberg_catalog import open_catalog
from lake.iceberg_migration import MigrationRefusedError, check_file_schema, migrate, registered_files
from lake.iceberg_tables import iceberg_arrow_schema, identifier
from lake.migration_commits import DAYS_PROPERTY, OPERATION, OPERATION_PROPERTY
from walletlake.commands import lake as lake_command

FIRST_DAY = dt.date(2026, 11, 20)
#: A day landed with slot-named objects, compacted in hour units (the sample days have no slots).
SLOTTED_DAY = dt.date(2026, 11, 23)
T0 = dt.datetime(2026, 11, 23, 7, 58, tzinfo=dt.UTC)


def slotted_book() -> Book:
    """Rows around 08:00 so the day compacts into two hour units."""
    book = Book()
    names = [f"s{i:02d}" for i in range(5)]
    clock = T0
    for name in names:
        book.open(name, clock)
        clock += dt.timedelta(seconds=20)
        book.deposit(name, 50 * USD, clock)
    for index, name in enumerate(names):
        clock += dt.timedelta(seconds=30)
        book.transfer(name, names[(index + 1) % len(names)], USD, clock)
    return book


def plain_lake(settings: Settings) -> list[dt.date]:
    """A compacted plain lake over four days; returns its days."""
    sample = make_sample(first_day=FIRST_DAY, days=3, wallets=5, transactions_per_day=6)
    write_sample(settings, sample)
    write_landing(settings, slotted_book().rows, batch_rows=3)
    days = [*sample.days, SLOTTED_DAY]
    for day in days:
        compact_day(settings, day, tables=tuple(STREAM_TABLES))
    return days


def plain_rows(settings: Settings, table: str, days: list[dt.date]) -> pa.Table:
    """The plain lake's rows of ``days`` as the Iceberg table's rows (``dt`` included), sorted."""
    parts = []
    for day in days:
        part = read_partition(settings, table, day)
        parts.append(part.append_column("dt", pa.array([day.isoformat()] * part.num_rows, pa.string())))
    return _sorted(pa.concat_tables(parts).cast(iceberg_arrow_schema(table)))


def iceberg_rows(settings: Settings, table: str, row_filter: Any = None) -> pa.Table:
    loaded = open_catalog(settings).load_table(identifier(settings.glue_database, table))
    scan = loaded.scan() if row_filter is None else loaded.scan(row_filter=row_filter)
    return _sorted(scan.to_arrow().cast(iceberg_arrow_schema(table)))


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([(name, "ascending") for name in table.column_names if name != "raw"])


def bucket_state(settings: Settings) -> dict[str, str]:
    listed = s3_client(settings).list_objects_v2(Bucket=settings.bucket)
    return {item["Key"]: item["ETag"] for item in listed.get("Contents", [])}


def _without_dt(schema: pa.Schema) -> pa.Schema:
    return schema.remove(schema.get_field_index("dt"))


def test_check_file_schema_allows_milliseconds_and_names_the_problem() -> None:
    assert check_file_schema("ledger", TABLES["ledger"]) is None
    assert check_file_schema("ledger", _without_dt(iceberg_arrow_schema("ledger"))) is None
    with_dt = iceberg_arrow_schema("wallets")
    assert check_file_schema("wallets", with_dt) == "it has a 'dt' column of its own"
    renamed = TABLES["wallets"].set(1, pa.field("user", pa.string(), False))
    assert check_file_schema("wallets", renamed) == (
        "its columns differ from the table's (missing ['user_id'], unknown ['user'])"
    )
    as_seconds = TABLES["wallets"].set(2, pa.field("created_at", pa.timestamp("s", tz="UTC"), False))
    assert check_file_schema("wallets", as_seconds) == (
        "column created_at is timestamp[s, tz=UTC], the table's is timestamp[us, tz=UTC]"
    )
    loose = TABLES["wallets"].set(0, pa.field("wallet_id", pa.string(), True))
    assert check_file_schema("wallets", loose) == "column wallet_id is nullable, the table's is required"


@pytest.mark.stack
def test_migration_registers_the_compacted_files_in_place_once(settings: Settings) -> None:
    # GIVEN a compacted plain lake and its objects
    days = plain_lake(settings)
    before = bucket_state(settings)
    catalog = open_catalog(settings)
    lines: list[str] = []

    # WHEN it is first dry-run, then migrated
    dry = migrate(settings, catalog, s3_client(settings), dry_run=True, progress=lines.append)

    # THEN the dry run lists every day and commits nothing
    assert dry.files_registered == 5 + 1 + 1
    assert any(line.startswith("ledger      2026-11-23: would register 2 files") for line in lines)
    for name in STREAM_TABLES:
        assert catalog.load_table(identifier(settings.glue_database, name)).current_snapshot() is None

    report = migrate(settings, catalog, s3_client(settings), files_per_commit=3)

    # (a) the Iceberg tables hold exactly the plain lake's rows, dt included
    assert report.files_registered == dry.files_registered
    for name in STREAM_TABLES:
        expected = plain_rows(settings, name, days)
        assert iceberg_rows(settings, name).equals(expected), name
    ledger = iceberg_rows(settings, "ledger")
    assert report.tables["ledger"].rows_registered == ledger.num_rows == 14 + 10 + 11 + 15
    per_day = ledger.group_by("dt").aggregate([("delta", "sum"), ("entry_id", "count")]).sort_by("dt")
    expected_ledger = plain_rows(settings, "ledger", days)
    assert per_day.equals(
        expected_ledger.group_by("dt").aggregate([("delta", "sum"), ("entry_id", "count")]).sort_by("dt")
    )
    # the millisecond files' bounds are right: a time filter keeps exactly the rows it should
    after = "2026-11-23T08:00:00+00:00"
    late = iceberg_rows(settings, "ledger", row_filter=f"created_at >= '{after}'")
    assert (
        late.num_rows
        == pc.sum(
            pc.greater_equal(
                ledger["created_at"],
                pa.scalar(dt.datetime.fromisoformat(after), pa.timestamp("us", tz="UTC")),
            )
        ).as_py()
        > 0
    )
    # commits of at most 3 files, marked as the migration's
    table = catalog.load_table(identifier(settings.glue_database, "ledger"))
    summaries = [table.snapshot_by_id(i).summary for i in report.tables["ledger"].snapshot_ids]
    assert [(s or {}).get("added-data-files") for s in summaries] == ["3", "2"]
    assert [(s or {}).get(OPERATION_PROPERTY) for s in summaries] == [OPERATION, OPERATION]
    assert [(s or {}).get(DAYS_PROPERTY) for s in summaries] == [
        "2026-11-20..2026-11-22",
        "2026-11-23..2026-11-23",
    ]

    # (c) nothing was written or copied: every file is an original key, the bucket is unchanged
    assert bucket_state(settings) == before
    for name in STREAM_TABLES:
        loaded = catalog.load_table(identifier(settings.glue_database, name))
        paths = registered_files(loaded)
        assert paths, name
        for path, day in paths.items():
            key = path.removeprefix(f"s3://{settings.bucket}/")
            assert key in before
            assert key.startswith(
                partition_prefix(settings.lake_prefix, name, dt.date.fromisoformat(day or ""))
            )
        bucket, _, prefix = loaded.location().removeprefix("s3://").partition("/")
        assert objects.list_keys(s3_client(settings), bucket, f"{prefix.rstrip('/')}/data/") == []

    # (b) a second run registers nothing and commits nothing
    again = migrate(settings, catalog, s3_client(settings))
    assert again.files_registered == 0
    assert {day.state for table in again.tables.values() for day in table.days} == {"done"}
    assert (
        catalog.load_table(identifier(settings.glue_database, "ledger")).current_snapshot()
        == table.current_snapshot()
    )

    # and the runbook's rollback (a partition-aligned delete) unregisters the files, deleting none
    ledger_table = catalog.load_table(identifier(settings.glue_database, "ledger"))
    ledger_table.delete("dt IN (" + ", ".join(f"'{day}'" for day in days) + ")")
    assert iceberg_rows(settings, "ledger").num_rows == 0
    assert registered_files(catalog.load_table(identifier(settings.glue_database, "ledger"))) == {}
    assert bucket_state(settings) == before


@pytest.mark.stack
def test_a_day_with_landing_objects_is_refused_and_nothing_committed(settings: Settings) -> None:
    # GIVEN a compacted lake, and a day whose landing objects were never compacted
    plain_lake(settings)
    late = [
        {**row, "created_at": row["created_at"] + dt.timedelta(days=3)} for row in slotted_book().rows[:4]
    ]
    keys = write_landing(settings, late, batch_rows=4)
    catalog = open_catalog(settings)

    # WHEN migrated, THEN it is refused with the reason and the remedy, and no table changed
    with pytest.raises(MigrationRefusedError) as refused:
        migrate(settings, catalog, s3_client(settings))
    name = keys[0].rsplit("/", 1)[1]
    assert str(refused.value) == (
        "migration refused, nothing committed: ledger 2026-11-26: 1 landing object(s) not compacted yet "
        f"(e.g. {name}); run `walletlake compact --date 2026-11-26` first"
    )
    for table in STREAM_TABLES:
        assert catalog.load_table(identifier(settings.glue_database, table)).current_snapshot() is None

    # and once compacted it migrates
    compact_day(settings, dt.date(2026, 11, 26), tables=("ledger",))
    assert migrate(settings, catalog, s3_client(settings)).files_registered == 5 + 1 + 1 + 1


@pytest.mark.stack
def test_a_day_the_stream_already_wrote_is_skipped_unless_included(settings: Settings) -> None:
    # GIVEN a migrated lake, and a day of the table that holds a file the stream committed
    days = plain_lake(settings)
    catalog = open_catalog(settings)
    table = catalog.load_table(identifier(settings.glue_database, "wallets"))
    stream_day = days[0]
    write_sample_rows = read_partition(settings, "wallets", stream_day).slice(0, 1)
    table.append(
        pa.Table.from_pylist(
            [{**write_sample_rows.to_pylist()[0], "wallet_id": "from-stream", "dt": stream_day.isoformat()}],
            schema=iceberg_arrow_schema("wallets"),
        )
    )
    # WHEN migrated
    report = migrate(settings, catalog, s3_client(settings), tables=("wallets",))
    # THEN that day is skipped and said so, the others registered
    (skipped,) = report.skipped
    assert (skipped.table, skipped.day) == ("wallets", stream_day)
    assert "the table already holds 1 file(s) of this day from elsewhere" in skipped.reason
    assert f"--include-day {stream_day}" in skipped.reason
    assert report.files_registered == 0  # the sample's wallets all opened on its first day
    # and naming the day registers it
    included = migrate(settings, catalog, s3_client(settings), tables=("wallets",), include_days={stream_day})
    assert included.files_registered == 1
    assert not included.skipped
    assert iceberg_rows(settings, "wallets").num_rows == 5 + 1


@pytest.mark.stack
def test_migrate_command(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    plain_lake(settings)
    parser = argparse.ArgumentParser()
    lake_command.register(parser.add_subparsers())

    def run(*argv: str) -> int:
        args = parser.parse_args(["lake", "migrate", *argv])
        return int(args.func(args))

    assert run("--dry-run", "--table", "quarantine") == 0
    captured = capsys.readouterr()
    assert "quarantine  2026-11-20: would register 1 files, 1 rows" in captured.err
    assert "  quarantine  would register 1 files, 1 rows (1 days: 0 already migrated" in captured.out
    assert run() == 0
    assert (
        "  ledger      registered 5 files, 50 rows (4 days: 0 already migrated, 0 skipped; 1 commits)"
        in capsys.readouterr().out
    )
    assert run() == 0
    assert "  ledger      registered 0 files, 0 rows (4 days: 4 already migrated, 0 skipped; 0 commits)" in (
        capsys.readouterr().out
    )
