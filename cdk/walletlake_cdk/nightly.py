"""The lake's scheduled work: the nightly job and (plain-Parquet lake only) hourly compaction, as units.

With the Iceberg lake (the default) the stream's tables are compacted by Glue's table optimizers
(``walletlake_cdk.catalog``): no hourly state machine, no compaction units, no compaction lease,
and the nightly job is the snapshot and the reconciliation (Iceberg readers never see a
half-compacted table, so nothing has to be compacted before the night reconciles). What follows
describes the ``-c lake_format=parquet`` deployment, whose nightly job also compacts.

At the seed's load (20,000 transactions/s) a day is about 2.9 billion ledger rows and 240 GB of
Parquet; no single function can snapshot, compact and reconcile it (15 minutes, 10 GB of memory
and of ``/tmp``). So every step that grows with the day is split into bounded units that Step
Functions runs in parallel (``docs/operations.md`` has the figures behind each choice):

Hourly (an EventBridge schedule at ``HH:10``)
    plan the closed hours' compaction units (``walletlake.handlers.compaction.plan_handler``) →
    a Distributed Map runs each unit (``unit_handler``: one table's rows of ``compaction_unit_minutes``
    minutes, found by their slot prefix; :mod:`lake.compaction_units` says why time, not wallet ranges).
Nightly (01:30 UTC)
    plan the night (the day, the snapshot's segments) → a Distributed Map scans the table one
    parallel-scan segment per Lambda → plan and compact what is left of the day (the same Map of
    units) → plan the reconciliation (catch-up days first) → per day, Athena runs the two heavy
    queries as ``UNLOAD`` to Parquet through Step Functions' native ``startQueryExecution.sync``
    (no function waits on Athena) → a small function classifies the result with the same pure
    code as the local run and writes the same objects. On the Iceberg lake the planning function
    tags the snapshots the night pins before any step reads them (``lake.snapshot_tags``).

Why a state machine at all (not the schedule invoking Lambda): it reports failures that a function
cannot report itself (a timeout, an out-of-memory kill) to SNS, retries only Lambda's service
errors and throttles (a finding is not retried), bounds every Map's concurrency so the lake's
prefix and the table's read capacity are not flooded, and leaves an execution record per run.

Distributed Map (not inline Map) because an inline Map runs at most 40 iterations at a time and
keeps every iteration in the parent's 25,000-event history; a Distributed Map runs each item as a
child execution (up to 10,000 at once). Children are STANDARD workflows: a unit may take up to
the function's 15 minutes, beyond an EXPRESS child's 5-minute limit.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from contracts import lambda_metrics
from contracts.settings import environment_for
from walletlake_cdk.catalog import Catalog
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.functions import FunctionAssets, PythonFunction, log_retention, python_function
from walletlake_cdk.lease_table import build_lease_table
from walletlake_cdk.nightly_grants import (
    UNLOAD_PREFIX,
    Grants,
    grant_athena_queries,
    grant_compaction_plan,
    grant_compaction_unit,
    grant_reconcile_classify,
    grant_reconcile_plan,
    grant_snapshot_segment,
)
from walletlake_cdk.storage import Storage

#: Lambda handlers of the units (modules elsewhere export them).
COMPACTION_PLAN_HANDLER: Final = "walletlake.handlers.compaction.plan_handler"
COMPACTION_UNIT_HANDLER: Final = "walletlake.handlers.compaction.unit_handler"
PLAN_NIGHT_HANDLER: Final = "walletlake.handlers.nightly.plan_night_handler"
SNAPSHOT_SEGMENT_HANDLER: Final = "walletlake.handlers.nightly.snapshot_segment_handler"
RECONCILE_PLAN_HANDLER: Final = "walletlake.handlers.nightly.reconcile_plan_handler"
RECONCILE_CLASSIFY_HANDLER: Final = "walletlake.handlers.nightly.reconcile_classify_handler"
#: The planning functions do little work; their peak is what their imports take (130-150 MB
#: measured by ``make deploy-check``). 512 MB leaves headroom and, Lambda's CPU growing with
#: memory, imports them in well under a second.
PLANNING_MEMORY_MB: Final = 512
#: The lease both compaction runs take; its error type as Lambda reports it.
COMPACTION_LEASE_HANDLER: Final = "walletlake.handlers.lease.handler"
#: The Powertools service each function logs and publishes metrics as (the rest: nightly).
_SERVICES: Final = {
    "compaction_plan": lambda_metrics.COMPACTION_SERVICE,
    "compaction_unit": lambda_metrics.COMPACTION_SERVICE,
    "compaction_lease": lambda_metrics.LEASE_SERVICE,
}
LEASE_BUSY: Final = "LeaseBusyError"
#: How long the nightly run waits between tries while an hourly run holds the lease.
LEASE_RETRY_SECONDS: Final = 60
#: The hourly state machine's timeout, also the longest it can hold the lease.
HOURLY_TIMEOUT_SECONDS: Final = 3600
#: Lambda errors worth retrying: the service's own, and throttling when many units start at once.
LAMBDA_THROTTLED: Final = ("Lambda.TooManyRequestsException",)
#: An invocation whose execution environment died under it (killed, out of memory, timed out):
#: Lambda answers with these ``errorType``s, which become the task's error. Every unit is safe
#: to run again (compaction's crash-safe protocol, segments and summaries written whole), so each
#: gets two more tries before the run fails; ``Lambda.Unknown`` is what AWS documents for the same.
LAMBDA_ENVIRONMENT_LOST: Final = (
    "Runtime.ExitError",
    "Runtime.OutOfMemory",
    "Sandbox.Timedout",
    "Lambda.Unknown",
)


@dataclasses.dataclass(frozen=True)
class NightlyJob:
    """The unit functions, the two state machines and their schedules."""

    functions: dict[str, PythonFunction]
    state_machine: sfn.StateMachine
    schedule: events.Rule
    #: The hourly compaction (plain-Parquet lake only).
    hourly: sfn.StateMachine | None = None
    hourly_schedule: events.Rule | None = None

    @property
    def state_machines(self) -> tuple[sfn.StateMachine, ...]:
        """Every state machine of the job."""
        return (self.state_machine, *((self.hourly,) if self.hourly is not None else ()))

    @property
    def roles(self) -> tuple[iam.IRole, ...]:
        """Every unit function's role (for the reviewed findings)."""
        return tuple(function.role for function in self.functions.values())


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
    """The unit functions with their grants, the hourly and nightly state machines and schedules."""
    grants = Grants(config, table, storage, catalog)
    functions = _unit_functions(scope, config, assets, environment)
    grant_snapshot_segment(functions["snapshot_segment"].role, grants)
    grant_reconcile_plan(functions["reconcile_plan"].role, grants)
    grant_reconcile_classify(functions["reconcile_classify"].role, grants)
    if config.iceberg:
        nightly = _state_machine(
            scope, "Nightly", config, _nightly_definition(scope, config, functions, topic)
        )
        grant_athena_queries(nightly, grants)
        schedule = events.Rule(
            scope,
            "NightlySchedule",
            description="walletlake nightly job for the previous UTC day",
            schedule=events.Schedule.expression(config.nightly_schedule),
            targets=[targets.SfnStateMachine(nightly, retry_attempts=4, max_event_age=Duration.hours(2))],
        )
        return NightlyJob(functions=functions, state_machine=nightly, schedule=schedule)
    grant_compaction_plan(functions["compaction_plan"].role, grants)
    grant_compaction_unit(functions["compaction_unit"].role, grants)
    lease_table = build_lease_table(scope, config)
    lease_table.grant(functions["compaction_lease"].role, "dynamodb:PutItem", "dynamodb:DeleteItem")

    hourly = _state_machine(scope, "Hourly", config, _hourly_definition(scope, config, functions, topic))
    hourly_schedule = events.Rule(
        scope,
        "HourlyCompactionSchedule",
        description="walletlake: compact the closed hours of today",
        schedule=events.Schedule.expression(config.compaction_schedule),
        targets=[
            targets.SfnStateMachine(
                hourly,
                input=events.RuleTargetInput.from_object({"closed_hours_of": "today"}),
                retry_attempts=4,
                max_event_age=Duration.minutes(30),
            )
        ],
    )
    nightly = _state_machine(scope, "Nightly", config, _nightly_definition(scope, config, functions, topic))
    grant_athena_queries(nightly, grants)
    schedule = events.Rule(
        scope,
        "NightlySchedule",
        description="walletlake nightly job for the previous UTC day",
        schedule=events.Schedule.expression(config.nightly_schedule),
        targets=[targets.SfnStateMachine(nightly, retry_attempts=4, max_event_age=Duration.hours(2))],
    )
    return NightlyJob(
        functions=functions,
        state_machine=nightly,
        schedule=schedule,
        hourly=hourly,
        hourly_schedule=hourly_schedule,
    )


def _unit_functions(
    scope: Construct, config: DeploymentConfig, assets: FunctionAssets, environment: dict[str, str]
) -> dict[str, PythonFunction]:
    """One function per kind of unit, each sized for its unit and with its own role."""
    specs: dict[str, tuple[str, str, str, int, int, dict[str, str]]] = {
        # name: (construct id, handler, description, memory MB, ephemeral MB, extra environment)
        "compaction_plan": (
            "CompactionPlanFunction",
            COMPACTION_PLAN_HANDLER,
            "walletlake: plan the compaction units (closed runs of five-minute slots) of a day",
            PLANNING_MEMORY_MB,
            512,
            environment_for(compaction_unit_minutes=config.compaction_unit_minutes),
        ),
        "compaction_unit": (
            "CompactionUnitFunction",
            COMPACTION_UNIT_HANDLER,
            "walletlake: compact one unit (one table, day and closed run of slots) of the lake",
            config.compaction_memory_mb,
            10_240,
            environment_for(compaction_unit_minutes=config.compaction_unit_minutes),
        ),
        "plan_night": (
            "PlanNightFunction",
            PLAN_NIGHT_HANDLER,
            "walletlake nightly: the day to close and the snapshot's scan segments",
            PLANNING_MEMORY_MB,
            512,
            environment_for(
                snapshot_segments=config.snapshot_segments,
                snapshot_read_units_per_second=config.snapshot_read_units_per_second,
                unload_prefix=UNLOAD_PREFIX,
            ),
        ),
        "snapshot_segment": (
            "SnapshotSegmentFunction",
            SNAPSHOT_SEGMENT_HANDLER,
            "walletlake nightly: scan one parallel-scan segment of the table into the snapshot",
            1_024,
            512,
            environment_for(
                snapshot_segments=config.snapshot_segments,
                snapshot_read_units_per_second=config.snapshot_read_units_per_second,
                unload_prefix=UNLOAD_PREFIX,
            ),
        ),
        "reconcile_plan": (
            "ReconcilePlanFunction",
            RECONCILE_PLAN_HANDLER,
            "walletlake nightly: the days to reconcile and their Athena UNLOAD statements",
            PLANNING_MEMORY_MB,
            512,
            environment_for(
                snapshot_segments=config.snapshot_segments,
                snapshot_read_units_per_second=config.snapshot_read_units_per_second,
                unload_prefix=UNLOAD_PREFIX,
                audit_tag_retention_days=config.settings.audit_tag_retention_days,
            ),
        ),
        "compaction_lease": (
            "CompactionLeaseFunction",
            COMPACTION_LEASE_HANDLER,
            "walletlake: take or give back the lease that keeps hourly and nightly compaction apart",
            256,
            512,
            environment_for(lease_table=config.settings.lease_table),
        ),
        "reconcile_classify": (
            "ReconcileClassifyFunction",
            RECONCILE_CLASSIFY_HANDLER,
            "walletlake nightly: classify one day's reconciliation from Athena's results",
            config.classify_memory_mb,
            512,
            environment_for(
                snapshot_segments=config.snapshot_segments,
                snapshot_read_units_per_second=config.snapshot_read_units_per_second,
                unload_prefix=UNLOAD_PREFIX,
                audit_tag_retention_days=config.settings.audit_tag_retention_days,
            ),
        ),
    }
    if config.iceberg:  # Glue's optimizers compact: no compaction units, no lease
        for name in ("compaction_plan", "compaction_unit", "compaction_lease"):
            del specs[name]
    return {
        name: python_function(
            scope,
            construct_id,
            config=config,
            assets=assets,
            handler=handler,
            description=description,
            environment={**environment, **extra},
            memory_mb=memory,
            timeout=Duration.minutes(15),
            service=_SERVICES.get(name, lambda_metrics.NIGHTLY_SERVICE),
            ephemeral_storage_mb=ephemeral,
        )
        for name, (construct_id, handler, description, memory, ephemeral, extra) in specs.items()
    }


def _invoke(
    scope: Construct,
    construct_id: str,
    function: PythonFunction,
    payload: sfn.TaskInput | None,
    result_path: str,
) -> tasks.LambdaInvoke:
    """A Lambda task retried on Lambda's service errors and throttles only.

    ``payload`` None hands the function the state's input as it is (no ``Parameters``: with
    ``payload_response_only`` a JSONPath payload of ``$`` would render as the string ``"$"``).
    """
    task = tasks.LambdaInvoke(
        scope,
        construct_id,
        lambda_function=function.function,
        payload=payload,
        payload_response_only=True,
        retry_on_service_exceptions=True,
        result_path=result_path,
    )
    task.add_retry(
        errors=list(LAMBDA_THROTTLED),
        interval=Duration.seconds(2),
        max_attempts=8,
        backoff_rate=2,
        jitter_strategy=sfn.JitterType.FULL,
    )
    task.add_retry(
        errors=list(LAMBDA_ENVIRONMENT_LOST),
        interval=Duration.seconds(5),
        max_attempts=2,
        backoff_rate=2,
        jitter_strategy=sfn.JitterType.FULL,
    )
    return task


def _lease(
    scope: Construct,
    construct_id: str,
    functions: dict[str, PythonFunction],
    action: str,
    ttl_seconds: int = 0,
) -> tasks.LambdaInvoke:
    """Take or give back the compaction lease (``lake.compaction_lease``) as this execution."""
    payload: dict[str, object] = {"action": action, "owner": sfn.JsonPath.execution_id}
    if action == "acquire":
        payload["ttl_seconds"] = ttl_seconds
    return _invoke(
        scope,
        construct_id,
        functions["compaction_lease"],
        sfn.TaskInput.from_object(payload),
        sfn.JsonPath.DISCARD,
    )


def _units_map(
    scope: Construct, prefix: str, config: DeploymentConfig, functions: dict[str, PythonFunction]
) -> sfn.DistributedMap:
    """Every compaction unit of ``$.compaction.units``, at most ``compaction_max_concurrency`` at once."""
    units = sfn.DistributedMap(
        scope,
        f"{prefix}CompactUnits",
        items_path="$.compaction.units",
        max_concurrency=config.compaction_max_concurrency,
        map_execution_type=sfn.StateMachineType.STANDARD,
        result_path=sfn.JsonPath.DISCARD,
    )
    units.item_processor(
        _invoke(
            scope,
            f"{prefix}CompactUnit",
            functions["compaction_unit"],
            None,
            "$",
        )
    )
    return units


def _hourly_definition(
    scope: Construct, config: DeploymentConfig, functions: dict[str, PythonFunction], topic: sns.ITopic
) -> sfn.IChainable:
    plan = _invoke(
        scope,
        "HourlyPlanUnits",
        functions["compaction_plan"],
        None,
        "$.compaction",
    )
    units = _units_map(scope, "Hourly", config, functions)
    acquire = _lease(scope, "HourlyTakeLease", functions, "acquire", ttl_seconds=HOURLY_TIMEOUT_SECONDS)
    # The nightly run holds the lease: end quietly, the next hour finds these units still to do.
    acquire.add_catch(
        sfn.Succeed(scope, "HourlyLeaseBusy", comment="the nightly run is compacting"),
        errors=[LEASE_BUSY],
        result_path="$.lease_busy",
    )
    failed = _lease(scope, "HourlyReleaseLeaseOnError", functions, "release").next(
        _publish(scope, "ReportHourlyError", topic, "failed", "walletlake hourly compaction FAILED")
    )
    failed.next(
        sfn.Fail(scope, "HourlyCompactionFailed", error="CompactionError", cause="a compaction unit failed")
    )
    acquire.add_catch(failed, errors=[sfn.Errors.ALL], result_path="$.error")
    for step in (plan, units):
        step.add_catch(failed, errors=[sfn.Errors.ALL], result_path="$.error")
    return (
        acquire.next(plan)
        .next(units)
        .next(_lease(scope, "HourlyReleaseLease", functions, "release"))
        .next(sfn.Succeed(scope, "HoursCompacted"))
    )


def _nightly_definition(
    scope: Construct, config: DeploymentConfig, functions: dict[str, PythonFunction], topic: sns.ITopic
) -> sfn.IChainable:
    plan_night = _invoke(scope, "PlanNight", functions["plan_night"], None, "$.night")
    snapshot = sfn.DistributedMap(
        scope,
        "SnapshotSegments",
        items_path="$.night.segments",
        # Every segment at once: the read pace is shared out among them (lake/snapshots.py).
        max_concurrency=config.snapshot_segments,
        map_execution_type=sfn.StateMachineType.STANDARD,
        result_path=sfn.JsonPath.DISCARD,
    )
    snapshot.item_processor(_invoke(scope, "ScanSegment", functions["snapshot_segment"], None, "$"))
    plan_reconciliation = _invoke(
        scope,
        "PlanReconciliation",
        functions["reconcile_plan"],
        sfn.TaskInput.from_object(
            {"date": sfn.JsonPath.string_at("$.night.date"), "run": sfn.JsonPath.execution_name}
        ),
        "$.reconciliation",
    )
    days, report_ok, crashed = _reconcile_days(scope, config, functions, topic)
    if config.iceberg:
        for step in (plan_night, snapshot, plan_reconciliation, days):
            step.add_catch(crashed, errors=[sfn.Errors.ALL], result_path="$.error")
        return (
            plan_night.next(snapshot)
            .next(plan_reconciliation)
            .next(days)
            .next(report_ok)
            .next(sfn.Succeed(scope, "Reconciled"))
        )
    plan_units = _invoke(
        scope,
        "NightlyPlanUnits",
        functions["compaction_plan"],
        sfn.TaskInput.from_object({"date": sfn.JsonPath.string_at("$.night.date")}),
        "$.compaction",
    )
    units = _units_map(scope, "Nightly", config, functions)
    acquire = _lease(
        scope, "NightlyTakeLease", functions, "acquire", ttl_seconds=config.nightly_timeout_hours * 3600
    )
    # An hourly run is compacting: wait for it (it ends within its one-hour timeout).
    acquire.add_retry(
        errors=[LEASE_BUSY], interval=Duration.seconds(LEASE_RETRY_SECONDS), max_attempts=60, backoff_rate=1
    )
    compaction_failed = _lease(scope, "NightlyReleaseLeaseOnError", functions, "release").next(crashed)
    for step in (plan_night, snapshot, acquire, plan_reconciliation, days):
        step.add_catch(crashed, errors=[sfn.Errors.ALL], result_path="$.error")
    for step in (plan_units, units):
        step.add_catch(compaction_failed, errors=[sfn.Errors.ALL], result_path="$.error")
    return (
        plan_night.next(snapshot)
        .next(acquire)
        .next(plan_units)
        .next(units)
        .next(_lease(scope, "NightlyReleaseLease", functions, "release"))
        .next(plan_reconciliation)
        .next(days)
        .next(report_ok)
        .next(sfn.Succeed(scope, "Reconciled"))
    )


def _reconcile_days(
    scope: Construct, config: DeploymentConfig, functions: dict[str, PythonFunction], topic: sns.ITopic
) -> tuple[sfn.Map, tasks.SnsPublish, sfn.Chain]:
    """The reconciliation of the planned days, the success report, and the error path."""
    queries = sfn.Parallel(scope, "ReconcileQueries", result_path=sfn.JsonPath.DISCARD)
    for name, path in (("Wallets", "$.wallets_sql"), ("Transfers", "$.transfers_sql")):
        queries.branch(_athena_unload(scope, f"Unload{name}", path, config))
    classify = _invoke(scope, "ClassifyDay", functions["reconcile_classify"], None, "$")
    day_ok = (
        sfn.Choice(scope, "DayOk")
        .when(
            sfn.Condition.and_(sfn.Condition.is_present("$.ok"), sfn.Condition.boolean_equals("$.ok", True)),
            sfn.Succeed(scope, "DayReconciled"),
        )
        .otherwise(sfn.Fail(scope, "DayHasFindings", error="ReconciliationFindings", cause="findings"))
    )
    # One day at a time, oldest first: a day's opening is the close the day before wrote.
    days = sfn.Map(
        scope,
        "ReconcileDays",
        items_path="$.reconciliation.days",
        max_concurrency=1,
        result_path="$.reconciled",
    )
    days.item_processor(queries.next(classify).next(day_ok))

    report_ok = _publish(scope, "ReportSuccess", topic, "ok", "walletlake nightly: reconciled")
    report_findings = _publish(scope, "ReportFindings", topic, "failed", "walletlake nightly: FINDINGS")
    report_error = _publish(scope, "ReportError", topic, "failed", "walletlake nightly: job FAILED")
    crashed = report_error.next(
        sfn.Fail(scope, "NightlyJobFailed", error="NightlyJobError", cause="a step of the nightly job failed")
    )
    days.add_catch(
        report_findings.next(
            sfn.Fail(
                scope, "ReconciliationFindings", error="Reconciliation", cause="reconciliation found problems"
            )
        ),
        errors=["ReconciliationFindings"],
        result_path="$.error",
    )
    return days, report_ok, crashed


def _athena_unload(
    scope: Construct, construct_id: str, sql_path: str, config: DeploymentConfig
) -> sfn.CustomState:
    """Run the statement at ``sql_path`` on Athena and wait for it (``startQueryExecution.sync``).

    Written as the state's JSON rather than CDK's ``AthenaStartQueryExecution``, whose generated
    policy grants S3 and Lake Formation actions on every resource and Glue writes; the state
    machine's role gets exactly what these reads and the UNLOAD need
    (:func:`grant_athena_queries`).
    """
    settings = config.settings
    return sfn.CustomState(
        scope,
        construct_id,
        state_json={
            "Type": "Task",
            "Resource": f"arn:{Aws.PARTITION}:states:::athena:startQueryExecution.sync",
            "Parameters": {
                "QueryString.$": sql_path,
                "QueryExecutionContext": {"Database": settings.glue_database},
                "WorkGroup": settings.athena_workgroup,
            },
            "ResultPath": None,
        },
    )


def _state_machine(
    scope: Construct, prefix: str, config: DeploymentConfig, definition: sfn.IChainable
) -> sfn.StateMachine:
    return sfn.StateMachine(
        scope,
        f"{prefix}StateMachine",
        definition_body=sfn.DefinitionBody.from_chainable(definition),
        timeout=Duration.hours(config.nightly_timeout_hours)
        if prefix == "Nightly"
        else Duration.seconds(HOURLY_TIMEOUT_SECONDS),
        tracing_enabled=True,
        logs=sfn.LogOptions(
            destination=logs.LogGroup(
                scope,
                f"{prefix}StateMachineLogs",
                retention=log_retention(config.log_retention_days),
                removal_policy=RemovalPolicy.RETAIN,
            ),
            level=sfn.LogLevel.ALL,
            include_execution_data=False,
        ),
    )


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
