"""The CDK app, synthesized once per session and context with no Docker, no network and no AWS credentials.

Assertions read the synthesized CloudFormation template and compare it with the project's own
definitions (``contracts.wallets_table``, ``lake.glue``, ``contracts.settings``, ``queries/sql``).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from aws_cdk import assertions
from cfnlint.api import lint_file
from support.cdk_synthesis import CONTEXT as SYNTHESIS_CONTEXT
from support.cdk_synthesis import Synthesis

from contracts import lambda_metrics
from contracts.audit_log import AUDIT_TABLE
from contracts.caller_permissions import CallerPermissions
from contracts.lake_tables import STREAM_TABLES, TABLES
from contracts.settings import Settings
from contracts.stream_filters import filter_patterns
from contracts.wallets_table import WALLETS_TABLE
from lake.glue import iceberg_table_input, table_input
from lake.iceberg_tables import CREATION_PROPERTY_KEYS, SNAPSHOT_RETENTION_HOURS, TABLE_PROPERTIES
from queries import list_queries
from wallet.api import create_app
from walletlake_cdk.assembly import build_app, error_messages
from walletlake_cdk.committer import COMMITTER_HANDLER
from walletlake_cdk.config import (
    CALLERS_REQUIRED,
    DEFAULT_CALLER_SESSION_PATTERN,
    LATTICE_PREFIX_LIST_REQUIRED,
)
from walletlake_cdk.monitoring import (
    COMMIT_LAG_MINUTES,
    COMMITTER_SILENT_ALARM,
    ITERATOR_AGE_ALARM_FRACTION,
    NOT_READING_ALARM,
    NOT_READING_MINUTES,
)
from walletlake_cdk.nightly import (
    COMPACTION_LEASE_HANDLER,
    COMPACTION_PLAN_HANDLER,
    COMPACTION_UNIT_HANDLER,
    LEASE_BUSY,
    PLAN_NIGHT_HANDLER,
    RECONCILE_CLASSIFY_HANDLER,
    RECONCILE_PLAN_HANDLER,
    SNAPSHOT_SEGMENT_HANDLER,
)
from walletlake_cdk.nightly_grants import NIGHT_TAG_GLUE_ACTIONS, UNLOAD_PREFIX
from walletlake_cdk.storage import ATHENA_RESULTS_PREFIX
from walletlake_cdk.stream_consumer import CONSUMER_HANDLER
from walletlake_cdk.write_api import API_HANDLER, TABLE_ACTIONS

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

#: The context of every synthesis here (``support.cdk_synthesis``), and what it names.
CONTEXT = SYNTHESIS_CONTEXT
BUCKET = CONTEXT["bucket_name"]
CALLER = CONTEXT["api_callers"]
SETTINGS = Settings()


class Synthesized:
    """The synthesized app: its template as a dict and as an assertions object, and its files.

    The synthesis is shared (``tests/cdk/conftest.py``'s ``synthesize``); the template is this
    object's own copy.
    """

    def __init__(self, synthesis: Synthesis) -> None:
        self.assembly = synthesis.assembly
        self.directory = synthesis.directory
        self.template_path = synthesis.template_path
        self.template: dict[str, Any] = synthesis.template()
        self.assertions = assertions.Template.from_json(self.template)

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return dict(self.assertions.find_resources(resource_type))  # type: ignore[arg-type]

    def only(self, resource_type: str) -> tuple[str, dict[str, Any]]:
        found = self.resources(resource_type)
        assert len(found) == 1, f"expected one {resource_type}, found {sorted(found)}"
        return next(iter(found.items()))

    def logical_id(self, resource_type: str, path_part: str) -> str:
        """The logical id of the one resource of a type whose construct path contains ``path_part``."""
        matches = [
            logical_id
            for logical_id, resource in self.resources(resource_type).items()
            if path_part in resource.get("Metadata", {}).get("aws:cdk:path", logical_id)
        ]
        if not matches:
            matches = [
                logical_id for logical_id in self.resources(resource_type) if logical_id.startswith(path_part)
            ]
        assert len(matches) == 1, f"{path_part}: {matches}"
        return matches[0]


@pytest.fixture(scope="module")
def synthesized(synthesize: Callable[..., Synthesis]) -> Synthesized:
    return Synthesized(synthesize())


@pytest.fixture(scope="module")
def parquet(synthesize: Callable[..., Synthesis]) -> Synthesized:
    """The plain-Parquet lake (``-c lake_format=parquet``), kept deployable behind one switch."""
    return Synthesized(synthesize(lake_format="parquet"))


@pytest.fixture(scope="module")
def lambda_front(synthesize: Callable[..., Synthesis]) -> Synthesized:
    """The low-load variant: the write path on API Gateway + Lambda (``-c api_front=lambda``)."""
    return Synthesized(synthesize(api_front="lambda"))


def functions_by_handler(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    return {
        resource["Properties"]["Handler"]: resource["Properties"]
        for resource in synthesized.resources("AWS::Lambda::Function").values()
    }


def policy_statements(synthesized: Synthesized, role_logical_id: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for policy in synthesized.resources("AWS::IAM::Policy").values():
        if {"Ref": role_logical_id} in policy["Properties"]["Roles"]:
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


UNIT_HANDLERS = (
    COMPACTION_PLAN_HANDLER,
    COMPACTION_UNIT_HANDLER,
    PLAN_NIGHT_HANDLER,
    SNAPSHOT_SEGMENT_HANDLER,
    RECONCILE_PLAN_HANDLER,
    RECONCILE_CLASSIFY_HANDLER,
    COMPACTION_LEASE_HANDLER,
)


def wallets_table(synthesized: Synthesized) -> tuple[str, dict[str, Any]]:
    table_id = synthesized.logical_id("AWS::DynamoDB::Table", "WalletsTable")
    return table_id, synthesized.resources("AWS::DynamoDB::Table")[table_id]


def function_id(synthesized: Synthesized, handler: str) -> str:
    return next(
        logical_id
        for logical_id, resource in synthesized.resources("AWS::Lambda::Function").items()
        if resource["Properties"]["Handler"] == handler
    )


def role_of(synthesized: Synthesized, handler: str) -> str:
    function = synthesized.resources("AWS::Lambda::Function")[function_id(synthesized, handler)]
    return str(function["Properties"]["Role"]["Fn::GetAtt"][0])


def definition_of(synthesized: Synthesized, path_part: str) -> tuple[str, dict[str, Any]]:
    """A state machine's logical id and its definition, tokens replaced by ``<ref LogicalId>``."""
    machine_id = synthesized.logical_id("AWS::StepFunctions::StateMachine", path_part)
    parts = synthesized.resources("AWS::StepFunctions::StateMachine")[machine_id]["Properties"][
        "DefinitionString"
    ]["Fn::Join"][1]
    text = "".join(
        part if isinstance(part, str) else f"<ref {part.get('Ref') or part.get('Fn::GetAtt', ['?'])[0]}>"
        for part in parts
    )
    return machine_id, json.loads(text)


def actions_by_resource(statements: list[dict[str, Any]]) -> list[tuple[frozenset[str], str]]:
    return [
        (frozenset(as_list(statement["Action"])), json.dumps(resource))
        for statement in statements
        for resource in as_list(statement["Resource"])
    ]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


# --- checkers -------------------------------------------------------------------------------


def test_cdk_nag_leaves_no_unsuppressed_error_and_every_suppression_has_a_reason(
    synthesized: Synthesized,
) -> None:
    # GIVEN the app synthesized with AwsSolutionsChecks applied as an Aspect
    # WHEN its annotations and the cdk-nag report are read
    report = next(synthesized.directory.glob("AwsSolutions-*NagReport.csv"))
    rows = list(csv.DictReader(report.open()))
    # THEN no error annotation is left, the checks ran, and each suppression says why
    assert error_messages(synthesized.assembly) == []
    assert len(rows) > 20
    assert {row["Compliance"] for row in rows} <= {"Compliant", "Suppressed"}
    suppressed = [row for row in rows if row["Compliance"] == "Suppressed"]
    assert suppressed
    assert all(len(row["Exception Reason"]) >= 40 for row in suppressed)


def test_cfn_lint_finds_nothing_in_the_template(synthesized: Synthesized) -> None:
    # GIVEN the synthesized template
    # WHEN cfn-lint checks it (its default rules: errors, warnings and informational)
    matches = lint_file(synthesized.template_path)
    # THEN it reports nothing
    assert [str(match) for match in matches] == []


# --- DynamoDB -------------------------------------------------------------------------------


def test_table_is_the_wallets_contract_with_stream_ttl_pitr_and_protection(synthesized: Synthesized) -> None:
    # GIVEN the table definition in contracts.wallets_table
    # WHEN the synthesized table is read
    _, table = wallets_table(synthesized)
    properties = table["Properties"]
    # THEN key, stream and TTL are the contract's, and the table is protected and encrypted
    assert properties["TableName"] == SETTINGS.table
    assert properties["KeySchema"] == [{"AttributeName": WALLETS_TABLE.partition_key, "KeyType": "HASH"}]
    assert properties["AttributeDefinitions"] == [
        {"AttributeName": WALLETS_TABLE.partition_key, "AttributeType": "S"}
    ]
    assert properties["StreamSpecification"] == {"StreamViewType": WALLETS_TABLE.stream_view_type}
    assert properties["TimeToLiveSpecification"] == {
        "AttributeName": WALLETS_TABLE.ttl_attribute,
        "Enabled": True,
    }
    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert properties["DeletionProtectionEnabled"] is True
    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert properties["SSESpecification"]["SSEEnabled"] is True
    assert properties["SSESpecification"]["SSEType"] == "KMS"
    assert table["DeletionPolicy"] == "Retain"


# --- stream consumer ------------------------------------------------------------------------


def test_event_source_mapping_is_bounded_ordered_and_reports_item_failures(synthesized: Synthesized) -> None:
    # GIVEN the consumer's event source mapping
    _, mapping = synthesized.only("AWS::Lambda::EventSourceMapping")
    properties = mapping["Properties"]
    queue_id, queue = synthesized.only("AWS::SQS::Queue")
    table_id, _ = wallets_table(synthesized)
    # THEN it reads the table's stream from the oldest record, reports item failures, gives up
    # within the stream's retention, keeps order, and hands exhausted batches to the queue
    assert properties["EventSourceArn"] == {"Fn::GetAtt": [table_id, "StreamArn"]}
    assert properties["StartingPosition"] == "TRIM_HORIZON"
    assert properties["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert properties["BatchSize"] == 10_000  # Lambda's largest for DynamoDB Streams
    assert properties["MaximumBatchingWindowInSeconds"] == 30  # the freshness cost, docs/operations.md
    # AND (the Iceberg lake) one batch per shard at a time, in a tumbling window that names the shard
    assert properties["ParallelizationFactor"] == 1
    assert properties["TumblingWindowInSeconds"] == 60
    assert properties["MaximumRetryAttempts"] == 10
    assert properties["MaximumRecordAgeInSeconds"] == 12 * 3600
    assert properties["MaximumRecordAgeInSeconds"] < 24 * 3600
    assert properties["BisectBatchOnFunctionError"] is False
    # AND records that make no row never invoke it (contracts.stream_filters, whose tests show that
    # every record the decoder turns into a row or a quarantine entry passes)
    assert [item["Pattern"] for item in properties["FilterCriteria"]["Filters"]] == filter_patterns()
    assert properties["DestinationConfig"] == {
        "OnFailure": {"Destination": {"Fn::GetAtt": [queue_id, "Arn"]}}
    }
    assert "KmsMasterKeyId" in queue["Properties"]
    function_id = properties["FunctionName"]["Ref"]
    consumer = synthesized.resources("AWS::Lambda::Function")[function_id]
    assert consumer["Properties"]["Handler"] == CONSUMER_HANDLER


def test_parquet_lake_consumer_role_may_only_put_objects_under_the_lake_prefix(parquet: Synthesized) -> None:
    # GIVEN the consumer function's role
    consumer = functions_by_handler(parquet)[CONSUMER_HANDLER]
    role_id = consumer["Role"]["Fn::GetAtt"][0]
    statements = policy_statements(parquet, role_id)
    # WHEN its S3 statements are collected
    s3_statements = [s for s in statements if any(a.startswith("s3:") for a in as_list(s["Action"]))]
    # THEN it can write objects, only under the lake prefix, and nothing else in S3
    assert len(s3_statements) == 1
    assert s3_statements[0]["Action"] == "s3:PutObject"
    assert s3_statements[0]["Resource"]["Fn::Join"][1][-1] == f"/{SETTINGS.lake_prefix}/*"
    assert not any(
        a.startswith("dynamodb:") and "Item" in a for s in statements for a in as_list(s["Action"])
    )


# --- write path -----------------------------------------------------------------------------


def test_the_lambda_front_requires_iam_is_throttled_and_logs_every_request(lambda_front: Synthesized) -> None:
    # GIVEN the HTTP API's route and stage of the low-load variant
    _, route = lambda_front.only("AWS::ApiGatewayV2::Route")
    _, stage = lambda_front.only("AWS::ApiGatewayV2::Stage")
    log_group_id = lambda_front.logical_id("AWS::Logs::LogGroup", "ApiAccessLogs")
    # THEN every request needs SigV4, bursts are throttled and each request is logged
    assert route["Properties"]["RouteKey"] == "$default"
    assert route["Properties"]["AuthorizationType"] == "AWS_IAM"
    throttle = stage["Properties"]["DefaultRouteSettings"]
    assert throttle["ThrottlingRateLimit"] == 22_000
    assert throttle["ThrottlingBurstLimit"] == 5_000
    access = stage["Properties"]["AccessLogSettings"]
    assert access["DestinationArn"] == {"Fn::GetAtt": [log_group_id, "Arn"]}
    assert "$context.requestId" in access["Format"]


def test_the_lambda_front_enforces_the_caller_map_the_session_rule_and_keeps_the_audit_log(
    lambda_front: Synthesized,
) -> None:
    # GIVEN the API function of the low-load variant (issue 44, point 3: it once got no map, so any
    # principal of the account allowed execute-api:Invoke could deposit)
    variables = functions_by_handler(lambda_front)[API_HANDLER]["Environment"]["Variables"]
    # THEN it trusts API Gateway's verified caller and checks it against the same map as Lattice's
    assert variables["WALLETLAKE_TRUST_FRONT"] == "apigateway"
    assert variables["WALLETLAKE_CALLER_PERMISSIONS"] == str(CallerPermissions.parse(CONTEXT["api_callers"]))
    assert variables["WALLETLAKE_CALLER_SESSION_PATTERN"] == DEFAULT_CALLER_SESSION_PATTERN
    # AND writes one audit line per request to its log group
    assert variables["WALLETLAKE_AUDIT_LOG"] == "stdout"


def test_synthesis_of_the_lambda_front_without_callers_refuses_in_one_line(tmp_path: Path) -> None:
    for auth in ({}, {"api_auth": "jwt", "jwt_issuer": "https://id.example.com/", "jwt_audience": "api"}):
        # GIVEN -c api_front=lambda (IAM or JWT) without api_callers
        context = {key: value for key, value in CONTEXT.items() if key != "api_callers"}
        context.update(api_front="lambda", **auth)
        environment = {**os.environ, "CDK_OUTDIR": str(tmp_path), "CDK_CONTEXT_JSON": json.dumps(context)}
        # WHEN the app runs as the CDK CLI runs it
        completed = subprocess.run(
            [sys.executable, str(ROOT / "cdk" / "app.py")],
            env=environment,
            capture_output=True,
            text=True,
            check=False,
        )
        # THEN it refuses as the Lattice front does, and writes no template
        assert completed.returncode == 2
        assert completed.stderr.splitlines() == [f"error: {CALLERS_REQUIRED}"]
        assert not list(tmp_path.glob("*.template.json"))


@pytest.mark.parametrize("front", ["fleet", "lambda"])
def test_api_role_holds_exactly_the_write_path_actions_on_the_table(
    front: str, synthesized: Synthesized, lambda_front: Synthesized
) -> None:
    # GIVEN the write path's role: the fleet's task role, or the low-load variant's function role
    built = synthesized if front == "fleet" else lambda_front
    if front == "fleet":
        (task,) = built.resources("AWS::ECS::TaskDefinition").values()
        role_id = task["Properties"]["TaskRoleArn"]["Fn::GetAtt"][0]
    else:
        role_id = functions_by_handler(built)[API_HANDLER]["Role"]["Fn::GetAtt"][0]
    table_id, _ = wallets_table(built)
    statements = policy_statements(built, role_id)
    # WHEN the DynamoDB statements are collected
    # (its grants on the idempotency and owners tables are tests/cdk/test_idempotency_table.py's
    # and tests/cdk/test_owners_table.py's)
    table_arn = {"Fn::GetAtt": [table_id, "Arn"]}
    dynamodb = [
        s
        for s in statements
        if any(a.startswith("dynamodb:") for a in as_list(s["Action"]))
        and table_arn in as_list(s["Resource"])
    ]
    # THEN there is one, with the write path's actions, on the table only
    assert len(dynamodb) == 1
    assert sorted(as_list(dynamodb[0]["Action"])) == sorted(TABLE_ACTIONS)
    assert dynamodb[0]["Resource"] == {"Fn::GetAtt": [table_id, "Arn"]}
    # AND of S3 it may only read (the fleet: the ledger's files for a wallet's history,
    # tests/cdk/test_history_access.py; the function: nothing)
    s3 = {a for s in statements for a in as_list(s["Action"]) if a.startswith("s3:")}
    assert s3 == ({"s3:GetObject"} if front == "fleet" else set())


def test_parquet_lake_functions_ship_their_own_layers_and_name_the_deployed_resources(
    parquet: Synthesized,
) -> None:
    # GIVEN the functions
    functions = functions_by_handler(parquet)
    # THEN their handlers are the modules' entry points on Python 3.11: the API, the consumer and
    # one function per kind of unit of the hourly and nightly jobs
    assert set(functions) == {CONSUMER_HANDLER, *UNIT_HANDLERS}
    knobs: dict[str, dict[str, Any]] = {
        COMPACTION_PLAN_HANDLER: {"compaction_unit_minutes": 5},
        COMPACTION_UNIT_HANDLER: {"compaction_unit_minutes": 5},
        **{
            handler: {
                "snapshot_segments": 200,
                "snapshot_read_units_per_second": 60_000,
                "unload_prefix": UNLOAD_PREFIX,
            }
            for handler in (
                PLAN_NIGHT_HANDLER,
                SNAPSHOT_SEGMENT_HANDLER,
                RECONCILE_PLAN_HANDLER,
                RECONCILE_CLASSIFY_HANDLER,
            )
        },
    }
    for handler, properties in functions.items():
        assert properties["Runtime"] == "python3.11"
        assert properties["Architectures"] == ["x86_64"]
        # AND their environment makes Settings.from_env name what was deployed
        environment = properties["Environment"]["Variables"]
        settings = Settings.from_env(
            {name: value for name, value in environment.items() if isinstance(value, str)}
        )
        expected = SETTINGS.replace(
            bucket=BUCKET, query_engine="athena", lake_format="parquet", **knobs.get(handler, {})
        )
        assert settings == expected, handler
        # AND each takes exactly one layer, the project's own (no AWS-published layer ARN): what
        # its handler imports beyond the runtime, derived at synth (lambda_code.function_packages)
        layer_refs = properties["Layers"]
        assert len(layer_refs) == 1, handler
        assert set(layer_refs[0]) == {"Ref"}, handler
        assert parquet.template["Resources"][layer_refs[0]["Ref"]]["Type"] == "AWS::Lambda::LayerVersion"
    assert "Mappings" not in parquet.template
    # AND functions needing the same packages share one layer: consumer, compaction, nightly, lease
    assert len({json.dumps(properties["Layers"]) for properties in functions.values()}) == 4


# --- lake bucket ----------------------------------------------------------------------------


def test_lake_bucket_is_private_encrypted_versioned_tiered_and_logged(synthesized: Synthesized) -> None:
    # GIVEN the lake bucket
    buckets = synthesized.resources("AWS::S3::Bucket")
    lake_id = synthesized.logical_id("AWS::S3::Bucket", "LakeBucket")
    log_id = synthesized.logical_id("AWS::S3::Bucket", "AccessLogBucket")
    lake = buckets[lake_id]["Properties"]
    # THEN it blocks public access, uses SSE-KMS with bucket keys, keeps versions, logs access
    assert lake["BucketName"] == BUCKET
    assert lake["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    encryption = lake["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert encryption["BucketKeyEnabled"] is True
    assert lake["VersioningConfiguration"] == {"Status": "Enabled"}
    assert lake["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": log_id}
    rules = {rule["Id"]: rule for rule in lake["LifecycleConfiguration"]["Rules"]}
    assert rules["expire-noncurrent-versions"]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}
    assert rules["lake-tiering"]["Prefix"] == f"{SETTINGS.lake_prefix}/"
    assert [t["StorageClass"] for t in rules["lake-tiering"]["Transitions"]] == [
        "INTELLIGENT_TIERING",
        "GLACIER_IR",
    ]
    assert rules["expire-athena-results"]["Prefix"] == ATHENA_RESULTS_PREFIX
    assert buckets[log_id]["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"
    ] == {"SSEAlgorithm": "AES256"}


def test_bucket_policies_deny_plain_http_and_old_tls(synthesized: Synthesized) -> None:
    # GIVEN both bucket policies
    policies = synthesized.resources("AWS::S3::BucketPolicy")
    # THEN each denies requests without TLS and with TLS older than 1.2
    assert len(policies) == 2
    for policy in policies.values():
        denies = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        conditions = [s["Condition"] for s in denies]
        assert {"Bool": {"aws:SecureTransport": "false"}} in conditions
        assert {"NumericLessThan": {"s3:TlsVersion": 1.2}} in conditions
        assert all(s["Principal"] == {"AWS": "*"} and s["Action"] == "s3:*" for s in denies)


# --- catalog --------------------------------------------------------------------------------


def test_parquet_lake_glue_tables_are_lake_glue_table_inputs_verbatim(parquet: Synthesized) -> None:
    # GIVEN the Glue tables of the template
    tables = {
        resource["Properties"]["TableInput"]["Name"]: resource["Properties"]
        for resource in parquet.resources("AWS::Glue::Table").values()
        if resource["Properties"]["TableInput"]["Name"] != AUDIT_TABLE  # tests/cdk/test_cdk_security.py
    }
    _, database = parquet.only("AWS::Glue::Database")
    # THEN there is one per lake table, each exactly lake.glue.table_input (columns from
    # contracts.lake_tables, partition projection on dt), in the settings' database
    assert set(tables) == set(TABLES)
    assert database["Properties"]["DatabaseInput"]["Name"] == SETTINGS.glue_database
    for name, properties in tables.items():
        assert properties["TableInput"] == table_input(name, BUCKET, SETTINGS.lake_prefix)
        assert properties["DatabaseName"] == SETTINGS.glue_database


def test_athena_workgroup_enforces_encrypted_results_and_a_scan_cutoff(synthesized: Synthesized) -> None:
    # GIVEN the workgroup
    workgroup = synthesized.resources("AWS::Athena::WorkGroup")[
        synthesized.logical_id("AWS::Athena::WorkGroup", "AthenaWorkgroup")
    ]
    properties = workgroup["Properties"]
    configuration = properties["WorkGroupConfiguration"]
    # THEN clients cannot override it, results are KMS-encrypted under their own prefix, and
    # a query scanning more than the cutoff is cancelled
    assert properties["Name"] == SETTINGS.athena_workgroup
    assert configuration["EnforceWorkGroupConfiguration"] is True
    assert configuration["BytesScannedCutoffPerQuery"] == 200 * 1024**3
    result = configuration["ResultConfiguration"]
    assert result["OutputLocation"] == f"s3://{BUCKET}/{ATHENA_RESULTS_PREFIX}"
    assert result["EncryptionConfiguration"]["EncryptionOption"] == "SSE_KMS"


def test_every_sql_file_is_a_named_query_in_the_workgroup(synthesized: Synthesized) -> None:
    # GIVEN the .sql files present at synth time, as the queries catalogue reads them
    files = {path.stem for path in (ROOT / "queries" / "sql").glob("*.sql")}
    catalogue = {query.name: query for query in list_queries()}
    # WHEN the named queries are read
    queries = {
        resource["Properties"]["Name"]: resource["Properties"]
        for resource in synthesized.resources("AWS::Athena::NamedQuery").values()
    }
    workgroup_id = synthesized.logical_id("AWS::Athena::WorkGroup", "AthenaWorkgroup")
    # THEN each file is one query with its exact text and description, in the workgroup and database
    assert set(queries) == set(catalogue) == files
    for name, query in catalogue.items():
        assert queries[name]["QueryString"] == query.sql
        assert queries[name]["Description"] == query.description[:1024]
        assert queries[name]["WorkGroup"] == {"Ref": workgroup_id}
        assert queries[name]["Database"] == SETTINGS.glue_database


# --- nightly job and alarms -----------------------------------------------------------------


def test_parquet_lake_nightly_schedule_starts_the_state_machine_that_runs_the_units_and_reports(
    parquet: Synthesized,
) -> None:
    # GIVEN the nightly schedule and state machine
    machine_id, definition = definition_of(parquet, "NightlyStateMachine")
    rules = {
        rule["Properties"]["Targets"][0]["Arn"]["Ref"]: rule["Properties"]
        for rule in parquet.resources("AWS::Events::Rule").values()
    }
    topic_id, _ = parquet.only("AWS::SNS::Topic")
    states = definition["States"]
    # THEN it runs daily at 01:30 UTC: plan → snapshot segments → plan and compact the units left →
    # plan the reconciliation → reconcile each day → report
    assert rules[machine_id]["ScheduleExpression"] == "cron(30 1 * * ? *)"
    order, state = [], definition["StartAt"]
    while state in states and "Next" in states[state]:
        order.append(state)
        state = states[state]["Next"]
    assert order == [
        "PlanNight",
        "SnapshotSegments",
        "NightlyTakeLease",
        "NightlyPlanUnits",
        "NightlyCompactUnits",
        "NightlyReleaseLease",
        "PlanReconciliation",
        "ReconcileDays",
        "ReportSuccess",
    ]
    # AND the compaction steps run under the lease: waited for while an hourly run holds it,
    # given back on failure too
    lease_retry = [
        retry for retry in states["NightlyTakeLease"]["Retry"] if retry["ErrorEquals"] == [LEASE_BUSY]
    ]
    assert lease_retry
    assert lease_retry[0]["IntervalSeconds"] * lease_retry[0]["MaxAttempts"] >= 3600
    for step in ("NightlyPlanUnits", "NightlyCompactUnits"):
        assert [catch["Next"] for catch in states[step]["Catch"]] == ["NightlyReleaseLeaseOnError"]
    assert states["NightlyReleaseLeaseOnError"]["Next"] == "ReportError"
    # AND the segments and the units are Distributed Maps of STANDARD children with bounded concurrency
    for name, items, concurrency in (
        ("SnapshotSegments", "$.night.segments", 200),
        ("NightlyCompactUnits", "$.compaction.units", 100),
    ):
        processor = states[name]["ItemProcessor"]["ProcessorConfig"]
        assert processor == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
        assert states[name]["ItemsPath"] == items
        assert states[name]["MaxConcurrency"] == concurrency
    unit = states["NightlyCompactUnits"]["ItemProcessor"]["States"]["NightlyCompactUnit"]
    assert unit["Resource"] == f"<ref {function_id(parquet, COMPACTION_UNIT_HANDLER)}>"
    assert "Parameters" not in unit  # the function gets the unit (the Map item) as it is
    retried = [error for retry in unit["Retry"] for error in retry["ErrorEquals"]]
    assert {"Lambda.ServiceException", "Lambda.TooManyRequestsException"} <= set(retried)
    assert "States.ALL" not in retried  # a unit that ran and failed is reported, not retried
    # AND days are reconciled one at a time, oldest first, each by two Athena UNLOADs run by
    # Step Functions itself, then classified by a function
    days = states["ReconcileDays"]
    assert days["MaxConcurrency"] == 1
    day_states = days["ItemProcessor"]["States"]
    branches = day_states["ReconcileQueries"]["Branches"]
    athena = [next(iter(branch["States"].values())) for branch in branches]
    assert [task["Resource"] for task in athena] == [
        "arn:<ref AWS::Partition>:states:::athena:startQueryExecution.sync"
    ] * 2
    assert {task["Parameters"]["QueryString.$"] for task in athena} == {"$.wallets_sql", "$.transfers_sql"}
    assert {task["Parameters"]["WorkGroup"] for task in athena} == {SETTINGS.athena_workgroup}
    assert day_states["ReconcileQueries"]["Next"] == "ClassifyDay"
    assert f"<ref {function_id(parquet, RECONCILE_CLASSIFY_HANDLER)}>" in json.dumps(
        day_states["ClassifyDay"]
    )
    # AND findings and failures of any step go to the alerts topic
    assert [catch["Next"] for catch in days["Catch"]] == ["ReportFindings", "ReportError"]
    for step in order[:-1]:
        if step in ("NightlyPlanUnits", "NightlyCompactUnits", "NightlyReleaseLease"):
            continue
        assert "ReportError" in [catch["Next"] for catch in states[step]["Catch"]], step
    for report in ("ReportSuccess", "ReportFindings", "ReportError"):
        assert states[report]["Parameters"]["TopicArn"] == f"<ref {topic_id}>"
    machine = parquet.resources("AWS::StepFunctions::StateMachine")[machine_id]
    assert machine["Properties"]["TracingConfiguration"] == {"Enabled": True}
    assert machine["Properties"]["LoggingConfiguration"]["Level"] == "ALL"


def test_parquet_lake_hourly_schedule_compacts_the_closed_hours_in_parallel_units(
    parquet: Synthesized,
) -> None:
    # GIVEN the hourly schedule and state machine
    machine_id, definition = definition_of(parquet, "HourlyStateMachine")
    rules = {
        rule["Properties"]["Targets"][0]["Arn"]["Ref"]: rule["Properties"]
        for rule in parquet.resources("AWS::Events::Rule").values()
    }
    states = definition["States"]
    # THEN ten minutes past every hour it plans today's closed hours and runs their units
    target = rules[machine_id]["Targets"][0]
    assert rules[machine_id]["ScheduleExpression"] == "cron(10 * * * ? *)"
    assert json.loads(target["Input"]) == {"closed_hours_of": "today"}
    assert definition["StartAt"] == "HourlyTakeLease"
    take = states["HourlyTakeLease"]
    assert take["Next"] == "HourlyPlanUnits"
    # AND while the nightly run holds the compaction lease it ends at once, successfully
    assert next((catch["ErrorEquals"], catch["Next"]) for catch in take["Catch"]) == (
        [LEASE_BUSY],
        "HourlyLeaseBusy",
    )
    assert states["HourlyLeaseBusy"]["Type"] == "Succeed"
    plan = states["HourlyPlanUnits"]
    assert plan["Resource"] == f"<ref {function_id(parquet, COMPACTION_PLAN_HANDLER)}>"
    assert plan["ResultPath"] == "$.compaction"
    assert plan["Next"] == "HourlyCompactUnits"
    units = states["HourlyCompactUnits"]
    assert units["ItemsPath"] == "$.compaction.units"
    assert units["MaxConcurrency"] == 100
    assert units["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
    assert units["Next"] == "HourlyReleaseLease"
    # AND a failure gives the lease back and is published before the execution fails
    assert [catch["Next"] for catch in units["Catch"]] == ["HourlyReleaseLeaseOnError"]
    assert states["HourlyReleaseLeaseOnError"]["Next"] == "ReportHourlyError"
    assert states["ReportHourlyError"]["Next"] == "HourlyCompactionFailed"


def test_parquet_lake_each_unit_function_holds_only_what_its_unit_does(parquet: Synthesized) -> None:
    # GIVEN each unit function's role
    lake_objects = f"/{SETTINGS.lake_prefix}/*"
    table_id, _ = wallets_table(parquet)

    def grants(handler: str) -> list[tuple[frozenset[str], str]]:
        return [
            (actions, resource)
            for actions, resource in actions_by_resource(
                policy_statements(parquet, role_of(parquet, handler))
            )
            if not any(action.startswith(("logs:", "kms:")) for action in actions)
        ]

    # THEN planning compaction only lists the lake prefix
    assert [actions for actions, _ in grants(COMPACTION_PLAN_HANDLER)] == [frozenset({"s3:ListBucket"})]
    # AND a compaction unit reads, writes and deletes lake objects and nothing else
    unit = grants(COMPACTION_UNIT_HANDLER)
    assert (
        frozenset({"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}),
        json.dumps(
            {
                "Fn::Join": [
                    "",
                    [
                        {"Fn::GetAtt": [parquet.logical_id("AWS::S3::Bucket", "LakeBucket"), "Arn"]},
                        lake_objects,
                    ],
                ]
            }
        ),
    ) in unit
    assert not any("dynamodb" in action for actions, _ in unit for action in actions)
    # AND a snapshot segment scans the table and puts objects; planning the night holds nothing
    segment = grants(SNAPSHOT_SEGMENT_HANDLER)
    assert (frozenset({"dynamodb:Scan"}), json.dumps({"Fn::GetAtt": [table_id, "Arn"]})) in segment
    assert {actions for actions, _ in segment} == {frozenset({"dynamodb:Scan"}), frozenset({"s3:PutObject"})}
    assert grants(PLAN_NIGHT_HANDLER) == []
    # AND planning the reconciliation only lists and reads; classifying may query Athena in the workgroup
    assert {actions for actions, _ in grants(RECONCILE_PLAN_HANDLER)} == {
        frozenset({"s3:ListBucket"}),
        frozenset({"s3:GetObject"}),
    }
    classify = grants(RECONCILE_CLASSIFY_HANDLER)
    athena = [resource for actions, resource in classify if "athena:StartQueryExecution" in actions]
    assert len(athena) == 1
    assert f"workgroup/{SETTINGS.athena_workgroup}" in athena[0]
    assert not any("s3:DeleteObject" in actions for actions, _ in classify)
    # AND the lease function may only put and delete items of the lease table
    lease_table = parquet.logical_id("AWS::DynamoDB::Table", "LeaseTable")
    assert grants(COMPACTION_LEASE_HANDLER) == [
        (
            frozenset({"dynamodb:PutItem", "dynamodb:DeleteItem"}),
            json.dumps({"Fn::GetAtt": [lease_table, "Arn"]}),
        )
    ]
    # AND every unit fits Lambda's limits: at most 15 minutes, 10,240 MB of memory and of /tmp
    for handler in UNIT_HANDLERS:
        properties = functions_by_handler(parquet)[handler]
        assert properties["Timeout"] <= 900
        assert properties["MemorySize"] <= 10_240
        assert properties["EphemeralStorage"]["Size"] <= 10_240


def test_the_nightly_state_machine_runs_athena_with_scoped_grants(synthesized: Synthesized) -> None:
    # GIVEN the nightly state machine's role
    machine_id, _ = definition_of(synthesized, "NightlyStateMachine")
    machine = synthesized.resources("AWS::StepFunctions::StateMachine")[machine_id]
    role_id = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    statements = policy_statements(synthesized, role_id)
    granted = actions_by_resource(statements)
    # THEN it may start and watch queries in the workgroup only
    athena = [resource for actions, resource in granted if "athena:StartQueryExecution" in actions]
    assert any(f"workgroup/{SETTINGS.athena_workgroup}" in resource for resource in athena)
    assert all("workgroup/" in resource or "datacatalog/AwsDataCatalog" in resource for resource in athena)
    # AND S3 writes only under the Athena results prefix (where the UNLOADs go), never on "*"
    writes = [resource for actions, resource in granted if "s3:PutObject" in actions]
    assert writes
    assert all(f"/{ATHENA_RESULTS_PREFIX}*" in resource for resource in writes)
    assert UNLOAD_PREFIX.startswith(ATHENA_RESULTS_PREFIX)
    assert not any(
        resource == '"*"' and any(action.startswith(("s3:", "glue:", "athena:")) for action in actions)
        for actions, resource in granted
    )
    assert not any(
        action.startswith("glue:") and "Get" not in action for actions, _ in granted for action in actions
    )


def test_alarms_cover_lag_errors_failures_and_reconciliation_and_publish_to_the_topic(
    synthesized: Synthesized,
) -> None:
    # GIVEN the alarms and the alerts topic
    alarms = synthesized.resources("AWS::CloudWatch::Alarm")
    topic_id, _ = synthesized.only("AWS::SNS::Topic")
    by_name = {
        logical_id.split("Alarm")[0]: resource["Properties"] for logical_id, resource in alarms.items()
    }
    # THEN every alarm notifies the topic
    assert all(properties["AlarmActions"] == [{"Ref": topic_id}] for properties in by_name.values())
    assert {
        "StreamIteratorAgeNearLimit",
        "StreamConsumerErrors",
        "StreamFailuresQueued",
        "ApiServerErrorRate",
        "ApiFleetCpuHigh",
        "ApiDynamoDbThrottles",
        "ApiDynamoDbInternalErrors",
        "ApiRequestsShed",
        "ApiAuditLinesLost",
        "NightlyReconciliationFailed",
    } <= set(by_name)
    assert by_name["ApiAuditLinesLost"]["MetricName"] == "AuditLinesLost"
    # AND the fleet's own alarms read what every task publishes (EMF: namespace walletlake)
    assert by_name["ApiDynamoDbThrottles"]["Namespace"] == "walletlake"
    assert by_name["ApiDynamoDbThrottles"]["MetricName"] == "DynamoDBThrottles"
    assert by_name["ApiDynamoDbInternalErrors"]["MetricName"] == "DynamoDBInternalErrors"
    assert by_name["ApiDynamoDbInternalErrors"]["EvaluationPeriods"] == 2
    # AND lag is caught before records age out of the consumer's reach
    near_limit = by_name["StreamIteratorAgeNearLimit"]
    assert near_limit["MetricName"] == "IteratorAge"
    assert near_limit["Threshold"] == 12 * 3600 * 1000 * ITERATOR_AGE_ALARM_FRACTION
    queue_id, _ = synthesized.only("AWS::SQS::Queue")
    failures = by_name["StreamFailuresQueued"]
    assert failures["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert failures["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
    machine_id = synthesized.logical_id("AWS::StepFunctions::StateMachine", "NightlyStateMachine")
    assert machine_id in json.dumps(by_name["NightlyReconciliationFailed"]["Metrics"])
    # AND the topic is encrypted and has the on-call subscription
    _, subscription = synthesized.only("AWS::SNS::Subscription")
    assert subscription["Properties"]["Endpoint"] == "oncall@example.com"
    assert synthesized.only("AWS::CloudWatch::Dashboard")


def test_outputs_give_the_cli_its_environment(synthesized: Synthesized) -> None:
    # GIVEN the stack outputs
    outputs = synthesized.template["Outputs"]
    # THEN the CLI environment names the deployed table, bucket, database and workgroup
    cli = json.dumps(outputs["CliEnvironment"]["Value"])
    for fragment in (
        f"WALLETLAKE_TABLE={SETTINGS.table}",
        f"WALLETLAKE_BUCKET={BUCKET}",
        f"WALLETLAKE_GLUE_DATABASE={SETTINGS.glue_database}",
        f"WALLETLAKE_ATHENA_WORKGROUP={SETTINGS.athena_workgroup}",
        "WALLETLAKE_QUERY_ENGINE=athena",
    ):
        assert fragment in cli
    assert {"ApiUrl", "TableName", "LakeBucketName", "AlertsTopicArn", "AnalystPolicyArn"} <= set(outputs)


# --- the Iceberg lake (the default) ------------------------------------------------------------


def test_the_stream_tables_are_iceberg_tables_and_only_the_nightly_outputs_hive_tables(
    synthesized: Synthesized,
) -> None:
    # GIVEN the Glue tables of the default (Iceberg) template
    tables = {
        resource["Properties"]["TableInput"]["Name"]: resource
        for resource in synthesized.resources("AWS::Glue::Table").values()
        if resource["Properties"]["TableInput"]["Name"] != AUDIT_TABLE  # tests/cdk/test_cdk_security.py
    }
    # THEN the nightly outputs are lake.glue's projected Hive tables, as before
    hive = {name for name, resource in tables.items() if "OpenTableFormatInput" not in resource["Properties"]}
    assert hive == set(TABLES) - set(STREAM_TABLES)
    for name in hive:
        assert tables[name]["Properties"]["TableInput"] == table_input(name, BUCKET, SETTINGS.lake_prefix)
    # AND ledger, wallets and quarantine are Iceberg tables Glue creates from lake.glue's input:
    # the schema ensure_tables would create (field ids, identity(dt), write order, properties),
    # in the lake bucket under lake/iceberg/, retained with the bucket
    for name in STREAM_TABLES:
        resource = tables[name]
        iceberg = resource["Properties"]["OpenTableFormatInput"]["IcebergInput"]
        assert iceberg["MetadataOperation"] == "CREATE"
        assert iceberg["Version"] == "2"
        location = f"s3://{BUCKET}/{SETTINGS.lake_prefix}/iceberg/{name}"
        assert iceberg["IcebergTableInput"] == iceberg_table_input(name, location)
        assert iceberg["IcebergTableInput"]["PartitionSpec"]["Fields"][0]["Transform"] == "identity"
        assert resource["DeletionPolicy"] == "Retain"


def test_glue_optimizers_compact_expire_and_remove_orphans_of_each_iceberg_table(
    synthesized: Synthesized,
) -> None:
    # GIVEN the table optimizers
    optimizers = synthesized.resources("AWS::Glue::TableOptimizer")
    by_table: dict[str, dict[str, Any]] = {}
    for resource in optimizers.values():
        properties = resource["Properties"]
        by_table.setdefault(properties["TableName"], {})[properties["Type"]] = properties
    # THEN every Iceberg table has its compaction and orphan file deletion; snapshot expiry is the
    # committer's (lake.snapshot_expiry keeps tagged snapshots: tests/unit/test_snapshot_expiry.py),
    # never Glue's retention, which counts days and documents nothing about tags
    assert set(by_table) == set(STREAM_TABLES)
    for kinds in by_table.values():
        assert set(kinds) == {"compaction", "orphan_file_deletion"}
        for kind in kinds.values():
            assert kind["TableOptimizerConfiguration"]["Enabled"] is True
    # AND orphans are removed only days after they were written (a landed file waits seconds)
    orphans = by_table["ledger"]["orphan_file_deletion"]["TableOptimizerConfiguration"]
    assert (
        orphans["OrphanFileDeletionConfiguration"]["IcebergConfiguration"]["OrphanFileRetentionPeriodInDays"]
        >= 1
    )
    # AND compaction sorts by the table's sort order (the one-wallet reads docs/analysts.md states)
    for name in STREAM_TABLES:
        compaction = by_table[name]["compaction"]["TableOptimizerConfiguration"]["CompactionConfiguration"]
        assert compaction["IcebergConfiguration"]["Strategy"] == "sort"
    # AND the tables state their retention in hours (what the committer's expiry applies)
    assert int(TABLE_PROPERTIES["history.expire.max-snapshot-age-ms"]) == SNAPSHOT_RETENTION_HOURS * 3_600_000
    # AND the template's Iceberg tables stay as first deployed whatever the contract gained since
    # (columns and properties added later are set at run time: ensure_tables), so a deploy never
    # updates an AWS::Glue::Table's Iceberg input
    glue_tables = synthesized.resources("AWS::Glue::Table").values()
    iceberg_inputs = [
        table["Properties"]["OpenTableFormatInput"]["IcebergInput"]["IcebergTableInput"]
        for table in glue_tables
        if "OpenTableFormatInput" in table["Properties"]
    ]
    assert len(iceberg_inputs) == len(STREAM_TABLES)
    for iceberg_input in iceberg_inputs:
        assert set(iceberg_input["Properties"]) == (CREATION_PROPERTY_KEYS - {"format-version"}) | {
            "schema.name-mapping.default"
        }
        names = [field["Name"] for field in iceberg_input["Schema"]["Fields"]]
        assert "extra_attributes" not in names
        assert names[-1] == "dt"
    # AND they run as a role Glue assumes, allowed to rewrite only the tables' prefix
    role_id = by_table["ledger"]["compaction"]["TableOptimizerConfiguration"]["RoleArn"]["Fn::GetAtt"][0]
    role = synthesized.resources("AWS::IAM::Role")[role_id]
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "glue.amazonaws.com"
    }
    writes = [
        resource
        for actions, resource in actions_by_resource(policy_statements(synthesized, role_id))
        if "s3:DeleteObject" in actions
    ]
    assert writes
    assert all(f"/{SETTINGS.lake_prefix}/iceberg/*" in resource for resource in writes)
    # AND no hourly compaction state machine, compaction unit or lease remains
    machines = synthesized.resources("AWS::StepFunctions::StateMachine")
    assert [logical_id for logical_id in machines if "Hourly" in logical_id] == []
    handlers = set(functions_by_handler(synthesized))
    assert not handlers & {COMPACTION_PLAN_HANDLER, COMPACTION_UNIT_HANDLER, COMPACTION_LEASE_HANDLER}


def test_the_committer_runs_every_minute_alone_with_the_grants_of_a_commit(synthesized: Synthesized) -> None:
    # GIVEN the committer function
    functions = functions_by_handler(synthesized)
    committer = functions[COMMITTER_HANDLER]
    committer_id = function_id(synthesized, COMMITTER_HANDLER)
    # THEN it is one at a time, sized for a minute of commits plus a cold start
    assert committer["ReservedConcurrentExecutions"] == 1
    assert committer["MemorySize"] == 512
    assert 60 < committer["Timeout"] <= 90
    environment = committer["Environment"]["Variables"]
    assert environment["WALLETLAKE_LAKE_FORMAT"] == "iceberg"
    assert environment["WALLETLAKE_ICEBERG_WAREHOUSE"] == {"Ref": "AWS::AccountId"}
    assert environment["WALLETLAKE_COMMIT_INTERVAL_SECONDS"] == "30"
    assert "WALLETLAKE_ICEBERG_CATALOG_URI" not in environment  # Glue's endpoint in its region
    # AND an EventBridge rule invokes it every minute
    rules = [
        rule["Properties"]
        for rule in synthesized.resources("AWS::Events::Rule").values()
        if rule["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": [committer_id, "Arn"]}
    ]
    assert [rule["ScheduleExpression"] for rule in rules] == ["rate(1 minute)"]
    # AND it may read and delete the landing log, read and write the tables' files, and commit
    granted = actions_by_resource(policy_statements(synthesized, role_of(synthesized, COMMITTER_HANDLER)))
    landing = [actions for actions, resource in granted if f"/{SETTINGS.lake_prefix}/_landed/*" in resource]
    assert landing == [frozenset({"s3:GetObject", "s3:DeleteObject"})]
    tables = [actions for actions, resource in granted if f"/{SETTINGS.lake_prefix}/iceberg/*" in resource]
    assert tables == [frozenset({"s3:GetObject", "s3:PutObject"})]
    # AND write its tidy's cursor and the misfit files it keeps aside, nowhere else of the lake
    own = [actions for actions, resource in granted if f"/{SETTINGS.lake_prefix}/_committer/*" in resource]
    assert own == [frozenset({"s3:GetObject", "s3:PutObject"})]
    misfits = [actions for actions, resource in granted if f"/{SETTINGS.lake_prefix}/_misfits/*" in resource]
    assert misfits == [frozenset({"s3:GetObject", "s3:PutObject"})]
    glue_actions = {action for actions, _ in granted for action in actions if action.startswith("glue:")}
    assert {"glue:GetCatalog", "glue:GetTable", "glue:UpdateTable", "glue:CreateTable"} <= glue_actions
    # AND delete the tables' archived versions (Glue's quota of table versions, lake.glue_versions)
    assert {"glue:GetTableVersions", "glue:BatchDeleteTableVersion"} <= glue_actions
    assert not any(resource == '"*"' for _, resource in granted)
    # AND every function names the lake's format (and the Iceberg functions the warehouse)
    for handler, properties in functions.items():
        assert properties["Environment"]["Variables"]["WALLETLAKE_LAKE_FORMAT"] == "iceberg", handler


def test_the_consumer_writes_data_files_and_landing_records_and_reads_the_catalog(
    synthesized: Synthesized,
) -> None:
    # GIVEN the consumer's role in the Iceberg lake
    granted = actions_by_resource(policy_statements(synthesized, role_of(synthesized, CONSUMER_HANDLER)))
    # THEN it puts objects only under the tables' data folders and the landing log
    puts = sorted(resource for actions, resource in granted if "s3:PutObject" in actions)
    assert len(puts) == 2
    assert f"/{SETTINGS.lake_prefix}/_landed/*" in puts[0]
    assert f"/{SETTINGS.lake_prefix}/iceberg/*/data/*" in puts[1]
    assert not any("s3:DeleteObject" in actions for actions, _ in granted)
    # AND lists only the landing log, and reads (never writes) the catalog
    statements = policy_statements(synthesized, role_of(synthesized, CONSUMER_HANDLER))
    lists = [statement for statement in statements if "s3:ListBucket" in as_list(statement["Action"])]
    assert len(lists) == 1
    assert lists[0]["Condition"] == {"StringLike": {"s3:prefix": [f"{SETTINGS.lake_prefix}/_landed/*"]}}
    glue_actions = {action for actions, _ in granted for action in actions if action.startswith("glue:")}
    assert glue_actions == {"glue:GetCatalog", "glue:GetDatabase", "glue:GetTable"}


def test_the_nightly_machine_snapshots_and_reconciles_without_compacting(synthesized: Synthesized) -> None:
    # GIVEN the nightly state machine of the Iceberg lake
    _, definition = definition_of(synthesized, "NightlyStateMachine")
    states = definition["States"]
    order, state = [], definition["StartAt"]
    while state in states and "Next" in states[state]:
        order.append(state)
        state = states[state]["Next"]
    # THEN it snapshots and reconciles; the stream tables are compacted by Glue, not by the night
    assert order == ["PlanNight", "SnapshotSegments", "PlanReconciliation", "ReconcileDays", "ReportSuccess"]
    for step in order[:-1]:
        assert "ReportError" in [catch["Next"] for catch in states[step]["Catch"]], step


def test_the_nightly_functions_may_tag_the_iceberg_tables_and_nothing_more(synthesized: Synthesized) -> None:
    # GIVEN the nightly planning and classification functions' grants (Iceberg lake)
    stream_tables = {f"table/{SETTINGS.glue_database}/{name}" for name in STREAM_TABLES}
    for handler in (RECONCILE_PLAN_HANDLER, RECONCILE_CLASSIFY_HANDLER):
        granted = actions_by_resource(policy_statements(synthesized, role_of(synthesized, handler)))
        # THEN each may load the stream's tables and commit their tags through Glue's Iceberg
        # REST endpoint (planning tags the night's snapshots before anything reads them)
        updated = {resource for actions, resource in granted if "glue:UpdateTable" in actions}
        assert {table for table in stream_tables if any(table in resource for resource in updated)} == (
            stream_tables
        ), handler
        assert all(
            any(
                part in resource
                for part in (*stream_tables, ":catalog", f"database/{SETTINGS.glue_database}")
            )
            for resource in updated
        ), (handler, updated)
        tagging = [actions for actions, resource in granted if "glue:UpdateTable" in actions]
        assert all(actions == frozenset(NIGHT_TAG_GLUE_ACTIONS) for actions in tagging), handler
        # AND no other catalog write, and nothing on "*"
        writes = {a for actions, _ in granted for a in actions if a.startswith("glue:") and "Get" not in a}
        assert writes == {"glue:UpdateTable"}, handler
        assert not any(resource == '"*"' for _, resource in granted), handler
    # AND the committer (its expiry) and the functions that tag get the tags' retention
    functions = functions_by_handler(synthesized)
    for handler in (COMMITTER_HANDLER, RECONCILE_PLAN_HANDLER, RECONCILE_CLASSIFY_HANDLER):
        environment = functions[handler]["Environment"]["Variables"]
        assert environment["WALLETLAKE_AUDIT_TAG_RETENTION_DAYS"] == "400", handler
    # AND the planner writes only under the lake prefix (the tag's new metadata file)
    planner = actions_by_resource(
        policy_statements(synthesized, role_of(synthesized, RECONCILE_PLAN_HANDLER))
    )
    puts = [resource for actions, resource in planner if "s3:PutObject" in actions]
    assert puts
    assert all(f"/{SETTINGS.lake_prefix}/*" in resource for resource in puts)


def test_the_parquet_lake_planner_reads_only(parquet: Synthesized) -> None:
    # GIVEN the plain-Parquet lake: no Iceberg catalog, no tags
    granted = actions_by_resource(policy_statements(parquet, role_of(parquet, RECONCILE_PLAN_HANDLER)))
    # THEN its planner has no Glue action and writes nothing
    assert not [a for actions, _ in granted for a in actions if a.startswith("glue:")]
    assert not [resource for actions, resource in granted if "s3:PutObject" in actions]


def test_committer_alarms_catch_errors_and_rows_landing_without_commits(synthesized: Synthesized) -> None:
    # GIVEN the alarms
    alarms = {
        logical_id.split("Alarm")[0]: resource["Properties"]
        for logical_id, resource in synthesized.resources("AWS::CloudWatch::Alarm").items()
    }
    # THEN the committer's errors and its lag (rows landing, none committed for 15 minutes) alarm
    committer_id = function_id(synthesized, COMMITTER_HANDLER)
    assert alarms["CommitterErrors"]["MetricName"] == "Errors"
    assert alarms["CommitterErrors"]["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": committer_id}}
    ]
    lag = json.dumps(alarms["CommitLag"]["Metrics"])
    assert "CommittedRows" in lag
    assert "LedgerRows" in lag
    assert alarms["CommitLag"]["EvaluationPeriods"] * 5 == COMMIT_LAG_MINUTES


def test_a_mapping_disabled_or_left_on_an_old_stream_and_a_stopped_committer_alarm(
    synthesized: Synthesized,
) -> None:
    # GIVEN the alarms
    alarms = {
        logical_id.split("Alarm")[0]: resource["Properties"]
        for logical_id, resource in synthesized.resources("AWS::CloudWatch::Alarm").items()
    }
    table_id = synthesized.logical_id("AWS::DynamoDB::Table", "WalletsTable")
    consumer_id = function_id(synthesized, CONSUMER_HANDLER)
    # THEN the table taking writes while the consumer is not invoked for 15 minutes alarms (what a
    # disabled mapping, or one bound to a stream the table no longer has, looks like), and a
    # period with no writes is calm, not breaching
    not_reading = alarms[NOT_READING_ALARM]
    metrics = {query["Id"]: query for query in not_reading["Metrics"]}
    (expression,) = [query["Expression"] for query in not_reading["Metrics"] if "Expression" in query]
    assert expression == "IF(FILL(writes, 0) > 0 AND FILL(invocations, 0) == 0, 1, 0)"
    writes = metrics["writes"]["MetricStat"]
    invocations = metrics["invocations"]["MetricStat"]
    assert (writes["Metric"]["MetricName"], writes["Stat"]) == ("ConsumedWriteCapacityUnits", "Sum")
    assert writes["Metric"]["Dimensions"] == [{"Name": "TableName", "Value": {"Ref": table_id}}]
    assert (invocations["Metric"]["MetricName"], invocations["Stat"]) == ("Invocations", "Sum")
    assert invocations["Metric"]["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": consumer_id}}]
    assert not_reading["EvaluationPeriods"] * 5 == NOT_READING_MINUTES
    assert not_reading["DatapointsToAlarm"] == not_reading["EvaluationPeriods"]
    assert (not_reading["Threshold"], not_reading["TreatMissingData"]) == (1, "notBreaching")
    # AND a committer that is not invoked for 10 minutes alarms, silence counting as breaching
    silent = alarms[COMMITTER_SILENT_ALARM]
    assert (silent["MetricName"], silent["Statistic"], silent["Period"]) == ("Invocations", "Sum", 300)
    assert silent["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": function_id(synthesized, COMMITTER_HANDLER)}}
    ]
    assert (silent["ComparisonOperator"], silent["Threshold"]) == ("LessThanThreshold", 1)
    assert (silent["TreatMissingData"], silent["EvaluationPeriods"]) == ("breaching", 2)
    # AND every other alarm keeps missing data as calm (they count failures: silence is none)
    assert {name for name, alarm in alarms.items() if alarm["TreatMissingData"] == "breaching"} == {
        COMMITTER_SILENT_ALARM
    }


def test_committer_alarms_catch_any_misfit_missing_file_and_blocked_table(synthesized: Synthesized) -> None:
    # GIVEN the alarms
    alarms = {
        logical_id.split("Alarm")[0]: resource["Properties"]
        for logical_id, resource in synthesized.resources("AWS::CloudWatch::Alarm").items()
    }
    # THEN one misfit file, one missing file or one held table in five minutes alarms, on the
    # metric the committer publishes (contracts.lambda_metrics), under its service
    watched = (
        ("LakeMisfits", "MisfitFiles"),
        ("LakeMissingFiles", "MissingFiles"),
        ("LakeTableBlocked", "BlockedTables"),
    )
    for name, metric in watched:
        alarm = alarms[name]
        assert alarm["MetricName"] == metric
        assert alarm["Namespace"] == lambda_metrics.NAMESPACE
        assert alarm["Dimensions"] == [{"Name": "service", "Value": "committer"}]
        assert (alarm["Statistic"], alarm["Period"], alarm["Threshold"]) == ("Sum", 300, 1)
        assert alarm["EvaluationPeriods"] == 1
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    # AND the tidy falling behind alarms on its streak of passes short of the log's end
    behind = alarms["LakeTidyBehind"]
    assert (behind["MetricName"], behind["Statistic"], behind["Threshold"]) == ("TidyBehind", "Maximum", 240)


def test_cdk_app_py_synthesizes_as_the_cdk_cli_runs_it(tmp_path: Path) -> None:
    # GIVEN the environment the CDK CLI gives `python app.py` (cdk.json's "app") when it has
    # credentials: an output directory, the context, and a concrete account and region
    environment = {
        **os.environ,
        "CDK_OUTDIR": str(tmp_path),
        "CDK_CONTEXT_JSON": json.dumps({**CONTEXT, "stack_name": "WalletLakeEuWest1"}),
        "CDK_DEFAULT_ACCOUNT": "123456789012",
        "CDK_DEFAULT_REGION": "eu-west-1",
    }
    # WHEN the entry point runs in its own process
    completed = subprocess.run(
        [sys.executable, str(ROOT / "cdk" / "app.py")],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    # THEN it succeeds into that directory: cdk-nag found nothing unsuppressed with literal
    # partition and region in the ARNs
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert f"synthesized WalletLakeEuWest1 into {tmp_path}" in completed.stdout
    template = json.loads((tmp_path / "WalletLakeEuWest1.template.json").read_text())
    assert "Mappings" not in template
    assert ":layer:AWS" not in json.dumps(template)


def test_every_function_logs_and_publishes_as_the_service_its_template_names(
    synthesized: Synthesized, parquet: Synthesized
) -> None:
    # GIVEN every function of both lake formats, and the handler module each one names
    import importlib

    functions = {**functions_by_handler(synthesized), **functions_by_handler(parquet)}
    checked = 0
    for handler, properties in sorted(functions.items()):
        module_name = handler.rpartition(".")[0]
        if module_name == "walletlake.handlers.api":
            continue  # builds its app at import, from the deployment's variables (tests/stack)
        module = importlib.import_module(module_name)
        environment = properties["Environment"]["Variables"]
        # THEN its Powertools logger and metrics carry the service and namespace the template sets
        assert module.logger.service == environment["POWERTOOLS_SERVICE_NAME"], handler
        assert module.metrics.service == environment["POWERTOOLS_SERVICE_NAME"], handler
        assert module.metrics.namespace == environment["POWERTOOLS_METRICS_NAMESPACE"], handler
        checked += 1
    # (the stream consumer, the committer, the two compaction steps, the lease, four nightly steps)
    assert checked == 9


def test_dashboard_graphs_the_metrics_the_consumer_publishes(synthesized: Synthesized) -> None:
    # GIVEN the consumer's metrics the contract says the dashboard graphs (that the handler emits
    # them is tests/stack/test_stream_handler.py's EMF test; its service, the test above)
    # THEN the dashboard graphs each of them
    _, dashboard = synthesized.only("AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert all(metric in body for metric in lambda_metrics.CONSUMER_GRAPHED)
    # AND the TTL deletions the stream's filter keeps from the consumer, as DynamoDB counts them
    assert "TimeToLiveDeletedItemCount" in body


# --- the write path's fleet -----------------------------------------------------------------


def test_the_write_path_is_a_fleet_of_arm64_tasks_across_three_azs_with_no_api_gateway(
    synthesized: Synthesized,
) -> None:
    # GIVEN the default deployment
    template = synthesized.template
    # THEN no request path goes through API Gateway + Lambda
    assert not synthesized.resources("AWS::ApiGatewayV2::Api")
    assert API_HANDLER not in functions_by_handler(synthesized)
    # AND the write path is an ECS service of ARM64 Fargate tasks running `walletlake serve`
    (task,) = synthesized.resources("AWS::ECS::TaskDefinition").values()
    properties = task["Properties"]
    assert properties["RuntimePlatform"]["CpuArchitecture"] == "ARM64"
    assert properties["RequiresCompatibilities"] == ["FARGATE"]
    (container,) = properties["ContainerDefinitions"]
    assert container["Command"][:4] == ["python", "-m", "walletlake.cli", "serve"]
    assert container["Command"][container["Command"].index("--host") + 1] == "0.0.0.0"
    assert container["Command"][container["Command"].index("--workers") + 1] == str(
        int(properties["Cpu"]) // 1024
    )
    assert container["ReadonlyRootFilesystem"] is True
    assert "/healthz" in " ".join(container["HealthCheck"]["Command"])
    (service,) = synthesized.resources("AWS::ECS::Service").values()
    assert service["Properties"]["LaunchType"] == "FARGATE"
    assert service["Properties"]["DeploymentConfiguration"]["DeploymentCircuitBreaker"]["Rollback"] is True
    # AND it runs in three Availability Zones, in isolated subnets: no NAT, no internet route
    subnets = synthesized.resources("AWS::EC2::Subnet")
    assert len(subnets) == 3
    assert {subnet["Properties"]["AvailabilityZone"]["Fn::Select"][0] for subnet in subnets.values()} == {
        0,
        1,
        2,
    }
    assert not synthesized.resources("AWS::EC2::NatGateway")
    assert not synthesized.resources("AWS::EC2::InternetGateway")
    assert len(service["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"]) == 3
    # AND DynamoDB and S3 are reached through gateway endpoints, ECR and logs through interface ones
    endpoints = [
        resource["Properties"] for resource in synthesized.resources("AWS::EC2::VPCEndpoint").values()
    ]
    kinds = {
        json.dumps(endpoint["ServiceName"]).split(".")[-1].strip('"]}'): endpoint.get(
            "VpcEndpointType", "Gateway"
        )
        for endpoint in endpoints
    }
    assert kinds["dynamodb"] == "Gateway"
    assert kinds["s3"] == "Gateway"
    assert {"api", "dkr", "logs"} <= set(kinds)
    assert "Mappings" not in template


def test_the_fleet_scales_on_cpu_at_half_and_on_requests_per_task(synthesized: Synthesized) -> None:
    # GIVEN the service's scalable target and its policies
    (target,) = synthesized.resources("AWS::ApplicationAutoScaling::ScalableTarget").values()
    policies = [
        resource["Properties"]
        for resource in synthesized.resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()
    ]
    # THEN it runs 3..60 tasks
    assert (target["Properties"]["MinCapacity"], target["Properties"]["MaxCapacity"]) == (3, 60)
    configurations = [policy["TargetTrackingScalingPolicyConfiguration"] for policy in policies]
    # AND tracks CPU at 50 % (seed 000's rule)
    cpu = [c for c in configurations if "PredefinedMetricSpecification" in c]
    assert (
        cpu[0]["PredefinedMetricSpecification"]["PredefinedMetricType"] == "ECSServiceAverageCPUUtilization"
    )
    assert cpu[0]["TargetValue"] == 50
    # AND Lattice requests per running task (1,400 a second, per minute)
    (requests,) = [c for c in configurations if "CustomizedMetricSpecification" in c]
    assert requests["TargetValue"] == 1_400 * 60
    queries = {query["Id"]: query for query in requests["CustomizedMetricSpecification"]["Metrics"]}
    assert queries["per_task"]["Expression"] == "requests / MAX([tasks, 1])"
    assert queries["requests"]["MetricStat"]["Metric"]["Namespace"] == "AWS/VpcLattice"


def test_callers_authenticate_with_iam_through_vpc_lattice(synthesized: Synthesized) -> None:
    # GIVEN the Lattice service, its network, their auth policies and the ECS service's registration
    (lattice_service,) = synthesized.resources("AWS::VpcLattice::Service").values()
    network_id, network = synthesized.only("AWS::VpcLattice::ServiceNetwork")
    service_id = synthesized.logical_id("AWS::VpcLattice::Service", "ApiLatticeService")
    policies = synthesized.resources("AWS::VpcLattice::AuthPolicy").values()
    (target_group,) = synthesized.resources("AWS::VpcLattice::TargetGroup").values()
    (service,) = synthesized.resources("AWS::ECS::Service").values()
    # THEN the network and the service are AWS_IAM and each has an auth policy (without the
    # network's, Lattice denies every request: the first deploy used to answer no one)
    assert lattice_service["Properties"]["AuthType"] == "AWS_IAM"
    assert network["Properties"]["AuthType"] == "AWS_IAM"
    governed = {json.dumps(policy["Properties"]["ResourceIdentifier"]) for policy in policies}
    assert governed == {
        json.dumps({"Fn::GetAtt": [network_id, "Id"]}),
        json.dumps({"Fn::GetAtt": [service_id, "Id"]}),
    }
    # AND each allows Invoke to the named caller only, signed, never anonymous (the per-operation
    # statements of the service's policy: tests/cdk/test_cdk_security.py)
    for policy in policies:
        for statement in policy["Properties"]["Policy"]["Statement"]:
            assert statement["Effect"] == "Allow"
            assert as_list(statement["Principal"]["AWS"]) == [CALLER]
            assert statement["Action"] == "vpc-lattice-svcs:Invoke"
            assert statement["Condition"]["StringNotEqualsIgnoreCase"] == {"aws:PrincipalType": "anonymous"}
    # AND ECS registers the tasks in the target group, health-checked on /healthz
    assert target_group["Properties"]["Config"]["HealthCheck"]["Path"] == "/healthz"
    (registration,) = service["Properties"]["VpcLatticeConfigurations"]
    assert registration["PortName"] == "api"
    # AND the tasks admit traffic from Lattice's managed prefix list only, no address range
    ingress = [
        rule["Properties"] for rule in synthesized.resources("AWS::EC2::SecurityGroupIngress").values()
    ]
    inline = [
        rule
        for group in synthesized.resources("AWS::EC2::SecurityGroup").values()
        for rule in group["Properties"].get("SecurityGroupIngress", [])
    ]
    task_rules = [rule for rule in ingress + inline if rule.get("FromPort") == 8080]
    assert [rule.get("SourcePrefixListId") for rule in task_rules] == [CONTEXT["lattice_prefix_list_id"]]
    assert not any(rule.get("CidrIp") == "0.0.0.0/0" for rule in inline + ingress)


#: The one "*" principal of the template: the S3 gateway endpoint's policy lets through only reads of
#: ECR's layer bucket, which ECR presigns (no principal of this account signs them; the endpoint
#: policy narrows the endpoint's default full access to that one bucket).
ECR_LAYERS = "-starport-layer-bucket/*"


def _allows_everyone(statement: dict[str, Any]) -> bool:
    principal = statement.get("Principal")
    if principal == "*":
        return True
    if isinstance(principal, dict):
        values = principal.get("AWS", [])
        return "*" in (values if isinstance(values, list) else [values])
    return False


@pytest.mark.parametrize("variant", ["synthesized", "lambda_front"])
def test_no_policy_of_the_template_allows_any_principal(variant: str, request: pytest.FixtureRequest) -> None:
    # GIVEN every resource policy of the template (auth, bucket, key, topic, ...)
    template: Synthesized = request.getfixturevalue(variant)
    statements = []

    def collect(node: object) -> None:
        if isinstance(node, dict):
            if "Statement" in node and isinstance(node["Statement"], list):
                statements.extend(node["Statement"])
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(template.template["Resources"])
    # THEN no Allow names "*" as its principal (Denies may: they refuse plain HTTP to everyone),
    # but the S3 endpoint's filter to ECR's layer bucket
    assert statements
    everyone = [s for s in statements if s.get("Effect") == "Allow" and _allows_everyone(s)]
    assert [
        s for s in everyone if ECR_LAYERS not in json.dumps(s["Resource"]) or s["Action"] != "s3:GetObject"
    ] == []


def test_synthesis_without_callers_refuses_in_one_line_saying_what_to_pass(tmp_path: Path) -> None:
    # GIVEN the context without api_callers (the Lattice front is the default)
    context = {key: value for key, value in CONTEXT.items() if key != "api_callers"}
    environment = {**os.environ, "CDK_OUTDIR": str(tmp_path), "CDK_CONTEXT_JSON": json.dumps(context)}
    # WHEN the app runs as the CDK CLI runs it
    completed = subprocess.run(
        [sys.executable, str(ROOT / "cdk" / "app.py")],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    # THEN it refuses with one line naming the option to pass, and writes no template
    assert completed.returncode == 2
    assert completed.stderr.splitlines() == [f"error: {CALLERS_REQUIRED}"]
    assert "-c api_callers=arn:" in completed.stderr
    assert not list(tmp_path.glob("*.template.json"))


def test_without_a_prefix_list_id_the_app_looks_up_lattices_prefix_list_for_its_region(
    tmp_path: Path,
) -> None:
    # GIVEN the context without lattice_prefix_list_id, synthesized for an account and region (as
    # the CDK CLI does with the deployer's credentials; issue 44, point 8)
    context = {key: value for key, value in CONTEXT.items() if key != "lattice_prefix_list_id"}
    with mock.patch.dict(
        os.environ, {"CDK_DEFAULT_ACCOUNT": "123456789012", "CDK_DEFAULT_REGION": "eu-west-1"}
    ):
        os.environ.pop("CDK_OUTDIR", None)
        app, stack = build_app(context, outdir=str(tmp_path))
        assembly = app.synth()
    # THEN the assembly asks the CLI to look the region's Lattice prefix list up by its name
    missing = json.loads((Path(assembly.directory) / "manifest.json").read_text()).get("missing", [])
    lookups = [
        entry["props"] for entry in missing if entry["props"].get("typeName") == "AWS::EC2::PrefixList"
    ]
    assert [(lookup["propertyMatch"]["PrefixListName"], lookup["region"]) for lookup in lookups] == [
        ("com.amazonaws.eu-west-1.vpc-lattice", "eu-west-1")
    ]
    # AND the tasks admit that list's addresses (the lookup's value once resolved)
    template = json.loads((tmp_path / f"{stack.artifact_id}.template.json").read_text())
    ingress = [
        resource["Properties"]
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::EC2::SecurityGroupIngress"
        and "SourcePrefixListId" in resource["Properties"]
    ]
    assert [rule["SourcePrefixListId"] for rule in ingress] == [lookups[0]["dummyValue"][0]["PrefixListId"]]


def test_an_environment_agnostic_synthesis_without_a_prefix_list_id_refuses_in_one_line(
    tmp_path: Path,
) -> None:
    context = {key: value for key, value in CONTEXT.items() if key != "lattice_prefix_list_id"}
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION")
    }
    environment.update(CDK_OUTDIR=str(tmp_path), CDK_CONTEXT_JSON=json.dumps(context))
    completed = subprocess.run(
        [sys.executable, str(ROOT / "cdk" / "app.py")],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 2
    assert completed.stderr.splitlines() == [f"error: {LATTICE_PREFIX_LIST_REQUIRED}"]


def test_caller_vpcs_are_associated_with_the_service_network(synthesize: Callable[..., Synthesis]) -> None:
    # GIVEN two caller VPCs in the context
    synthesized = Synthesized(synthesize(caller_vpc_ids="vpc-0123456789abcdef0,vpc-0fedcba9876543210"))
    associations = synthesized.resources("AWS::VpcLattice::ServiceNetworkVpcAssociation").values()
    vpcs = [association["Properties"]["VpcIdentifier"] for association in associations]
    # THEN each joins the network, and nothing else: the API's own VPC calls nothing through it
    assert sorted(vpcs) == ["vpc-0123456789abcdef0", "vpc-0fedcba9876543210"]


def test_the_front_forwards_no_operator_route_and_drains_within_the_stop_timeout(
    synthesized: Synthesized, lambda_front: Synthesized
) -> None:
    # GIVEN the task's container and its environment
    (task,) = synthesized.resources("AWS::ECS::TaskDefinition").values()
    (container,) = task["Properties"]["ContainerDefinitions"]
    environment = {pair["Name"]: pair["Value"] for pair in container["Environment"]}
    # (the service's ARN is a token CloudFormation resolves; here an ARN of its form)
    assert environment["WALLETLAKE_LATTICE_SERVICE_ARN"] == {"Fn::GetAtt": ["ApiLatticeService", "Arn"]}
    environment["WALLETLAKE_LATTICE_SERVICE_ARN"] = (
        "arn:aws:vpc-lattice:eu-west-1:123456789012:service/svc-0123456789abcdef0"
    )
    # THEN the tasks trust Lattice's identity header and serve no operator routes
    assert environment["WALLETLAKE_TRUST_FRONT"] == "lattice"
    assert environment["WALLETLAKE_ADMIN_ROUTES"] == "off"
    # AND the app built from that environment answers none of them (the front forwards every path)
    app = create_app(Settings.from_env(environment), store=mock.MagicMock())
    paths = {route.path for route in app.routes}  # type: ignore[attr-defined]
    assert not paths & {"/docs", "/redoc", "/openapi.json", "/metrics"}
    assert "/healthz" in paths
    # AND the server drains inside the container's stop timeout (SIGKILL after it)
    assert int(environment["WALLETLAKE_DRAIN_SECONDS"]) < container["StopTimeout"]
    # AND the Lambda front believes only API Gateway's verified identity, never a header
    (function,) = [
        f["Properties"]
        for f in lambda_front.resources("AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == API_HANDLER
    ]
    variables = function["Environment"]["Variables"]
    assert variables["WALLETLAKE_TRUST_FRONT"] == "apigateway"
    assert variables["WALLETLAKE_ADMIN_ROUTES"] == "off"
