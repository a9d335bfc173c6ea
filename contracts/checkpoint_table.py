"""The local consumer's checkpoint table: one item per (stream ARN, shard id), as the KCL keeps leases.

Item attributes (all but the key optional, so an item can be created by its first update):

- ``lease_key`` S: :func:`lease_key`;
- ``stream_arn`` S, ``shard_id`` S: the same, readable by an operator;
- ``sequence_number`` S: the last record whose batch is in the lake; the consumer resumes after it;
- ``pending_through`` S: set before a batch's Parquet is written, removed when its checkpoint is
  saved. A consumer that finds it resumes by rereading *exactly* the records through it, so the
  batch it rewrites has the same first record, hence the same object names, and overwrites what
  the interrupted run may have written instead of landing a differently cut copy;
- ``shard_end`` BOOL: the shard is closed and was read to its end (nothing more will come);
- ``records`` N: records checkpointed in this shard so far; ``updated_at`` N: epoch ms.

One more item per table, keyed :func:`stream_key`, names the stream the consumer reads
(``stream_arn``) and, once the table's stream changed (disabled and enabled again, a restored
table), the stream it left (``previous_stream_arn``), when (``switched_at`` N, epoch ms) and how
many records of the old stream it drained first (``drained_records`` N): a new stream ARN is
never taken silently (:mod:`stream_processor.consumer`).
"""

from __future__ import annotations

from typing import Final

from contracts.wallets_table import TableSpec

LEASE_KEY: Final = "lease_key"

#: No stream and no TTL: checkpoints must outlive the stream's 24-hour retention to be useful.
CHECKPOINT_TABLE: Final = TableSpec(partition_key=LEASE_KEY)


class CheckpointAttr:
    """Attribute names of a checkpoint item; one spelling, imported everywhere."""

    LEASE_KEY: Final = LEASE_KEY
    STREAM_ARN: Final = "stream_arn"
    SHARD_ID: Final = "shard_id"
    SEQUENCE_NUMBER: Final = "sequence_number"
    PENDING_THROUGH: Final = "pending_through"
    SHARD_END: Final = "shard_end"
    RECORDS: Final = "records"
    UPDATED_AT: Final = "updated_at"
    PREVIOUS_STREAM_ARN: Final = "previous_stream_arn"
    SWITCHED_AT: Final = "switched_at"
    DRAINED_RECORDS: Final = "drained_records"


def lease_key(stream_arn: str, shard_id: str) -> str:
    """The checkpoint item's key: a stream ARN changes when a table is recreated, so both are part of it."""
    return f"{stream_arn}|{shard_id}"


def stream_key(table: str) -> str:
    """The key of the item naming the stream a table's consumer reads: no lease key has this shape
    (theirs start with a stream ARN).

    Examples
    --------
    >>> stream_key("wallets")
    'stream-of|wallets'
    """
    return f"stream-of|{table}"
