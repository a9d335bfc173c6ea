"""What the deployed functions' real callers send them: Lambda's DynamoDB Streams events and API
Gateway's HTTP API events, shaped as those services shape them."""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any, Final


def stream_event(
    stream_arn: str, shard_id: str, records: list[dict[str, Any]], *, windowed: bool
) -> dict[str, Any]:
    """A DynamoDB Streams event of one shard's records, as Lambda sends it.

    ``windowed``: the mapping has a tumbling window, so the event also names the shard, the
    stream, the window and its state (Lambda's "Time windows" of DynamoDB event sources).
    """
    from stream_processor.lambda_records import lambda_record

    event: dict[str, Any] = {"Records": [lambda_record(record, stream_arn) for record in records]}
    if windowed:
        start = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
        event.update(
            {
                "window": {
                    "start": start.isoformat().replace("+00:00", "Z"),
                    "end": (start + dt.timedelta(minutes=1)).isoformat().replace("+00:00", "Z"),
                },
                "state": {},
                "shardId": shard_id,
                "eventSourceARN": stream_arn,
                "isFinalInvokeForWindow": False,
                "isWindowTerminatedEarly": False,
            }
        )
    return event


#: The IAM principal an event is authorized as unless told otherwise.
DEFAULT_EVENT_PRINCIPAL: Final = "arn:aws:iam::123456789012:role/caller"


def http_api_event(
    method: str, path: str, body: Mapping[str, Any] | None, principal: str = DEFAULT_EVENT_PRINCIPAL
) -> dict[str, Any]:
    """An API Gateway HTTP API event (payload format 2.0), IAM-authorized for ``principal``, as the
    integration sends it (the function checks that principal against its caller map)."""
    now = dt.datetime.now(dt.UTC)
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json",
            "host": "api.example.com",
            "user-agent": "deploy-check",
        },
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "deploycheck",
            "authorizer": {"iam": {"accountId": "123456789012", "userArn": principal}},
            "domainName": "api.example.com",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.1",
                "userAgent": "deploy-check",
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(time.time() * 1000),
        },
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }
