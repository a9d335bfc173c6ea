"""The local consumer's checkpoint table: one item per (stream ARN, shard id), as the KCL keeps leases."""

from __future__ import annotations

from typing import Final

from wallet.table import TableSpec

LEASE_KEY: Final = "lease_key"

#: No stream and no TTL: checkpoints must outlive the stream's 24-hour retention to be useful.
CHECKPOINT_TABLE: Final = TableSpec(partition_key=LEASE_KEY)


def lease_key(stream_arn: str, shard_id: str) -> str:
    """The checkpoint item's key: a stream ARN changes when a table is recreated, so both are part of it."""
    return f"{stream_arn}|{shard_id}"
