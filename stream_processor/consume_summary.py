"""What one run of the local consumer did (:func:`stream_processor.consumer.drain`), added up over
its batches: the summary ``walletlake consume`` prints, and the stream switch it made, if any."""

from __future__ import annotations

import dataclasses
from typing import Any

from stream_processor.batch import BatchOutcome


@dataclasses.dataclass
class ConsumeSummary:
    """What one run of the consumer did, added up over its batches."""

    stream_arn: str | None = None
    records: int = 0
    ledger_rows: int = 0
    wallets: int = 0
    ttl_expired: int = 0
    ignored: int = 0
    quarantined: int = 0
    files_written: int = 0
    bytes_written: int = 0
    batches: int = 0
    replayed_batches: int = 0
    shards: int = 0
    seconds: float = 0.0
    unconfirmed_shards: list[str] = dataclasses.field(default_factory=list)
    trimmed_shards: list[str] = dataclasses.field(default_factory=list)
    #: The switch to the table's new stream this run made: ``{"from", "to", "drained_records"}``.
    stream_switch: dict[str, Any] | None = None

    def add(self, outcome: BatchOutcome) -> None:
        """Count one landed batch."""
        self.records += outcome.records
        self.ledger_rows += outcome.ledger_rows
        self.wallets += outcome.wallets
        self.ttl_expired += outcome.ttl_expired
        self.ignored += outcome.ignored
        self.quarantined += outcome.quarantined
        self.files_written += outcome.files_written
        self.bytes_written += outcome.bytes_written
        self.batches += 1

    def merge(self, other: ConsumeSummary) -> None:
        """Add another run's counts (the old stream's drain, before a switch)."""
        for name in ("records", "ledger_rows", "wallets", "ttl_expired", "ignored", "quarantined"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("files_written", "bytes_written", "batches", "replayed_batches"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def complete(self) -> bool:
        """True when every shard was confirmed drained and nothing was lost to trimming."""
        return not self.unconfirmed_shards and not self.trimmed_shards

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for ``--json`` and logs."""
        values = dataclasses.asdict(self)
        values["seconds"] = round(self.seconds, 3)
        values["records_per_second"] = round(self.records / self.seconds) if self.seconds > 0 else 0
        return values
