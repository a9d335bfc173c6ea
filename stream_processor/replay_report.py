"""What a replay found and did, whatever it replayed (quarantine, dead letters, a stream range, an
export): one report, printed by ``walletlake replay``."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

from contracts.lake_layout import partition_day

if TYPE_CHECKING:
    from lake.landing_log import LandingRecord
    from lake.writer import LandingObject
    from stream_processor.decoded import DecodedBatch

#: The lake tables a replay writes; decoding failures stay in (or go back to) quarantine instead.
REPLAYED_TABLES: Final = ("ledger", "wallets")


@dataclasses.dataclass
class ReplayReport:
    """What a replay found and did; ``as_dict`` is what ``walletlake replay --json`` prints."""

    source: str
    dry_run: bool
    sources_read: int = 0
    records: int = 0
    ledger_rows: int = 0
    wallets: int = 0
    ttl_expired: int = 0
    ignored: int = 0
    still_failing: int = 0
    expired: int = 0
    unreadable: int = 0
    files_written: int = 0
    sources_cleared: int = 0
    days: set[dt.date] = dataclasses.field(default_factory=set)
    problems: list[str] = dataclasses.field(default_factory=list)

    def add_decoded(self, decoded: DecodedBatch) -> None:
        """Count one decoded batch."""
        self.records += decoded.records
        self.ledger_rows += decoded.ledger_rows
        self.wallets += decoded.wallet_rows
        self.ttl_expired += decoded.ttl_expired
        self.ignored += decoded.ignored
        self.still_failing += decoded.quarantined

    def add_written(self, objects: Iterable[LandingObject]) -> None:
        """Count objects written and the lake days they touched (to compact and reconcile again)."""
        for written in objects:
            self.files_written += 1
            if written.table == "ledger":
                self.days.add(written.day)

    def add_landed(self, record: LandingRecord | None) -> None:
        """Count an Iceberg landing's data files and the lake days they touched."""
        for file in record.files if record is not None else ():
            self.files_written += 1
            if file.table == "ledger" and (day := partition_day(file.path)) is not None:
                self.days.add(day)

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for logs and JSON."""
        values = dataclasses.asdict(self)
        values["days"] = sorted(day.isoformat() for day in self.days)
        return values
