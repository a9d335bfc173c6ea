"""The API's audit trail on AWS: VPC Lattice's access logs, kept, encrypted and queryable.

Lattice writes one JSON object per request the service saw, those its auth policies denied
included (``authDeniedReason``), with the verified caller (``callerPrincipal``): "Access log
contents", VPC Lattice User Guide (monitoring-access-logs.html). The service subscribes two
destinations (:mod:`walletlake_cdk.lattice_front`):

* **S3**, under :data:`contracts.audit_log.ACCESS_LOG_PREFIX` of the lake bucket, expired after
  :data:`~contracts.audit_log.ACCESS_LOG_RETENTION_DAYS` by a lifecycle rule, and read by the Glue
  table :data:`~contracts.audit_log.AUDIT_TABLE` (JSON SerDe, columns from
  :data:`~contracts.audit_log.AUDIT_COLUMNS`) that the named query ``who_did_what`` reads. The
  delivery writes as ``delivery.logs.amazonaws.com`` ("Logs sent to Amazon S3", Amazon CloudWatch
  Logs User Guide, AWS-logs-and-resource-policy.html): the bucket policy lets it put objects under
  the prefix only, for this account's deliveries, and the lake key lets it make data keys.
  Athena reads a Hive table's location with its sub-folders, so the date folders the delivery
  writes under the prefix need no partitions.
* **CloudWatch Logs**, a log group with the same retention, encrypted with the logs key, for the
  on-call's Logs Insights.

The server's own audit line per request (``WALLETLAKE_AUDIT_LOG=stdout``) reaches the tasks' log
group, which is encrypted with the same key.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from contracts.audit_log import ACCESS_LOG_PREFIX, ACCESS_LOG_RETENTION_DAYS, AUDIT_COLUMNS, AUDIT_TABLE
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.lattice_front import AccessLogDestinations
from walletlake_cdk.storage import Storage

#: The service principal AWS's vended-log deliveries write to S3 as.
LOG_DELIVERY: Final = "delivery.logs.amazonaws.com"
#: The SerDe of Lattice's JSON lines (Athena, "OpenX JSON SerDe").
JSON_SERDE: Final = "org.openx.data.jsonserde.JsonSerDe"


@dataclasses.dataclass(frozen=True)
class AuditTrail:
    """Where the access logs go and the table analysts query them through."""

    destinations: AccessLogDestinations
    log_group: logs.LogGroup
    table: glue.CfnTable


def access_log_location(bucket_name: str) -> str:
    """``s3://`` location of the access logs (the Glue table's)."""
    return f"s3://{bucket_name}/{ACCESS_LOG_PREFIX}/"


def build_audit_trail(scope: Construct, config: DeploymentConfig, storage: Storage) -> AuditTrail:
    """The S3 prefix (policy, lifecycle), the log group and the Glue table of the access logs."""
    stack = Stack.of(scope)
    bucket = storage.lake_bucket
    bucket.add_lifecycle_rule(
        id="expire-lattice-access-logs",
        prefix=f"{ACCESS_LOG_PREFIX}/",
        expiration=Duration.days(ACCESS_LOG_RETENTION_DAYS),
    )
    _admit_log_delivery(bucket, storage)
    log_group = logs.LogGroup(
        scope,
        "ApiAccessLogGroup",
        retention=logs.RetentionDays.SEVEN_YEARS,
        encryption_key=storage.logs_key,
        removal_policy=RemovalPolicy.RETAIN,
    )
    table = glue.CfnTable(
        scope,
        "GlueTableApiAccessLog",
        catalog_id=stack.account,
        database_name=config.settings.glue_database,
        table_input=glue.CfnTable.TableInputProperty(
            name=AUDIT_TABLE,
            description="VPC Lattice access logs of the API: who asked what, when, and the answer",
            table_type="EXTERNAL_TABLE",
            parameters={"classification": "json", "EXTERNAL": "TRUE"},
            storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                columns=[glue.CfnTable.ColumnProperty(name=name, type=kind) for name, kind in AUDIT_COLUMNS],
                location=access_log_location(storage.bucket_name),
                input_format="org.apache.hadoop.mapred.TextInputFormat",
                output_format="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                serde_info=glue.CfnTable.SerdeInfoProperty(
                    serialization_library=JSON_SERDE,
                    parameters={"ignore.malformed.json": "true"},
                ),
            ),
        ),
    )
    return AuditTrail(
        destinations=AccessLogDestinations(
            s3_arn=f"{bucket.bucket_arn}/{ACCESS_LOG_PREFIX}", log_group_arn=log_group.log_group_arn
        ),
        log_group=log_group,
        table=table,
    )


def _admit_log_delivery(bucket: s3.Bucket, storage: Storage) -> None:
    """Lattice's delivery may put objects under the prefix (and read the ACL), for this account only."""
    this_account = {"aws:SourceAccount": Aws.ACCOUNT_ID}
    from_logs = {"aws:SourceArn": f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:*"}
    delivery = iam.ServicePrincipal(LOG_DELIVERY)
    bucket.add_to_resource_policy(
        iam.PolicyStatement(
            sid="LatticeAccessLogDelivery",
            principals=[delivery],
            actions=["s3:PutObject"],
            resources=[bucket.arn_for_objects(f"{ACCESS_LOG_PREFIX}/AWSLogs/{Aws.ACCOUNT_ID}/*")],
            conditions={
                "StringEquals": {**this_account, "s3:x-amz-acl": "bucket-owner-full-control"},
                "ArnLike": from_logs,
            },
        )
    )
    bucket.add_to_resource_policy(
        iam.PolicyStatement(
            sid="LatticeAccessLogAclCheck",
            principals=[delivery],
            actions=["s3:GetBucketAcl"],
            resources=[bucket.bucket_arn],
            conditions={"StringEquals": this_account, "ArnLike": from_logs},
        )
    )
    storage.lake_key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="LatticeAccessLogDeliveryKey",
            principals=[delivery],
            actions=["kms:GenerateDataKey*"],
            resources=["*"],
            conditions={"StringEquals": this_account, "ArnLike": from_logs},
        )
    )
