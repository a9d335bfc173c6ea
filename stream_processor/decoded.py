"""A decoded batch: its lake tables, the quarantine of the records it rejected, and its name.

The last step of a batch's walk (:mod:`stream_processor.decoder` collects,
:mod:`stream_processor.columns` checks and shapes, this module finishes): the rejected records
become quarantine rows, kept whole for replay, and the batch is named by its stream and its first
and last sequence numbers, which name its landing objects (docs/architecture.md, "The lake").
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pyarrow as pa

from contracts.lake_tables import QUARANTINE, TIMESTAMP_MS
from stream_processor.lambda_records import CREATION_TIME, EVENT_SOURCE_ARN, SEQUENCE_NUMBER

#: The stream a batch without any ``eventSourceARN`` is named after.
UNKNOWN_STREAM: Final = "unknown-stream"


@dataclasses.dataclass(frozen=True, slots=True)
class DecodedBatch:
    """One batch, decoded: the lake tables it becomes and what was counted on the way.

    ``event_source_arn`` and ``first_sequence_number`` name the batch's landing objects, so a
    retried batch overwrites its own files (docs/architecture.md, "The lake").
    """

    ledger: pa.Table
    wallets: pa.Table
    quarantine: pa.Table
    records: int
    ttl_expired: int
    ignored: int
    event_source_arn: str
    first_sequence_number: str
    last_sequence_number: str
    ingested_at_ms: int
    first_record_time: float | None
    """``ApproximateCreationDateTime`` of the batch's first (oldest) record, epoch seconds."""

    @property
    def ledger_rows(self) -> int:
        """Ledger rows (entries) this batch produced."""
        return int(self.ledger.num_rows)

    @property
    def wallet_rows(self) -> int:
        """Wallets created in this batch."""
        return int(self.wallets.num_rows)

    @property
    def quarantined(self) -> int:
        """Records sent to quarantine."""
        return int(self.quarantine.num_rows)

    def tables(self) -> dict[str, pa.Table]:
        """The non-empty tables by lake table name: what the writer lands."""
        named = {"ledger": self.ledger, "wallets": self.wallets, "quarantine": self.quarantine}
        return {name: table for name, table in named.items() if table.num_rows}

    def max_record_age_seconds(self) -> float | None:
        """How far behind the stream this batch was when decoded (the first record is the oldest)."""
        if self.first_record_time is None:
            return None
        return max(0.0, self.ingested_at_ms / 1000 - self.first_record_time)


def named_batch(
    ledger: pa.Table,
    wallets: pa.Table,
    rejected: list[tuple[int, str]],
    records: Sequence[Mapping[str, Any]],
    ingested_at_ms: int,
    *,
    ttl_expired: int,
    ignored: int,
) -> DecodedBatch:
    """The batch with its quarantine (``rejected``: positions in ``records``, with reasons) and name."""
    first_sequence, last_sequence = sequence_bounds(records)
    return DecodedBatch(
        ledger=ledger,
        wallets=wallets,
        quarantine=_quarantine(rejected, records, pa.scalar(ingested_at_ms, TIMESTAMP_MS)),
        records=len(records),
        ttl_expired=ttl_expired,
        ignored=ignored,
        event_source_arn=event_source_arn(records),
        first_sequence_number=first_sequence,
        last_sequence_number=last_sequence,
        ingested_at_ms=ingested_at_ms,
        first_record_time=first_record_time(records),
    )


def _quarantine(
    rejected: list[tuple[int, str]], records: Sequence[Mapping[str, Any]], ingested: pa.Scalar
) -> pa.Table:
    if not rejected:
        return QUARANTINE.empty_table()
    return pa.Table.from_arrays(
        [
            pa.array([reason for _, reason in rejected], pa.string()),
            pa.array([raw_json(records[position]) for position, _ in rejected], pa.string()),
            pa.array([sequence_number(records[position]) for position, _ in rejected], pa.string()),
            pa.repeat(ingested, len(rejected)),
        ],
        schema=QUARANTINE,
    )


def raw_json(record: Any) -> str:
    """The record as JSON text, whatever it holds (quarantine keeps it whole for replay)."""
    return json.dumps(record, default=str, separators=(",", ":"), sort_keys=True)


def sequence_number(record: Any) -> str | None:
    """The record's ``SequenceNumber`` when it has a usable one (garbage in a batch may not)."""
    change = record.get("dynamodb") if isinstance(record, Mapping) else None
    value = change.get(SEQUENCE_NUMBER) if isinstance(change, Mapping) else None
    return value if isinstance(value, str) else None


def sequence_bounds(records: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """First and last ``SequenceNumber``; Lambda always sends them, garbage may not."""
    sequences = [sequence_number(record) for record in (records[0], records[-1])] if records else [None, None]
    if sequences[0] is not None and sequences[1] is not None:
        return sequences[0], sequences[1]
    found = [seq for seq in map(sequence_number, records) if seq is not None]
    if found:
        return found[0], found[-1]
    # No record names the batch: name it by its content, which a retry repeats exactly.
    digest = hashlib.sha256("\n".join(map(raw_json, records)).encode()).hexdigest()[:32]
    return f"content-{digest}", f"content-{digest}"


def event_source_arn(records: Sequence[Mapping[str, Any]]) -> str:
    """The stream the batch came from (the first record naming one), or :data:`UNKNOWN_STREAM`."""
    for record in records:
        arn = record.get(EVENT_SOURCE_ARN) if isinstance(record, Mapping) else None
        if isinstance(arn, str) and arn:
            return arn
    return UNKNOWN_STREAM


def first_record_time(records: Sequence[Mapping[str, Any]]) -> float | None:
    """``ApproximateCreationDateTime`` of the first record, epoch seconds, when it has one."""
    try:
        value = records[0]["dynamodb"][CREATION_TIME]
    except (KeyError, TypeError, IndexError):
        return None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
