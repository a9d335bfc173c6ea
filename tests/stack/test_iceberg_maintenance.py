"""Maintenance of the Iceberg tables on the embedded stack: compaction beside a live committer,
snapshot expiry that keeps tagged snapshots, orphan removal that keeps landed and tagged files."""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import boto3
import pyarrow as pa
import pytest
from botocore.exceptions import ClientError

from contracts.lake_tables import LEDGER
from contracts.settings import Settings
from lake import parquet
from lake.committer import COMMIT_ID_PROPERTY, PROGRESS_PROPERTY, commit_landed
from lake.iceberg_catalog import open_catalog
from lake.iceberg_cleanup import expire_snapshots, landed_paths, remove_orphan_files
from lake.iceberg_landing import land_batch, split_bucket_key
from lake.iceberg_maintenance import (
    COMPACTION,
    DEFAULT_ATTEMPTS,
    OPERATION_PROPERTY,
    compact_day,
    maintain,
)
from lake.iceberg_tables import SNAPSHOT_RETENTION_HOURS, identifier
from lake.landing_log import record_key

DAY = "2026-01-15"
ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/wallets/stream/2026-01-01T00:00:00.000"
SHARD = "shardId-0001"
_START = dt.datetime(2026, 1, 15, 12, tzinfo=dt.UTC)


def _records(first: int, last: int) -> list[dict[str, Any]]:
    return [{"dynamodb": {"SequenceNumber": str(sequence)}} for sequence in range(first, last + 1)]


def _decode(records: Sequence[Mapping[str, Any]]) -> dict[str, pa.Table]:
    """One ledger row per record, ids from the sequence number, wallets interleaved (so sorting
    changes the order)."""
    sequences = [int(record["dynamodb"]["SequenceNumber"]) for record in records]
    n = len(sequences)
    at = [_START + dt.timedelta(milliseconds=s) for s in sequences]
    rows = pa.table(
        {
            "entry_id": [f"e{s:06d}" for s in sequences],
            "txn_id": [f"t{s}" for s in sequences],
            "txn_type": ["deposit"] * n,
            "wallet_id": [f"w{s % 7}" for s in sequences],
            "counterparty_wallet_id": [None] * n,
            "direction": ["credit"] * n,
            "amount": list(sequences),
            "delta": list(sequences),
            "wallet_version": list(sequences),
            "balance_after": list(sequences),
            "nonce": [f"n{s}" for s in sequences],
            "created_at": at,
            "stream_sequence": [str(s) for s in sequences],
            "ingested_at": at,
            "extra_attributes": pa.nulls(len(sequences), pa.string()),
            "initiated_by": pa.nulls(len(sequences), pa.string()),
        },
        schema=LEDGER,
    )
    return {"ledger": rows}


class Lake:
    """A fresh namespace with the three tables, and the steps the tests take in it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.s3 = boto3.client("s3", region_name=settings.region)
        self.catalog = open_catalog(settings)
        self.next_sequence = 1

    def land(self, rows: int) -> list[str]:
        """Land a batch of ``rows`` ledger rows (not committed); returns its data files' paths."""
        first, last = self.next_sequence, self.next_sequence + rows - 1
        self.next_sequence = last + 1
        landed = land_batch(
            self.s3, self.settings, _records(first, last), _decode, event_source_arn=ARN, shard=SHARD
        )
        assert landed.record is not None
        return [file.path for file in landed.record.files]

    def commit(self, catalog: Any = None) -> int:
        return commit_landed(self.settings, self.s3, catalog or self.catalog, tables=("ledger",)).rows

    def land_and_commit(self, rows: int, catalog: Any = None) -> list[str]:
        paths = self.land(rows)
        assert self.commit(catalog) == rows
        return paths

    def table(self, catalog: Any = None) -> Any:
        return (catalog or self.catalog).load_table(identifier(self.settings.glue_database, "ledger"))

    def entry_ids(self, catalog: Any = None, snapshot_id: int | None = None) -> list[str]:
        table = self.table(catalog)
        if table.current_snapshot() is None:
            return []
        scan = table.scan(selected_fields=("entry_id",), snapshot_id=snapshot_id)
        return [str(value) for value in scan.to_arrow()["entry_id"].to_pylist()]

    def live_files(self) -> list[str]:
        return sorted(task.file.file_path for task in self.table().scan().plan_files())

    def exists(self, path: str) -> bool:
        bucket, key = split_bucket_key(path)
        try:
            self.s3.head_object(Bucket=bucket, Key=key)
        except ClientError:
            return False
        return True

    def forget_landing_records(self, first: int, last: int) -> None:
        """What the committer's tidy does to a record past retention."""
        self.s3.delete_object(
            Bucket=self.settings.bucket, Key=record_key(self.settings.lake_prefix, ARN, SHARD, first, last)
        )


@pytest.fixture
def lake(make_settings: Callable[..., Settings]) -> Lake:
    return Lake(make_settings(lake_format="iceberg"))


def _compacted(results: Sequence[Any]) -> int:
    return sum(1 for result in results if result.outcome == COMPACTION)


def _ids(first: int, last: int) -> list[str]:
    return [f"e{s:06d}" for s in range(first, last + 1)]


def test_compaction_rewrites_a_day_into_one_sorted_file_with_the_same_rows(lake: Lake) -> None:
    for _ in range(4):
        lake.land_and_commit(25)
    before = lake.table()
    progress = before.metadata.properties[PROGRESS_PROPERTY]
    assert len(lake.live_files()) == 4

    result = compact_day(lake.settings, lake.catalog, "ledger", DAY)

    assert (result.outcome, result.files_in, result.files_out, result.rows, result.attempts) == (
        COMPACTION,
        4,
        1,
        100,
        1,
    )
    after = lake.table()
    assert lake.live_files() == list(result.paths_out)
    assert result.paths_out[0].startswith(f"{after.location()}/data/dt={DAY}/compacted-")
    assert sorted(lake.entry_ids()) == _ids(1, 100)
    bucket, key = split_bucket_key(result.paths_out[0])
    written = parquet.decode(lake.s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    order = list(zip(written["wallet_id"].to_pylist(), written["wallet_version"].to_pylist(), strict=True))
    assert order == sorted(order)
    # the kernel writes the lake schema; readers take dt from the partition the file is registered in
    assert "dt" not in written.column_names
    assert set(after.scan().to_arrow()["dt"].to_pylist()) == {DAY}
    summary = after.current_snapshot().summary
    assert summary.operation.value == "overwrite"
    counts = ("walletlake.compaction.files-in", "walletlake.compaction.files-out", "deleted-data-files")
    assert [summary[key] for key in (OPERATION_PROPERTY, *counts)] == [COMPACTION, "4", "1", "4"]
    assert (summary["added-data-files"], summary["total-records"], summary["total-data-files"]) == (
        "1",
        "100",
        "1",
    )
    assert after.metadata.properties[PROGRESS_PROPERTY] == progress
    # The same day again: one file is as compact as it gets.
    assert compact_day(lake.settings, lake.catalog, "ledger", DAY).outcome == "nothing to compact"
    assert lake.table().current_snapshot().snapshot_id == after.current_snapshot().snapshot_id


def test_compaction_refused_by_a_concurrent_append_commits_again_and_keeps_every_row(lake: Lake) -> None:
    for _ in range(3):
        lake.land_and_commit(10)
    appended: list[str] = []

    def append_meanwhile(attempt: int) -> None:
        if attempt == 1:
            appended.extend(lake.land_and_commit(10))

    result = compact_day(lake.settings, lake.catalog, "ledger", DAY, before_commit=append_meanwhile)

    assert (result.outcome, result.attempts, result.files_in, result.rows) == (COMPACTION, 2, 3, 30)
    assert lake.live_files() == sorted([*result.paths_out, *appended])
    assert sorted(lake.entry_ids()) == _ids(1, 40)
    table = lake.table()
    snapshot = table.current_snapshot()
    assert snapshot.summary["total-records"] == "40"
    parent = table.metadata.snapshot_by_id(snapshot.parent_snapshot_id)
    assert parent.summary.operation.value == "append"
    assert COMMIT_ID_PROPERTY in parent.summary.additional_properties


def test_compaction_refused_by_appends_more_often_than_its_attempts_still_commits_once(lake: Lake) -> None:
    # A hot table: the committer wins the race on every one of seven tries, more than the five a
    # conflict may take. Appends never take an input, so none of those refusals is counted.
    for _ in range(3):
        lake.land_and_commit(10)
    appended: list[str] = []

    def append_meanwhile(attempt: int) -> None:
        if attempt <= DEFAULT_ATTEMPTS + 2:
            appended.extend(lake.land_and_commit(5))

    result = compact_day(lake.settings, lake.catalog, "ledger", DAY, before_commit=append_meanwhile)

    assert (result.outcome, result.attempts, result.files_in, result.rows) == (
        COMPACTION,
        DEFAULT_ATTEMPTS + 3,
        3,
        30,
    )
    assert lake.live_files() == sorted([*result.paths_out, *appended])
    assert sorted(lake.entry_ids()) == _ids(1, 30 + 5 * (DEFAULT_ATTEMPTS + 2))


def test_compaction_refused_by_other_rewrites_gives_up_after_its_attempts_and_keeps_every_row(
    lake: Lake,
) -> None:
    from pyiceberg.io.pyarrow import parquet_files_to_data_files

    for _ in range(3):
        lake.land_and_commit(10)

    def overwrite_meanwhile(attempt: int) -> None:
        # Another engine's overwrite that leaves the day's files alone: not an append, so the
        # compaction must look again, and that counts against its attempts.
        paths = lake.land(5)
        table = lake.table()
        transaction = table.transaction()
        with transaction.update_snapshot().overwrite() as rewrite:
            for data_file in parquet_files_to_data_files(table.io, table.metadata, iter(paths)):
                rewrite.append_data_file(data_file)
        transaction.commit_transaction()

    with pytest.raises(
        RuntimeError, match=f"after {DEFAULT_ATTEMPTS} refused commits, {DEFAULT_ATTEMPTS} of them"
    ):
        compact_day(lake.settings, lake.catalog, "ledger", DAY, before_commit=overwrite_meanwhile)

    assert sorted(lake.entry_ids()) == _ids(1, 30 + 5 * DEFAULT_ATTEMPTS)
    assert len(lake.live_files()) == 3 + DEFAULT_ATTEMPTS


def test_compaction_whose_inputs_were_compacted_meanwhile_is_abandoned_and_removes_its_output(
    lake: Lake,
) -> None:
    for _ in range(3):
        lake.land_and_commit(10)
    rival: list[Any] = []

    def compact_meanwhile(attempt: int) -> None:
        if attempt == 1:
            rival.append(compact_day(lake.settings, lake.catalog, "ledger", DAY))

    result = compact_day(lake.settings, lake.catalog, "ledger", DAY, before_commit=compact_meanwhile)

    assert (result.outcome, result.attempts, result.paths_out) == ("abandoned", 2, ())
    assert rival[0].outcome == COMPACTION
    assert lake.live_files() == list(rival[0].paths_out)
    assert sorted(lake.entry_ids()) == _ids(1, 30)
    bucket, key = split_bucket_key(f"{lake.table().location()}/data/dt={DAY}/compacted-")
    listed = lake.s3.list_objects_v2(Bucket=bucket, Prefix=key).get("Contents", [])
    assert [f"s3://{bucket}/{item['Key']}" for item in listed] == list(rival[0].paths_out)


def test_readers_never_see_a_row_twice_or_miss_a_committed_one_while_compactions_run(lake: Lake) -> None:
    committed: list[str] = []  # entry ids whose commit returned, in order
    compactions: list[Any] = []
    reads: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    writer_done = threading.Event()
    pause = threading.Event()  # never set: the writer's interval
    batch_rows = 15

    def writer() -> None:
        # The committer commits every interval (30 s in AWS); here every ~0.1 s. A writer that
        # commits back to back would refuse every compaction (each attempt spans a commit), which
        # is not the race production has; the interval is pacing, not a wait for work.
        catalog = open_catalog(lake.settings)
        try:
            batches = 0
            while batches < 6 or (_compacted(compactions) < 2 and batches < 40):
                first = lake.next_sequence
                lake.land_and_commit(batch_rows, catalog)
                committed.extend(_ids(first, first + batch_rows - 1))
                batches += 1
                pause.wait(0.1)
        except BaseException as error:
            errors.append(error)
        finally:
            writer_done.set()

    def compactor() -> None:
        catalog = open_catalog(lake.settings)
        try:
            while not writer_done.is_set():
                result = compact_day(lake.settings, catalog, "ledger", DAY)
                if result.outcome != "nothing to compact":
                    compactions.append(result)
        except BaseException as error:
            errors.append(error)

    def reader() -> None:
        catalog = open_catalog(lake.settings)
        try:
            last = 0
            while not writer_done.is_set():
                floor = list(committed)
                seen = lake.entry_ids(catalog)
                assert len(seen) == len(set(seen)), f"{len(seen) - len(set(seen))} rows seen twice"
                missing = set(floor) - set(seen)
                assert not missing, f"committed rows missing: {sorted(missing)[:5]}"
                assert len(seen) >= last, "the table shrank"
                last = len(seen)
                reads.append((len(seen), len(set(seen))))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=job) for job in (writer, compactor, reader)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert not errors, errors

    assert _compacted(compactions) >= 2
    assert len(reads) >= 3
    final = lake.entry_ids()
    assert sorted(final) == sorted(committed) == _ids(1, lake.next_sequence - 1)
    table = lake.table()
    assert int(table.current_snapshot().summary["total-records"]) == len(committed)


def test_expiry_keeps_the_current_snapshot_the_newest_and_tagged_ones(lake: Lake) -> None:
    snapshots = []
    for _ in range(4):
        lake.land_and_commit(5)
        snapshots.append(lake.table().current_snapshot().snapshot_id)
    lake.table().manage_snapshots().create_tag(snapshots[1], "reconciliation-2026-01-15").commit()

    young = expire_snapshots(lake.settings, lake.catalog, "ledger", older_than_seconds=3600, retain_last=1)
    assert young.expired == ()

    later = time.time() + 7200
    result = expire_snapshots(
        lake.settings, lake.catalog, "ledger", older_than_seconds=3600, retain_last=1, clock=lambda: later
    )

    assert sorted(result.expired) == sorted([snapshots[0], snapshots[2]])
    table = lake.table()
    assert sorted(s.snapshot_id for s in table.metadata.snapshots) == sorted([snapshots[1], snapshots[3]])
    assert table.current_snapshot().snapshot_id == snapshots[3]
    assert table.metadata.refs["reconciliation-2026-01-15"].snapshot_id == snapshots[1]
    assert sorted(lake.entry_ids(snapshot_id=snapshots[1])) == _ids(1, 10)
    assert sorted(lake.entry_ids()) == _ids(1, 20)


def test_orphan_removal_deletes_only_old_unreferenced_files(lake: Lake) -> None:
    tagged_files = lake.land_and_commit(10) + lake.land_and_commit(10)
    lake.forget_landing_records(1, 10)
    lake.forget_landing_records(11, 20)
    table = lake.table()
    table.manage_snapshots().create_tag(table.current_snapshot().snapshot_id, "audit").commit()
    compacted = compact_day(lake.settings, lake.catalog, "ledger", DAY)
    committed = lake.land_and_commit(5)
    landed_only = lake.land(5)
    location = lake.table().location()
    stray = f"{location}/data/dt={DAY}/stray-batch-that-died.parquet"
    bucket, key = split_bucket_key(stray)
    lake.s3.put_object(Bucket=bucket, Key=key, Body=b"PAR1")
    later = time.time() + 7200
    expire_snapshots(lake.settings, lake.catalog, "ledger", 3600, retain_last=1, clock=lambda: later)

    young = remove_orphan_files(lake.settings, lake.catalog, "ledger", older_than_seconds=3600)
    assert young.deleted == ()
    assert young.young == 1

    result = remove_orphan_files(
        lake.settings, lake.catalog, "ledger", older_than_seconds=3600, clock=lambda: later
    )

    assert result.deleted == (stray,)
    assert not lake.exists(stray)
    kept = [*tagged_files, *compacted.paths_out, *committed, *landed_only]
    assert [lake.exists(path) for path in kept] == [True] * len(kept)
    assert (result.referenced, result.landed) == (len(tagged_files) + 1 + len(committed), len(landed_only))

    # Once the tag goes and its snapshot expires, the files only it held are orphans.
    lake.table().manage_snapshots().remove_tag("audit").commit()
    report = maintain(
        lake.settings,
        lake.catalog,
        "ledger",
        DAY,
        snapshot_age_seconds=3600,
        retain_last=1,
        orphan_age_seconds=3600,
        clock=lambda: later,
    )
    assert report.compaction.outcome == COMPACTION  # the compacted file and the later batch
    # The later batch's file is no longer referenced either, and its landing record, at the
    # table's position, protects nothing: an orphan too. The uncommitted batch's record protects it.
    assert sorted(report.orphans.deleted) == sorted([*tagged_files, *compacted.paths_out, *committed])
    assert [lake.exists(path) for path in [*committed, *landed_only]] == [False, True]
    assert sorted(lake.entry_ids()) == _ids(1, 25)


def test_only_records_past_the_tables_position_protect_their_files(lake: Lake) -> None:
    # GIVEN two committed batches (their records kept, as the log keeps them for a day) and two
    # landed after the last commit
    lake.land_and_commit(3)
    lake.land_and_commit(4)
    pending = lake.land(5) + lake.land(6)
    # THEN the landed paths are the uncommitted batches' files alone
    assert landed_paths(lake.s3, lake.settings, lake.table()) == set(pending)
    # AND once they are committed, none
    lake.commit()
    assert landed_paths(lake.s3, lake.settings, lake.table()) == set()


def test_compaction_sorts_across_the_day_so_each_file_holds_a_range_of_wallets(lake: Lake) -> None:
    # GIVEN four commits of rows from seven wallets each
    for _ in range(4):
        lake.land_and_commit(700)

    # WHEN the day is compacted into files of about one (smallest, 1,024-row) row group each (the
    # 14 KB landing files are small against a 20 KB target; a group compresses to about 12 KB)
    result = compact_day(lake.settings, lake.catalog, "ledger", DAY, target_file_bytes=20_000)

    # THEN the outputs hold every row once, and their wallet ranges follow one another
    assert result.files_out >= 2
    assert sorted(lake.entry_ids()) == _ids(1, 2800)
    ranges = []
    for path in result.paths_out:
        bucket, key = split_bucket_key(path)
        rows = parquet.decode(lake.s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        wallets = rows["wallet_id"].to_pylist()
        ranges.append((min(wallets), max(wallets)))
    ranges.sort()
    assert all(earlier[1] <= later[0] for earlier, later in itertools.pairwise(ranges))


def test_the_committer_expires_snapshots_past_retention_and_keeps_tags_and_rows(lake: Lake) -> None:
    # GIVEN 32 commits, the 5th tagged by a reconciliation
    for _ in range(32):
        lake.land_and_commit(3)
    table = lake.table()
    history = [snapshot.snapshot_id for snapshot in table.snapshots()]
    with table.manage_snapshots() as manage:
        manage.create_tag(history[4], "reconciled-2026-01-15")

    # WHEN a cycle runs hours later (no tidy: the count past retention alone triggers it)
    later = time.time() + (SNAPSHOT_RETENTION_HOURS + 1) * 3600
    report = commit_landed(lake.settings, lake.s3, lake.catalog, tables=("ledger",), clock=lambda: later)

    # THEN every snapshot but the tagged one and the last 10 is gone, and no row
    kept = {snapshot.snapshot_id for snapshot in lake.table().snapshots()}
    assert kept == {history[4], *history[-10:]}
    assert report.snapshots_expired == 32 - 11
    assert sorted(lake.entry_ids()) == _ids(1, lake.next_sequence - 1)
    assert len(lake.entry_ids(snapshot_id=history[4])) == 5 * 3
