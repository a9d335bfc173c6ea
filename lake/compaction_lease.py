"""One compaction at a time: the lease the hourly and nightly runs hold while they compact.

The hourly state machine compacts the closed units of today and finishes yesterday's last hour;
the nightly one compacts what is left of yesterday. Both rewrite the same partitions, so their
compaction steps must never overlap. Each takes this lease (one item in a small DynamoDB table)
before planning units and gives it back after the last unit, on success and on failure.

Why a lease and not Step Functions alone: Step Functions has no concurrency control across two
state machines. Why it is safe:

* **Taking it** is one conditional ``PutItem``: it succeeds when nobody holds the lease, when the
  holder's lease has expired, or when the caller already holds it (a retried task of the same
  execution); otherwise :class:`LeaseBusyError`, which the state machines retry (nightly) or end
  on (hourly: the next hour finds the same units still to do).
* **Expiry** bounds a holder that can no longer release (an execution stopped by its timeout
  runs no ``Catch``): the lease lasts at most the holder's state machine timeout.
* **Giving it back** is a ``DeleteItem`` conditional on the owner, so a late release never frees
  a lease someone else took after expiry.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from contracts.lease_table import ACQUIRED_AT, COMPACTION_LEASE, EXPIRES_AT, LEASE_KEY, OWNER

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class LeaseBusyError(RuntimeError):
    """Another run holds the lease; the message names it and when its lease expires."""


@dataclasses.dataclass(frozen=True, slots=True)
class Lease:
    """A held lease."""

    name: str
    owner: str
    expires_at: int

    def to_dict(self) -> dict[str, object]:
        """What the state machine carries."""
        return {"name": self.name, "owner": self.owner, "expires_at": self.expires_at}


def acquire(
    dynamodb: DynamoDBClient,
    table: str,
    *,
    owner: str,
    ttl_seconds: int,
    now: dt.datetime,
    name: str = COMPACTION_LEASE,
) -> Lease:
    """Take the lease for ``ttl_seconds``; :class:`LeaseBusyError` while another owner holds it."""
    if ttl_seconds < 1:
        raise ValueError(f"ttl_seconds must be positive, not {ttl_seconds}")
    now_s = int(now.timestamp())
    expires = now_s + ttl_seconds
    try:
        dynamodb.put_item(
            TableName=table,
            Item={
                LEASE_KEY: {"S": name},
                OWNER: {"S": owner},
                EXPIRES_AT: {"N": str(expires)},
                ACQUIRED_AT: {"N": str(now_s)},
            },
            ConditionExpression="attribute_not_exists(#k) OR #e < :now OR #o = :owner",
            ExpressionAttributeNames={"#k": LEASE_KEY, "#e": EXPIRES_AT, "#o": OWNER},
            ExpressionAttributeValues={":now": {"N": str(now_s)}, ":owner": {"S": owner}},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except ClientError as error:
        if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
        held: dict[str, Any] = dict(error.response.get("Item") or {})  # type: ignore[call-overload]
        holder = held.get(OWNER, {}).get("S", "another run")
        until = held.get(EXPIRES_AT, {}).get("N", "?")
        raise LeaseBusyError(f"lease {name!r} is held by {holder} until {until} (epoch s)") from None
    return Lease(name=name, owner=owner, expires_at=expires)


def release(dynamodb: DynamoDBClient, table: str, *, owner: str, name: str = COMPACTION_LEASE) -> bool:
    """Give the lease back; False when ``owner`` no longer held it (expired and taken, or gone)."""
    try:
        dynamodb.delete_item(
            TableName=table,
            Key={LEASE_KEY: {"S": name}},
            ConditionExpression="#o = :owner",
            ExpressionAttributeNames={"#o": OWNER},
            ExpressionAttributeValues={":owner": {"S": owner}},
        )
    except ClientError as error:
        if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
        return False
    return True
