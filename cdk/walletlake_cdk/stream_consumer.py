"""The stream consumer: DynamoDB Streams → Lambda → the lake (Iceberg data files + landing records,
or, with ``-c lake_format=parquet``, Parquet landing files).

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
  naming (docs/architecture.md) and multiplies small files; and records that cannot be decoded never
  fail a batch in the first place, they go to the quarantine prefix (a code path).
- **Filter criteria: records that make no row never invoke Lambda** (transaction INSERTs, TTL
  REMOVEs, user claims, idempotency records: about half the stream), while every record the
  decoder would quarantine still reaches it (:mod:`contracts.stream_filters`, which says what
  passes and why). TTL deletions are then counted by DynamoDB (``TimeToLiveDeletedItemCount``,
  on the dashboard), not by the handler.
- **TRIM_HORIZON**: a new mapping starts at the oldest record still in the stream, so nothing
  written before the consumer existed is skipped.
- **Iceberg lake: a tumbling window, and ParallelizationFactor 1.** Lambda names a batch's shard
  (``shardId``) only in tumbling-window events, and the committer keeps its exactly-once progress
  per shard (``lake.committer``). That progress is one high-water mark per shard: the last
  sequence number committed. With ParallelizationFactor above 1, Lambda runs several batches of
  one shard at once (in order per item key only), so a later batch's landing record can exist
  before an earlier one's; a commit between the two moves the shard's mark past the earlier
  batch, whose record, landing after, is then taken for a redelivery and skipped (its rows never
  committed) or, straddling the mark, stops the committer (``OverlapError``). Hence one batch per
  shard at a time. What it costs is small: at the seed's load a shard carries ~690 records/s
  (74,000 stream records/s over at least 108 shards) and a batch of ~5,400 records (Lambda's 6 MB
  payload) takes 17 ms of CPU plus its PUTs (measured, ``docs/operations.md``, "Batching"), so
  one batch at a time per shard keeps up many times over; what factor 2 bought was a faster
  drain of a backlog after an outage.
"""

from __future__ import annotations

import dataclasses
from typing import Final

import jsii
from aws_cdk import Duration, Names, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from contracts import lambda_metrics
from contracts.lake_layout import ICEBERG_FOLDER, LANDING_LOG_FOLDER
from contracts.lake_tables import STREAM_TABLES
from contracts.stream_filters import filter_patterns
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.functions import FunctionAssets, PythonFunction, python_function
from walletlake_cdk.storage import S3_WRITE_KEY_ACTIONS, Storage, grant_key_via

#: The handler other modules export for Lambda (``walletlake/handlers/stream.py``).
CONSUMER_HANDLER: Final = "walletlake.handlers.stream.handler"
#: What reaching the Iceberg REST catalog to read a table takes (Glue's "AWS Glue REST APIs for
#: Apache Iceberg specifications": GetConfig → glue:GetCatalog, LoadNamespaceMetadata →
#: glue:GetDatabase, LoadTable → glue:GetTable). ``lakeformation:GetDataAccess`` is needed only
#: for tables whose location is registered with Lake Formation, which this stack's are not.
ICEBERG_READ_ACTIONS: Final = ("glue:GetCatalog", "glue:GetDatabase", "glue:GetTable")


@dataclasses.dataclass(frozen=True)
class StreamConsumer:
    """The consumer function, its event source mapping and its on-failure queue."""

    handler: PythonFunction
    mapping: lambda_.EventSourceMapping
    failures: sqs.Queue


@jsii.implements(lambda_.IEventSourceDlq)
class QueueDestination:
    """The on-failure queue of the mapping, granted as :func:`grant_key_via` grants (CDK's ``SqsDlq``
    would grant the queue's key for direct use, with no ``kms:ViaService``)."""

    def __init__(self, queue: sqs.Queue) -> None:
        self.queue = queue

    def bind(
        self, target: lambda_.IEventSourceMapping, target_handler: lambda_.IFunction
    ) -> lambda_.DlqDestinationConfig:
        """Let the function's role send to the queue (through SQS only for its key)."""
        target_handler.add_to_role_policy(
            iam.PolicyStatement(
                actions=["sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"],
                resources=[self.queue.queue_arn],
            )
        )
        if self.queue.encryption_master_key is not None and target_handler.role is not None:
            grant_key_via(
                target_handler.role,
                self.queue.encryption_master_key,
                "sqs",
                "kms:GenerateDataKey",
                "kms:Decrypt",
            )
        return lambda_.DlqDestinationConfig(destination=self.queue.queue_arn)


def grant_stream_read(role: iam.IRole, table: dynamodb.Table) -> None:
    """Read the table's stream (what CDK's ``grantStreamRead`` grants, its key through DynamoDB only)."""
    role.add_to_principal_policy(iam.PolicyStatement(actions=["dynamodb:ListStreams"], resources=["*"]))
    assert table.table_stream_arn is not None
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"],
            resources=[table.table_stream_arn],
        )
    )
    if table.encryption_key is not None:
        grant_key_via(role, table.encryption_key, "dynamodb", "kms:Decrypt", "kms:DescribeKey")


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
        encryption_master_key=storage.queue_key,
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
        description="walletlake stream consumer: DynamoDB stream records to the lake's landing files",
        environment=environment,
        memory_mb=config.consumer_memory_mb,
        timeout=Duration.minutes(2),
        service=lambda_metrics.CONSUMER_SERVICE,
    )
    if config.iceberg:
        grant_iceberg_landing(handler.role, config, storage)
    else:
        # Landing files and quarantined records: writes under the lake prefix only.
        handler.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[storage.lake_objects_arn])
        )
    grant_key_via(handler.role, storage.lake_key, "s3", *S3_WRITE_KEY_ACTIONS)
    mapping = handler.function.add_event_source_mapping(
        # The id CDK's DynamoEventSource gave it: the same logical id, so a deploy updates the
        # mapping in place instead of replacing it (a new mapping would start again at TRIM_HORIZON).
        f"DynamoDBEventSource:{Names.node_unique_id(table.node)}",
        event_source_arn=table.table_stream_arn,
        starting_position=lambda_.StartingPosition.TRIM_HORIZON,
        batch_size=config.stream_batch_size,
        max_batching_window=Duration.seconds(config.stream_batching_window_seconds),
        parallelization_factor=config.stream_parallelization,
        tumbling_window=Duration.seconds(config.stream_tumbling_window_seconds) if config.iceberg else None,
        report_batch_item_failures=True,
        retry_attempts=config.stream_retry_attempts,
        max_record_age=Duration.seconds(config.stream_max_record_age_seconds),
        bisect_batch_on_error=False,
        on_failure=QueueDestination(failures),
        filters=[{"pattern": pattern} for pattern in filter_patterns()],
    )
    grant_stream_read(handler.role, table)
    return StreamConsumer(handler=handler, mapping=mapping, failures=failures)


def grant_iceberg_landing(role: iam.IRole, config: DeploymentConfig, storage: Storage) -> None:
    """Write the tables' data files and the landing records, list the landing log, and learn the
    tables' locations from the catalog (once per cold start)."""
    prefix = config.settings.lake_prefix
    stack = Stack.of(role)
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:PutObject"],
            resources=[
                storage.lake_bucket.arn_for_objects(f"{prefix}/{ICEBERG_FOLDER}/*/data/*"),
                storage.lake_bucket.arn_for_objects(f"{prefix}/{LANDING_LOG_FOLDER}/*"),
            ],
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[storage.lake_bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{prefix}/{LANDING_LOG_FOLDER}/*"]}},
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=list(ICEBERG_READ_ACTIONS), resources=iceberg_glue_arns(stack, config))
    )


def iceberg_glue_arns(stack: Stack, config: DeploymentConfig) -> list[str]:
    """The account's catalog, the lake's database and its Iceberg tables."""
    database = config.settings.glue_database
    return [
        stack.format_arn(service="glue", resource="catalog"),
        stack.format_arn(service="glue", resource="database", resource_name=database),
        *(
            stack.format_arn(service="glue", resource="table", resource_name=f"{database}/{name}")
            for name in STREAM_TABLES
        ),
    ]
