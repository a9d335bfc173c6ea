"""Reading and moving the local consumer's per-shard checkpoints (DynamoDB adapter).

Every move is a conditional write on the sequence number the consumer last read, so two consumers
draining the same shard cannot silently overwrite each other's progress: the second one stops with
:class:`CheckpointConflictError` instead.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from contracts.checkpoint_table import CheckpointAttr, lease_key, stream_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class CheckpointConflictError(RuntimeError):
    """The checkpoint moved under this consumer: another consumer is reading the same shard."""


@dataclasses.dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where a shard stands (see :mod:`contracts.checkpoint_table` for the fields' meaning)."""

    stream_arn: str
    shard_id: str
    sequence_number: str | None = None
    pending_through: str | None = None
    shard_end: bool = False
    records: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class StreamChoice:
    """The stream a table's consumer reads, and the switch that brought it there (if any)."""

    table: str
    stream_arn: str
    previous_stream_arn: str | None = None
    switched_at_ms: int | None = None
    drained_records: int = 0


class CheckpointStore:
    """Checkpoints of one consumer in the table named by ``Settings.checkpoint_table``."""

    def __init__(self, dynamodb: DynamoDBClient, table: str) -> None:
        self._client = dynamodb
        self.table = table

    def load(self, stream_arn: str, shard_id: str) -> Checkpoint:
        """The shard's checkpoint (a blank one when it was never read), read strongly consistently."""
        item = self._client.get_item(
            TableName=self.table,
            Key={CheckpointAttr.LEASE_KEY: {"S": lease_key(stream_arn, shard_id)}},
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return Checkpoint(stream_arn=stream_arn, shard_id=shard_id)
        return Checkpoint(
            stream_arn=stream_arn,
            shard_id=shard_id,
            sequence_number=_string(item, CheckpointAttr.SEQUENCE_NUMBER),
            pending_through=_string(item, CheckpointAttr.PENDING_THROUGH),
            shard_end=bool(item.get(CheckpointAttr.SHARD_END, {}).get("BOOL", False)),
            records=int(item.get(CheckpointAttr.RECORDS, {}).get("N", "0")),
        )

    def mark_pending(self, checkpoint: Checkpoint, through: str) -> Checkpoint:
        """Record, before writing, that a batch through ``through`` is about to land."""
        self._update(checkpoint, "SET #pending = :pending", {":pending": {"S": through}})
        return dataclasses.replace(checkpoint, pending_through=through)

    def commit(
        self, checkpoint: Checkpoint, sequence_number: str, records: int, *, shard_end: bool = False
    ) -> Checkpoint:
        """Move the checkpoint past a batch whose Parquet is written, and clear its pending mark."""
        total = checkpoint.records + records
        self._update(
            checkpoint,
            "SET #seq = :seq, #records = :records, #end = :end REMOVE #pending",
            {":seq": {"S": sequence_number}, ":records": {"N": str(total)}, ":end": {"BOOL": shard_end}},
        )
        return dataclasses.replace(
            checkpoint,
            sequence_number=sequence_number,
            pending_through=None,
            shard_end=shard_end,
            records=total,
        )

    def finish_shard(self, checkpoint: Checkpoint) -> Checkpoint:
        """Mark a closed shard as read to its end, so later drains skip it without a request."""
        self._update(checkpoint, "SET #end = :end REMOVE #pending", {":end": {"BOOL": True}})
        return dataclasses.replace(checkpoint, shard_end=True, pending_through=None)

    def load_stream(self, table: str) -> StreamChoice | None:
        """The stream the table's consumer last read (None before its first run)."""
        item = self._client.get_item(
            TableName=self.table,
            Key={CheckpointAttr.LEASE_KEY: {"S": stream_key(table)}},
            ConsistentRead=True,
        ).get("Item")
        arn = _string(item or {}, CheckpointAttr.STREAM_ARN)
        if arn is None:
            return None
        switched = (item or {}).get(CheckpointAttr.SWITCHED_AT, {}).get("N")
        return StreamChoice(
            table=table,
            stream_arn=arn,
            previous_stream_arn=_string(item or {}, CheckpointAttr.PREVIOUS_STREAM_ARN),
            switched_at_ms=int(switched) if switched is not None else None,
            drained_records=int((item or {}).get(CheckpointAttr.DRAINED_RECORDS, {}).get("N", "0")),
        )

    def record_stream(self, choice: StreamChoice, expected: str | None) -> StreamChoice:
        """Record the stream the consumer reads from now on, conditional on the one it read before
        (``expected``; None: none recorded), so two consumers cannot both switch unseen."""
        values: dict[str, Any] = {
            ":arn": {"S": choice.stream_arn},
            ":drained": {"N": str(choice.drained_records)},
        }
        update = "SET #arn = :arn, #drained = :drained"
        names = {"#arn": CheckpointAttr.STREAM_ARN, "#drained": CheckpointAttr.DRAINED_RECORDS}
        if choice.previous_stream_arn is not None:
            update += ", #previous = :previous, #switched = :switched"
            names.update(
                {"#previous": CheckpointAttr.PREVIOUS_STREAM_ARN, "#switched": CheckpointAttr.SWITCHED_AT}
            )
            values[":previous"] = {"S": choice.previous_stream_arn}
            values[":switched"] = {"N": str(choice.switched_at_ms or int(time.time() * 1000))}
        if expected is None:
            condition = "attribute_not_exists(#arn)"
        else:
            condition = "#arn = :expected"
            values[":expected"] = {"S": expected}
        try:
            self._client.update_item(
                TableName=self.table,
                Key={CheckpointAttr.LEASE_KEY: {"S": stream_key(choice.table)}},
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            raise CheckpointConflictError(
                f"the stream recorded for table {choice.table} in {self.table} changed under this "
                f"consumer (expected {expected or 'none'}); another `walletlake consume` is reading it: "
                "stop one of them"
            ) from error
        return choice

    def _update(self, checkpoint: Checkpoint, expression: str, values: dict[str, Any]) -> None:
        names = {
            "#seq": CheckpointAttr.SEQUENCE_NUMBER,
            "#pending": CheckpointAttr.PENDING_THROUGH,
            "#end": CheckpointAttr.SHARD_END,
            "#records": CheckpointAttr.RECORDS,
            "#arn": CheckpointAttr.STREAM_ARN,
            "#shard": CheckpointAttr.SHARD_ID,
            "#updated": CheckpointAttr.UPDATED_AT,
        }
        values = {
            **values,
            ":arn": {"S": checkpoint.stream_arn},
            ":shard": {"S": checkpoint.shard_id},
            ":updated": {"N": str(int(time.time() * 1000))},
        }
        set_common = "#arn = :arn, #shard = :shard, #updated = :updated"
        set_part, _, remove_part = expression.partition(" REMOVE ")
        update = f"{set_part}, {set_common}" + (f" REMOVE {remove_part}" if remove_part else "")
        if checkpoint.sequence_number is None:
            condition = "attribute_not_exists(#seq)"
        else:
            condition = "#seq = :expected"
            values[":expected"] = {"S": checkpoint.sequence_number}
        used = {name: attr for name, attr in names.items() if name in update or name in condition}
        try:
            self._client.update_item(
                TableName=self.table,
                Key={CheckpointAttr.LEASE_KEY: {"S": lease_key(checkpoint.stream_arn, checkpoint.shard_id)}},
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=used,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            raise CheckpointConflictError(
                f"the checkpoint of shard {checkpoint.shard_id} in table {self.table} moved under this "
                f"consumer (expected {checkpoint.sequence_number or 'none'}); another `walletlake consume` "
                "is reading the same stream: stop one of them"
            ) from error


def _string(item: dict[str, Any], name: str) -> str | None:
    value = item.get(name, {}).get("S")
    return value if isinstance(value, str) else None
