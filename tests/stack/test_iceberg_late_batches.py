"""A dead-lettered batch replayed after later batches of its shard were committed lands once.

The event source mapping gives up on a batch (it goes to the dead-letter queue) and goes on with
the shard: the committer's position for the shard is past the failed batch before anyone replays
it. ``walletlake replay`` then lands it as a source of its own (``{shard}~late-{first}``), so the
committer takes it once, and a second replay of the same message finds it landed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import boto3
import pyarrow as pa
import pytest
from support.stream_records import TableWriter, assert_exact_ledger

from contracts.lake_layout import LATE_SOURCE_MARK
from contracts.settings import Settings
from lake.committer import commit_landed, read_progress
from lake.iceberg_catalog import load_table, open_catalog
from stream_processor.batch import process_batch
from stream_processor.dead_letters import BatchInfo, read_batch
from stream_processor.replay import replay_dead_letters
from walletlake.local import EmbeddedStack

pytestmark = pytest.mark.stack


def commit(settings: Settings) -> Any:
    client = boto3.client("s3", region_name=settings.region)
    return commit_landed(settings, client, open_catalog(settings), empty_after_seconds=0)


def scan(settings: Settings, table: str) -> pa.Table:
    return load_table(settings, table, open_catalog(settings)).scan().to_arrow()


def shard_records(settings: Settings) -> tuple[str, str, list[dict[str, Any]]]:
    """The stream's ARN, its shard and every record of it as Lambda delivers them."""
    arn = boto3.client("dynamodb").describe_table(TableName=settings.table)["Table"]["LatestStreamArn"]
    streams = boto3.client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    raw = streams.get_records(ShardIterator=iterator["ShardIterator"], Limit=1000)["Records"]
    info = BatchInfo(
        stream_arn=arn,
        shard_id=shard,
        start_sequence_number=raw[0]["dynamodb"]["SequenceNumber"],
        end_sequence_number=raw[-1]["dynamodb"]["SequenceNumber"],
    )
    return arn, shard, read_batch(streams, info)


def failure_message(arn: str, shard: str, batch: list[dict[str, Any]]) -> str:
    """The message the event source mapping sends to its on-failure destination."""
    return json.dumps(
        {
            "DDBStreamBatchInfo": {
                "shardId": shard,
                "startSequenceNumber": batch[0]["dynamodb"]["SequenceNumber"],
                "endSequenceNumber": batch[-1]["dynamodb"]["SequenceNumber"],
                "batchSize": len(batch),
                "streamArn": arn,
            }
        }
    )


def test_a_batch_replayed_after_its_shard_went_on_lands_once_however_often_replayed(
    stack: EmbeddedStack, make_settings: Callable[..., Settings], queue_url: str
) -> None:
    # GIVEN a shard delivered in three batches; the middle one failed (dead-lettered) while the
    # first and the last landed and were committed: the shard's position is past the failed one
    settings = make_settings(lake_format="iceberg")
    writer = TableWriter(settings.table)
    writer.workload(wallets=3, deposits=6, transfers=12)
    arn, shard, records = shard_records(settings)
    third = len(records) // 3
    first, failed, last = records[:third], records[third : 2 * third], records[2 * third :]
    assert sum(r["eventName"] == "MODIFY" for r in failed) > 0, "the failed batch must hold movements"
    process_batch(first, settings, shard=shard)
    process_batch(last, settings, shard=shard)
    commit(settings)
    (position,) = [
        v[0] for v in read_progress(load_table(settings, "ledger", open_catalog(settings))).values()
    ]
    assert position >= int(last[-1]["dynamodb"]["SequenceNumber"])
    before = scan(settings, "ledger").num_rows
    assert before < len(writer.model.entries)

    # WHEN `walletlake replay`'s dead-letter path replays it, the committer runs, and the same
    # message is replayed and committed again
    assert stack.endpoints is not None
    sqs = boto3.client("sqs", endpoint_url=stack.endpoints.aws)
    sqs.send_message(QueueUrl=queue_url, MessageBody=failure_message(arn, shard, failed))
    once = replay_dead_letters(settings, queue_url, sqs=sqs)
    commit(settings)
    sqs.send_message(QueueUrl=queue_url, MessageBody=failure_message(arn, shard, failed))
    twice = replay_dead_letters(settings, queue_url, sqs=sqs)
    commit(settings)

    # THEN the batch landed once (as a late source of its shard), the second replay wrote nothing
    assert once.records == len(failed)
    assert once.files_written > 0
    assert twice.files_written == 0
    progress = read_progress(load_table(settings, "ledger", open_catalog(settings)))
    assert any(LATE_SOURCE_MARK in source for source in progress)
    # AND the lake holds every entry exactly once, versions 1..N per wallet
    assert_exact_ledger(scan(settings, "ledger"), writer.model.entries)
    assert sorted(scan(settings, "wallets").column("wallet_id").to_pylist()) == sorted(writer.model.wallets)


def test_a_late_batch_partly_landed_before_it_failed_lands_only_the_rest(
    stack: EmbeddedStack, make_settings: Callable[..., Settings], queue_url: str
) -> None:
    # GIVEN a failed batch whose first half an earlier attempt landed (then the invocation died),
    # and a later batch of the shard committed
    settings = make_settings(lake_format="iceberg")
    writer = TableWriter(settings.table)
    writer.workload(wallets=3, deposits=6, transfers=12)
    arn, shard, records = shard_records(settings)
    half = len(records) // 2
    failed, last = records[:half], records[half:]
    process_batch(failed[: half // 2], settings, shard=shard)
    process_batch(last, settings, shard=shard)
    commit(settings)

    # WHEN the whole failed batch is replayed and committed
    assert stack.endpoints is not None
    sqs = boto3.client("sqs", endpoint_url=stack.endpoints.aws)
    sqs.send_message(QueueUrl=queue_url, MessageBody=failure_message(arn, shard, failed))
    replay_dead_letters(settings, queue_url, sqs=sqs)
    commit(settings)

    # THEN every entry once: the landed half is not landed again
    assert_exact_ledger(scan(settings, "ledger"), writer.model.entries)
