"""A dead-lettered stream batch: where the on-failure message says it is, and its records read back.

Lambda's on-failure destination gets, per failed batch, a message whose ``DDBStreamBatchInfo``
locates it in the stream (stream ARN, shard, first and last sequence numbers), not the records;
:func:`read_batch` reads them back while the stream still holds them (24 hours), in Lambda's shape,
for :func:`stream_processor.replay.replay_dead_letters`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from stream_processor.lambda_records import SEQUENCE_NUMBER, lambda_record

if TYPE_CHECKING:
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient

BATCH_INFO: Final = "DDBStreamBatchInfo"
_EMPTY_PAGES_LIMIT: Final = 10
#: The stream no longer holds the position (trimmed past its retention, or the stream is gone).
_GONE: Final = frozenset({"TrimmedDataAccessException", "ResourceNotFoundException"})


@dataclasses.dataclass(frozen=True, slots=True)
class BatchInfo:
    """The part of a failed-invocation record that locates the batch in the stream."""

    stream_arn: str
    shard_id: str
    start_sequence_number: str
    end_sequence_number: str
    batch_size: int | None = None


def batch_info(body: str) -> BatchInfo | None:
    """Parse an on-failure destination message; None when it does not describe a stream batch.

    Examples
    --------
    >>> body = json.dumps({"DDBStreamBatchInfo": {"streamArn": "arn:s", "shardId": "sh",
    ...     "startSequenceNumber": "100", "endSequenceNumber": "200", "batchSize": 3}})
    >>> batch_info(body).end_sequence_number
    '200'
    """
    try:
        info = json.loads(body)[BATCH_INFO]
        return BatchInfo(
            stream_arn=str(info["streamArn"]),
            shard_id=str(info["shardId"]),
            start_sequence_number=str(info["startSequenceNumber"]),
            end_sequence_number=str(info["endSequenceNumber"]),
            batch_size=int(info["batchSize"]) if "batchSize" in info else None,
        )
    except (TypeError, ValueError, KeyError):
        return None


class ExpiredBatchError(Exception):
    """The stream no longer holds (all of) the batch."""


def read_batch(streams: DynamoDBStreamsClient, info: BatchInfo) -> list[dict[str, Any]]:
    """The batch's records, first to last sequence number, in Lambda's shape."""
    try:
        iterator: str | None = streams.get_shard_iterator(
            StreamArn=info.stream_arn,
            ShardId=info.shard_id,
            ShardIteratorType="AT_SEQUENCE_NUMBER",
            SequenceNumber=info.start_sequence_number,
        )["ShardIterator"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") not in _GONE:
            raise
        raise ExpiredBatchError(
            f"shard {info.shard_id} no longer holds sequence {info.start_sequence_number} "
            f"(older than the stream's retention): backfill from an export"
        ) from error
    end = int(info.end_sequence_number)
    records: list[dict[str, Any]] = []
    empty_pages = 0
    while iterator and empty_pages < _EMPTY_PAGES_LIMIT:
        page = streams.get_records(ShardIterator=iterator, Limit=1000)
        raw_records = page.get("Records", [])
        empty_pages = 0 if raw_records else empty_pages + 1
        for raw in raw_records:
            if int(raw["dynamodb"]["SequenceNumber"]) > end:
                return records
            records.append(lambda_record(raw, info.stream_arn))
        if records and int(records[-1]["dynamodb"][SEQUENCE_NUMBER]) == end:
            return records
        iterator = page.get("NextShardIterator")
    if not records or int(records[-1]["dynamodb"][SEQUENCE_NUMBER]) < end:
        raise ExpiredBatchError(
            f"shard {info.shard_id} ended before sequence {info.end_sequence_number} "
            f"({len(records)} records read)"
        )
    return records
