"""The stream consumer: the Lambda handler for the ``wallets`` table's DynamoDB event source.

Configure the event source mapping with ``FunctionResponseTypes: [ReportBatchItemFailures]``. When
the batch's Parquet cannot be written, the handler answers ``batchItemFailures`` naming the batch's
*first* record: for a stream, Lambda then retries from that record and holds back everything after
it, so ordering is kept and the retry rewrites the same object names (fail fast; no partial
success inside a batch, because one landing object holds the whole batch). A record that cannot be
decoded never fails the batch: it lands in quarantine and is counted.

For the Iceberg lake the event source mapping has a tumbling window: that is how Lambda tells a
function which shard a batch comes from (``shardId``), which the committer's exactly-once
progress is kept by (:mod:`lake.committer`); the handler answers the window's (unused) ``state``.

Logs are structured JSON (Powertools ``Logger``); metrics are CloudWatch EMF (Powertools
``Metrics``), named in :mod:`contracts.lambda_metrics` (service ``stream_processor``): records in,
rows landed per table, TTL expiries, ignored and quarantined records, files and bytes written, the
oldest record's age, the batch's seconds and, on a failed write, ``BatchWriteFailures``.
"""

from __future__ import annotations

from typing import Any, Final

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from contracts import lambda_metrics as names
from contracts.settings import DEPLOYED_VARIABLES, HandlerSettings
from lake.writer import LandingWriteError
from stream_processor.batch import BatchOutcome, BatchProcessor
from walletlake.handlers import clients

logger = Logger(service=names.CONSUMER_SERVICE)
metrics = Metrics(namespace=names.NAMESPACE, service=names.CONSUMER_SERVICE)

#: What the CDK app sets for the consumer (``cdk/walletlake_cdk/stream_consumer.py``); on Lambda,
#: a function missing one or holding one it cannot use fails at cold start.
REQUIRED_VARIABLES: Final = DEPLOYED_VARIABLES

#: The consumer's settings, read once (at import on Lambda).
SETTINGS: Final = HandlerSettings(REQUIRED_VARIABLES)


class LambdaBatchProcessor(BatchProcessor):
    """The shared batch loop, reporting through Powertools and failing soft on a write error."""

    def report(self, outcome: BatchOutcome) -> None:
        """EMF metrics and one JSON log line per batch."""
        counts = {
            names.RECORDS_IN: outcome.records,
            names.LEDGER_ROWS: outcome.ledger_rows,
            names.WALLET_ROWS: outcome.wallets,
            names.TTL_EXPIRED: outcome.ttl_expired,
            names.IGNORED: outcome.ignored,
            names.QUARANTINED: outcome.quarantined,
            names.FILES_WRITTEN: outcome.files_written,
        }
        for name, value in counts.items():
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
        metrics.add_metric(name=names.BYTES_WRITTEN, unit=MetricUnit.Bytes, value=outcome.bytes_written)
        metrics.add_metric(name=names.BATCH_SECONDS, unit=MetricUnit.Seconds, value=outcome.seconds)
        if outcome.max_record_age_seconds is not None:
            metrics.add_metric(
                name=names.MAX_RECORD_AGE_SECONDS,
                unit=MetricUnit.Seconds,
                value=outcome.max_record_age_seconds,
            )
        if outcome.quarantined:
            logger.warning(
                "records quarantined; inspect the quarantine table",
                extra={
                    "quarantined": outcome.quarantined,
                    "first_sequence_number": outcome.first_sequence_number,
                },
            )
        logger.info("batch landed", extra=_log_fields(outcome))

    def write_failed(self, outcome: BatchOutcome, error: LandingWriteError) -> None:
        """Count and log it; the handler answers ``batchItemFailures`` so Lambda retries the batch."""
        metrics.add_metric(name=names.BATCH_WRITE_FAILURES, unit=MetricUnit.Count, value=1)
        logger.exception(
            "landing write failed; Lambda will retry the batch from its first record",
            extra=_log_fields(outcome),
        )


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Land one DynamoDB Streams batch in the lake; see the module docstring for the contract."""
    settings = SETTINGS()
    records = event.get("Records") or []
    # With a tumbling window (the Iceberg lake's event source mapping) Lambda names the shard and
    # expects the window's state back; without one there is no "state" key to answer.
    windowed = "window" in event
    answer: dict[str, Any] = {"state": {}} if windowed else {}
    if not records:  # a tumbling window's final invocation may carry none
        return {**answer, "batchItemFailures": []}
    outcome = LambdaBatchProcessor(settings, s3=clients.s3(settings.region)).process(
        records, shard=event.get("shardId")
    )
    if not outcome.ok:
        return {**answer, "batchItemFailures": [{"itemIdentifier": outcome.first_sequence_number}]}
    return {**answer, "batchItemFailures": []}


def _log_fields(outcome: BatchOutcome) -> dict[str, Any]:
    fields = outcome.as_dict()
    fields["keys"] = list(outcome.keys)
    return fields
