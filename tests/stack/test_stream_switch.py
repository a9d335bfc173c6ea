"""A new stream ARN is never silent (docs/operations.md, "A new stream ARN").

The table's stream is disabled and enabled again while the old stream still holds records the
consumer has not read (as after a restore): ``walletlake consume``, as typed, drains the old stream
to its end, then moves to the new one and records the switch; every entry is in the lake once.
An old stream it cannot drain stops it with one line and exit 1, nothing of the new stream read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from support.stream_records import TableWriter, assert_exact_ledger, poll_until

from contracts.checkpoint_table import CheckpointAttr, stream_key
from contracts.settings import Settings
from lake.iceberg_catalog import load_table, open_catalog
from stream_processor.consumer import ConsumeError, drain

pytestmark = pytest.mark.stack

_BIN = str(Path(sys.executable).parent)


def walletlake(settings: Settings, *argv: str) -> subprocess.CompletedProcess[str]:
    """The command line as an operator types it, in its own process."""
    environ = {**os.environ, **settings.to_env(), "PATH": f"{_BIN}:{os.environ.get('PATH', '')}"}
    return subprocess.run(
        ["walletlake", *argv], env=environ, capture_output=True, text=True, check=False, timeout=300
    )


def latest_stream(settings: Settings) -> str:
    table = boto3.client("dynamodb", region_name=settings.region).describe_table(TableName=settings.table)
    return str(table["Table"].get("LatestStreamArn", ""))


def renew_the_stream(settings: Settings) -> tuple[str, str]:
    """Disable the table's stream and enable it again (what a restore's new stream looks like to
    the consumer); returns (old, new) ARNs."""
    dynamodb = boto3.client("dynamodb", region_name=settings.region)
    old = latest_stream(settings)
    dynamodb.update_table(TableName=settings.table, StreamSpecification={"StreamEnabled": False})
    poll_until(
        lambda: (
            not dynamodb.describe_table(TableName=settings.table)["Table"]
            .get("StreamSpecification", {})
            .get("StreamEnabled", False)
        ),
        timeout=30,
        what="the stream disabled",
    )
    dynamodb.update_table(
        TableName=settings.table,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    new = poll_until(lambda: (arn := latest_stream(settings)) != old and arn, timeout=30, what="a new stream")
    return old, str(new)


def recorded_stream(settings: Settings) -> dict[str, Any]:
    item = boto3.client("dynamodb", region_name=settings.region).get_item(
        TableName=settings.checkpoint_table,
        Key={CheckpointAttr.LEASE_KEY: {"S": stream_key(settings.table)}},
        ConsistentRead=True,
    )["Item"]
    return {name: next(iter(value.values())) for name, value in item.items()}


def ledger(settings: Settings) -> Any:
    return load_table(settings, "ledger", open_catalog(settings)).scan().to_arrow()


def test_consume_drains_the_old_stream_before_moving_to_the_new_one(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(lake_format="iceberg")
    writer = TableWriter(settings.table)
    writer.workload(wallets=3, deposits=3, transfers=3)
    first = walletlake(settings, "consume", "--json")
    assert first.returncode == 0, first.stdout + first.stderr
    # GIVEN records the consumer never read on the table's stream, which is then disabled and
    # enabled again, and more records on the new stream
    writer.workload(wallets=2, deposits=3, transfers=4)
    unread = len(writer.model.entries)
    old, new = renew_the_stream(settings)
    writer.workload(wallets=2, deposits=2, transfers=2)

    # WHEN the operator consumes, as typed
    done = walletlake(settings, "consume")
    again = walletlake(settings, "consume", "--json")

    # THEN the old stream was drained first, the switch is recorded and said, every entry is once
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"switched    from {old} (" in done.stdout
    assert f"records drained first) to {new}" in done.stdout
    record = recorded_stream(settings)
    assert (record[CheckpointAttr.STREAM_ARN], record[CheckpointAttr.PREVIOUS_STREAM_ARN]) == (new, old)
    assert int(record[CheckpointAttr.DRAINED_RECORDS]) > 0
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["stream_switch"] is None
    assert len(writer.model.entries) > unread
    assert_exact_ledger(ledger(settings), writer.model.entries)


class StreamGone:
    """A dynamodbstreams client for which one stream no longer exists (past its 24 hours)."""

    def __init__(self, client: Any, gone: str) -> None:
        self._client = client
        self._gone = gone

    def describe_stream(self, **kwargs: Any) -> Any:
        if kwargs.get("StreamArn") == self._gone:
            raise ClientError(
                {"Error": {"Code": "ResourceNotFoundException", "Message": "gone"}}, "DescribeStream"
            )
        return self._client.describe_stream(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class SessionWithoutStream:
    def __init__(self, settings: Settings, gone: str) -> None:
        self._session = boto3.Session(region_name=settings.region)
        self._gone = gone

    def client(self, service: str) -> Any:
        client = self._session.client(service)  # type: ignore[call-overload]
        return StreamGone(client, self._gone) if service == "dynamodbstreams" else client


def test_an_old_stream_that_cannot_be_drained_stops_the_consumer_in_one_line(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(lake_format="iceberg")
    writer = TableWriter(settings.table)
    writer.workload(wallets=2, deposits=2, transfers=1)
    drain(settings, batch_size=50)
    writer.workload(wallets=2, deposits=2, transfers=2)
    old, new = renew_the_stream(settings)
    writer.workload(wallets=1, deposits=1, transfers=0)

    # WHEN the old stream is gone when the consumer looks for it
    with pytest.raises(ConsumeError) as refused:
        drain(settings, batch_size=50, session=SessionWithoutStream(settings, old))  # type: ignore[arg-type]
    # THEN it refuses in one line naming both streams and the way forward, and switched nothing
    message = str(refused.value)
    assert "\n" not in message
    assert f"changed from {old} to {new}" in message
    assert "ResourceNotFoundException" in message
    assert "`walletlake consume --accept-stream-switch`" in message
    assert recorded_stream(settings)[CheckpointAttr.STREAM_ARN] == old

    # WHEN the operator accepts the switch (after a backfill of the old stream's records)
    accepted = walletlake(settings, "consume", "--accept-stream-switch")
    # THEN the switch is recorded without draining, and the new stream is read
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert f"switched    from {old} (0 records drained first) to {new}" in accepted.stdout
    record = recorded_stream(settings)
    assert (record[CheckpointAttr.STREAM_ARN], int(record[CheckpointAttr.DRAINED_RECORDS])) == (new, 0)


def test_consume_follow_moves_to_the_new_stream_once_the_old_one_is_read(
    make_settings: Callable[..., Settings],
) -> None:
    import threading

    settings = make_settings(lake_format="iceberg")
    writer = TableWriter(settings.table)
    writer.workload(wallets=2, deposits=2, transfers=2)
    stop = threading.Event()
    follower = threading.Thread(
        target=lambda: drain(settings, batch_size=5, follow=True, should_stop=stop.is_set, poll_interval=0.1)
    )
    follower.start()
    try:
        # GIVEN a follower reading the table's stream, which is disabled and enabled again while
        # writes go on before and after
        writer.workload(wallets=2, deposits=2, transfers=3)
        old, new = renew_the_stream(settings)
        writer.workload(wallets=2, deposits=2, transfers=2)
        # THEN it reads the old stream to its end, moves to the new one and records the switch
        poll_until(
            lambda: recorded_stream(settings)[CheckpointAttr.STREAM_ARN] == new, timeout=60, what="the switch"
        )
        poll_until(
            lambda: (
                walletlake(settings, "commit").returncode == 0
                and ledger(settings).num_rows == len(writer.model.entries)
            ),
            timeout=60,
            what="every entry committed",
        )
    finally:
        stop.set()
        follower.join(timeout=60)
    assert recorded_stream(settings)[CheckpointAttr.PREVIOUS_STREAM_ARN] == old
    assert_exact_ledger(ledger(settings), writer.model.entries)
