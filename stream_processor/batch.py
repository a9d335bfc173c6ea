"""The one loop the Lambda handler and the local poller share: decode a batch → write Parquet → report.

:class:`BatchProcessor` is a template method (as Powertools' ``BasePartialProcessor`` owns
prepare → process → clean): :meth:`BatchProcessor.process` fixes the order of the steps, and the
two callers fill in only what differs between them — the Lambda handler turns a failed write into a
``batchItemFailures`` answer and reports CloudWatch metrics; the local poller marks its checkpoint
pending before the write and moves it after.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import boto3
import pyarrow as pa

from contracts.settings import Settings
from lake.iceberg_landing import land_batch
from lake.writer import LandingObject, LandingWriteError, write_landing
from stream_processor.decoded import DecodedBatch
from stream_processor.decoder import decode_records

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class BatchOutcome:
    """What one batch did. ``failure`` is set (and nothing of the batch is left in S3) when the
    landing write failed: the batch must be retried from ``first_sequence_number``."""

    records: int
    ledger_rows: int
    wallets: int
    ttl_expired: int
    ignored: int
    quarantined: int
    files_written: int
    bytes_written: int
    event_source_arn: str
    first_sequence_number: str
    last_sequence_number: str
    max_record_age_seconds: float | None
    seconds: float
    keys: tuple[str, ...] = ()
    failure: str | None = None
    #: Records an earlier attempt of this batch already landed (Iceberg lake: skipped, not rewritten).
    already_landed: int = 0

    @property
    def ok(self) -> bool:
        """True when the batch's rows are in the lake."""
        return self.failure is None

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for logs and JSON."""
        return dataclasses.asdict(self)


class BatchProcessor:
    """Decode → write → after-write → report, for one batch of Lambda-shaped stream records.

    Subclasses override the hooks, never :meth:`process`:

    - :meth:`prepare` runs before anything is written (the poller marks its checkpoint pending);
    - :meth:`after_write` runs once the batch's objects are in S3 (the poller saves its checkpoint);
    - :meth:`report` runs last, for a batch that landed (metrics, logs, progress);
    - :meth:`write_failed` decides what a failed write means (default: raise it).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        s3: S3Client | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._s3 = s3
        self._clock = clock

    @property
    def s3(self) -> S3Client:
        """The S3 client, made on first use."""
        if self._s3 is None:
            self._s3 = boto3.client("s3", region_name=self.settings.region)
        return self._s3

    def process(
        self, records: Sequence[Mapping[str, Any]], *, shard: str | None = None, late: bool = False
    ) -> BatchOutcome:
        """Run one batch through every step; returns what it did.

        ``shard`` (the stream shard the records come from) is required by the Iceberg lake, whose
        committer keeps its progress per shard (:mod:`lake.committer`). ``late``: the batch is a
        replayed one whose shard went on without it (the dead-letter queue's), landed as a source
        of its own (:func:`lake.iceberg_landing.land_batch`).
        """
        started = time.perf_counter()
        self.prepare(records)
        if self.settings.lake_format == "iceberg":
            return self._process_iceberg(records, shard, started, late=late)
        decoded = decode_records(records, ingested_at_ms=int(self._clock() * 1000))
        try:
            objects = write_landing(
                self.s3,
                self.settings.bucket,
                self.settings.lake_prefix,
                decoded.tables(),
                event_source_arn=decoded.event_source_arn,
                first_sequence_number=decoded.first_sequence_number,
            )
        except LandingWriteError as error:
            outcome = _outcome(decoded, [], started, failure=str(error))
            self.write_failed(outcome, error)
            return outcome
        outcome = _outcome(decoded, objects, started)
        self.after_write(outcome)
        self.report(outcome)
        return outcome

    def _process_iceberg(
        self, records: Sequence[Mapping[str, Any]], shard: str | None, started: float, *, late: bool = False
    ) -> BatchOutcome:
        """Land the records no earlier attempt landed as Iceberg data files plus a landing record."""
        if not shard:
            raise ValueError("the Iceberg lake needs the shard of every batch (the committer's progress key)")
        ingested_at_ms = int(self._clock() * 1000)
        decoded = decode_records(records, ingested_at_ms=ingested_at_ms)
        pending: list[DecodedBatch] = []

        def decode(uncovered: Sequence[Mapping[str, Any]]) -> Mapping[str, pa.Table]:
            batch = (
                decoded
                if len(uncovered) == len(records)
                else decode_records(uncovered, ingested_at_ms=ingested_at_ms)
            )
            pending.append(batch)
            return batch.tables()

        try:
            landed = land_batch(
                self.s3,
                self.settings,
                records,
                decode,
                event_source_arn=decoded.event_source_arn,
                shard=shard,
                late=late,
            )
        except LandingWriteError as error:
            outcome = _outcome(decoded, [], started, failure=str(error))
            self.write_failed(outcome, error)
            return outcome
        written = pending[0] if pending else decode_records([], ingested_at_ms=ingested_at_ms)
        files = list(landed.record.files) if landed.record is not None else []
        outcome = dataclasses.replace(
            _outcome(decoded, [], started),
            ledger_rows=written.ledger_rows,
            wallets=written.wallet_rows,
            quarantined=written.quarantined,
            files_written=len(files),
            bytes_written=sum(file.size for file in files),
            keys=tuple(file.path for file in files),
            already_landed=landed.skipped_records,
        )
        self.after_write(outcome)
        self.report(outcome)
        return outcome

    def prepare(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Before decoding and writing: nothing by default."""

    def after_write(self, outcome: BatchOutcome) -> None:
        """After the batch's objects are written: nothing by default."""

    def report(self, outcome: BatchOutcome) -> None:
        """After a batch landed: a debug log line by default."""
        _logger.debug("batch landed: %s", outcome.as_dict())

    def write_failed(self, outcome: BatchOutcome, error: LandingWriteError) -> None:
        """When the write failed: raise by default (a poller must not move past it)."""
        raise error


def process_batch(
    records: Sequence[Mapping[str, Any]],
    settings: Settings,
    *,
    s3: S3Client | None = None,
    clock: Callable[[], float] = time.time,
    shard: str | None = None,
    late: bool = False,
) -> BatchOutcome:
    """Decode one batch and land it in the lake; raises :class:`LandingWriteError` if S3 fails.

    ``shard`` is the stream shard of the records (the Iceberg lake needs it); ``late`` marks a
    replayed batch its shard went on without (:meth:`BatchProcessor.process`).

    Examples
    --------
    >>> outcome = process_batch(event["Records"], Settings.from_env())  # doctest: +SKIP
    >>> outcome.ledger_rows, outcome.keys  # doctest: +SKIP
    """
    return BatchProcessor(settings, s3=s3, clock=clock).process(records, shard=shard, late=late)


def _outcome(
    decoded: DecodedBatch, objects: list[LandingObject], started: float, failure: str | None = None
) -> BatchOutcome:
    return BatchOutcome(
        records=decoded.records,
        ledger_rows=decoded.ledger_rows,
        wallets=decoded.wallet_rows,
        ttl_expired=decoded.ttl_expired,
        ignored=decoded.ignored,
        quarantined=decoded.quarantined,
        files_written=len(objects),
        bytes_written=sum(obj.size for obj in objects),
        event_source_arn=decoded.event_source_arn,
        first_sequence_number=decoded.first_sequence_number,
        last_sequence_number=decoded.last_sequence_number,
        max_record_age_seconds=decoded.max_record_age_seconds(),
        seconds=time.perf_counter() - started,
        keys=tuple(obj.key for obj in objects),
        failure=failure,
    )
