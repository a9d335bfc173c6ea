"""What the API tasks need to read a wallet's history from the lake, and nothing more.

A history page past DynamoDB's records reads the ledger's Iceberg table directly
(:mod:`lake.ledger_history`): the table's metadata through Glue's Iceberg REST endpoint (GetConfig →
``glue:GetCatalog``, LoadNamespaceMetadata → ``glue:GetDatabase``, LoadTable → ``glue:GetTable``:
"AWS Glue REST APIs for Apache Iceberg specifications"), then the ledger's metadata and data files
from S3 (``s3:GetObject`` under the ledger's folder only, decrypted with the lake's key through S3).
The tasks' subnets have no route out, so Glue is reached through an interface endpoint of its own,
whose policy, like every endpoint's of the fleet, lets through only the task role's reads of this
lake; the S3 gateway endpoint's policy gains the same reads of the ledger's files.

The function front (``api_front=lambda``) does not read the lake: its layer has no pyiceberg, and
a history reaching past DynamoDB answers 501 ``history_needs_lake`` there (docs/architecture.md).
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam

from contracts.lake_layout import ICEBERG_FOLDER
from walletlake_cdk.api_service import ApiService
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.storage import S3_READ_KEY_ACTIONS, Storage, grant_key_via
from walletlake_cdk.stream_consumer import ICEBERG_READ_ACTIONS


def grant_history_reads(config: DeploymentConfig, fleet: ApiService, storage: Storage) -> None:
    """Let the tasks read the ledger's Iceberg table (an Iceberg lake only), through their endpoints."""
    if not config.iceberg:
        return
    role = fleet.task_role
    stack = Stack.of(role)
    database = config.settings.glue_database
    glue = [
        stack.format_arn(service="glue", resource="catalog"),
        stack.format_arn(service="glue", resource="database", resource_name=database),
        stack.format_arn(service="glue", resource="table", resource_name=f"{database}/ledger"),
    ]
    prefix = config.settings.lake_prefix
    ledger_files = storage.lake_bucket.arn_for_objects(f"{prefix}/{ICEBERG_FOLDER}/ledger/*")
    role.add_to_principal_policy(iam.PolicyStatement(actions=list(ICEBERG_READ_ACTIONS), resources=glue))
    role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[ledger_files]))
    grant_key_via(role, storage.lake_key, "s3", *S3_READ_KEY_ACTIONS)
    task = iam.ArnPrincipal(role.role_arn)
    s3_endpoint = fleet.vpc.node.find_child("S3Endpoint")
    assert isinstance(s3_endpoint, ec2.GatewayVpcEndpoint)
    s3_endpoint.add_to_policy(
        iam.PolicyStatement(principals=[task], actions=["s3:GetObject"], resources=[ledger_files])
    )
    glue_endpoint = fleet.vpc.add_interface_endpoint(
        "GlueEndpoint", service=ec2.InterfaceVpcEndpointAwsService.GLUE, private_dns_enabled=True
    )
    glue_endpoint.add_to_policy(
        iam.PolicyStatement(principals=[task], actions=list(ICEBERG_READ_ACTIONS), resources=glue)
    )
