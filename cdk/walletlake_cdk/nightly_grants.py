"""What each function and state machine of the nightly and hourly jobs may do: one grant per unit.

Each unit's function gets only what its unit does (its prefixes, its tables, its keys through
their services); :mod:`walletlake_cdk.nightly` builds the jobs and calls these.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Final

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn

from contracts.lake_layout import ICEBERG_FOLDER, table_prefix
from contracts.lake_tables import TABLES
from contracts.settings import DEFAULT_UNLOAD_PREFIX
from lake.snapshots import TABLE as SNAPSHOT_TABLE
from queries.reconciliation_runs import summary_key
from walletlake_cdk.catalog import Catalog
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.storage import (
    ATHENA_RESULTS_PREFIX,
    S3_READ_KEY_ACTIONS,
    S3_WRITE_KEY_ACTIONS,
    Storage,
    grant_key_via,
)
from walletlake_cdk.stream_consumer import iceberg_glue_arns

#: Where the reconciliation's UNLOADs write: inside the workgroup's results prefix (checked in
#: tests/cdk/test_cdk.py), so the results' lifecycle rule expires them and no new S3 grant is needed.
UNLOAD_PREFIX: Final = DEFAULT_UNLOAD_PREFIX

#: Athena actions a classification needs for its rare second pass (awswrangler's read path).
ATHENA_ACTIONS: Final = (
    "athena:StartQueryExecution",
    "athena:GetQueryExecution",
    "athena:GetQueryResults",
    "athena:StopQueryExecution",
    "athena:GetWorkGroup",
)
#: What Step Functions' ``athena:startQueryExecution.sync`` calls with the state machine's role.
ATHENA_SYNC_ACTIONS: Final = (
    "athena:StartQueryExecution",
    "athena:GetQueryExecution",
    "athena:StopQueryExecution",
    "athena:GetWorkGroup",
    "athena:GetDataCatalog",
)
#: What pinning and tagging a night's snapshots asks of Glue's Iceberg REST endpoint (planning
#: tags them before anything reads them; classification tags them ``reconciled-{day}``).
NIGHT_TAG_GLUE_ACTIONS: Final = ("glue:GetCatalog", "glue:GetTable", "glue:UpdateTable")
#: Glue reads of the lake tables (Athena resolves the tables through the caller's permissions).
GLUE_READ_ACTIONS: Final = ("glue:GetDatabase", "glue:GetTable", "glue:GetTables", "glue:GetPartitions")


@dataclasses.dataclass(frozen=True)
class Grants:
    config: DeploymentConfig
    table: dynamodb.Table
    storage: Storage
    catalog: Catalog


# --- grants: each unit's function gets only what its unit does --------------------------------


def list_lake(role: iam.IRole, grants: Grants, *, extra_prefixes: tuple[str, ...] = ()) -> None:
    storage = grants.storage
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[storage.lake_bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{storage.lake_prefix}/*", *extra_prefixes]}},
        )
    )


def grant_compaction_plan(role: iam.IRole, grants: Grants) -> None:
    """Planning lists the day's landing files; it reads and writes nothing."""
    list_lake(role, grants)


def grant_compaction_unit(role: iam.IRole, grants: Grants) -> None:
    """A unit reads its landing files, writes its compacted file and deletes the inputs."""
    storage = grants.storage
    list_lake(role, grants)
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], resources=[storage.lake_objects_arn]
        )
    )
    grant_key_via(role, storage.lake_key, "s3", *S3_WRITE_KEY_ACTIONS)


def grant_snapshot_segment(role: iam.IRole, grants: Grants) -> None:
    """A segment scans the table and writes one snapshot object under the lake prefix."""
    table = grants.table
    role.add_to_principal_policy(iam.PolicyStatement(actions=["dynamodb:Scan"], resources=[table.table_arn]))
    if table.encryption_key is not None:
        grant_key_via(role, table.encryption_key, "dynamodb", "kms:Decrypt")
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:PutObject"],
            resources=[
                grants.storage.lake_bucket.arn_for_objects(
                    f"{table_prefix(grants.storage.lake_prefix, SNAPSHOT_TABLE)}*"
                )
            ],
        )
    )
    grant_key_via(role, grants.storage.lake_key, "s3", *S3_WRITE_KEY_ACTIONS)


def grant_reconcile_plan(role: iam.IRole, grants: Grants) -> None:
    """Planning lists snapshots and reads earlier runs' summaries (catch-up days); on the Iceberg
    lake it also pins the tables' snapshots and tags them (:func:`grant_night_tags`)."""
    list_lake(role, grants)
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[grants.storage.lake_objects_arn])
    )
    if grants.config.iceberg:
        grant_night_tags(role, grants)
        # the endpoint writes the table's new metadata file with the caller's permissions, as
        # for the committer's commits (the lake prefix: the nightly roles' reviewed object scope)
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[grants.storage.lake_objects_arn])
        )
        grant_key_via(role, grants.storage.lake_key, "s3", *S3_WRITE_KEY_ACTIONS)
    else:
        grant_key_via(role, grants.storage.lake_key, "s3", *S3_READ_KEY_ACTIONS)


def grant_night_tags(role: iam.IRole, grants: Grants) -> None:
    """Load the stream's Iceberg tables and tag their snapshots through Glue's Iceberg REST
    endpoint: GetConfig → ``glue:GetCatalog``, LoadTable → ``glue:GetTable``, a tag's commit
    (UpdateTable) → ``glue:UpdateTable``; on the catalog, the lake's database and its Iceberg
    tables only (``walletlake_cdk.committer`` has the endpoint's mapping)."""
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=list(NIGHT_TAG_GLUE_ACTIONS),
            resources=iceberg_glue_arns(grants.table.stack, grants.config),
        )
    )


def classify_output_arns(storage: Storage, *, iceberg: bool = False) -> list[str]:
    """What a day's classification writes: its daily balances, its findings, its summaries, and on
    the Iceberg lake the metadata files of its ``reconciled-{day}`` tags' commits."""
    prefix = storage.lake_prefix
    reports = summary_key(prefix, dt.date(2000, 1, 1)).split("/dt=", 1)[0]
    arns = [
        storage.lake_bucket.arn_for_objects(f"{table_prefix(prefix, table)}*")
        for table in ("daily_balances", "reconciliation")
    ] + [storage.lake_bucket.arn_for_objects(f"{reports}/*")]
    if iceberg:
        arns.append(storage.lake_bucket.arn_for_objects(f"{prefix}/{ICEBERG_FOLDER}/*/metadata/*"))
    return arns


def grant_reconcile_classify(role: iam.IRole, grants: Grants) -> None:
    """Reads the UNLOADed results, writes the day's tables and summary, and may ask Athena once more."""
    storage = grants.storage
    list_lake(role, grants, extra_prefixes=(f"{UNLOAD_PREFIX}/*", f"{ATHENA_RESULTS_PREFIX}*"))
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[storage.athena_results_arn])
    )
    # Reads the lake (Athena's second pass reads its tables with this role); writes only the day's
    # outputs: daily balances, findings and the summaries.
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[storage.lake_objects_arn])
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:PutObject"], resources=classify_output_arns(storage, iceberg=grants.config.iceberg)
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:PutObject"], resources=[storage.athena_results_arn])
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:GetBucketLocation"], resources=[storage.lake_bucket.bucket_arn])
    )
    grant_key_via(role, storage.lake_key, "s3", *S3_WRITE_KEY_ACTIONS)
    grant_key_via(role, storage.results_key, "s3", *S3_WRITE_KEY_ACTIONS)
    grant_athena(role, grants)
    if grants.config.iceberg:  # the day's ``reconciled-{day}`` tags
        grant_night_tags(role, grants)


def grant_athena(role: iam.IRole, grants: Grants) -> None:
    """Run queries in the workgroup over the lake's Glue tables."""
    settings = grants.config.settings
    stack = grants.table.stack
    workgroup_arn = stack.format_arn(
        service="athena", resource="workgroup", resource_name=settings.athena_workgroup
    )
    role.add_to_principal_policy(iam.PolicyStatement(actions=list(ATHENA_ACTIONS), resources=[workgroup_arn]))
    grant_glue_reads(role, grants)


def grant_glue_reads(role: iam.IRole, grants: Grants) -> None:
    settings = grants.config.settings
    stack = grants.table.stack
    catalog_arn = stack.format_arn(service="glue", resource="catalog")
    database_arn = stack.format_arn(service="glue", resource="database", resource_name=settings.glue_database)
    table_arns = [
        stack.format_arn(service="glue", resource="table", resource_name=f"{settings.glue_database}/{name}")
        for name in TABLES
    ]
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=list(GLUE_READ_ACTIONS), resources=[catalog_arn, database_arn, *table_arns]
        )
    )


def grant_athena_queries(state_machine: sfn.StateMachine, grants: Grants) -> None:
    """What Athena needs from the caller to run the UNLOADs: read the lake, write results."""
    storage = grants.storage
    role = state_machine.role
    stack = grants.table.stack
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=list(ATHENA_SYNC_ACTIONS),
            resources=[
                stack.format_arn(
                    service="athena",
                    resource="workgroup",
                    resource_name=grants.config.settings.athena_workgroup,
                ),
                stack.format_arn(service="athena", resource="datacatalog", resource_name="AwsDataCatalog"),
            ],
        )
    )
    grant_glue_reads(role, grants)
    list_lake(role, grants, extra_prefixes=(f"{ATHENA_RESULTS_PREFIX}*",))
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:GetObject"], resources=[storage.lake_objects_arn, storage.athena_results_arn]
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:PutObject", "s3:AbortMultipartUpload"], resources=[storage.athena_results_arn]
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:GetBucketLocation"], resources=[storage.lake_bucket.bucket_arn])
    )
    grant_key_via(role, storage.lake_key, "s3", *S3_READ_KEY_ACTIONS)
    grant_key_via(role, storage.results_key, "s3", *S3_WRITE_KEY_ACTIONS)
