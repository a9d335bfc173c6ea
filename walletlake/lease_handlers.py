"""The compaction lease's Lambda entry point (:mod:`lake.compaction_lease`) for the state machines.

Event ``{"action": "acquire", "owner": <execution id>, "ttl_seconds": N}`` or
``{"action": "release", "owner": <execution id>}``. A busy lease raises
:class:`~lake.compaction_lease.LeaseBusyError`, which Lambda reports as the error type
``LeaseBusyError``: the state machines match it in ``Retry`` and ``Catch``.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import TYPE_CHECKING, Any, Final

import boto3

from contracts.settings import DEPLOYED_VARIABLES, LEASE_TABLE_VARIABLE, HandlerSettings
from lake.compaction_lease import acquire, release

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

REQUIRED_VARIABLES: Final = (*DEPLOYED_VARIABLES, LEASE_TABLE_VARIABLE)
SETTINGS: Final = HandlerSettings(REQUIRED_VARIABLES)


@functools.cache
def _client(region: str) -> DynamoDBClient:
    return boto3.client("dynamodb", region_name=region)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Take or give back the compaction lease for the execution named in the event."""
    settings = SETTINGS()
    client = _client(settings.region)
    owner = str(event["owner"])
    action = event.get("action")
    if action == "acquire":
        lease = acquire(
            client,
            settings.lease_table,
            owner=owner,
            ttl_seconds=int(event["ttl_seconds"]),
            now=dt.datetime.now(dt.UTC),
        )
        return lease.to_dict()
    if action == "release":
        return {"owner": owner, "released": release(client, settings.lease_table, owner=owner)}
    raise ValueError(f'action must be "acquire" or "release", not {action!r}')
