"""The shape of a DynamoDB Streams record as Lambda delivers it, and how the local poller gets there.

The pipeline only ever sees what AWS Lambda sends for a DynamoDB event source (``eventName``,
``eventSourceARN``, ``dynamodb`` with ``Keys``/``NewImage``/``OldImage`` in DynamoDB JSON,
``SequenceNumber``, ``ApproximateCreationDateTime`` in epoch seconds, and ``userIdentity`` on TTL
deletions). The local poller reads the ``dynamodbstreams`` API through boto3 instead, whose answers
differ in a few ways; :func:`lambda_record` absorbs them here, in one place, so the decoder has no
"local mode".

Differences absorbed (docs/architecture.md, "The system in one picture"):

- DynamoDB Local sends TTL deletions with ``eventName`` ``UNKNOWN_TO_SDK_VERSION``, an ``OldImage``
  and no ``userIdentity``; AWS sends ``REMOVE`` with ``userIdentity`` of the DynamoDB service.
- boto3 parses ``ApproximateCreationDateTime`` into a ``datetime``; Lambda passes epoch seconds.
- boto3 decodes binary attributes (``B``/``BS``) to ``bytes``; Lambda passes them base64-encoded.
- boto3's records carry no ``eventSourceARN``; Lambda's do (landing object names come from it).
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping
from typing import Any, Final

EVENT_INSERT: Final = "INSERT"
EVENT_MODIFY: Final = "MODIFY"
EVENT_REMOVE: Final = "REMOVE"
#: What DynamoDB Local's Java SDK calls the TTL deletion event it cannot name.
EVENT_LOCAL_TTL: Final = "UNKNOWN_TO_SDK_VERSION"

#: The ``userIdentity`` AWS puts on deletions made by the TTL process (and only on those).
TTL_IDENTITY_TYPE: Final = "Service"
TTL_IDENTITY_PRINCIPAL: Final = "dynamodb.amazonaws.com"

NEW_IMAGE: Final = "NewImage"
OLD_IMAGE: Final = "OldImage"
SEQUENCE_NUMBER: Final = "SequenceNumber"
CREATION_TIME: Final = "ApproximateCreationDateTime"
EVENT_SOURCE_ARN: Final = "eventSourceARN"


def ttl_identity() -> dict[str, str]:
    """A fresh copy of the ``userIdentity`` AWS attaches to TTL deletions."""
    return {"type": TTL_IDENTITY_TYPE, "principalId": TTL_IDENTITY_PRINCIPAL}


def lambda_record(raw: Mapping[str, Any], stream_arn: str) -> dict[str, Any]:
    """One record of a boto3 ``get_records`` answer, reshaped exactly as Lambda would deliver it.

    Examples
    --------
    >>> raw = {"eventName": "UNKNOWN_TO_SDK_VERSION", "dynamodb": {"OldImage": {}, "SequenceNumber": "1"}}
    >>> record = lambda_record(raw, "arn:aws:dynamodb:ddblocal:0:table/t/stream/x")
    >>> record["eventName"], record["userIdentity"]["principalId"]
    ('REMOVE', 'dynamodb.amazonaws.com')
    """
    record = dict(raw)
    change = dict(record.get("dynamodb") or {})
    created = change.get(CREATION_TIME)
    if isinstance(created, dt.datetime):
        change[CREATION_TIME] = _epoch_seconds(created)
    for name in ("Keys", NEW_IMAGE, OLD_IMAGE):
        image = change.get(name)
        if isinstance(image, Mapping) and _has_binary(image):
            change[name] = {key: _lambda_value(value) for key, value in image.items()}
    if (
        record.get("eventName") == EVENT_LOCAL_TTL
        and OLD_IMAGE in change
        and NEW_IMAGE not in change
        and "userIdentity" not in record
    ):
        record["eventName"] = EVENT_REMOVE
        record["userIdentity"] = ttl_identity()
    record["dynamodb"] = change
    record[EVENT_SOURCE_ARN] = stream_arn
    return record


def _epoch_seconds(moment: dt.datetime) -> int | float:
    """Lambda's number: whole seconds when the moment has no fraction (the usual case)."""
    seconds = moment.timestamp()
    return int(seconds) if seconds.is_integer() else seconds


def _has_binary(image: Mapping[str, Any]) -> bool:
    return any(
        isinstance(value, Mapping) and ("B" in value or "BS" in value or "M" in value or "L" in value)
        for value in image.values()
    )


def _lambda_value(value: Any) -> Any:
    """DynamoDB JSON as Lambda serialises it: binary as base64 text, recursively."""
    if not isinstance(value, Mapping):
        return value
    if "B" in value:
        return {"B": _base64(value["B"])}
    if "BS" in value:
        return {"BS": [_base64(item) for item in value["BS"]]}
    if "M" in value:
        return {"M": {key: _lambda_value(item) for key, item in value["M"].items()}}
    if "L" in value:
        return {"L": [_lambda_value(item) for item in value["L"]]}
    return value


def _base64(data: Any) -> Any:
    return base64.b64encode(data).decode("ascii") if isinstance(data, bytes | bytearray) else data
