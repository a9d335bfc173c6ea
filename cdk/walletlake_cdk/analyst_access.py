"""The managed policy for people and tools that query the deployed lake (CLI, notebooks).

Attach it to an analyst's role or SSO permission set: it allows running queries in the walletlake
analysts' workgroup, reading the lake's Glue tables and objects (with the KMS key that encrypts
them, through S3 only) and the API's access logs (``api_access_log``), and writing results to that
workgroup's own prefix. It allows no write to the lake, the table or the nightly job's results.

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

from aws_cdk import Aws, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from contracts.audit_log import ACCESS_LOG_PREFIX, AUDIT_TABLE
from contracts.lake_tables import TABLES
from walletlake_cdk.catalog import analyst_workgroup
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.nightly_grants import ATHENA_ACTIONS, GLUE_READ_ACTIONS
from walletlake_cdk.storage import ANALYST_RESULTS_PREFIX, Storage


def build_analyst_policy(scope: Construct, config: DeploymentConfig, storage: Storage) -> iam.ManagedPolicy:
    """Read-only access to the lake through Athena in the analysts' own workgroup.

    Queries run in the analysts' workgroup only, whose results land under
    :data:`~walletlake_cdk.storage.ANALYST_RESULTS_PREFIX`: the one prefix this policy lets them
    write. The nightly job's workgroup writes its results and UNLOADs (``unload_prefix``) elsewhere
    under ``athena-results/``, which an analyst can neither write nor overwrite, so nobody but the
    nightly job can change what its classification reads back. The named queries live in the
    nightly job's workgroup; analysts may read them, not run queries there.
    """
    settings = config.settings
    stack = Stack.of(scope)
    glue_resources = [
        stack.format_arn(service="glue", resource="catalog"),
        stack.format_arn(service="glue", resource="database", resource_name=settings.glue_database),
        *(
            stack.format_arn(
                service="glue", resource="table", resource_name=f"{settings.glue_database}/{name}"
            )
            for name in (*TABLES, AUDIT_TABLE)
        ),
    ]
    bucket = storage.lake_bucket
    workgroup_arn = stack.format_arn(
        service="athena", resource="workgroup", resource_name=analyst_workgroup(settings.athena_workgroup)
    )
    named_queries_arn = stack.format_arn(
        service="athena", resource="workgroup", resource_name=settings.athena_workgroup
    )
    return iam.ManagedPolicy(
        scope,
        "AnalystPolicy",
        description="walletlake: query the lake with Athena (read-only)",
        statements=[
            iam.PolicyStatement(actions=list(ATHENA_ACTIONS), resources=[workgroup_arn]),
            iam.PolicyStatement(
                actions=["athena:ListNamedQueries", "athena:GetNamedQuery", "athena:BatchGetNamedQuery"],
                resources=[named_queries_arn],
            ),
            iam.PolicyStatement(actions=list(GLUE_READ_ACTIONS), resources=glue_resources),
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[storage.lake_objects_arn, bucket.arn_for_objects(f"{ACCESS_LOG_PREFIX}/*")],
            ),
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject"], resources=[storage.analyst_results_arn]
            ),
            iam.PolicyStatement(actions=["s3:GetBucketLocation"], resources=[bucket.bucket_arn]),
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={
                    "StringLike": {
                        "s3:prefix": [
                            f"{storage.lake_prefix}/*",
                            f"{ACCESS_LOG_PREFIX}/*",
                            f"{ANALYST_RESULTS_PREFIX}*",
                        ]
                    }
                },
            ),
            _key_via_s3(storage.lake_key, "kms:Decrypt"),
            _key_via_s3(storage.results_key, "kms:Decrypt", "kms:GenerateDataKey"),
        ],
    )


def _key_via_s3(key: kms.IKey, *actions: str) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        actions=list(actions),
        resources=[key.key_arn],
        conditions={"StringEquals": {"kms:ViaService": f"s3.{Aws.REGION}.amazonaws.com"}},
    )
