"""The stream consumer: DynamoDB Streams → Lambda → Parquet landing files in the lake.

Event source mapping choices (defaults in :class:`~walletlake_cdk.config.DeploymentConfig`):

- **ReportBatchItemFailures**: the handler returns ``batchItemFailures``; Lambda resumes the
  shard at the first failed record instead of replaying the whole batch.
- **Bounded retries and MaximumRecordAgeInSeconds under 24 h**: a shard is never blocked until
  its records fall off the stream. When either bound is hit, Lambda sends the batch's shard and
  sequence range to the encrypted SQS on-failure queue while the records are still in the stream,
  so an operator can replay them; reconciliation reports the wallets they touch as missing.
- **BisectBatchOnFunctionError off**: with item-level failure reporting the retry already starts
  exactly at the failed record, in shard order. Bisecting would split batches into halves with
  new first sequence numbers, which breaks the "a retried batch overwrites its own landing file"
  naming (ARCHITECTURE.md) and multiplies small files; and records that cannot be decoded never
  fail a batch in the first place, they go to the quarantine prefix (a code path).
- **TTL deletions are handled by the code path, not an event filter**: ARCHITECTURE.md wants
  them counted (``ttl_expired``), and a filtered-out record is never seen by the handler.
- **TRIM_HORIZON**: a new mapping starts at the oldest record still in the stream, so nothing
  written before the consumer existed is skipped.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.functions import FunctionAssets, PythonFunction, python_function
from walletlake_cdk.storage import Storage

#: The handler other modules export for Lambda (``stream_processor/handler.py``).
CONSUMER_HANDLER: Final = "stream_processor.handler.lambda_handler"


@dataclasses.dataclass(frozen=True)
class StreamConsumer:
    """The consumer function, its event source mapping and its on-failure queue."""

    handler: PythonFunction
    source: sources.DynamoEventSource
    failures: sqs.Queue


def build_stream_consumer(
    scope: Construct,
    config: DeploymentConfig,
    assets: FunctionAssets,
    table: dynamodb.Table,
    storage: Storage,
    environment: dict[str, str],
) -> StreamConsumer:
    """The consumer with its event source mapping, on-failure queue and lake write access."""
    failures = sqs.Queue(
        scope,
        "StreamFailures",
        encryption=sqs.QueueEncryption.KMS,
        encryption_master_key=storage.data_key,
        enforce_ssl=True,
        retention_period=Duration.days(14),
        removal_policy=RemovalPolicy.RETAIN,
    )
    handler = python_function(
        scope,
        "StreamConsumerFunction",
        config=config,
        assets=assets,
        handler=CONSUMER_HANDLER,
        description="walletlake stream consumer: DynamoDB stream records to Parquet landing files",
        environment=environment,
        memory_mb=config.consumer_memory_mb,
        timeout=Duration.minutes(2),
        service="stream_processor",
    )
    # Landing files and quarantined records: writes under the lake prefix only.
    handler.role.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:PutObject"], resources=[storage.lake_objects_arn])
    )
    storage.data_key.grant(handler.role, "kms:GenerateDataKey", "kms:Decrypt")
    source = sources.DynamoEventSource(
        table,
        starting_position=lambda_.StartingPosition.TRIM_HORIZON,
        batch_size=config.stream_batch_size,
        max_batching_window=Duration.seconds(config.stream_batching_window_seconds),
        parallelization_factor=config.stream_parallelization,
        report_batch_item_failures=True,
        retry_attempts=config.stream_retry_attempts,
        max_record_age=Duration.seconds(config.stream_max_record_age_seconds),
        bisect_batch_on_error=False,
        on_failure=sources.SqsDlq(failures),
    )
    handler.function.add_event_source(source)
    return StreamConsumer(handler=handler, source=source, failures=failures)
