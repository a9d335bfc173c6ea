"""The Iceberg committer: one function, invoked every minute, that commits what the consumer landed.

``walletlake.handlers.commit.handler`` reads the landing log (``lake/_landed/``) past what each
table has committed and appends the new batches' data files, one commit per table and interval
(``lake.committer``), until its minute is over. EventBridge's finest schedule is one minute, so
the function's timeout (70 s) covers the minute plus a cold start, and **reserved concurrency 1**
keeps one committer at a time: a second one would only have its commits refused by the catalog
and decided again (correct, but wasted), and a slow invocation makes the next one wait (throttled
and retried by EventBridge) instead of overlapping.

Its grants (:func:`grant_committer`):

- S3: list the landing log, read its records (and delete them past retention, hourly), read the
  data files' footers and the tables' metadata, write the new manifests and manifest lists that
  pyiceberg writes beside the data (``lake/iceberg/*/metadata/``); for a replayed batch, read its
  files and the table's rows of their time span and write the rows it keeps beside them
  (``lake.identity_guard``: within ``lake/iceberg/*``, the same grant), its tidy's cursor
  (``lake/_committer/``) and copies of landed files that fit no table (``lake/_misfits/``);
  nothing else of the lake.
- Glue, besides the REST endpoint's actions below: ``GetTableVersions`` and
  ``BatchDeleteTableVersion``, for the hourly deletion of archived table versions
  (``lake.glue_versions``: Glue's quota of 100,000 per table).
- Glue, as the Iceberg REST endpoint maps its operations (Glue's "AWS Glue REST APIs for Apache
  Iceberg specifications"): GetConfig → ``glue:GetCatalog``, LoadNamespaceMetadata →
  ``glue:GetDatabase``, CreateNamespace → ``glue:CreateDatabase``, LoadTable → ``glue:GetTable``,
  ListTables → ``glue:GetTables``, CreateTable → ``glue:CreateTable``, UpdateTable (a commit) →
  ``glue:UpdateTable``. The create actions serve the cold start's ``ensure_tables`` (the tables
  exist, made by the template: it checks and creates nothing, but a CreateNamespace on an existing
  database must be refused as "exists", not "forbidden"). No ``lakeformation:GetDataAccess``: the
  lake's locations are not registered with Lake Formation (``analyst_access.py``).
"""

from __future__ import annotations

import dataclasses
from typing import Final

from aws_cdk import Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from constructs import Construct

from contracts import lambda_metrics
from contracts.lake_layout import COMMITTER_STATE_FOLDER, ICEBERG_FOLDER, LANDING_LOG_FOLDER, MISFITS_FOLDER
from contracts.settings import environment_for
from walletlake_cdk.catalog import Catalog
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.functions import FunctionAssets, PythonFunction, python_function
from walletlake_cdk.storage import S3_WRITE_KEY_ACTIONS, Storage, grant_key_via
from walletlake_cdk.stream_consumer import iceberg_glue_arns

#: The committer's Lambda handler (``walletlake/handlers/commit.py``).
COMMITTER_HANDLER: Final = "walletlake.handlers.commit.handler"
#: A minute of commits plus a cold start (pyiceberg's import and the catalog's first round trip).
COMMITTER_TIMEOUT: Final = Duration.seconds(70)
#: What the committer asks of the Iceberg REST endpoint (see the module docstring).
COMMITTER_GLUE_ACTIONS: Final = (
    "glue:GetCatalog",
    "glue:GetDatabase",
    "glue:CreateDatabase",
    "glue:GetTable",
    "glue:GetTables",
    "glue:CreateTable",
    "glue:UpdateTable",
    # the hourly tidy's deletion of archived table versions (lake.glue_versions: Glue's quota)
    "glue:GetTableVersions",
    "glue:BatchDeleteTableVersion",
)


@dataclasses.dataclass(frozen=True)
class Committer:
    """The committer function and its schedule."""

    handler: PythonFunction
    schedule: events.Rule


def build_committer(
    scope: Construct,
    config: DeploymentConfig,
    assets: FunctionAssets,
    storage: Storage,
    catalog: Catalog,
    environment: dict[str, str],
) -> Committer:
    """The committer function, its grants and its one-minute schedule."""
    handler = python_function(
        scope,
        "CommitterFunction",
        config=config,
        assets=assets,
        handler=COMMITTER_HANDLER,
        description="walletlake committer: append the landed batches to the Iceberg tables, every interval",
        environment={
            **environment,
            **environment_for(
                commit_interval_seconds=config.commit_interval_seconds,
                audit_tag_retention_days=config.settings.audit_tag_retention_days,
            ),
        },
        memory_mb=config.committer_memory_mb,
        timeout=COMMITTER_TIMEOUT,
        service=lambda_metrics.COMMITTER_SERVICE,
        reserved_concurrency=1,
    )
    grant_committer(handler.role, config, storage)
    # The tables exist before the first commit looks for them.
    for table in catalog.tables.values():
        if table.open_table_format_input is not None:
            handler.function.node.add_dependency(table)
    schedule = events.Rule(
        scope,
        "CommitterSchedule",
        description="walletlake: run the Iceberg committer (commits every interval within the minute)",
        schedule=events.Schedule.rate(Duration.minutes(1)),
        targets=[
            targets.LambdaFunction(
                handler.function,
                event=events.RuleTargetInput.from_object({}),
                # A minute later the next invocation commits everything anyway: no long retries.
                retry_attempts=2,
                max_event_age=Duration.minutes(2),
            )
        ],
    )
    return Committer(handler=handler, schedule=schedule)


def grant_committer(role: iam.IRole, config: DeploymentConfig, storage: Storage) -> None:
    """S3, KMS and Glue for the committer (module docstring)."""
    prefix = config.settings.lake_prefix
    bucket = storage.lake_bucket
    landing = bucket.arn_for_objects(f"{prefix}/{LANDING_LOG_FOLDER}/*")
    tables = bucket.arn_for_objects(f"{prefix}/{ICEBERG_FOLDER}/*")
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={
                "StringLike": {
                    "s3:prefix": [f"{prefix}/{LANDING_LOG_FOLDER}/*", f"{prefix}/{ICEBERG_FOLDER}/*"]
                }
            },
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:GetObject", "s3:DeleteObject"], resources=[landing])
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"], resources=[tables])
    )
    # its own bookkeeping (the tidy's cursor) and the landed files that fit no table, kept aside
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject"],
            resources=[
                bucket.arn_for_objects(f"{prefix}/{COMMITTER_STATE_FOLDER}/*"),
                bucket.arn_for_objects(f"{prefix}/{MISFITS_FOLDER}/*"),
            ],
        )
    )
    grant_key_via(role, storage.lake_key, "s3", *S3_WRITE_KEY_ACTIONS)
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=list(COMMITTER_GLUE_ACTIONS), resources=iceberg_glue_arns(Stack.of(role), config)
        )
    )
