"""The DynamoDB table ``wallets``, created from :data:`contracts.wallets_table.WALLETS_TABLE`.

The key, the stream view and the TTL attribute come from the table contract; this module adds
only what production needs around it: capacity mode, point-in-time recovery, deletion
protection and encryption with the stack's customer-managed key.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

from contracts.wallets_table import WALLETS_TABLE, TableSpec
from walletlake_cdk.config import DeploymentConfig

#: Target utilisation of provisioned capacity: leaves room for a burst while auto scaling reacts.
AUTO_SCALING_TARGET_PERCENT = 70


def build_ledger_table(
    scope: Construct, config: DeploymentConfig, key: kms.IKey, spec: TableSpec = WALLETS_TABLE
) -> dynamodb.Table:
    """The wallets table with its stream; retained (and deletion-protected) on stack deletion."""
    if spec.stream_view_type is None:
        raise ValueError("the wallets table needs a stream: the lake is built from it")
    provisioned = config.billing_mode == "provisioned"
    table = dynamodb.Table(
        scope,
        "WalletsTable",
        table_name=config.settings.table,
        partition_key=dynamodb.Attribute(name=spec.partition_key, type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PROVISIONED
        if provisioned
        else dynamodb.BillingMode.PAY_PER_REQUEST,
        read_capacity=config.read_capacity if provisioned else None,
        write_capacity=config.write_capacity if provisioned else None,
        stream=dynamodb.StreamViewType[spec.stream_view_type],
        time_to_live_attribute=spec.ttl_attribute,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        deletion_protection=True,
        encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
        encryption_key=key,
        removal_policy=RemovalPolicy.RETAIN,
        warm_throughput=_warm_throughput(config),
    )
    if provisioned:
        table.auto_scale_read_capacity(
            min_capacity=config.read_capacity, max_capacity=config.max_read_capacity
        ).scale_on_utilization(target_utilization_percent=AUTO_SCALING_TARGET_PERCENT)
        table.auto_scale_write_capacity(
            min_capacity=config.write_capacity, max_capacity=config.max_write_capacity
        ).scale_on_utilization(target_utilization_percent=AUTO_SCALING_TARGET_PERCENT)
    return table


def _warm_throughput(config: DeploymentConfig) -> dynamodb.WarmThroughput | None:
    """Pre-warmed capacity when asked for, so launch-day traffic at full load is not throttled."""
    if not (config.warm_write_units_per_second or config.warm_read_units_per_second):
        return None
    return dynamodb.WarmThroughput(
        write_units_per_second=config.warm_write_units_per_second or None,
        read_units_per_second=config.warm_read_units_per_second or None,
    )
