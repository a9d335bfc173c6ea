"""Replays into the Iceberg lake land each record once, however often they run.

A dead-lettered batch is read again from the real stream and landed under its shard (the landing
log skips what is already landed); quarantined records that now decode are landed as one replay
source named after them, committed, then deleted from the quarantine table.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import boto3
import pyarrow as pa
import pytest
from support.stream_records import TableWriter, assert_exact_ledger

from contracts.lake_tables import QUARANTINE
from contracts.settings import Settings
from lake.committer import PROGRESS_PROPERTY, commit_landed
from lake.iceberg_catalog import load_table, open_catalog
from lake.iceberg_landing import land_rows
from lake.objects import list_keys
from stream_processor.dead_letters import BatchInfo, read_batch
from stream_processor.replay import replay_dead_letters, replay_quarantine
from stream_processor.replay_sources import assignments_prefix
from walletlake.local import EmbeddedStack

pytestmark = pytest.mark.stack


def commit(settings: Settings) -> None:
    commit_landed(settings, boto3.client("s3", region_name=settings.region), open_catalog(settings))


def scan(settings: Settings, table: str) -> pa.Table:
    return load_table(settings, table, open_catalog(settings)).scan().to_arrow()


def stream_records(settings: Settings, writer: TableWriter) -> tuple[BatchInfo, list[dict[str, Any]]]:
    """The table's whole stream as Lambda delivers it, and the batch description naming all of it."""
    arn = boto3.client("dynamodb").describe_table(TableName=settings.table)["Table"]["LatestStreamArn"]
    streams = boto3.client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    raw = streams.get_records(ShardIterator=iterator["ShardIterator"], Limit=1000)["Records"]
    first, last = raw[0]["dynamodb"]["SequenceNumber"], raw[-1]["dynamodb"]["SequenceNumber"]
    info = BatchInfo(stream_arn=arn, shard_id=shard, start_sequence_number=first, end_sequence_number=last)
    return info, read_batch(streams, info)


def test_a_dead_lettered_batch_replayed_twice_lands_once(
    stack: EmbeddedStack, make_settings: Callable[..., Settings], queue_url: str
) -> None:
    # GIVEN a stream whose only batch was dead-lettered (nothing of it landed)
    settings = make_settings(lake_format="iceberg")
    writer = TableWriter(settings.table)
    writer.workload(wallets=2, deposits=4, transfers=3)
    info, records = stream_records(settings, writer)
    assert stack.endpoints is not None
    sqs = boto3.client("sqs", endpoint_url=stack.endpoints.aws)
    message = json.dumps(
        {
            "DDBStreamBatchInfo": {
                "shardId": info.shard_id,
                "startSequenceNumber": info.start_sequence_number,
                "endSequenceNumber": info.end_sequence_number,
                "batchSize": len(records),
                "streamArn": info.stream_arn,
            }
        }
    )
    # WHEN it is replayed, committed, sent again, replayed and committed again
    sqs.send_message(QueueUrl=queue_url, MessageBody=message)
    first = replay_dead_letters(settings, queue_url, sqs=sqs)
    commit(settings)
    sqs.send_message(QueueUrl=queue_url, MessageBody=message)
    second = replay_dead_letters(settings, queue_url, sqs=sqs)
    commit(settings)

    # THEN the first replay landed the batch, the second nothing, and the lake holds each entry once
    assert (first.records, first.sources_cleared, first.files_written > 0) == (len(records), 1, True)
    assert second.files_written == 0
    assert_exact_ledger(scan(settings, "ledger"), writer.model.entries)


def test_quarantined_records_replay_into_the_tables_and_leave_the_quarantine(
    make_settings: Callable[..., Settings],
) -> None:
    # GIVEN every record of a stream quarantined (a decoder bug of the past), nothing in the ledger
    settings = make_settings(lake_format="iceberg")
    writer = TableWriter(settings.table)
    writer.workload(wallets=2, deposits=3, transfers=2)
    _info, records = stream_records(settings, writer)
    rows = [
        {
            "reason": "decoder bug #12",
            "raw": json.dumps(record, sort_keys=True, default=str),
            "stream_sequence": record["dynamodb"]["SequenceNumber"],
            "quarantined_at": dt.datetime.now(dt.UTC),
        }
        for record in records
    ]
    client = boto3.client("s3", region_name=settings.region)
    quarantine = {"quarantine": pa.Table.from_pylist(rows, schema=QUARANTINE)}
    land_rows(client, settings, quarantine, event_source_arn="test", shard="quarantined", first=1, last=1)
    commit(settings)
    assert scan(settings, "quarantine").num_rows == len(records)

    # WHEN the quarantine is replayed, twice
    first = replay_quarantine(settings)
    second = replay_quarantine(settings)

    # THEN the ledger and the wallets hold every row once, and the quarantine is empty
    assert (first.still_failing, first.sources_cleared) == (0, 1)
    assert (second.records, second.files_written) == (0, 0)
    assert_exact_ledger(scan(settings, "ledger"), writer.model.entries)
    assert sorted(scan(settings, "wallets").column("wallet_id").to_pylist()) == sorted(writer.model.wallets)
    assert scan(settings, "quarantine").num_rows == 0


def test_an_export_replayed_twice_into_the_iceberg_lake_lands_every_entry_once(
    make_settings: Callable[..., Settings],
) -> None:
    import gzip

    from stream_processor.replay import replay_export

    # GIVEN a point-in-time export of a table the write path wrote, in two data files
    settings = make_settings(lake_format="iceberg")
    writer = TableWriter(settings.table)
    writer.workload(wallets=3, deposits=5, transfers=6, seed=3)
    items = boto3.client("dynamodb").scan(TableName=settings.table, ConsistentRead=True)["Items"]
    folder = "exports/AWSDynamoDB/01772000000000-e5f6a7b8/"
    s3 = boto3.client("s3", region_name=settings.region)
    summary = json.dumps({"exportTime": dt.datetime.now(dt.UTC).isoformat()})
    s3.put_object(Bucket=settings.bucket, Key=f"{folder}manifest-summary.json", Body=summary)
    for index, part in enumerate((items[::2], items[1::2])):
        body = gzip.compress("".join(json.dumps({"Item": item}) + "\n" for item in part).encode())
        s3.put_object(Bucket=settings.bucket, Key=f"{folder}data/part{index}.json.gz", Body=body)

    # WHEN it is replayed and committed, twice
    first = replay_export(settings, f"s3://{settings.bucket}/{folder}")
    commit(settings)
    second = replay_export(settings, f"s3://{settings.bucket}/{folder}")
    commit(settings)

    # THEN every entry is in the ledger once; the second run landed nothing
    assert (first.ledger_rows, first.problems, first.files_written > 0) == (5 + 2 * 6, [], True)
    assert second.files_written == 0
    assert_exact_ledger(scan(settings, "ledger"), writer.model.entries)
    # AND the export is one source of the committer's progress, whatever its file count
    progress = json.loads(
        load_table(settings, "ledger", open_catalog(settings)).properties[PROGRESS_PROPERTY]
    )
    assert [source for source in progress if source.startswith("export/")] == [
        "export/01772000000000-e5f6a7b8"
    ]


def quarantined(settings: Settings, writer: TableWriter) -> int:
    """Every record of the table's stream put in the quarantine table (a decoder bug of the past)."""
    _info, records = stream_records(settings, writer)
    rows = [
        {
            "reason": "decoder bug #12",
            "raw": json.dumps(record, sort_keys=True, default=str),
            "stream_sequence": record["dynamodb"]["SequenceNumber"],
            "quarantined_at": dt.datetime.now(dt.UTC),
        }
        for record in records
    ]
    client = boto3.client("s3", region_name=settings.region)
    quarantine = {"quarantine": pa.Table.from_pylist(rows, schema=QUARANTINE)}
    land_rows(client, settings, quarantine, event_source_arn="test", shard="quarantined", first=1, last=1)
    commit(settings)
    return len(records)


def test_a_quarantine_replay_rerun_after_a_crash_recovering_one_more_record_lands_nothing_twice(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyiceberg.table

    import stream_processor.replay as replay

    # GIVEN a quarantine of a whole stream, one record of which still fails to decode
    settings = make_settings(lake_format="iceberg")
    writer = TableWriter(settings.table)
    writer.workload(wallets=2, deposits=3, transfers=2)
    total = quarantined(settings, writer)
    real_decode = replay.decode_records
    entries = [
        row["stream_sequence"]
        for row in scan(settings, "quarantine").to_pylist()
        if real_decode([json.loads(row["raw"])], ingested_at_ms=0).ledger_rows
    ]
    last_sequence = max(entries, key=int)

    def still_broken(records: list[dict[str, Any]], **kwargs: Any) -> Any:
        if records[0]["dynamodb"]["SequenceNumber"] == last_sequence:
            broken = {**records[0], "dynamodb": {**records[0]["dynamodb"], "NewImage": {}}}
            return real_decode([broken], **kwargs)
        return real_decode(records, **kwargs)

    def crash(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("killed between the commit and the quarantine's deletion")

    # WHEN a replay lands and commits what decodes, and dies before deleting it from the quarantine
    rows = scan(settings, "quarantine").to_pylist()
    with monkeypatch.context() as patched:
        patched.setattr(replay, "decode_records", still_broken)
        patched.setattr(pyiceberg.table.Table, "delete", crash)
        with pytest.raises(RuntimeError, match="killed"):
            replay_quarantine(settings)
    ledger_after_crash = scan(settings, "ledger").num_rows
    # AND the rerun recovers one more record (the decoder was fixed meanwhile), then runs once more
    rerun = replay_quarantine(settings)
    again = replay_quarantine(settings)

    # THEN the crashed run's rows were in, the rerun landed only the one record it newly recovered,
    # and the lake holds every entry once; the quarantine is empty and no assignment is left
    assert (
        ledger_after_crash
        == len(writer.model.entries)
        - real_decode(
            [json.loads(next(r["raw"] for r in rows if r["stream_sequence"] == last_sequence))],
            ingested_at_ms=0,
        ).ledger_rows
    )
    assert rerun.records == total
    assert rerun.files_written == 1
    assert (again.records, again.files_written) == (0, 0)
    assert_exact_ledger(scan(settings, "ledger"), writer.model.entries)
    assert sorted(scan(settings, "wallets").column("wallet_id").to_pylist()) == sorted(writer.model.wallets)
    assert scan(settings, "quarantine").num_rows == 0
    s3 = boto3.client("s3", region_name=settings.region)
    assert list_keys(s3, settings.bucket, assignments_prefix(settings.lake_prefix)) == []
