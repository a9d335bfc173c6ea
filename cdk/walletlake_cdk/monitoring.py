"""The alerts topic, the alarms that publish to it, and the pipeline's CloudWatch dashboard.

One SNS topic carries both the nightly job's findings and every alarm, so whoever is on call
subscribes once (``-c alarm_email=…`` adds an e-mail subscription). The topic is encrypted with
its own key: CloudWatch publishes alarms as the ``cloudwatch.amazonaws.com`` service, which needs
that key in its key policy, and that grant stays off the key protecting the data.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from contracts import api_metrics, lambda_metrics
from walletlake_cdk.config import DeploymentConfig

FIVE_MINUTES: Final = Duration.minutes(5)
#: The iterator-age alarm fires at this fraction of MaximumRecordAgeInSeconds: past that age Lambda
#: discards records to the on-failure queue, so it is the consumer's effective retention.
ITERATOR_AGE_ALARM_FRACTION: Final = 0.75
#: Sustained lag worth a look long before the limit.
LAG_WARNING: Final = Duration.minutes(10)
API_SERVER_ERROR_PERCENT: Final = 1
#: The fleet scales on CPU at 50 %; sustained CPU above this means it cannot scale further.
API_CPU_ALARM_PERCENT: Final = 75
#: Minutes of rows landing with none committed before the commit-lag alarm fires: the committer
#: runs every minute and commits every interval, so 15 minutes is a dozen missed commits, and
#: days under the orphan-file retention (``catalog.py``) after which landed files could be lost.
COMMIT_LAG_MINUTES: Final = 15
#: Minutes the table takes writes while the stream consumer is not invoked before
#: :data:`NOT_READING_ALARM` fires: the mapping's batching window (seconds) and its tumbling window
#: (60 s) are far shorter, so three silent five-minute periods under writes are a mapping that
#: is disabled or bound to a stream that is no longer the table's latest.
NOT_READING_MINUTES: Final = 15
#: The alarm on a consumer that reads nothing while the table is written (the mapping disabled,
#: or left on an old stream ARN after the table's stream was disabled and enabled again).
NOT_READING_ALARM: Final = "StreamConsumerNotReading"
#: The alarm on a committer that is not invoked at all (its schedule disabled or deleted).
COMMITTER_SILENT_ALARM: Final = "CommitterNotRunning"
#: Alarms on a count that must keep coming: they fire below their threshold, and on no data
#: (``TreatMissingData`` ``breaching``): the committer is invoked every minute whatever the load,
#: so a silent one is a stopped one. The lag alarms
#: on ``IteratorAge`` stay ``notBreaching``: Lambda publishes it only when it delivers records,
#: so an idle table is silent too; a silent consumer under writes is :data:`NOT_READING_ALARM`'s.
BREACHING_WHEN_SILENT: Final = frozenset({COMMITTER_SILENT_ALARM})


def build_alerts_topic(scope: Construct, config: DeploymentConfig) -> sns.Topic:
    """The encrypted topic for findings and alarms, with an optional e-mail subscription."""
    key = kms.Key(
        scope,
        "AlertsKey",
        description="walletlake: the alerts topic (usable by CloudWatch alarms)",
        enable_key_rotation=True,
        removal_policy=RemovalPolicy.RETAIN,
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="AllowCloudWatchAlarmsToPublish",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            resources=["*"],
        )
    )
    topic = sns.Topic(
        scope, "AlertsTopic", display_name="walletlake alerts", master_key=key, enforce_ssl=True
    )
    if config.alarm_email:
        topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
    return topic


AlarmSpec = tuple[cloudwatch.IMetric, float, int, str]


@dataclasses.dataclass(frozen=True)
class WatchedApi:
    """The write path's front, whichever it is: its requests, 5xx answers and latency (five-minute
    sums), plus what only that front has (the fleet's tasks, or the Lambda function's errors)."""

    requests: cloudwatch.IMetric
    server_errors: cloudwatch.IMetric
    latency_p99: cloudwatch.IMetric
    alarms: dict[str, AlarmSpec]
    graphs: dict[str, list[cloudwatch.IMetric]]


def lambda_api(api: apigwv2.HttpApi, function: lambda_.Function) -> WatchedApi:
    """API Gateway + Lambda: the function's errors and throttles besides the API's own metrics."""
    return WatchedApi(
        requests=api.metric_count(period=FIVE_MINUTES, statistic="Sum"),
        server_errors=api.metric_server_error(period=FIVE_MINUTES, statistic="Sum"),
        latency_p99=api.metric_latency(statistic="p99"),
        alarms={
            "ApiFunctionErrors": (
                function.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
                5,
                1,
                "The write path's Lambda function is failing (timeouts, crashes).",
            ),
            "ApiFunctionThrottles": (
                function.metric_throttles(period=FIVE_MINUTES, statistic="Sum"),
                1,
                1,
                "The write path hit its Lambda concurrency limit.",
            ),
        },
        graphs={
            "API function": [
                function.metric_duration(statistic="p99"),
                function.metric_throttles(statistic="Sum"),
                function.metric("ConcurrentExecutions", statistic="Maximum"),
            ]
        },
    )


#: The alarm on the server's refusals (``RequestsUnauthenticated`` + ``RequestsForbidden`` > 0).
REFUSED_REQUESTS_ALARM: Final = "ApiRequestsRefused"


def fleet_api(
    requests: cloudwatch.IMetric,
    server_errors: cloudwatch.IMetric,
    latency_p99: cloudwatch.IMetric,
    service: ecs.FargateService,
) -> WatchedApi:
    """The ECS fleet: its front's metrics, the tasks' CPU, and the servers' own (EMF) counters."""
    cpu = service.metric_cpu_utilization(period=FIVE_MINUTES, statistic="Average")
    # What every task prints as EMF (wallet/emf.py): per-interval counts, so Sum is the fleet's.
    app = {
        counter: cloudwatch.Metric(
            namespace=api_metrics.NAMESPACE,
            metric_name=name,
            dimensions_map={api_metrics.SERVICE_DIMENSION: api_metrics.SERVICE},
            statistic="Sum",
            period=FIVE_MINUTES,
        )
        for counter, name in api_metrics.PUBLISHED.items()
    }
    return WatchedApi(
        requests=requests,
        server_errors=server_errors,
        latency_p99=latency_p99,
        alarms={
            "ApiFleetCpuHigh": (
                cpu,
                API_CPU_ALARM_PERCENT,
                3,
                f"The API fleet's CPU has been above {API_CPU_ALARM_PERCENT}% for 15 minutes: scaling is "
                "not keeping up (at its maximum task count?).",
            ),
            "ApiDynamoDbThrottles": (
                app["dynamodb_throttles"],
                1,
                2,
                "DynamoDB throttled the write path for 10 minutes (capacity or a hot partition).",
            ),
            "ApiDynamoDbInternalErrors": (
                app[api_metrics.INTERNAL_ERRORS],
                1,
                2,
                "DynamoDB answered the write path with internal errors (HTTP 500) for 10 minutes: a "
                "service-side problem; check the AWS Health Dashboard for the table's region.",
            ),
            # Anything the server refused as unverified or not permitted (401/403, nothing written):
            # Lattice should have stopped it, so one is a front bypassed or misconfigured
            # (docs/operations.md, "Refused requests").
            REFUSED_REQUESTS_ALARM: (
                cloudwatch.MathExpression(
                    expression="unauthenticated + forbidden",
                    using_metrics={
                        "unauthenticated": app[api_metrics.UNAUTHENTICATED],
                        "forbidden": app[api_metrics.FORBIDDEN],
                    },
                    label="requests refused by the server (401 + 403)",
                    period=FIVE_MINUTES,
                ),
                1,
                1,
                "The API refused requests Lattice let through (no verified principal, another "
                "Lattice service, or an operation the role may not do): a front bypassed or "
                "misconfigured. Runbook: docs/operations.md, 'Refused requests'.",
            ),
            # An answered request whose audit line was not written whole (wallet/audit.py): a
            # request off the record (a full disk, a broken log pipe).
            "ApiAuditLinesLost": (
                app[api_metrics.AUDIT_LINES_LOST],
                1,
                1,
                "API processes failed to write whole audit lines: requests are missing from the "
                "server's record (a full disk or a broken pipe to the log driver).",
            ),
            "ApiRequestsShed": (
                app["requests_shed"],
                100,
                2,
                "API processes answered 429 (past their bound of requests in flight) for 10 minutes.",
            ),
        },
        graphs={
            "API fleet CPU (%)": [cpu],
            "API processes": [
                app[name] for name in ("requests_succeeded", "requests_failed", "requests_shed")
            ],
            "API DynamoDB": [
                app[name]
                for name in ("dynamodb_throttles", "dynamodb_transaction_conflicts", "group_commits")
            ],
        },
    )


@dataclasses.dataclass(frozen=True)
class Monitored:
    """What the alarms and the dashboard watch."""

    api: WatchedApi
    table: dynamodb.Table
    consumer: lambda_.Function
    failures: sqs.Queue
    nightly_function: lambda_.Function
    nightly: sfn.StateMachine
    athena_workgroup: str
    #: The Iceberg committer (None with the plain-Parquet lake).
    committer: lambda_.Function | None = None


def build_alarms(
    scope: Construct, config: DeploymentConfig, watched: Monitored, topic: sns.ITopic
) -> dict[str, cloudwatch.Alarm]:
    """Alarms on lag, errors, the failure queue and the nightly job, all publishing to ``topic``."""
    near_limit_ms = int(config.stream_max_record_age_seconds * 1000 * ITERATOR_AGE_ALARM_FRACTION)
    iterator_age = watched.consumer.metric("IteratorAge", statistic="Maximum", period=FIVE_MINUTES)
    nightly_failures = cloudwatch.MathExpression(
        expression="failed + timedOut + aborted",
        using_metrics={
            "failed": watched.nightly.metric_failed(period=FIVE_MINUTES),
            "timedOut": watched.nightly.metric_timed_out(period=FIVE_MINUTES),
            "aborted": watched.nightly.metric_aborted(period=FIVE_MINUTES),
        },
        label="nightly executions not succeeded",
        period=FIVE_MINUTES,
    )
    server_error_rate = cloudwatch.MathExpression(
        expression="100 * errors / MAX([errors, requests])",
        using_metrics={
            "errors": watched.api.server_errors,
            "requests": watched.api.requests,
        },
        label="API 5xx %",
        period=FIVE_MINUTES,
    )
    specs: dict[str, tuple[cloudwatch.IMetric, float, int, str]] = {
        "StreamIteratorAgeNearLimit": (
            iterator_age,
            near_limit_ms,
            1,
            f"Stream consumer lag is {ITERATOR_AGE_ALARM_FRACTION:.0%} of MaximumRecordAge "
            f"({config.stream_max_record_age_hours} h): records will soon be sent to the failure queue.",
        ),
        "StreamConsumerLagging": (
            iterator_age,
            LAG_WARNING.to_milliseconds(),
            3,
            "Stream consumer has been more than 10 minutes behind for 15 minutes.",
        ),
        "StreamConsumerErrors": (
            watched.consumer.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
            1,
            3,
            "Stream consumer invocations have failed for 15 minutes; batches are being retried.",
        ),
        NOT_READING_ALARM: (
            consumer_not_reading(watched.table, watched.consumer),
            1,
            NOT_READING_MINUTES // 5,
            f"The table has taken writes for {NOT_READING_MINUTES} minutes and the stream consumer was "
            "not invoked once: its event source mapping is disabled, or bound to a stream that is not "
            "the table's latest (the stream was disabled and enabled again, e.g. after a restore). "
            "docs/operations.md, 'A new stream ARN'.",
        ),
        "StreamFailuresQueued": (
            watched.failures.metric_approximate_number_of_messages_visible(
                period=FIVE_MINUTES, statistic="Maximum"
            ),
            1,
            1,
            "Stream batches exhausted their retries: replay them from the stream within 24 h "
            "of their writes.",
        ),
        "ApiServerErrorRate": (
            server_error_rate,
            API_SERVER_ERROR_PERCENT,
            1,
            f"More than {API_SERVER_ERROR_PERCENT}% of API requests answered 5xx.",
        ),
        "NightlyReconciliationFailed": (
            nightly_failures,
            1,
            1,
            "The nightly snapshot/compaction/reconciliation failed or found discrepancies; "
            "see the findings message.",
        ),
    }
    specs.update(watched.api.alarms)
    if watched.committer is not None:
        specs.update(committer_alarms(watched.committer))
    alarms: dict[str, cloudwatch.Alarm] = {}
    for name, (metric, threshold, periods, description) in specs.items():
        silent_breaches = name in BREACHING_WHEN_SILENT
        alarm = cloudwatch.Alarm(
            scope,
            f"{name}Alarm",
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            datapoints_to_alarm=periods,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD
            if silent_breaches
            else cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING
            if silent_breaches
            else cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        alarm.add_alarm_action(actions.SnsAction(topic))
        alarms[name] = alarm
    return alarms


def consumer_not_reading(table: dynamodb.Table, consumer: lambda_.Function) -> cloudwatch.MathExpression:
    """1 in a five-minute period where the table consumed write capacity and the stream consumer
    was not invoked, else 0.

    Why this and not the mapping's own metrics with missing data as breaching: Lambda publishes a
    mapping's metrics (``IteratorAge``) only while it delivers records, so silence means a
    disabled mapping, a mapping left on an old stream, or merely an idle table, and the first two
    are harm while the third is not. The table's writes tell them apart without a function of our
    own: every write of the write path is a wallet MODIFY the mapping's filter passes, while TTL
    deletions consume no write capacity. A period with neither metric has no data and is not
    breaching: nothing was written, so nothing is being left unread.
    """
    return cloudwatch.MathExpression(
        expression="IF(FILL(writes, 0) > 0 AND FILL(invocations, 0) == 0, 1, 0)",
        using_metrics={
            "writes": table.metric_consumed_write_capacity_units(period=FIVE_MINUTES, statistic="Sum"),
            "invocations": consumer.metric_invocations(period=FIVE_MINUTES, statistic="Sum"),
        },
        label="table written, stream consumer not invoked",
        period=FIVE_MINUTES,
    )


#: Tidy passes in a row short of the log's end that alarm: two hours of 30-second cycles.
TIDY_BEHIND_PASSES: Final = 240


def committer_metric(name: str) -> cloudwatch.Metric:
    """One of the committer's own metrics (``CommittedRows``, ``CommitSeconds``), five-minute sums."""
    return cloudwatch.Metric(
        namespace=lambda_metrics.NAMESPACE,
        metric_name=name,
        dimensions_map={lambda_metrics.SERVICE_DIMENSION: lambda_metrics.COMMITTER_SERVICE},
        statistic="Sum",
        period=FIVE_MINUTES,
    )


def committer_alarms(committer: lambda_.Function) -> dict[str, AlarmSpec]:
    """The committer failing, not running, running without committing what the consumer lands,
    keeping a misfit file aside, finding a landed file gone, or holding a table it cannot take a
    type change of.

    Landed rows wait in the landing log until a commit appends them; a committer outage loses
    nothing until it outlasts the orphan-file retention (days), so these alarms are what stands
    between an outage and that loss.
    """
    landed = cloudwatch.MathExpression(
        expression="FILL(ledger, 0) + FILL(wallets, 0)",
        using_metrics={
            "ledger": _consumer_metric(lambda_metrics.LEDGER_ROWS),
            "wallets": _consumer_metric(lambda_metrics.WALLET_ROWS),
        },
        label="rows landed",
        period=FIVE_MINUTES,
    )
    lag = cloudwatch.MathExpression(
        expression="IF(FILL(landed, 0) > 0 AND FILL(committed, 0) == 0, 1, 0)",
        using_metrics={"landed": landed, "committed": committer_metric(lambda_metrics.COMMITTED_ROWS)},
        label="rows landed, none committed",
        period=FIVE_MINUTES,
    )
    periods = COMMIT_LAG_MINUTES // 5
    return {
        COMMITTER_SILENT_ALARM: (
            committer.metric_invocations(period=FIVE_MINUTES, statistic="Sum"),
            1,
            2,
            "The Iceberg committer was not invoked for 10 minutes (its once-a-minute schedule is "
            "disabled or gone): nothing lands in the tables. Missing data counts as breaching.",
        ),
        "CommitterErrors": (
            committer.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
            1,
            2,
            "The Iceberg committer has failed for 10 minutes: landed batches are not reaching the tables.",
        ),
        "CommitLag": (
            lag,
            1,
            periods,
            f"Rows have landed for {COMMIT_LAG_MINUTES} minutes and the committer committed none: the lake "
            "is falling behind (schedule disabled, throttled, or failing).",
        ),
        "LakeMisfits": (
            committer_metric(lambda_metrics.MISFIT_FILES),
            1,
            1,
            "A landed file did not fit its table and was kept aside under _misfits/: its rows are not in "
            "the table. docs/operations.md, 'Misfit files': walletlake lake reland.",
        ),
        "LakeMissingFiles": (
            committer_metric(lambda_metrics.MISSING_FILES),
            1,
            1,
            "A landed file was gone from storage when its batch was committed: its rows are not in the "
            "table. docs/operations.md, 'Misfit files' (a missing file).",
        ),
        "LakeTidyBehind": (
            cloudwatch.Metric(
                namespace=lambda_metrics.NAMESPACE,
                metric_name=lambda_metrics.TIDY_BEHIND,
                dimensions_map={lambda_metrics.SERVICE_DIMENSION: lambda_metrics.COMMITTER_SERVICE},
                statistic="Maximum",
                period=FIVE_MINUTES,
            ),
            TIDY_BEHIND_PASSES,
            1,
            f"The landing log's tidy has stopped short of the log's end {TIDY_BEHIND_PASSES} passes in a "
            "row (a pass every cycle while behind): records land faster than they are deleted, and every "
            "commit cycle lists more of them.",
        ),
        "LakeTableBlocked": (
            committer_metric(lambda_metrics.BLOCKED_TABLES),
            1,
            1,
            "The committer holds a table: the contract changed a column's type in a way Iceberg cannot "
            "promote. Its batches wait; the committer's log line names the column and both types.",
        ),
    }


def _consumer_metric(name: str) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=lambda_metrics.NAMESPACE,
        metric_name=name,
        dimensions_map={lambda_metrics.SERVICE_DIMENSION: lambda_metrics.CONSUMER_SERVICE},
        statistic="Sum",
        period=FIVE_MINUTES,
    )


def build_dashboard(
    scope: Construct, watched: Monitored, alarms: dict[str, cloudwatch.Alarm]
) -> cloudwatch.Dashboard:
    """One page: API → table → stream consumer → lake/nightly, plus every alarm's state."""
    table_name = watched.table.table_name
    dashboard = cloudwatch.Dashboard(scope, "Dashboard", default_interval=Duration.hours(3))
    graph = _graph
    dashboard.add_widgets(
        cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(alarms.values()), width=24, height=3)
    )
    dashboard.add_widgets(
        graph("API requests", [watched.api.requests]),
        graph("API 5xx answers", [watched.api.server_errors]),
        graph("API latency p99 (ms)", [watched.api.latency_p99]),
        *(graph(title, metrics) for title, metrics in watched.api.graphs.items()),
    )
    dashboard.add_widgets(
        graph(
            "Table capacity consumed",
            [
                watched.table.metric_consumed_write_capacity_units(statistic="Sum"),
                watched.table.metric_consumed_read_capacity_units(statistic="Sum"),
            ],
        ),
        graph(
            "Table throttles and conflicts",
            [
                _dynamodb("WriteThrottleEvents", table_name),
                _dynamodb("ReadThrottleEvents", table_name),
                _dynamodb("TransactionConflict", table_name),
            ],
        ),
        # The stream's filter criteria keep TTL REMOVEs from the consumer (contracts.stream_filters):
        # DynamoDB's own count of the items its TTL deleted is the figure.
        graph("Items deleted by TTL", [_dynamodb(TTL_DELETED_ITEMS, table_name)]),
        graph(
            "Stream consumer lag (ms)",
            [watched.consumer.metric("IteratorAge", statistic="Maximum")],
        ),
        graph(
            "Stream consumer",
            [
                watched.consumer.metric_invocations(statistic="Sum"),
                watched.consumer.metric_errors(statistic="Sum"),
                watched.failures.metric_approximate_number_of_messages_visible(statistic="Maximum"),
            ],
        ),
    )
    if watched.committer is not None:
        dashboard.add_widgets(
            graph(
                "Iceberg committer",
                [
                    committer_metric(lambda_metrics.COMMITTED_ROWS),
                    watched.committer.metric_errors(statistic="Sum"),
                    watched.committer.metric_duration(statistic="Maximum"),
                ],
                width=12,
            ),
            graph("Commit seconds", [committer_metric(lambda_metrics.COMMIT_SECONDS)], width=12),
        )
    dashboard.add_widgets(
        graph(
            "Stream records (Powertools metrics)",
            [
                cloudwatch.Metric(
                    namespace=lambda_metrics.NAMESPACE,
                    metric_name=name,
                    dimensions_map={lambda_metrics.SERVICE_DIMENSION: lambda_metrics.CONSUMER_SERVICE},
                    statistic="Sum",
                )
                for name in lambda_metrics.CONSUMER_GRAPHED
            ],
            width=12,
        ),
        graph(
            "Nightly job",
            [
                watched.nightly.metric_succeeded(statistic="Sum"),
                watched.nightly.metric_failed(statistic="Sum"),
                watched.nightly_function.metric_duration(statistic="Maximum"),
            ],
        ),
        graph(
            "Athena bytes scanned",
            [
                cloudwatch.Metric(
                    namespace="AWS/Athena",
                    metric_name="ProcessedBytes",
                    dimensions_map={"WorkGroup": watched.athena_workgroup},
                    statistic="Sum",
                )
            ],
        ),
    )
    return dashboard


def _graph(title: str, metrics: list[cloudwatch.IMetric], width: int = 6) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(title=title, left=metrics, width=width, height=6)


#: DynamoDB's count of the items its TTL deleted (``AWS/DynamoDB``, per table).
TTL_DELETED_ITEMS: Final = "TimeToLiveDeletedItemCount"


def _dynamodb(metric_name: str, table_name: str) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace="AWS/DynamoDB",
        metric_name=metric_name,
        dimensions_map={"TableName": table_name},
        statistic="Sum",
    )
