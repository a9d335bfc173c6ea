"""DynamoDB Streams → the Parquet lake: the decoder, the shared batch loop, the Lambda handler and the
local consumer.

Where things are:

- :mod:`stream_processor.decoder` — records → column lists (pure; the record kinds' dispatch table);
- :mod:`stream_processor.columns` — column lists → validated Arrow tables, double entry;
- :mod:`stream_processor.decoded` — the decoded batch: its quarantine and its name (a batch walks
  decoder → columns → decoded, each once: ``scripts/record_walk.py``);
- :mod:`stream_processor.batch` — decode → write Parquet → report, shared by the two callers;
- :mod:`walletlake.handlers.stream` — the Lambda handler (Powertools logs and EMF metrics);
- :mod:`stream_processor.consumer` — the local poller with per-shard checkpoints;
- :mod:`stream_processor.lambda_records` — Lambda's record shape, and DynamoDB Local's differences;
- :mod:`stream_processor.checkpoints` — checkpoint storage (its items: :mod:`contracts.checkpoint_table`);
- :mod:`stream_processor.shards` — shard lineage (parents before children).

Names are imported lazily, so a caller of one light module (``lambda_records``, ``shards``) does not
load pyarrow and boto3 through this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stream_processor.batch import BatchOutcome, BatchProcessor, process_batch
    from stream_processor.consumer import ConsumeSummary, drain
    from stream_processor.decoded import DecodedBatch
    from stream_processor.decoder import decode_records

__all__ = [
    "BatchOutcome",
    "BatchProcessor",
    "ConsumeSummary",
    "DecodedBatch",
    "decode_records",
    "drain",
    "process_batch",
]

_HOMES = {
    "BatchOutcome": "stream_processor.batch",
    "BatchProcessor": "stream_processor.batch",
    "process_batch": "stream_processor.batch",
    "ConsumeSummary": "stream_processor.consumer",
    "drain": "stream_processor.consumer",
    "DecodedBatch": "stream_processor.decoded",
    "decode_records": "stream_processor.decoder",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'stream_processor' has no attribute {name!r}")
