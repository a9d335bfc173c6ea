"""The whole pipeline in one stack: table → API → stream consumer → lake (→ committer) → catalog →
nightly job.

One stack because every part references the others (the table's stream, the lake bucket, the
key, the topic) and they are deployed and versioned together; each part lives in its own module.
"""

from __future__ import annotations

import jsii
from aws_cdk import Aspects, CfnOutput, Environment, Fn, IAspect, Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct, IConstruct

from contracts.settings import ATHENA_WORKGROUP_VARIABLE
from walletlake_cdk.analyst_access import build_analyst_policy
from walletlake_cdk.api_service import ApiService, build_api_service, front_environment
from walletlake_cdk.api_tables import build_api_tables, grant_api_tables
from walletlake_cdk.audit_trail import AuditTrail, build_audit_trail
from walletlake_cdk.catalog import analyst_workgroup, build_catalog
from walletlake_cdk.committer import build_committer
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.functions import build_function_assets, settings_environment
from walletlake_cdk.history_access import grant_history_reads
from walletlake_cdk.ledger_table import build_ledger_table
from walletlake_cdk.monitoring import (
    Monitored,
    build_alarms,
    build_alerts_topic,
    build_dashboard,
    fleet_api,
    lambda_api,
)
from walletlake_cdk.nag import ReviewedConstructs, suppress_api_service_findings, suppress_reviewed_findings
from walletlake_cdk.nightly import build_nightly_job
from walletlake_cdk.storage import build_storage
from walletlake_cdk.stream_consumer import build_stream_consumer
from walletlake_cdk.write_api import build_write_api


@jsii.implements(IAspect)
class EncryptLogGroups:
    """Every log group of the stack encrypted with the logs key (one place, so none is missed)."""

    def __init__(self, key: kms.IKey) -> None:
        self.key = key

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, logs.CfnLogGroup) and node.kms_key_id is None:
            node.kms_key_id = self.key.key_arn


class WalletLakeStack(Stack):
    """Every AWS resource walletlake runs on (the embedded stack's production counterpart)."""

    @property
    def availability_zones(self) -> list[str]:
        """The fleet's zones: for an environment-agnostic stack, the region's first ``api_azs`` by
        ``Fn::GetAZs`` (CDK's own default would cap such a stack at two zones)."""
        if Token.is_unresolved(self.region):
            return [Fn.select(index, Fn.get_azs()) for index in range(self.config.api_azs)]
        zones: list[str] = super().availability_zones
        return zones

    def _log_outputs(self, fleet: ApiService, audit: AuditTrail | None) -> None:
        """Where the on-call reads the server's refusals and audit lines, and Lattice's access logs
        (docs/operations.md, "Refused requests")."""
        CfnOutput(self, "ApiLogGroupName", value=fleet.log_group.log_group_name)
        if audit is not None:
            CfnOutput(self, "ApiAccessLogGroupName", value=audit.log_group.log_group_name)

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        env: Environment | None = None,
    ) -> None:
        super().__init__(
            scope, construct_id, description="walletlake: wallet ledger on DynamoDB and its S3 lake", env=env
        )
        self.config = config
        storage = build_storage(self, config)
        Aspects.of(self).add(EncryptLogGroups(storage.logs_key))
        table = build_ledger_table(self, config, storage.table_key)
        api_tables = build_api_tables(self, config, storage.table_key)
        environment = settings_environment(config.settings, storage.bucket_name)
        assets = build_function_assets(self, config)
        api_role: iam.IRole
        # the API also learns what its front vouches for (attribution) and hides operator routes
        api_environment = {**environment, **front_environment(config)}
        if config.api_front == "lambda":
            api = build_write_api(self, config, assets, table, api_environment)
            watched_api = lambda_api(api.api, api.handler.function)
            api_role, api_url, api_functions = api.handler.role, api.stage.url, [api.handler.function]
        else:
            audit = build_audit_trail(self, config, storage) if config.api_front == "lattice" else None
            fleet = build_api_service(
                self,
                config,
                table,
                api_environment,
                idempotency_table=api_tables.idempotency,
                owners_table=api_tables.owners,
                access_logs=audit.destinations if audit is not None else None,
            )
            grant_history_reads(config, fleet, storage)
            watched_api = fleet_api(fleet.requests, fleet.server_errors, fleet.latency, fleet.service)
            suppress_api_service_findings(
                fleet.task_definition, fleet.execution_role, fleet.lattice_role, fleet.vpc
            )
            api_role, api_url, api_functions = fleet.task_role, fleet.endpoint, []
            self._log_outputs(fleet, audit)
        grant_api_tables(api_tables, api_role)
        consumer = build_stream_consumer(self, config, assets, table, storage, environment)
        catalog = build_catalog(self, config, storage)
        if config.iceberg:
            # The consumer asks the catalog where the tables are at its cold start.
            for glue_table in catalog.tables.values():
                if glue_table.open_table_format_input is not None:
                    consumer.handler.function.node.add_dependency(glue_table)
        committer = (
            build_committer(self, config, assets, storage, catalog, environment) if config.iceberg else None
        )
        topic = build_alerts_topic(self, config)
        nightly = build_nightly_job(self, config, assets, table, storage, catalog, topic, environment)
        analyst_policy = build_analyst_policy(self, config, storage)
        watched = Monitored(
            api=watched_api,
            table=table,
            consumer=consumer.handler.function,
            failures=consumer.failures,
            nightly_function=nightly.functions[
                "snapshot_segment" if config.iceberg else "compaction_unit"
            ].function,
            nightly=nightly.state_machine,
            athena_workgroup=config.settings.athena_workgroup,
            committer=committer.handler.function if committer else None,
        )
        alarms = build_alarms(self, config, watched, topic)
        build_dashboard(self, watched, alarms)
        suppress_reviewed_findings(
            ReviewedConstructs(
                lake_prefix=storage.lake_prefix,
                api_role=api_role,
                consumer_role=consumer.handler.role,
                nightly_roles=nightly.roles,
                state_machines=nightly.state_machines,
                analyst_policy=analyst_policy,
                failure_queue=consumer.failures,
                functions=(
                    *api_functions,
                    consumer.handler.function,
                    *((committer.handler.function,) if committer else ()),
                    *(unit.function for unit in nightly.functions.values()),
                ),
                committer_role=committer.handler.role if committer else None,
                optimizer_role=catalog.optimizer_role,
            )
        )

        self.table = table
        self.idempotency_table = api_tables.idempotency
        self.storage = storage
        self.consumer = consumer
        self.catalog = catalog
        self.nightly = nightly
        self.committer = committer
        self.topic = topic
        self.alarms = alarms

        outputs = {
            "ApiUrl": api_url,
            "TableName": table.table_name,
            "LakeBucketName": storage.bucket_name,
            "GlueDatabaseName": config.settings.glue_database,
            "AthenaWorkgroupName": config.settings.athena_workgroup,
            "AnalystWorkgroupName": catalog.analyst_workgroup.ref,
            "AlertsTopicArn": topic.topic_arn,
            "NightlyStateMachineArn": nightly.state_machine.state_machine_arn,
            **(
                {"HourlyCompactionStateMachineArn": nightly.hourly.state_machine_arn}
                if nightly.hourly is not None
                else {}
            ),
            **({"CommitterFunctionName": committer.handler.function.function_name} if committer else {}),
            "StreamFailureQueueUrl": consumer.failures.queue_url,
            "AnalystPolicyArn": analyst_policy.managed_policy_arn,
        }
        for name, value in outputs.items():
            CfnOutput(self, name, value=value)
        # What `walletlake` (CLI and notebooks) needs to talk to this stack, ready for `eval`: the
        # analysts' workgroup, whose results are the only ones the analyst policy may write.
        cli_environment = {
            **environment,
            ATHENA_WORKGROUP_VARIABLE: analyst_workgroup(config.settings.athena_workgroup),
        }
        CfnOutput(
            self,
            "CliEnvironment",
            value=Fn.join(
                " ",
                [
                    f"export AWS_DEFAULT_REGION={self.region}",
                    *(f"{name}={value}" for name, value in cli_environment.items()),
                ],
            ),
        )
