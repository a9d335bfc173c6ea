"""The nightly job: snapshot → compaction → reconciliation of the previous UTC day.

Orchestration: **an EventBridge schedule starts a Step Functions state machine that invokes one
Lambda function** (``walletlake.nightly.lambda_handler``, which runs the three steps in order and
returns ``{"ok": …, counts…}``). Why not the schedule invoking Lambda directly:

- The job must report failure even when it cannot report anything itself: a timeout, an
  out-of-memory kill or an import error ends a Lambda without running its own error handling.
  The state machine catches every error and still publishes a finding to SNS, and its
  ``ExecutionsFailed`` metric drives the reconciliation-failure alarm.
- Retries are explicit and bounded (Lambda service errors only; a job that ran and found a
  mismatch is a finding, not something to retry), instead of EventBridge's asynchronous
  invocation retrying a failed job twice on its own.
- Each night leaves an execution record (input day, result counts, failure cause) for 90 days.
- The cost is a handful of state transitions a night.

The steps stay in one function because the nightly module owns their order and hand-offs; the
state machine is where a fan-out (for example compaction per hour with a Distributed Map) would go
if a day's ledger ever outgrows one 15-minute invocation.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from lake.schemas import TABLES
from walletlake_cdk.catalog import Catalog
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.functions import FunctionAssets, PythonFunction, log_retention, python_function
from walletlake_cdk.storage import ATHENA_RESULTS_PREFIX, Storage

#: The handler other modules export for Lambda (``walletlake/nightly.py``).
NIGHTLY_HANDLER: Final = "walletlake.nightly.lambda_handler"

#: Athena actions the reconciliation needs in its workgroup (awswrangler's read path).
ATHENA_ACTIONS: Final = (
    "athena:StartQueryExecution",
    "athena:GetQueryExecution",
    "athena:GetQueryResults",
    "athena:StopQueryExecution",
    "athena:GetWorkGroup",
)
#: Glue reads of the lake tables. Nothing creates tables: the Athena engine reads with
#: ``ctas_approach=False`` (queries/_athena.py), so no temporary Glue tables.
GLUE_READ_ACTIONS: Final = ("glue:GetDatabase", "glue:GetTable", "glue:GetTables", "glue:GetPartitions")


@dataclasses.dataclass(frozen=True)
class NightlyJob:
    """The function, the state machine and the schedule."""

    handler: PythonFunction
    state_machine: sfn.StateMachine
    schedule: events.Rule


def build_nightly_job(
    scope: Construct,
    config: DeploymentConfig,
    assets: FunctionAssets,
    table: dynamodb.Table,
    storage: Storage,
    catalog: Catalog,
    topic: sns.ITopic,
    environment: dict[str, str],
) -> NightlyJob:
    """The nightly function with its grants, the state machine around it and the schedule."""
    handler = python_function(
        scope,
        "NightlyFunction",
        config=config,
        code=assets.code,
        handler=NIGHTLY_HANDLER,
        description="walletlake nightly: snapshot, compaction, reconciliation of the previous UTC day",
        function_layers=[assets.pandas, assets.powertools, assets.pipeline_dependencies],
        environment=environment,
        memory_mb=config.nightly_memory_mb,
        timeout=Duration.minutes(15),
        service="nightly",
        ephemeral_storage_mb=10_240,
    )
    _grant_nightly(handler.role, config, table, storage, catalog)

    run = tasks.LambdaInvoke(
        scope,
        "RunNightly",
        lambda_function=handler.function,
        payload=sfn.TaskInput.from_json_path_at("$"),
        payload_response_only=True,
        retry_on_service_exceptions=True,
        result_path="$.result",
    )
    report_ok = _publish(scope, "ReportSuccess", topic, "ok", "walletlake nightly: reconciled")
    report_findings = _publish(scope, "ReportFindings", topic, "failed", "walletlake nightly: FINDINGS")
    report_error = _publish(scope, "ReportError", topic, "failed", "walletlake nightly: job FAILED")
    succeeded = sfn.Succeed(scope, "Reconciled")
    findings = sfn.Fail(
        scope, "ReconciliationFindings", error="Reconciliation", cause="nightly job returned ok=false"
    )
    crashed = sfn.Fail(
        scope, "NightlyJobFailed", error="NightlyJobError", cause="the nightly function failed"
    )
    run.add_catch(report_error.next(crashed), errors=[sfn.Errors.ALL], result_path="$.error")
    definition = run.next(
        sfn.Choice(scope, "AllOk")
        .when(
            sfn.Condition.and_(
                sfn.Condition.is_present("$.result.ok"), sfn.Condition.boolean_equals("$.result.ok", True)
            ),
            report_ok.next(succeeded),
        )
        .otherwise(report_findings.next(findings))
    )
    state_machine = sfn.StateMachine(
        scope,
        "NightlyStateMachine",
        definition_body=sfn.DefinitionBody.from_chainable(definition),
        timeout=Duration.hours(1),
        tracing_enabled=True,
        logs=sfn.LogOptions(
            destination=logs.LogGroup(
                scope,
                "NightlyStateMachineLogs",
                retention=log_retention(config.log_retention_days),
                removal_policy=RemovalPolicy.RETAIN,
            ),
            level=sfn.LogLevel.ALL,
            include_execution_data=False,
        ),
    )
    schedule = events.Rule(
        scope,
        "NightlySchedule",
        description="walletlake nightly job for the previous UTC day",
        schedule=events.Schedule.expression(config.nightly_schedule),
        targets=[targets.SfnStateMachine(state_machine, retry_attempts=4, max_event_age=Duration.hours(2))],
    )
    return NightlyJob(handler=handler, state_machine=state_machine, schedule=schedule)


def _publish(
    scope: Construct, construct_id: str, topic: sns.ITopic, status: str, subject: str
) -> tasks.SnsPublish:
    """Publish the state (the job's counts or its error) with a ``status`` attribute to filter on."""
    return tasks.SnsPublish(
        scope,
        construct_id,
        topic=topic,
        subject=subject,
        message=sfn.TaskInput.from_json_path_at("$"),
        message_attributes={"status": tasks.MessageAttribute(value=status)},
        result_path=sfn.JsonPath.DISCARD,
    )


def _grant_nightly(
    role: iam.IRole, config: DeploymentConfig, table: dynamodb.Table, storage: Storage, catalog: Catalog
) -> None:
    """Snapshot reads the table; compaction rewrites the lake; reconciliation queries Athena."""
    settings = config.settings
    stack = table.stack
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["dynamodb:Scan", "dynamodb:DescribeTable"], resources=[table.table_arn])
    )
    if table.encryption_key is not None:
        table.encryption_key.grant_decrypt(role)
    bucket = storage.lake_bucket
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            resources=[storage.lake_objects_arn, storage.athena_results_arn],
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:GetBucketLocation"], resources=[bucket.bucket_arn])
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={
                "StringLike": {"s3:prefix": [f"{storage.lake_prefix}/*", f"{ATHENA_RESULTS_PREFIX}*", ""]}
            },
        )
    )
    storage.data_key.grant_encrypt_decrypt(role)
    workgroup_arn = stack.format_arn(
        service="athena", resource="workgroup", resource_name=settings.athena_workgroup
    )
    role.add_to_principal_policy(iam.PolicyStatement(actions=list(ATHENA_ACTIONS), resources=[workgroup_arn]))
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
