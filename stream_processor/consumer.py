"""The local stream consumer: the table's DynamoDB stream → the lake, with per-shard checkpoints.

On AWS, Lambda polls the stream and calls :func:`walletlake.handlers.stream.handler`. On one
machine (and for operators replaying a stream) :func:`drain` does Lambda's part: it reads every
shard through the ``dynamodbstreams`` API, reshapes the records exactly as Lambda would deliver them
(:func:`stream_processor.lambda_records.lambda_record`, which also absorbs DynamoDB Local's
differences), and runs them through the same :class:`~stream_processor.batch.BatchProcessor` as the
handler. Only where records come from and where progress is kept differ.

Exactly once into the lake, whatever happens to the process:

1. before a batch is written, its shard's checkpoint item records ``pending_through`` (the batch's
   last sequence number);
2. the batch's Parquet objects are written, named after its first record (a rewrite replaces them);
3. the checkpoint moves to the batch's last record and ``pending_through`` is cleared.

Killed after 1 or 2, the next run rereads exactly the records after the checkpoint through
``pending_through``: the same batch, the same first record, the same object names, so it overwrites
what the interrupted run wrote instead of adding a copy. Killed after 3, it simply continues.

A drain (``follow=False``) reads closed shards to their end and open shards until they are caught
up: they answered nothing for ``quiet_seconds`` (DynamoDB Streams may return empty pages before the
end of an open shard, so one empty page proves nothing), or they delivered a record stamped after
the drain began. If a writer keeps an open shard busy past ``max_wait`` seconds, the drain stops
reading it — but never in the middle of a backlog of records stamped well before the drain began —
and reports it in ``unconfirmed_shards``; the next run resumes from its checkpoint.

A new stream ARN is never taken silently. When the table's stream was disabled and enabled again
(as after a restore), its records up to then stay in the old stream (readable for 24 hours), and
the new stream starts empty: the consumer first drains the old stream to its end, then records
the switch (the checkpoint table's item :func:`contracts.checkpoint_table.stream_key`, and a log
line), then reads the new one. An old stream it cannot drain (gone, trimmed, a shard still open)
stops it with :class:`ConsumeError` naming what to do, rather than abandon its unread records;
``accept_stream_switch`` records the switch without draining, for after a backfill.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import boto3
from botocore.exceptions import ClientError

from contracts.settings import Settings
from lake.writer import LandingWriteError
from stream_processor.batch import BatchOutcome, BatchProcessor
from stream_processor.checkpoints import Checkpoint, CheckpointStore, StreamChoice
from stream_processor.consume_summary import ConsumeSummary
from stream_processor.lambda_records import CREATION_TIME, SEQUENCE_NUMBER, lambda_record
from stream_processor.shards import Shard, ready_shards, sequence_key, shards_from_description
from stream_processor.stream_switch import record_switch, undrained_message

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient
    from mypy_boto3_s3 import S3Client

_logger = logging.getLogger(__name__)

#: GetRecords' own ceiling per call.
GET_RECORDS_LIMIT: Final = 1000
#: How far the consumer's clock may run behind the stream's when judging "stamped after the drain began".
CLOCK_SKEW_SECONDS: Final = 2.0
#: Records stamped this long before the drain began certainly existed then (DynamoDB Local stamps
#: records to the minute), so max_wait never cuts them short.
BACKLOG_MARGIN_SECONDS: Final = 60.0
#: How often ``follow`` mode looks for new shards (DynamoDB rolls shards every few hours).
SHARD_REFRESH_SECONDS: Final = 30.0
#: ``--follow``: the first and the longest pause before writing a batch again while S3 fails.
WRITE_RETRY_FIRST_SECONDS: Final = 0.5
WRITE_RETRY_MAX_SECONDS: Final = 15.0

#: Called with a stage name — ``before_write``, ``after_write``, ``after_checkpoint`` — around each
#: batch; a hook that raises simulates a crash at that point (tests use it; nothing else should).
FaultHook = Callable[[str], None]


class ConsumeError(RuntimeError):
    """The consumer cannot run (no stream on the table, say); the message says what to do."""


def drain(
    settings: Settings,
    *,
    batch_size: int = 1000,
    max_wait: float = 30.0,
    follow: bool = False,
    on_progress: Callable[[int], None] | None = None,
    fault_hook: FaultHook | None = None,
    quiet_seconds: float = 1.0,
    poll_interval: float = 0.2,
    should_stop: Callable[[], bool] | None = None,
    session: boto3.Session | None = None,
    accept_stream_switch: bool = False,
) -> ConsumeSummary:
    """Read the table's stream into the lake and return what was done.

    Parameters
    ----------
    settings:
        Names the table (its stream is read), the lake bucket/prefix and the checkpoint table.
    batch_size:
        Records per batch, hence per landing object (Lambda's ``BatchSize``); GetRecords pages of at
        most 1,000 are combined up to it.
    max_wait:
        Seconds a drain keeps reading open shards that never go quiet (see the module docstring).
    follow:
        Keep polling for new records until ``should_stop`` says so or the process is interrupted
        (Ctrl-C returns the summary so far; the checkpoint protocol makes stopping anywhere safe).
    on_progress:
        Called after each batch with the number of ledger rows landed so far in this run.
    fault_hook:
        Crash injection for tests (:data:`FaultHook`).
    quiet_seconds, poll_interval:
        How long an open shard must answer nothing to count as caught up, and the pause between
        polls when no shard had anything.
    accept_stream_switch:
        Move to the table's new stream without draining the old one (its unread records were
        brought back otherwise: a backfill); the switch is recorded all the same.

    Raises
    ------
    ConsumeError
        The table's stream changed and the old one cannot be drained (module docstring).
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    session = session or boto3.Session(region_name=settings.region)
    consumer = _Consumer(
        settings,
        dynamodb=session.client("dynamodb"),
        streams=session.client("dynamodbstreams"),
        s3=session.client("s3"),
        options=_Options(
            batch_size=batch_size,
            max_wait=max_wait,
            follow=follow,
            quiet_seconds=quiet_seconds,
            poll_interval=poll_interval,
            on_progress=on_progress,
            fault_hook=fault_hook,
            should_stop=should_stop,
            accept_stream_switch=accept_stream_switch,
        ),
    )
    return consumer.run()


@dataclasses.dataclass(frozen=True, slots=True)
class _Options:
    batch_size: int
    max_wait: float
    follow: bool
    quiet_seconds: float
    poll_interval: float
    on_progress: Callable[[int], None] | None
    fault_hook: FaultHook | None
    should_stop: Callable[[], bool] | None
    accept_stream_switch: bool = False


class _Consumer:
    """One run: discovers shards, polls the ready ones round-robin, stops when drained."""

    def __init__(
        self,
        settings: Settings,
        *,
        dynamodb: DynamoDBClient,
        streams: DynamoDBStreamsClient,
        s3: S3Client,
        options: _Options,
        old_stream_arn: str | None = None,
    ) -> None:
        self.settings = settings
        self.dynamodb = dynamodb
        self.streams = streams
        self.s3 = s3
        self.options = options
        self.store = CheckpointStore(dynamodb, settings.checkpoint_table)
        self.summary = ConsumeSummary()
        self.shards: list[Shard] = []
        self.readers: dict[str, _ShardReader] = {}
        #: Set when this run only drains a stream the table left (:meth:`_drain_old_stream`).
        self.old_stream_arn = old_stream_arn
        self.stream_arn = ""
        self.began_at = 0.0
        self.deadline = 0.0

    def run(self) -> ConsumeSummary:
        started = time.monotonic()
        self.began_at = time.time()
        self.deadline = started + self.options.max_wait
        try:
            self.stream_arn = self.old_stream_arn or self._stream_arn()
            self.summary.stream_arn = self.stream_arn
            if self.old_stream_arn is None:
                self._settle_stream()
            self._refresh_shards()
            self._loop()
        except KeyboardInterrupt:
            if not self.options.follow:
                raise
            _logger.warning("interrupted: stopping; every landed batch is checkpointed or will be replayed")
        finally:
            self.summary.seconds = time.monotonic() - started
            self.summary.shards = sum(1 for reader in self.readers.values() if reader.polled)
        return self.summary

    def _loop(self) -> None:
        last_refresh = time.monotonic()
        while True:
            progressed = False
            closed_one = False
            for reader in self._ready():
                progressed |= reader.poll()
                closed_one |= reader.finished and reader.ended
            if self.options.should_stop is not None and self.options.should_stop():
                return
            pending = [reader for reader in self.readers.values() if not reader.finished]
            if not pending or closed_one:
                if not pending and self.options.follow:
                    self._follow_stream()  # every shard read to its end: the table's stream may be new
                self._refresh_shards()  # a closed shard may have children to read next
                last_refresh = time.monotonic()
                pending = [reader for reader in self.readers.values() if not reader.finished]
            if not pending and not self.options.follow:
                return
            if self.options.follow and time.monotonic() - last_refresh > SHARD_REFRESH_SECONDS:
                self._follow_stream()
                self._refresh_shards()
                last_refresh = time.monotonic()
            if not progressed:
                time.sleep(self.options.poll_interval)

    def _settle_stream(self) -> None:
        """Before reading the table's stream: if it is not the one recorded, drain the recorded
        one to its end first, then record the switch (module docstring)."""
        table = self.settings.table
        recorded = self.store.load_stream(table)
        if recorded is None:
            self.store.record_stream(StreamChoice(table, self.stream_arn), expected=None)
        elif recorded.stream_arn != self.stream_arn:
            old, accepted = recorded.stream_arn, self.options.accept_stream_switch
            drained = 0 if accepted else self._drain_old_stream(old)
            self.summary.stream_switch = record_switch(
                self.store, table, old, self.stream_arn, drained, accepted=accepted
            )

    def _drain_old_stream(self, old: str) -> int:
        """Read the stream the table left to its end (its shards are closed); the records read."""
        options = dataclasses.replace(self.options, follow=False, should_stop=None)
        drainer = _Consumer(
            self.settings,
            dynamodb=self.dynamodb,
            streams=self.streams,
            s3=self.s3,
            options=options,
            old_stream_arn=old,
        )
        try:
            drained = drainer.run()
        except ClientError as error:
            why = error.response.get("Error", {}).get("Code", str(error))
            raise ConsumeError(undrained_message(self.settings.table, old, self.stream_arn, why)) from error
        unread = [shard_id for shard_id, reader in drainer.readers.items() if not reader.ended]
        if unread := drained.trimmed_shards or drained.unconfirmed_shards or unread:
            why = f"shards {', '.join(unread)} not read to their end"
            raise ConsumeError(undrained_message(self.settings.table, old, self.stream_arn, why))
        self.summary.merge(drained)
        return drained.records

    def _follow_stream(self) -> None:
        """``--follow``: once every shard of the stream read so far is finished and the table names
        another stream, move to it (the old one was read to its end: the switch is recorded)."""
        if any(not reader.finished for reader in self.readers.values()):
            return
        try:
            latest = self._stream_arn()
        except ConsumeError:  # the stream is disabled for now: the next look finds the new one
            return
        if latest != self.stream_arn:
            drained = sum(reader.checkpoint.records for reader in self.readers.values())
            switch = record_switch(self.store, self.settings.table, self.stream_arn, latest, drained)
            self.summary.stream_switch = switch
            self.stream_arn = self.summary.stream_arn = latest
            self.readers = {}

    def _ready(self) -> list[_ShardReader]:
        finished = {shard_id for shard_id, reader in self.readers.items() if reader.finished}
        return [self.readers[shard.shard_id] for shard in ready_shards(self.shards, finished)]

    def _stream_arn(self) -> str:
        try:
            table = self.dynamodb.describe_table(TableName=self.settings.table)["Table"]
        except self.dynamodb.exceptions.ResourceNotFoundException:
            raise ConsumeError(
                f"table {self.settings.table} does not exist; provision it first (walletlake local up)"
            ) from None
        arn = table.get("LatestStreamArn")
        if not arn or not table.get("StreamSpecification", {}).get("StreamEnabled", False):
            raise ConsumeError(
                f"table {self.settings.table} has no stream; enable DynamoDB Streams with NEW_AND_OLD_IMAGES"
            )
        return arn

    def _refresh_shards(self) -> None:
        listed: list[Mapping[str, Any]] = []
        kwargs: dict[str, Any] = {"StreamArn": self.stream_arn}
        while True:
            description = self.streams.describe_stream(**kwargs)["StreamDescription"]
            listed.extend(description.get("Shards", []))
            last = description.get("LastEvaluatedShardId")
            if not last:
                break
            kwargs["ExclusiveStartShardId"] = last
        self.shards = shards_from_description(listed)
        for shard in self.shards:
            if shard.shard_id not in self.readers:
                checkpoint = self.store.load(self.stream_arn, shard.shard_id)
                self.readers[shard.shard_id] = _ShardReader(self, shard, checkpoint)


class _ShardBatchProcessor(BatchProcessor):
    """The shared batch loop with the poller's checkpoint protocol around the write."""

    def __init__(self, reader: _ShardReader) -> None:
        super().__init__(reader.consumer.settings, s3=reader.consumer.s3)
        self.reader = reader
        self._through = ""

    def prepare(self, records: Sequence[Mapping[str, Any]]) -> None:
        self._through = records[-1]["dynamodb"][SEQUENCE_NUMBER]
        reader = self.reader
        reader.checkpoint = reader.consumer.store.mark_pending(reader.checkpoint, self._through)
        reader.fault("before_write")

    def after_write(self, outcome: BatchOutcome) -> None:
        reader = self.reader
        reader.fault("after_write")
        reader.checkpoint = reader.consumer.store.commit(reader.checkpoint, self._through, outcome.records)
        reader.fault("after_checkpoint")

    def report(self, outcome: BatchOutcome) -> None:
        consumer = self.reader.consumer
        consumer.summary.add(outcome)
        _logger.info(
            "shard %s: %d records → %d ledger rows, %d wallets, %d quarantined in %d objects; checkpoint %s",
            self.reader.shard.shard_id,
            outcome.records,
            outcome.ledger_rows,
            outcome.wallets,
            outcome.quarantined,
            outcome.files_written,
            self._through,
        )
        if outcome.quarantined:
            _logger.warning(
                "shard %s: %d records quarantined (batch from %s); see s3://%s/%s/quarantine/",
                self.reader.shard.shard_id,
                outcome.quarantined,
                outcome.first_sequence_number,
                consumer.settings.bucket,
                consumer.settings.lake_prefix,
            )
        if consumer.options.on_progress is not None:
            consumer.options.on_progress(consumer.summary.ledger_rows)


class _ShardReader:
    """Reads one shard page by page, cuts batches, and keeps its iterator alive."""

    def __init__(self, consumer: _Consumer, shard: Shard, checkpoint: Checkpoint) -> None:
        self.consumer = consumer
        self.shard = shard
        self.checkpoint = checkpoint
        self.processor = _ShardBatchProcessor(self)
        self.iterator: str | None = None
        self.from_trim_horizon = False
        #: The last sequence number received (batched or buffered): where a new iterator starts.
        self.position: str | None = checkpoint.sequence_number
        self.buffer: list[dict[str, Any]] = []
        self.replay_through = checkpoint.pending_through
        self.finished = checkpoint.shard_end
        self.ended = checkpoint.shard_end
        self.polled = False
        self.caught_up = False
        self.empty_since: float | None = None
        self.last_stamp: float | None = None
        if self.replay_through is not None:
            _logger.warning(
                "shard %s: a batch through %s was being written when the last run stopped; "
                "rewriting exactly that batch first",
                shard.shard_id,
                self.replay_through,
            )

    def fault(self, stage: str) -> None:
        hook = self.consumer.options.fault_hook
        if hook is not None:
            hook(stage)

    def poll(self) -> bool:
        """One GetRecords call, and the batches it completes; True when it brought records."""
        self.polled = True
        if self.iterator is None and not self._open_iterator():
            return False
        options = self.consumer.options
        limit = self._limit()
        try:
            page = self.consumer.streams.get_records(ShardIterator=self.iterator or "", Limit=limit)
        except ClientError as error:
            self._read_failed(error)
            return False
        raw = page.get("Records", [])
        next_iterator: str | None = page.get("NextShardIterator")  # absent once a closed shard ends
        self.iterator = next_iterator
        records = self._accept([lambda_record(item, self.consumer.stream_arn) for item in raw])
        now = time.monotonic()
        if records:
            self.buffer.extend(records)
            self.position = records[-1]["dynamodb"][SEQUENCE_NUMBER]
            self.empty_since = None
            stamp = records[-1]["dynamodb"].get(CREATION_TIME)
            if isinstance(stamp, int | float):
                self.last_stamp = float(stamp)
                if stamp > self.consumer.began_at + CLOCK_SKEW_SECONDS:
                    self.caught_up = True
        elif not raw:
            self.empty_since = self.empty_since if self.empty_since is not None else now
            if now - self.empty_since >= options.quiet_seconds:
                self.caught_up = True
        if self.iterator is None:
            self.ended = True
        self._cut_batches(short_page=len(raw) < limit)
        if self.ended:
            self._flush(self.buffer)
            self._finish_closed()
        elif not options.follow and (self.caught_up or self._out_of_time()):
            self._flush(self.buffer)
            self.finished = True
            if not self.caught_up:
                self.consumer.summary.unconfirmed_shards.append(self.shard.shard_id)
                _logger.warning(
                    "shard %s: still delivering records after --max-wait %.0f s; stopped without "
                    "confirming it passed every record that existed when the drain began. Run consume "
                    "again (it resumes from the checkpoint) or raise --max-wait.",
                    self.shard.shard_id,
                    options.max_wait,
                )
        return bool(records)

    def _limit(self) -> int:
        if self.replay_through is not None:
            return GET_RECORDS_LIMIT
        return max(1, min(GET_RECORDS_LIMIT, self.consumer.options.batch_size - len(self.buffer)))

    def _accept(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Drop records already received (only possible after restarting from the trim horizon)."""
        if self.position is None or not records:
            return records
        after = sequence_key(self.position)
        return [record for record in records if sequence_key(record["dynamodb"][SEQUENCE_NUMBER]) > after]

    def _cut_batches(self, *, short_page: bool) -> None:
        if self.replay_through is not None:
            self._cut_replay()
            return
        size = self.consumer.options.batch_size
        while len(self.buffer) >= size:
            self._flush(self.buffer[:size])
        if short_page and self.buffer:  # at the shard's tip: land what there is
            self._flush(self.buffer)

    def _cut_replay(self) -> None:
        """Rewrite exactly the interrupted batch: the records through ``replay_through``."""
        through = self.replay_through
        if through is None or not self.buffer:
            return
        limit = sequence_key(through)
        if sequence_key(self.buffer[-1]["dynamodb"][SEQUENCE_NUMBER]) < limit and not (
            self.ended or self.caught_up
        ):
            return  # keep reading until the batch is complete
        count = sum(1 for record in self.buffer if sequence_key(record["dynamodb"][SEQUENCE_NUMBER]) <= limit)
        self.replay_through = None
        if count:
            self.consumer.summary.replayed_batches += 1
            self._flush(self.buffer[:count])

    def _flush(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        batch = list(records)
        if self.consumer.options.follow:
            self._process_until_landed(batch)
        else:
            self.processor.process(
                batch, shard=self.shard.shard_id
            )  # a drain stops on the error; the next run replays it
        del self.buffer[: len(batch)]

    def _process_until_landed(self, batch: list[dict[str, Any]]) -> None:
        """``--follow``: write the batch again, with backoff, while S3 fails; never skip it.

        A follower is a long-lived process: an object store that is down, frozen or restarting is
        a pause, not an end. The checkpoint stays pending through every attempt, and each attempt
        writes the same object names (named from the batch's first sequence number), so a retry
        replaces what a failed one may have left instead of adding a copy.
        """
        pause = WRITE_RETRY_FIRST_SECONDS
        failures = 0
        while True:
            try:
                self.processor.process(batch, shard=self.shard.shard_id)
            except LandingWriteError as error:
                failures += 1
                stop = self.consumer.options.should_stop
                if stop is not None and stop():
                    raise
                _logger.error(
                    "shard %s: S3 write failed (attempt %d; the batch through %s stays pending, "
                    "retrying in %.1f s): %s",
                    self.shard.shard_id,
                    failures,
                    batch[-1]["dynamodb"][SEQUENCE_NUMBER],
                    pause,
                    error,
                )
                time.sleep(pause)
                pause = min(pause * 2, WRITE_RETRY_MAX_SECONDS)
                continue
            if failures:
                _logger.warning(
                    "shard %s: S3 write succeeded after %d failed attempts; caught up from the pending batch",
                    self.shard.shard_id,
                    failures,
                )
            return

    def _finish_closed(self) -> None:
        self.finished = True
        if not self.checkpoint.shard_end:
            self.checkpoint = self.consumer.store.finish_shard(self.checkpoint)
            _logger.info("shard %s: closed and read to its end", self.shard.shard_id)

    def _out_of_time(self) -> bool:
        if time.monotonic() < self.consumer.deadline or self.replay_through is not None:
            return False  # an interrupted batch is always completed: cut shorter, it would land twice
        in_backlog = (
            self.last_stamp is not None and self.last_stamp < self.consumer.began_at - BACKLOG_MARGIN_SECONDS
        )
        return not in_backlog

    def _open_iterator(self) -> bool:
        kwargs: dict[str, Any] = {"StreamArn": self.consumer.stream_arn, "ShardId": self.shard.shard_id}
        if self.position is not None and not self.from_trim_horizon:
            kwargs.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=self.position)
        else:
            kwargs["ShardIteratorType"] = "TRIM_HORIZON"
        try:
            self.iterator = self.consumer.streams.get_shard_iterator(**kwargs)["ShardIterator"]
        except ClientError as error:
            self._read_failed(error)
            return False
        self.from_trim_horizon = False
        return True

    def _read_failed(self, error: ClientError) -> None:
        code = error.response.get("Error", {}).get("Code", "")
        shard_id = self.shard.shard_id
        self.iterator = None
        if code == "ExpiredIteratorException":
            _logger.info("shard %s: iterator expired; reopening after %s", shard_id, self.position)
        elif code == "TrimmedDataAccessException":
            _logger.error(
                "shard %s: records after %s were trimmed from the stream (past its 24-hour retention) "
                "before they reached the lake. They are missing from it: reconciliation will report the "
                "affected wallets. Continuing from the oldest record still in the stream.",
                shard_id,
                self.position,
            )
            self.consumer.summary.trimmed_shards.append(shard_id)
            self.from_trim_horizon = True
            self.replay_through = None
        elif code == "ResourceNotFoundException":
            _logger.warning("shard %s: no longer in the stream (expired); skipping it", shard_id)
            self._flush(self.buffer)
            self.finished = True
        else:
            raise error
