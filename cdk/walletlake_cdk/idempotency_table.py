"""The DynamoDB table of idempotency records, from :data:`contracts.idempotency_table.IDEMPOTENCY_TABLE`.

One record per deposit or transfer, put in the movement's own TransactWriteItems and kept for the
idempotency window (2 days) by TTL. Its own table, not items of ``wallets``: no stream (the
consumer Lambda is never invoked for a record's INSERT or its TTL REMOVE) and no records in the
nightly snapshot's Scan of ``wallets`` (docs/capacity.md).

Production settings beside the contract's key and TTL:

* **On demand**, whatever ``billing_mode`` the wallets table has: its writes follow the wallets
  table's one for one (a record per transaction), and a second provisioned capacity plan would be
  one more thing to size; launch-day throughput comes from the same warm write units as the
  wallets table's when they are asked for.
* **Point-in-time recovery, deletion protection, retained**: restoring ``wallets`` to a moment
  without the records of that moment would let a client's repeat within the window pay twice.
* **Encrypted with the stack's customer-managed key** (the wallets table's): a record holds wallet
  ids and amounts.
"""

from __future__ import annotations

from typing import Final

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from contracts.idempotency_table import IDEMPOTENCY_TABLE
from contracts.wallets_table import TableSpec
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.owners_table import key_attribute
from walletlake_cdk.storage import TABLE_KEY_ACTIONS, grant_key_via

#: What the write path does on the records, and nothing else: PutItem (the record's Put inside
#: TransactWriteItems, which IAM authorizes per contained operation) and GetItem (a replay whose
#: refusal did not return the record; ``GET .../transactions/{nonce}``).
IDEMPOTENCY_ACTIONS: Final = ("dynamodb:GetItem", "dynamodb:PutItem")
#: What a wallet's history does on the records' indexes (:data:`contracts.idempotency_table.BY_WALLET`
#: and ``BY_PAYEE``), and nothing else.
HISTORY_ACTIONS: Final = ("dynamodb:Query",)


def build_idempotency_table(
    scope: Construct, config: DeploymentConfig, key: kms.IKey, spec: TableSpec = IDEMPOTENCY_TABLE
) -> dynamodb.Table:
    """The records table: key and TTL from the contract, no stream; retained on stack deletion."""
    if spec.stream_view_type is not None:
        raise ValueError("the idempotency table has no stream: nothing reads the records' changes")
    warm = config.warm_write_units_per_second
    table = dynamodb.Table(
        scope,
        "IdempotencyTable",
        table_name=config.settings.idempotency_table,
        partition_key=dynamodb.Attribute(name=spec.partition_key, type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        time_to_live_attribute=spec.ttl_attribute,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        deletion_protection=True,
        encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
        encryption_key=key,
        removal_policy=RemovalPolicy.RETAIN,
        warm_throughput=dynamodb.WarmThroughput(write_units_per_second=warm) if warm else None,
    )
    for index in spec.indexes:
        table.add_global_secondary_index(
            index_name=index.name,
            partition_key=key_attribute(index.partition_key),
            sort_key=key_attribute(index.sort_key),
            projection_type=dynamodb.ProjectionType.INCLUDE,
            non_key_attributes=list(index.projected),
        )
    return table


def index_arns(table: dynamodb.ITable, spec: TableSpec = IDEMPOTENCY_TABLE) -> list[str]:
    """The ARNs of the records' indexes, each by name (a wildcard would grant indexes added later)."""
    return [f"{table.table_arn}/index/{index.name}" for index in spec.indexes]


def grant_write_path(table: dynamodb.Table, role: iam.IRole) -> None:
    """Let the write path's role (API tasks or API function) put and read records, nothing else."""
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=list(IDEMPOTENCY_ACTIONS), resources=[table.table_arn])
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=list(HISTORY_ACTIONS), resources=index_arns(table))
    )
    if table.encryption_key is not None:
        grant_key_via(role, table.encryption_key, "dynamodb", *TABLE_KEY_ACTIONS)
