"""What an operator's disaster drill needs on the embedded stack: exports, a trimmed stream, the
commands' environment.

- a DynamoDB point-in-time export (``DYNAMODB_JSON``) emulated as the service writes one: a
  consistent scan of the table into ``AWSDynamoDB/{id}/data/*.json.gz`` with its
  ``manifest-summary.json`` (``exportTime``);
- a stream past its 24 hours: DynamoDB Local never trims, so a streams client that hides the records
  below a sequence number and answers ``TrimmedDataAccessException`` for a position among them, as
  the service does.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
from typing import Any

import boto3
from botocore.exceptions import ClientError

from contracts.settings import LAKE_FORMAT_VARIABLE, Settings


def write_export(settings: Settings, export_id: str, *, parts: int = 2) -> str:
    """Export the table now, as ``export-table-to-point-in-time`` would; returns its folder's URI."""
    client = boto3.client("dynamodb", region_name=settings.region)
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": settings.table, "ConsistentRead": True}
    while True:
        page = client.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    folder = f"backfill/AWSDynamoDB/{export_id}/"
    s3 = boto3.client("s3", region_name=settings.region)
    summary = json.dumps({"exportTime": dt.datetime.now(dt.UTC).isoformat(), "itemCount": len(items)})
    s3.put_object(Bucket=settings.bucket, Key=f"{folder}manifest-summary.json", Body=summary)
    for index in range(parts):
        body = gzip.compress(
            "".join(json.dumps({"Item": item}) + "\n" for item in items[index::parts]).encode()
        )
        s3.put_object(Bucket=settings.bucket, Key=f"{folder}data/part-{index}.json.gz", Body=body)
    return f"s3://{settings.bucket}/{folder}"


def stream_sequences(settings: Settings) -> list[int]:
    """Every sequence number of the table's stream (one shard on DynamoDB Local), in order."""
    arn = boto3.client("dynamodb").describe_table(TableName=settings.table)["Table"]["LatestStreamArn"]
    streams = boto3.client("dynamodbstreams")
    sequences: list[int] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            sequences.extend(int(r["dynamodb"]["SequenceNumber"]) for r in page["Records"])
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return sorted(sequences)


class TrimmedStreams:
    """A real dynamodbstreams client whose stream lost every record below ``below`` (trimmed)."""

    def __init__(self, client: Any, below: int) -> None:
        self._client = client
        self._below = below

    def get_shard_iterator(self, **kwargs: Any) -> Any:
        position = kwargs.get("SequenceNumber")
        if position is not None and int(position) < self._below:
            raise ClientError(
                {"Error": {"Code": "TrimmedDataAccessException", "Message": "trimmed"}}, "GetShardIterator"
            )
        return self._client.get_shard_iterator(**kwargs)

    def get_records(self, **kwargs: Any) -> Any:
        page = dict(self._client.get_records(**kwargs))
        page["Records"] = [r for r in page["Records"] if int(r["dynamodb"]["SequenceNumber"]) >= self._below]
        return page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class TrimmedSession:
    """A boto3 session whose streams client is :class:`TrimmedStreams` (``drain(session=...)``)."""

    def __init__(self, settings: Settings, below: int) -> None:
        self._session = boto3.Session(region_name=settings.region)
        self._below = below

    def client(self, service: str, **kwargs: Any) -> Any:
        client = self._session.client(service, **kwargs)  # type: ignore[call-overload]
        return TrimmedStreams(client, self._below) if service == "dynamodbstreams" else client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def operator_env(settings: Settings) -> dict[str, str]:
    """The variables an operator's shell sets for the commands to reach this test's resources."""
    return {**settings.to_env(), LAKE_FORMAT_VARIABLE: "iceberg"}


def table_items(settings: Settings) -> list[dict[str, Any]]:
    """Every item of the wallets table now (a backup's content)."""
    client = boto3.client("dynamodb", region_name=settings.region)
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": settings.table, "ConsistentRead": True}
    while True:
        page = client.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def restore_as_aws_does(settings: Settings, items: list[dict[str, Any]]) -> None:
    """Replace the table by one restored from ``items``, as a point-in-time restore makes it:
    the same key, the items, and neither a stream nor TTL."""
    from contracts.wallets_table import WALLETS_TABLE, TableSpec
    from walletlake.local._provision import ensure_table, wait_for_table_active

    client = boto3.client("dynamodb", region_name=settings.region)
    client.delete_table(TableName=settings.table)
    client.get_waiter("table_not_exists").wait(TableName=settings.table, WaiterConfig={"Delay": 1})
    ensure_table(client, settings.table, TableSpec(partition_key=WALLETS_TABLE.partition_key))
    wait_for_table_active(client, settings.table)
    for start in range(0, len(items), 25):
        chunk = items[start : start + 25]
        client.batch_write_item(
            RequestItems={settings.table: [{"PutRequest": {"Item": item}} for item in chunk]}
        )


def write_incremental_export(
    settings: Settings,
    export_id: str,
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    window: tuple[dt.datetime, dt.datetime],
    *,
    deleted: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> str:
    """An ``INCREMENTAL_EXPORT`` (``NEW_AND_OLD_IMAGES``) of ``window`` as the service writes one:
    a line per item changed in it (``NewImage``, with ``OldImage`` when it existed before), and a
    line per item deleted in it (``OldImage`` only: ``deleted``, as TTL deletions of items written
    before the window, which the emulation does not remove from the table)."""
    old = {item["pk"]["S"]: item for item in before}
    lines = []
    for item in after:
        previous = old.get(item["pk"]["S"])
        if previous == item:
            continue
        line: dict[str, Any] = {"Keys": {"pk": item["pk"]}, "NewImage": item}
        if previous is not None:
            line["OldImage"] = previous
        lines.append(line)
    lines += [{"Keys": {"pk": item["pk"]}, "OldImage": item} for item in deleted]
    folder = f"backfill/AWSDynamoDB/{export_id}/"
    s3 = boto3.client("s3", region_name=settings.region)
    summary = {
        "exportType": "INCREMENTAL_EXPORT",
        "exportFromTime": window[0].isoformat(),
        "exportToTime": window[1].isoformat(),
        "itemCount": len(lines),
    }
    s3.put_object(Bucket=settings.bucket, Key=f"{folder}manifest-summary.json", Body=json.dumps(summary))
    body = gzip.compress("".join(json.dumps(line) + "\n" for line in lines).encode())
    s3.put_object(Bucket=settings.bucket, Key=f"{folder}data/part-0.json.gz", Body=body)
    return f"s3://{settings.bucket}/{folder}"
