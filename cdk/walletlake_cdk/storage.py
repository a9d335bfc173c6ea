"""Encryption keys and the lake's S3 buckets.

**One customer-managed key per data class**, so that a grant on one never reaches another and each
can be disabled or audited alone: the DynamoDB tables (``table_key``), the lake bucket's objects
(``lake_key``), Athena's query results (``results_key``), the stream's on-failure queue
(``queue_key``) and the log groups (``logs_key``). Roles use a key only through the service that
holds the data (``kms:ViaService``, :func:`grant_key_via`): a task role may have DynamoDB decrypt
an item for it, never call ``kms:Decrypt`` itself.

Server-side encryption of the lake: **SSE-KMS with a customer-managed key and S3 Bucket Keys**.
The lake holds every wallet's money movements; with KMS, reading an object needs both
``s3:GetObject`` and ``kms:Decrypt`` on this key, so the key policy is a second, auditable gate
(every use is in CloudTrail) and disabling the key makes the whole lake unreadable at once.
Bucket Keys let S3 reuse a bucket-level data key, which cuts KMS requests (and their cost) by
orders of magnitude for the many small landing objects the consumer writes. SSE-S3 would be
free but gives no separate access control.

The server access log bucket uses SSE-S3: S3 log delivery cannot write to a bucket whose default
encryption is SSE-KMS.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from walletlake_cdk.config import DeploymentConfig

#: What a role needs of a DynamoDB table's key (through DynamoDB only: :func:`grant_key_via`).
TABLE_KEY_ACTIONS: Final = (
    "kms:Decrypt",
    "kms:DescribeKey",
    "kms:Encrypt",
    "kms:ReEncrypt*",
    "kms:GenerateDataKey*",
)

#: What reading an SSE-KMS object takes of its key, and writing one (S3 asks for a data key).
S3_READ_KEY_ACTIONS: Final = ("kms:Decrypt",)
S3_WRITE_KEY_ACTIONS: Final = ("kms:Decrypt", "kms:GenerateDataKey")

#: Key prefix of Athena query results inside the lake bucket (never under the lake prefix).
ATHENA_RESULTS_PREFIX = "athena-results/"
#: The analysts' workgroup's results, inside the results prefix; the only part analysts may write.
ANALYST_RESULTS_PREFIX: Final = f"{ATHENA_RESULTS_PREFIX}analysts/"


@dataclasses.dataclass(frozen=True)
class Storage:
    """What the rest of the stack uses from this module."""

    #: The lake bucket's objects (the bucket's default encryption).
    lake_key: kms.Key
    #: The DynamoDB tables (ledger and idempotency records).
    table_key: kms.Key
    #: Athena's query results and the nightly's UNLOADs (the workgroups' result encryption).
    results_key: kms.Key
    #: The stream consumer's on-failure queue.
    queue_key: kms.Key
    #: The key of every log group (a data class of its own: logs hold requests, not balances).
    logs_key: kms.Key
    lake_bucket: s3.Bucket
    log_bucket: s3.Bucket
    lake_prefix: str
    #: The bucket's name as given (a plain string when configured, so the Glue locations, the
    #: functions' settings and the outputs read as text), or the same tokens the bucket uses.
    bucket_name: str

    @property
    def lake_objects_arn(self) -> str:
        """ARN pattern of every object under the lake prefix."""
        return self.lake_bucket.arn_for_objects(f"{self.lake_prefix}/*")

    @property
    def athena_results_arn(self) -> str:
        """ARN pattern of every Athena result object."""
        return self.lake_bucket.arn_for_objects(f"{ATHENA_RESULTS_PREFIX}*")

    @property
    def athena_results_uri(self) -> str:
        """``s3://`` location the workgroup writes results to."""
        return f"s3://{self.bucket_name}/{ATHENA_RESULTS_PREFIX}"

    @property
    def analyst_results_arn(self) -> str:
        """ARN pattern of the analysts' workgroup's result objects."""
        return self.lake_bucket.arn_for_objects(f"{ANALYST_RESULTS_PREFIX}*")

    @property
    def analyst_results_uri(self) -> str:
        """``s3://`` location the analysts' workgroup writes results to."""
        return f"s3://{self.bucket_name}/{ANALYST_RESULTS_PREFIX}"


def build_storage(scope: Construct, config: DeploymentConfig) -> Storage:
    """The keys, the lake bucket and its access-log bucket; all retained on stack deletion."""
    keys = {
        # "DataKey" stays the lake's: the objects written before the keys were split decrypt with it.
        name: kms.Key(
            scope,
            logical_id,
            description=f"walletlake: {what}",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        for name, logical_id, what in (
            ("lake", "DataKey", "the lake bucket's objects"),
            ("table", "TableKey", "the DynamoDB tables"),
            ("results", "ResultsKey", "Athena query results and the nightly's UNLOADs"),
            ("queue", "QueueKey", "the stream consumer's on-failure queue"),
        )
    }
    data_key = keys["lake"]
    logs_key = build_logs_key(scope)
    log_bucket = s3.Bucket(
        scope,
        "AccessLogBucket",
        encryption=s3.BucketEncryption.S3_MANAGED,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        minimum_tls_version=1.2,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        lifecycle_rules=[
            s3.LifecycleRule(id="expire-access-logs", expiration=Duration.days(config.access_log_days)),
        ],
        removal_policy=RemovalPolicy.RETAIN,
    )
    prefix = config.settings.lake_prefix
    bucket_name = config.bucket_name or f"{config.settings.bucket}-{Aws.ACCOUNT_ID}-{Aws.REGION}"
    lake_bucket = s3.Bucket(
        scope,
        "LakeBucket",
        bucket_name=bucket_name,
        encryption=s3.BucketEncryption.KMS,
        encryption_key=data_key,
        bucket_key_enabled=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        minimum_tls_version=1.2,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        versioned=True,
        server_access_logs_bucket=log_bucket,
        server_access_logs_prefix="lake-bucket/",
        lifecycle_rules=_lake_lifecycle(config, prefix),
        removal_policy=RemovalPolicy.RETAIN,
    )
    return Storage(
        lake_key=data_key,
        table_key=keys["table"],
        results_key=keys["results"],
        queue_key=keys["queue"],
        logs_key=logs_key,
        lake_bucket=lake_bucket,
        log_bucket=log_bucket,
        lake_prefix=prefix,
        bucket_name=bucket_name,
    )


def build_logs_key(scope: Construct) -> kms.Key:
    """The log groups' key: CloudWatch Logs of this account and region may use it for its log groups.

    CloudWatch Logs encrypts a log group with a customer-managed key only if the key policy lets the
    regional service principal use it, scoped by the ``kms:EncryptionContext:aws:logs:arn`` context
    ("Encrypt log data in CloudWatch Logs using AWS KMS", Amazon CloudWatch Logs User Guide).
    """
    key = kms.Key(
        scope,
        "LogsKey",
        description="walletlake: CloudWatch log groups (the API's requests and audit lines, functions' logs)",
        enable_key_rotation=True,
        removal_policy=RemovalPolicy.RETAIN,
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchLogsOfThisAccount",
            principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
            actions=[
                "kms:Encrypt*",
                "kms:Decrypt*",
                "kms:ReEncrypt*",
                "kms:GenerateDataKey*",
                "kms:Describe*",
            ],
            resources=["*"],
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": (
                        f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:*"
                    )
                }
            },
        )
    )
    return key


def _lake_lifecycle(config: DeploymentConfig, prefix: str) -> list[s3.LifecycleRule]:
    """Old partitions to cheaper storage; superseded versions and stale uploads expire.

    Objects are written on (or, after compaction, just after) their ``dt`` day, so an object's
    age is its partition's age. Intelligent-Tiering moves compacted days that nobody queries to
    its infrequent tiers with no retrieval fee; after a year, Glacier Instant Retrieval is the
    cheapest class Athena still reads directly. Compaction deletes landing files: with
    versioning they become non-current and expire after ``noncurrent_version_days``.
    """
    return [
        s3.LifecycleRule(
            id="lake-tiering",
            prefix=f"{prefix}/",
            transitions=[
                s3.Transition(
                    storage_class=s3.StorageClass.INTELLIGENT_TIERING,
                    transition_after=Duration.days(config.lake_intelligent_tiering_days),
                ),
                s3.Transition(
                    storage_class=s3.StorageClass.GLACIER_INSTANT_RETRIEVAL,
                    transition_after=Duration.days(config.lake_glacier_ir_days),
                ),
            ],
        ),
        s3.LifecycleRule(
            id="expire-noncurrent-versions",
            noncurrent_version_expiration=Duration.days(config.noncurrent_version_days),
            expired_object_delete_marker=True,
            abort_incomplete_multipart_upload_after=Duration.days(7),
        ),
        s3.LifecycleRule(
            id="expire-athena-results",
            prefix=ATHENA_RESULTS_PREFIX,
            expiration=Duration.days(config.athena_results_days),
        ),
    ]


def grant_key_via(role: iam.IRole, key: kms.IKey, service: str, *actions: str) -> None:
    """Let ``role`` use ``key`` only through ``service`` in this region (``kms:ViaService``).

    The role cannot call KMS with the key directly, only have DynamoDB (or S3, SQS) use it on its
    behalf ("kms:ViaService", AWS KMS Developer Guide, conditions).
    """
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=list(actions),
            resources=[key.key_arn],
            conditions={"StringEquals": {"kms:ViaService": f"{service}.{Aws.REGION}.amazonaws.com"}},
        )
    )
