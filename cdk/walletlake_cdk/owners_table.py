"""The DynamoDB table of which wallets each person owns, from :data:`contracts.owners_table.OWNERS_TABLE`.

One item per owned wallet, put in the wallet's creation transaction; ``GET …/wallets/me/`` is one
consistent Query of it. Production settings beside the contract's keys: on demand (a wallet is
created far more rarely than money moves), point-in-time recovery, deletion protection and
retained (a restored ``wallets`` table needs its owners' index of the same moment), encrypted with
the stack's customer-managed key (it names people).
"""

from __future__ import annotations

from typing import Final

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from contracts.owners_table import OWNERS_TABLE
from contracts.wallets_table import KeyAttribute, TableSpec
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.storage import TABLE_KEY_ACTIONS, grant_key_via

#: What the API does on it, and nothing else: PutItem (the entry's Put inside the creation's
#: TransactWriteItems, which IAM authorizes per contained operation) and Query (``me/``).
OWNERS_ACTIONS: Final = ("dynamodb:PutItem", "dynamodb:Query")


def key_attribute(key: KeyAttribute) -> dynamodb.Attribute:
    """A contract's key attribute as CDK declares it."""
    kind = dynamodb.AttributeType.NUMBER if key.type == "N" else dynamodb.AttributeType.STRING
    return dynamodb.Attribute(name=key.name, type=kind)


def build_owners_table(
    scope: Construct, config: DeploymentConfig, key: kms.IKey, spec: TableSpec = OWNERS_TABLE
) -> dynamodb.Table:
    """The owners' index: keys from the contract, no stream, no TTL; retained on stack deletion."""
    if spec.sort_key is None or spec.stream_view_type is not None or spec.ttl_attribute is not None:
        raise ValueError("the owners table is keyed by owner and wallet, with no stream and no TTL")
    return dynamodb.Table(
        scope,
        "OwnersTable",
        table_name=config.settings.owners_table,
        partition_key=key_attribute(KeyAttribute(spec.partition_key)),
        sort_key=key_attribute(spec.sort_key),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        deletion_protection=True,
        encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
        encryption_key=key,
        removal_policy=RemovalPolicy.RETAIN,
    )


def grant_owners(table: dynamodb.Table, role: iam.IRole) -> None:
    """Let the API's role (tasks or function) put a wallet's entry and list a person's wallets."""
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=list(OWNERS_ACTIONS), resources=[table.table_arn])
    )
    if table.encryption_key is not None:
        grant_key_via(role, table.encryption_key, "dynamodb", *TABLE_KEY_ACTIONS)
