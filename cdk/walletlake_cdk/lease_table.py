"""The compaction lease's DynamoDB table (:mod:`lake.compaction_lease`): the hourly and nightly
compactions take it so that they never run at once."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from contracts.lease_table import LEASE_TABLE
from walletlake_cdk.config import DeploymentConfig


def build_lease_table(scope: Construct, config: DeploymentConfig) -> dynamodb.Table:
    """The compaction lease's table: one small item, expired by TTL if never deleted."""
    return dynamodb.Table(
        scope,
        "LeaseTable",
        table_name=config.settings.lease_table,
        partition_key=dynamodb.Attribute(name=LEASE_TABLE.partition_key, type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        time_to_live_attribute=LEASE_TABLE.ttl_attribute,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        removal_policy=RemovalPolicy.DESTROY,
    )
