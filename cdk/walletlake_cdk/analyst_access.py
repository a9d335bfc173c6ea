"""The managed policy for people and tools that query the deployed lake (CLI, notebooks).

Attach it to an analyst's role or SSO permission set: it allows running queries in the walletlake
workgroup, reading the lake's Glue tables and objects (with the KMS key that encrypts them), and
writing results to the workgroup's own prefix. It allows no write to the lake or the table.

The Iceberg tables need nothing else: Athena reads an Iceberg table through the same Glue
``GetTable`` (its ``metadata_location``) and the caller's S3 reads of its metadata and data files,
all under the lake prefix (``lake/iceberg/``) this policy already covers. **Access is IAM only, no
Lake Formation**: the stack registers no S3 location with Lake Formation and grants no Lake
Formation permission, so the account's default (``IAMAllowedPrincipals`` on new databases and
tables) applies. An account that manages the catalog with Lake Formation must register the lake
location and grant ``SELECT``/``DESCRIBE`` on the database's tables to the analysts' roles (and
``lakeformation:GetDataAccess`` in this policy): that is a change of governance, not of this app.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from contracts.lake_tables import TABLES
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.nightly import ATHENA_ACTIONS, GLUE_READ_ACTIONS
from walletlake_cdk.storage import ATHENA_RESULTS_PREFIX, Storage


def build_analyst_policy(scope: Construct, config: DeploymentConfig, storage: Storage) -> iam.ManagedPolicy:
    """Read-only access to the lake through Athena in the walletlake workgroup."""
    settings = config.settings
    stack = Stack.of(scope)
    glue_resources = [
        stack.format_arn(service="glue", resource="catalog"),
        stack.format_arn(service="glue", resource="database", resource_name=settings.glue_database),
        *(
            stack.format_arn(
                service="glue", resource="table", resource_name=f"{settings.glue_database}/{name}"
            )
            for name in TABLES
        ),
    ]
    bucket = storage.lake_bucket
    return iam.ManagedPolicy(
        scope,
        "AnalystPolicy",
        description="walletlake: query the lake with Athena (read-only)",
        statements=[
            iam.PolicyStatement(
                actions=[
                    *ATHENA_ACTIONS,
                    "athena:ListNamedQueries",
                    "athena:GetNamedQuery",
                    "athena:BatchGetNamedQuery",
                ],
                resources=[
                    stack.format_arn(
                        service="athena", resource="workgroup", resource_name=settings.athena_workgroup
                    )
                ],
            ),
            iam.PolicyStatement(actions=list(GLUE_READ_ACTIONS), resources=glue_resources),
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[storage.lake_objects_arn]),
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject"], resources=[storage.athena_results_arn]
            ),
            iam.PolicyStatement(actions=["s3:GetBucketLocation"], resources=[bucket.bucket_arn]),
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={
                    "StringLike": {"s3:prefix": [f"{storage.lake_prefix}/*", f"{ATHENA_RESULTS_PREFIX}*"]}
                },
            ),
            iam.PolicyStatement(
                actions=["kms:Decrypt", "kms:GenerateDataKey"], resources=[storage.data_key.key_arn]
            ),
        ],
    )
