"""Compaction on S3: few sorted files, no row lost or doubled, idempotent, and recovered after a kill.

The kernel's rules (copies, order, counts, sizing, naming) are tested without a server in
``test_compaction_kernel.py``; these tests are the S3 side's, against the embedded stack.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest
from support.ledger_builder import (
    Book,
    SimulatedCrashError,
    day_keys,
    read_partition,
    s3_client,
    write_landing,
    write_table,
)
from support.ledger_builder import busy_day as shared_busy_day

from contracts.lake_layout import partition_prefix
from contracts.lake_tables import QUARANTINE, WALLETS
from contracts.settings import Settings
from lake import objects
from lake.compaction import read_footer
from lake.compaction_kernel import CompactionConflictError, is_compacted
from lake.compaction_units import compact_day
from walletlake import cli

DAY = dt.date(2026, 11, 20)
T0 = dt.datetime(2026, 11, 20, 8, tzinfo=dt.UTC)


def busy_day() -> Book:
    return shared_busy_day(T0, wallets=12, rounds=6)


def partition_keys(settings: Settings, table: str = "ledger") -> list[str]:
    return day_keys(settings, DAY, table)


def entry_ids(settings: Settings) -> list[str]:
    return list(read_partition(settings, "ledger", DAY).column("entry_id").to_pylist())


# ---------------------------------------------------------------- against the embedded stack


@pytest.mark.stack
def test_compaction_makes_one_sorted_file_without_duplicates(settings: Settings) -> None:
    # GIVEN a day landed in small batches, one of them landed twice
    book = busy_day()
    keys = write_landing(settings, book.rows, batch_rows=8)
    client = s3_client(settings)
    client.copy_object(
        Bucket=settings.bucket,
        Key=keys[3].replace(".parquet", "-b.parquet"),
        CopySource={"Bucket": settings.bucket, "Key": keys[3]},
    )
    # WHEN the day is compacted
    report = compact_day(settings, DAY)
    # THEN one file holds every entry exactly once, sorted by wallet and version, inputs gone
    ledger = report.tables["ledger"]
    assert (ledger.files_in, ledger.files_out) == (len(keys) + 1, 1)
    assert ledger.rows_out == report.rows_out == len(book.rows)
    assert ledger.duplicates_dropped == 8
    (key,) = partition_keys(settings)
    assert key == ledger.keys_out[0]
    rows = read_partition(settings, "ledger", DAY).to_pylist()
    assert sorted(r["entry_id"] for r in rows) == sorted(r["entry_id"] for r in book.rows)
    assert [(r["wallet_id"], r["wallet_version"]) for r in rows] == sorted(
        (r["wallet_id"], r["wallet_version"]) for r in book.rows
    )


@pytest.mark.stack
def test_compacting_twice_changes_nothing(settings: Settings) -> None:
    write_landing(settings, busy_day().rows)
    compact_day(settings, DAY)
    client = s3_client(settings)
    before = {
        item["Key"]: item["ETag"] for item in client.list_objects_v2(Bucket=settings.bucket)["Contents"]
    }
    # WHEN compacted again
    report = compact_day(settings, DAY)
    # THEN nothing is rewritten or removed
    after = {item["Key"]: item["ETag"] for item in client.list_objects_v2(Bucket=settings.bucket)["Contents"]}
    assert after == before
    assert report.tables["ledger"].already_compact
    assert report.rows_out == len(busy_day().rows)


@pytest.mark.stack
def test_large_days_split_into_files_of_whole_row_groups(settings: Settings) -> None:
    # GIVEN a day of 156 rows, a 3 KB file target and 10-row groups
    book = busy_day()
    write_landing(settings, book.rows, batch_rows=16)
    # WHEN compacted
    report = compact_day(settings, DAY, target_file_bytes=3_000, row_group_rows=10)
    # THEN several files, each whole row groups of 10 rows, together every entry once, in order
    ledger = report.tables["ledger"]
    assert ledger.files_out > 1
    client = s3_client(settings)
    footers = [read_footer(client, settings.bucket, key) for key in ledger.keys_out]
    assert all(f.row_group(i).num_rows == 10 for f in footers[:-1] for i in range(f.num_row_groups))
    assert sum(f.num_rows for f in footers) == len(book.rows)
    rows = read_partition(settings, "ledger", DAY).to_pylist()
    assert [(r["wallet_id"], r["wallet_version"]) for r in rows] == sorted(
        (r["wallet_id"], r["wallet_version"]) for r in book.rows
    )
    # AND row-group statistics on wallet_id do not overlap: a one-wallet reader skips the rest
    ranges = [
        (f.row_group(i).column(3).statistics.min, f.row_group(i).column(3).statistics.max)
        for f in footers
        for i in range(f.num_row_groups)
    ]
    assert all(ranges[i][1] <= ranges[i + 1][0] for i in range(len(ranges) - 1))


@pytest.mark.stack
@pytest.mark.parametrize("kill_after_outputs", [1, 2, 3])
def test_a_run_killed_while_writing_is_finished_by_the_next(
    settings: Settings, kill_after_outputs: int
) -> None:
    # GIVEN a run that dies after writing some of its outputs (none of its inputs deleted)
    book = busy_day()
    inputs = write_landing(settings, book.rows, batch_rows=16)
    written: list[str] = []

    def die(step: str, what: object) -> None:
        if step == "wrote":
            written.append(str(what))
            if len(written) == kill_after_outputs:
                raise SimulatedCrashError

    with pytest.raises(SimulatedCrashError):
        compact_day(settings, DAY, target_file_bytes=3_000, row_group_rows=10, on_step=die)
    # THEN nothing is lost: every input is still there beside the partial outputs
    assert set(inputs) <= set(partition_keys(settings))
    assert set(written) <= set(partition_keys(settings))
    # WHEN the job runs again
    report = compact_day(settings, DAY, target_file_bytes=3_000, row_group_rows=10)
    # THEN it finishes: every entry exactly once, only the new generation's files left
    assert sorted(entry_ids(settings)) == sorted(r["entry_id"] for r in book.rows)
    assert set(partition_keys(settings)) == set(report.tables["ledger"].keys_out)
    assert not set(written) & set(report.tables["ledger"].keys_out)
    assert is_compacted(partition_keys(settings))


@pytest.mark.stack
def test_a_run_killed_while_deleting_is_finished_by_the_next(settings: Settings) -> None:
    # GIVEN a run that dies having deleted half of its inputs
    book = busy_day()
    inputs = write_landing(settings, book.rows, batch_rows=8)
    client = s3_client(settings)

    def die(step: str, what: Any) -> None:
        if step == "deleting":
            objects.delete_keys(client, settings.bucket, list(what)[: len(what) // 2])
            raise SimulatedCrashError

    with pytest.raises(SimulatedCrashError):
        compact_day(settings, DAY, on_step=die)
    # THEN readers see every entry, some twice until the rerun (queries count an entry_id once)
    assert set(entry_ids(settings)) == {r["entry_id"] for r in book.rows}
    assert len(partition_keys(settings)) == len(inputs) - len(inputs) // 2 + 1
    # WHEN the job runs again
    compact_day(settings, DAY)
    # THEN each entry is there exactly once, in one file
    assert sorted(entry_ids(settings)) == sorted(r["entry_id"] for r in book.rows)
    assert len(partition_keys(settings)) == 1


@pytest.mark.stack
def test_late_landing_files_join_the_compacted_day(settings: Settings) -> None:
    # GIVEN a compacted day, then a batch of that day that arrives late
    book = busy_day()
    write_landing(settings, book.rows[:-10])
    compact_day(settings, DAY)
    write_landing(settings, book.rows[-10:])
    # WHEN compacted again
    report = compact_day(settings, DAY)
    # THEN the late rows are merged into a new single file
    assert not report.tables["ledger"].already_compact
    assert len(partition_keys(settings)) == 1
    assert sorted(entry_ids(settings)) == sorted(r["entry_id"] for r in book.rows)


@pytest.mark.stack
def test_conflicting_copies_leave_the_partition_untouched(settings: Settings) -> None:
    book = busy_day()
    keys = write_landing(settings, book.rows)
    forged = [{**book.rows[0], "amount": book.rows[0]["amount"] + 1}]
    write_table(settings, "ledger", DAY, "forged.parquet", forged)
    with pytest.raises(CompactionConflictError):
        compact_day(settings, DAY)
    assert set(partition_keys(settings)) == {
        *keys,
        partition_prefix(settings.lake_prefix, "ledger", DAY) + "forged.parquet",
    }


@pytest.mark.stack
def test_wallets_and_quarantine_are_compacted_too(settings: Settings) -> None:
    # GIVEN wallet and quarantine landing files, with a wallet and a bad record landed twice
    created = dt.datetime(2026, 11, 20, 8, tzinfo=dt.UTC)
    wallets = [{"wallet_id": f"w{i}", "user_id": f"u{i}", "created_at": created} for i in range(5)]
    write_table(settings, "wallets", DAY, "s-1.parquet", wallets[:3])
    write_table(settings, "wallets", DAY, "s-2.parquet", wallets[2:])
    bad = {"reason": "undecodable", "raw": "{}", "stream_sequence": "7", "quarantined_at": created}
    write_table(settings, "quarantine", DAY, "s-1.parquet", [bad])
    write_table(
        settings,
        "quarantine",
        DAY,
        "s-2.parquet",
        [{**bad, "quarantined_at": created + dt.timedelta(minutes=1)}],
    )
    # WHEN the day is compacted
    report = compact_day(settings, DAY)
    # THEN each table is one file, without the copies (the earliest quarantine copy kept)
    assert report.tables["wallets"].rows_out == 5
    assert report.tables["wallets"].duplicates_dropped == 1
    assert report.tables["quarantine"].rows_out == 1
    assert read_partition(settings, "wallets", DAY).column("wallet_id").to_pylist() == [
        f"w{i}" for i in range(5)
    ]
    assert read_partition(settings, "quarantine", DAY).to_pylist()[0]["quarantined_at"] == created
    assert len(partition_keys(settings, "wallets")) == len(partition_keys(settings, "quarantine")) == 1
    assert report.tables["ledger"].already_compact  # nothing landed: nothing to do
    assert pa.schema(WALLETS) == read_partition(settings, "wallets", DAY).schema
    assert pa.schema(QUARANTINE) == read_partition(settings, "quarantine", DAY).schema


@pytest.mark.stack
def test_compact_command(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WALLETLAKE_BUCKET", settings.bucket)
    monkeypatch.setenv("WALLETLAKE_LAKE_PREFIX", settings.lake_prefix)
    write_landing(settings, busy_day().rows, batch_rows=10)
    assert cli.main(["compact", "--date", DAY.isoformat()]) == 0
    out = capsys.readouterr().out
    assert "ledger      16 files, 156 rows → 1 files, 156 rows (0 duplicates dropped;" in out
    assert cli.main(["compact", "--date", DAY.isoformat()]) == 0
    assert "ledger      already compact: 1 files, 156 rows" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["compact", "--date", "not-a-date"])
    assert "'not-a-date' is not a date (YYYY-MM-DD)" in capsys.readouterr().err
