"""A table's new stream ARN, taken on purpose: what the consumer records and says when it moves.

DynamoDB gives a table a new stream (a new ARN, shards from scratch) when its stream is disabled
and enabled again, as after a restore; the old stream's records stay readable for 24 hours and
never reach the new one. The consumer (:mod:`stream_processor.consumer`) drains the old stream
before it reads the new one; this module holds the parts of that which are not reading: recording
the switch in the checkpoint table (conditional on the stream recorded before, so two consumers
cannot both switch unseen), the log line, and the one-line refusal when the old stream cannot be
drained.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from stream_processor.checkpoints import CheckpointStore, StreamChoice

_logger = logging.getLogger(__name__)

#: The consumer's flag that records a switch without draining the old stream.
ACCEPT_FLAG = "--accept-stream-switch"


def record_switch(
    store: CheckpointStore, table: str, old: str, new: str, drained: int, *, accepted: bool = False
) -> dict[str, Any]:
    """Record that ``table``'s consumer moved from ``old`` to ``new`` having drained ``drained``
    records of ``old`` (none when ``accepted`` without draining), log it, and return it as the
    run's summary holds it."""
    store.record_stream(StreamChoice(table, new, old, int(time.time() * 1000), drained), expected=old)
    _logger.warning(
        "stream switch: table %s moved from %s to %s; %s",
        table,
        old,
        new,
        f"accepted without draining the old stream ({ACCEPT_FLAG})"
        if accepted
        else f"the old stream was read to its end first ({drained} records)",
    )
    return {"from": old, "to": new, "drained_records": drained}


def undrained_message(table: str, old: str, new: str, why: str) -> str:
    """The one line a consumer stops with when the old stream cannot be drained.

    Examples
    --------
    >>> undrained_message("wallets", "arn:old", "arn:new", "gone")[:60]
    'table wallets: its stream changed from arn:old to arn:new, a'
    """
    return (
        f"table {table}: its stream changed from {old} to {new}, and the old stream cannot be drained "
        f"({why}): its unread records would be lost; bring them back (docs/operations.md, section 4), "
        f"then run `walletlake consume {ACCEPT_FLAG}`"
    )
