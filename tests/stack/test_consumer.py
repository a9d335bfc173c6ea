"""The local consumer on the embedded stack: DynamoDB Local's real stream → S3, exactly once.

Items are written with TransactWriteItems following the item contract (``stream_records.TableWriter``),
so the stream carries exactly what the write path's transactions produce.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from support.fresh_resources import fresh_settings
from support.stream_records import TableWriter, assert_exact_ledger, lake_keys, poll_until, read_lake_table

from contracts.settings import LAKE_FORMAT_VARIABLE, Settings
from stream_processor.checkpoints import CheckpointConflictError, CheckpointStore
from stream_processor.consumer import ConsumeError, drain
from stream_processor.shards import Shard, lineage_order, ready_shards
from walletlake.local import EmbeddedStack, patched_environ, provision

pytestmark = pytest.mark.stack


class InjectedCrashError(Exception):
    """Stands for the process dying at a chosen point."""


def records_of(wallets: int, deposits: int, transfers: int) -> int:
    """Stream records the contract's writes produce: claim + wallet, MODIFY + INSERT, 2 MODIFYs + INSERT."""
    return 2 * wallets + 2 * deposits + 3 * transfers


def without_ingestion_time(table: Any) -> list[dict[str, Any]]:
    rows = [{k: v for k, v in row.items() if k != "ingested_at"} for row in table.to_pylist()]
    return sorted(rows, key=lambda row: row["entry_id"])


def stream_arn(settings: Settings) -> str:
    client = boto3.client("dynamodb", region_name=settings.region)
    return client.describe_table(TableName=settings.table)["Table"]["LatestStreamArn"]


def test_drain_lands_every_entry_once_and_checkpoints(settings: Settings) -> None:
    # GIVEN 5 wallets, 10 deposits and 25 transfers committed to the table
    writer = TableWriter(settings.table)
    writer.workload(wallets=5, deposits=10, transfers=25)

    # WHEN the stream is drained in batches of 20
    progress: list[int] = []
    summary = drain(settings, batch_size=20, on_progress=progress.append)

    # THEN every record was accounted for
    expected_records = records_of(5, 10, 25)
    assert summary.as_dict() | {"seconds": 0, "records_per_second": 0} == {
        "stream_arn": stream_arn(settings),
        "records": expected_records,
        "ledger_rows": 10 + 2 * 25,
        "wallets": 5,
        "ttl_expired": 0,
        "ignored": 5 + 10 + 25,  # the user claims and the transaction INSERTs (idempotency records)
        "quarantined": 0,
        "files_written": summary.files_written,
        "bytes_written": summary.bytes_written,
        "batches": -(-expected_records // 20),
        "replayed_batches": 0,
        "shards": 1,
        "seconds": 0,
        "records_per_second": 0,
        "unconfirmed_shards": [],
        "trimmed_shards": [],
        "stream_switch": None,
    }
    assert summary.files_written >= summary.batches
    assert progress[-1] == 10 + 2 * 25
    # AND the lake read back from S3 holds each entry once, versions 1..N, running sums == balance_after
    assert_exact_ledger(read_lake_table(settings, "ledger"), writer.model.entries)
    assert sorted(read_lake_table(settings, "wallets").column("wallet_id").to_pylist()) == sorted(
        writer.model.wallets
    )
    # AND the shard's checkpoint is at its last record, with nothing pending
    streams = boto3.client("dynamodbstreams", region_name=settings.region)
    arn = stream_arn(settings)
    shard_id = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    checkpoint = CheckpointStore(
        boto3.client("dynamodb", region_name=settings.region), settings.checkpoint_table
    ).load(arn, shard_id)
    assert (checkpoint.records, checkpoint.pending_through) == (expected_records, None)

    # WHEN drained again with nothing new
    keys = lake_keys(settings)
    again = drain(settings, batch_size=20)

    # THEN nothing is read twice and nothing is written
    assert (again.records, again.files_written) == (0, 0)
    assert lake_keys(settings) == keys


@pytest.mark.parametrize("stage", ["before_write", "after_write", "after_checkpoint"])
def test_a_crash_anywhere_neither_loses_nor_doubles_an_entry(settings: Settings, stage: str) -> None:
    # GIVEN a committed history, and a consumer that dies at `stage` of its third batch
    writer = TableWriter(settings.table)
    writer.workload(wallets=4, deposits=8, transfers=20)
    seen: list[str] = []

    def crash_on_third_batch(point: str) -> None:
        seen.append(point)
        if point == stage and seen.count(stage) == 3:
            raise InjectedCrashError(stage)

    with pytest.raises(InjectedCrashError):
        drain(settings, batch_size=7, fault_hook=crash_on_third_batch)

    # WHEN a new consumer starts, even with a different batch size
    summary = drain(settings, batch_size=5)

    # THEN the interrupted batch was rewritten in place (not cut differently), and the lake is exact
    assert summary.replayed_batches == (0 if stage == "after_checkpoint" else 1)
    assert summary.quarantined == 0
    assert_exact_ledger(read_lake_table(settings, "ledger"), writer.model.entries)
    wallet_ids = read_lake_table(settings, "wallets").column("wallet_id").to_pylist()
    assert sorted(wallet_ids) == sorted(writer.model.wallets)


@pytest.fixture
def ttl_settings(tmp_path: Path) -> Iterator[Settings]:
    """Fresh resources on a stack of this test's own.

    DynamoDB Local's TTL sweeper walks every table of its server: on the session's stack, after a
    full suite's tables and idempotency records, it took over 300 s to reach this test's items
    (3 s on a stack of its own).
    """
    with (
        EmbeddedStack(tmp_path / "stack") as stack,
        patched_environ({**stack.environment(), LAKE_FORMAT_VARIABLE: "parquet"}),
    ):
        settings = fresh_settings()
        provision(settings)
        yield settings


def test_ttl_expiry_of_hot_items_changes_nothing_in_the_lake(ttl_settings: Settings) -> None:
    settings = ttl_settings
    # GIVEN transactions written with a one-second hot window, and drained into the lake
    writer = TableWriter(settings.table, ttl_seconds=1)
    writer.workload(wallets=3, deposits=3, transfers=4)
    first = drain(settings)
    ledger_before = without_ingestion_time(read_lake_table(settings, "ledger"))
    keys_before = lake_keys(settings)
    assert len(ledger_before) == 3 + 2 * 4

    # WHEN DynamoDB Local's TTL process really deletes the transaction items
    poll_until(lambda: writer.transaction_items() == 0, timeout=180, interval=1.0, what="TTL deletions")
    # ... and the consumer drains until it has seen every expiry on the stream
    expired = [first.ttl_expired]
    later: list[Any] = []

    def every_expiry_seen() -> bool:
        later.append(drain(settings, quiet_seconds=0.5))
        expired.append(later[-1].ttl_expired)
        return sum(expired) >= 7

    poll_until(every_expiry_seen, timeout=60, interval=0.5, what="TTL REMOVE records on the stream")

    # THEN the expiries were counted, nothing was quarantined, and the lake is exactly as before
    assert sum(expired) == 7
    assert sum(run.quarantined for run in [first, *later]) == 0
    assert sum(run.ledger_rows for run in later) == 0
    assert lake_keys(settings) == keys_before
    assert without_ingestion_time(read_lake_table(settings, "ledger")) == ledger_before


def test_follow_mode_lands_records_as_they_are_written(settings: Settings) -> None:
    # GIVEN a consumer following the stream in the background
    landed = [0]
    deadline = time.monotonic() + 120
    expected = 4 + 2 * 6

    def stop() -> bool:
        return landed[0] >= expected or time.monotonic() > deadline

    result: list[Any] = []
    follower = threading.Thread(
        target=lambda: result.append(
            drain(
                settings, follow=True, on_progress=lambda rows: landed.__setitem__(0, rows), should_stop=stop
            )
        )
    )
    follower.start()

    # WHEN transactions are committed while it runs
    writer = TableWriter(settings.table)
    writer.workload(wallets=3, deposits=4, transfers=6)
    follower.join(timeout=150)

    # THEN it landed every entry without being restarted
    assert not follower.is_alive()
    assert result[0].ledger_rows == expected
    assert_exact_ledger(read_lake_table(settings, "ledger"), writer.model.entries)


def test_two_consumers_cannot_move_the_same_checkpoint(settings: Settings) -> None:
    # GIVEN two consumers that loaded the same shard's checkpoint
    client = boto3.client("dynamodb", region_name=settings.region)
    mine = CheckpointStore(client, settings.checkpoint_table)
    theirs = CheckpointStore(client, settings.checkpoint_table)
    loaded = mine.load("arn:stream", "shard-1")
    theirs.commit(theirs.load("arn:stream", "shard-1"), "000000000000000000010", 10)

    # WHEN the first one tries to move it from where it read it
    # THEN it is refused with a message an operator can act on
    with pytest.raises(CheckpointConflictError, match="another `walletlake consume`"):
        mine.commit(loaded, "000000000000000000005", 5)
    assert mine.load("arn:stream", "shard-1").sequence_number == "000000000000000000010"


def test_drain_refuses_a_table_without_a_stream(settings: Settings) -> None:
    # GIVEN settings naming a table that has no stream (the checkpoint table)
    # THEN the consumer says so instead of draining nothing
    with pytest.raises(ConsumeError, match="has no stream"):
        drain(settings.replace(table=settings.checkpoint_table))


def cli_env(settings: Settings) -> dict[str, str]:
    return {
        **os.environ,
        "WALLETLAKE_TABLE": settings.table,
        "WALLETLAKE_BUCKET": settings.bucket,
        "WALLETLAKE_LAKE_PREFIX": settings.lake_prefix,
        "WALLETLAKE_CHECKPOINT_TABLE": settings.checkpoint_table,
    }


def test_consume_command_prints_one_json_summary(settings: Settings) -> None:
    # GIVEN a committed history
    writer = TableWriter(settings.table)
    writer.workload(wallets=2, deposits=2, transfers=3)

    # WHEN `walletlake consume --json` runs
    done = subprocess.run(
        [sys.executable, "-m", "walletlake.cli", "consume", "--json", "--batch-size", "4"],
        env=cli_env(settings),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    # THEN it prints one JSON object with the contract's counts
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    picked = {key: summary[key] for key in ("records", "ledger_rows", "wallets", "ttl_expired", "ignored")}
    assert picked == {
        "records": records_of(2, 2, 3),
        "ledger_rows": 8,
        "wallets": 2,
        "ttl_expired": 0,
        "ignored": 2 + 2 + 3,  # user claims and transaction INSERTs
    }
    assert (summary["quarantined"], summary["files_written"] > 0) == (0, True)

    # WHEN run again in its readable form
    readable = subprocess.run(
        [sys.executable, "-m", "walletlake.cli", "consume"],
        env=cli_env(settings),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    # THEN it says nothing new was read
    assert readable.returncode == 0, readable.stderr
    assert "records     0 in 0 batches" in readable.stdout


def test_consume_command_fails_with_one_line_reason(settings: Settings) -> None:
    # GIVEN a table name that does not exist
    env = cli_env(settings) | {"WALLETLAKE_TABLE": "no-such-table"}
    done = subprocess.run(
        [sys.executable, "-m", "walletlake.cli", "consume"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # THEN it exits non-zero with one line saying what to do
    assert done.returncode == 1
    reason = "table no-such-table does not exist; provision it first (walletlake local up)"
    assert done.stderr.strip().splitlines() == [f"walletlake consume: error: {reason}"]


def test_shards_are_read_parents_first() -> None:
    # GIVEN a parent split into two children, one of which was split again
    root = Shard("root", ending_sequence_number="100")
    left = Shard("left", parent_id="root", ending_sequence_number="200")
    right = Shard("right", parent_id="root")
    grandchild = Shard("grand", parent_id="left")
    orphan = Shard("orphan", parent_id="trimmed-away")  # its parent is past the stream's retention

    # THEN only shards whose parent is finished (or gone) are ready, and lineage order follows
    shards = [grandchild, right, left, root, orphan]
    assert [s.shard_id for s in ready_shards(shards, finished=set())] == ["root", "orphan"]
    assert [s.shard_id for s in ready_shards(shards, finished={"root", "orphan"})] == ["right", "left"]
    assert [s.shard_id for s in lineage_order(shards)] == ["root", "orphan", "right", "left", "grand"]


class StreamsWithFaults:
    """A real dynamodbstreams client that fails chosen calls once, as the service can (fault injection)."""

    def __init__(self, client: Any, faults: dict[tuple[str, int], str]) -> None:
        self._client = client
        self._faults = dict(faults)  # (operation, nth call) -> error code
        self._calls: dict[str, int] = {}

    def _call(self, operation: str, **kwargs: Any) -> Any:
        self._calls[operation] = self._calls.get(operation, 0) + 1
        code = self._faults.pop((operation, self._calls[operation]), None)
        if code is not None:
            raise ClientError({"Error": {"Code": code, "Message": "injected"}}, operation)
        return getattr(self._client, operation)(**kwargs)

    def get_records(self, **kwargs: Any) -> Any:
        return self._call("get_records", **kwargs)

    def get_shard_iterator(self, **kwargs: Any) -> Any:
        return self._call("get_shard_iterator", **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class SessionWithFaults:
    def __init__(self, settings: Settings, faults: dict[tuple[str, int], str]) -> None:
        self._session = boto3.Session(region_name=settings.region)
        self._faults = faults

    def client(self, service: str) -> Any:
        client = self._session.client(service)  # type: ignore[call-overload]
        return StreamsWithFaults(client, self._faults) if service == "dynamodbstreams" else client


def test_expired_iterators_and_trimmed_reads_neither_skip_nor_double(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN a committed history, and a stream that expires the reader's iterator on its 2nd page and
    # reports trimmed data on its 4th (DynamoDB Local never trims: the records are all still there)
    writer = TableWriter(settings.table)
    writer.workload(wallets=3, deposits=6, transfers=12)
    faults = {
        ("get_records", 2): "ExpiredIteratorException",
        ("get_records", 4): "TrimmedDataAccessException",
    }

    # WHEN the stream is drained in small batches
    summary = drain(settings, batch_size=6, session=SessionWithFaults(settings, faults))  # type: ignore[arg-type]

    # THEN the trimmed shard is reported loudly, and rereading from the trim horizon doubled nothing
    assert summary.trimmed_shards == [summary.as_dict()["trimmed_shards"][0]]
    assert any("trimmed from the stream" in r.getMessage() and r.levelname == "ERROR" for r in caplog.records)
    assert summary.records == records_of(3, 6, 12)
    assert_exact_ledger(read_lake_table(settings, "ledger"), writer.model.entries)
