"""Issue 38 in the template: who may call for what, from where, on record, and least privilege.

Each test reads the synthesized template (no AWS): the Lattice auth policies and the callers'
policies against :mod:`contracts.caller_permissions`, the access logs and their table against
:mod:`contracts.audit_log`, the analysts' reach against the nightly job's results (the statements
evaluated, not only read), the endpoints, the keys and the refusal alarm.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable
from typing import Any

import pytest
from support.cdk_synthesis import Synthesis
from test_cdk import BUCKET, CONTEXT, Synthesized, as_list, policy_statements, role_of

from contracts import api_metrics
from contracts.audit_log import ACCESS_LOG_PREFIX, ACCESS_LOG_RETENTION_DAYS, AUDIT_COLUMNS, AUDIT_TABLE
from contracts.caller_permissions import OPERATIONS, ROUTES, CallerPermissions
from contracts.idempotency_table import IDEMPOTENCY_TABLE
from contracts.settings import Settings
from walletlake_cdk.monitoring import REFUSED_REQUESTS_ALARM
from walletlake_cdk.nightly import RECONCILE_CLASSIFY_HANDLER, SNAPSHOT_SEGMENT_HANDLER
from walletlake_cdk.nightly_grants import UNLOAD_PREFIX
from walletlake_cdk.storage import ANALYST_RESULTS_PREFIX, ATHENA_RESULTS_PREFIX

pytestmark = pytest.mark.slow

TREASURY = "arn:aws:iam::123456789012:role/treasury"
PAYMENTS = "arn:aws:iam::123456789012:role/payments"
SUPPORT = "arn:aws:iam::444455556666:role/ops/support"
CALLERS = f"{TREASURY}=deposit+read,{PAYMENTS},{SUPPORT}=read"
VPCS = ("vpc-0123456789abcdef0", "vpc-0fedcba9876543210")
#: What the template's tokens stand for here (as CloudFormation would resolve them).
SERVICE_ARN = "arn:aws:vpc-lattice:eu-west-1:123456789012:service/svc-0123456789abcdef0"
ACCOUNT, REGION, PARTITION = "123456789012", "eu-west-1", "aws"


@pytest.fixture(scope="module")
def template(synthesize: Callable[..., Synthesis]) -> Synthesized:
    """Three callers: one may deposit and read, one is named bare (defaults), one of another account reads."""
    return Synthesized(synthesize(api_callers=CALLERS, caller_vpc_ids=",".join(VPCS)))


def resolve(value: Any, template: Synthesized) -> Any:
    """A template value with its intrinsic functions replaced by what CloudFormation would give."""
    if isinstance(value, list):
        return [resolve(item, template) for item in value]
    if not isinstance(value, dict):
        return value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(str(resolve(part, template)) for part in parts)
    if "Ref" in value:
        pseudo = {"AWS::AccountId": ACCOUNT, "AWS::Region": REGION, "AWS::Partition": PARTITION}
        return pseudo.get(value["Ref"], f"<{value['Ref']}>")
    if "Fn::GetAtt" in value:
        logical_id, attribute = value["Fn::GetAtt"]
        if logical_id.startswith("LakeBucket") and attribute == "Arn":
            return f"arn:aws:s3:::{BUCKET}"
        if logical_id == "ApiLatticeService" and attribute == "Arn":
            return SERVICE_ARN
        return f"<{logical_id}.{attribute}>"
    return {key: resolve(item, template) for key, item in value.items()}


def allowed(statements: list[dict[str, Any]], action: str, resource: str) -> bool:
    """Whether any Allow of ``statements`` covers ``action`` on ``resource`` (conditions only narrow
    an Allow, so ignoring them can only say "allowed" more often: a "not allowed" is certain)."""
    return any(
        statement["Effect"] == "Allow"
        and any(fnmatch.fnmatchcase(action, pattern) for pattern in as_list(statement["Action"]))
        and any(fnmatch.fnmatchcase(resource, pattern) for pattern in as_list(statement["Resource"]))
        for statement in statements
    )


def lattice_policy(template: Synthesized, name: str) -> dict[str, Any]:
    policies = template.resources("AWS::VpcLattice::AuthPolicy")
    (policy,) = [resource for logical_id, resource in policies.items() if logical_id.startswith(name)]
    document: dict[str, Any] = resolve(policy["Properties"]["Policy"], template)
    return document


def task_egress(template: Synthesized) -> list[dict[str, Any]]:
    """The tasks' egress rules, inline and as resources of their own (prefix lists)."""
    group_id = template.logical_id("AWS::EC2::SecurityGroup", "ApiTasks")
    rules = list(template.resources("AWS::EC2::SecurityGroup")[group_id]["Properties"]["SecurityGroupEgress"])
    for rule in template.resources("AWS::EC2::SecurityGroupEgress").values():
        if rule["Properties"]["GroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}:
            rules.append(rule["Properties"])
    return rules


def routes_of(operation: str) -> tuple[str, list[str]]:
    (method,) = {route.method for route in ROUTES if route.operation == operation}
    paths = [
        f"{SERVICE_ARN}{path}"
        for route in ROUTES
        if route.operation == operation
        for path in route.lattice_paths
    ]
    return method, paths


# --- 1 and 2: who may call for what, from where ---------------------------------------------------


def test_the_service_policy_allows_each_role_exactly_its_operations_routes_from_the_caller_vpcs(
    template: Synthesized,
) -> None:
    # GIVEN the service's auth policy and the map it was written from
    permissions = CallerPermissions.parse(CALLERS)
    statements = lattice_policy(template, "ApiAuthPolicy")["Statement"]
    # THEN each statement is one role and one operation: its routes, its method, the callers' VPCs,
    # never anonymous, no "*" principal and no "*" resource
    granted = set()
    for statement in statements:
        assert statement["Effect"] == "Allow"
        assert statement["Action"] == "vpc-lattice-svcs:Invoke"
        (role,) = as_list(statement["Principal"]["AWS"])
        assert role in permissions.role_arns
        conditions = statement["Condition"]
        assert conditions["StringNotEqualsIgnoreCase"] == {"aws:PrincipalType": "anonymous"}
        assert conditions["StringEquals"]["vpc-lattice-svcs:SourceVpc"] == list(VPCS)
        method = conditions["StringEquals"]["vpc-lattice-svcs:RequestMethod"]
        (operation,) = [op for op in OPERATIONS if routes_of(op) == (method, statement["Resource"])]
        granted.add((role, operation))
    # AND the statements are exactly the map: deposits to treasury alone (named for it), a bare
    # role the defaults (everything but deposit), support reads only
    assert granted == {(role, op) for role, ops in permissions.roles for op in ops}
    assert {role for role, op in granted if op == "deposit"} == {TREASURY}
    assert {op for role, op in granted if role == PAYMENTS} == {"create_wallet", "transfer", "read"}
    assert {op for role, op in granted if role == SUPPORT} == {"read"}
    # AND a wallet's glob cannot reach a longer route: "?" is one character of a UUID's 36
    (deposit_path, *_) = routes_of("deposit")[1]
    assert fnmatch.fnmatchcase(
        f"{SERVICE_ARN}/api/v1/wallets/8a6e0804-2bd0-4672-b79d-d97027f9071a/deposit", deposit_path
    )
    assert not fnmatch.fnmatchcase(f"{SERVICE_ARN}/api/v1/wallets/x/y/../deposit", deposit_path)


def test_the_network_policy_stays_coarse_named_roles_authenticated(template: Synthesized) -> None:
    (statement,) = lattice_policy(template, "ApiNetworkAuthPolicy")["Statement"]
    assert statement == {
        "Effect": "Allow",
        "Principal": {"AWS": [TREASURY, PAYMENTS, SUPPORT]},
        "Action": "vpc-lattice-svcs:Invoke",
        "Resource": "*",
        "Condition": {"StringNotEqualsIgnoreCase": {"aws:PrincipalType": "anonymous"}},
    }


def test_only_the_callers_vpcs_join_the_network_and_the_tasks_admit_only_lattices_prefix_list(
    template: Synthesized,
) -> None:
    # GIVEN the network's VPC associations and the tasks' security group rules
    associations = template.resources("AWS::VpcLattice::ServiceNetworkVpcAssociation").values()
    ingress = list(template.resources("AWS::EC2::SecurityGroupIngress").values())
    (group,) = [
        g
        for logical_id, g in template.resources("AWS::EC2::SecurityGroup").items()
        if logical_id.startswith("ApiTasks")
    ]
    # THEN the callers' VPCs are associated, the API's own VPC is not (Lattice health-checks its
    # targets without it)
    assert sorted(a["Properties"]["VpcIdentifier"] for a in associations) == sorted(VPCS)
    (target_group,) = template.resources("AWS::VpcLattice::TargetGroup").values()
    assert target_group["Properties"]["Config"]["HealthCheck"]["Path"] == "/healthz"
    # AND the tasks admit the container port from the managed prefix list only, no hand-written range
    task_ingress = [rule["Properties"] for rule in ingress if rule["Properties"].get("ToPort") == 8080]
    assert task_ingress == [
        {
            "IpProtocol": "tcp",
            "FromPort": 8080,
            "ToPort": 8080,
            "SourcePrefixListId": CONTEXT["lattice_prefix_list_id"],
            "Description": "VPC Lattice (its managed prefix list) to the API tasks",
            "GroupId": {
                "Fn::GetAtt": [template.logical_id("AWS::EC2::SecurityGroup", "ApiTasks"), "GroupId"]
            },
        }
    ]
    assert not group["Properties"].get("SecurityGroupIngress")
    # AND their egress is HTTPS only: to the VPC's interface endpoints and the gateway endpoints
    egress = task_egress(template)
    assert {(rule["IpProtocol"], rule["FromPort"], rule["ToPort"]) for rule in egress} == {("tcp", 443, 443)}
    assert {json.dumps(rule["CidrIp"]) for rule in egress} == {
        json.dumps({"Fn::GetAtt": [template.logical_id("AWS::EC2::VPC", "ApiVpc"), "CidrBlock"]}),
        json.dumps("0.0.0.0/0"),
    }


def test_gateway_egress_is_limited_to_their_prefix_lists_when_given(
    synthesize: Callable[..., Synthesis],
) -> None:
    synthesized = Synthesized(
        synthesize(dynamodb_prefix_list_id="pl-0aaaaaaaaaaaaaaaa", s3_prefix_list_id="pl-0bbbbbbbbbbbbbbbb")
    )
    egress = task_egress(synthesized)
    assert sorted(rule.get("DestinationPrefixListId", "vpc") for rule in egress) == [
        "pl-0aaaaaaaaaaaaaaaa",
        "pl-0bbbbbbbbbbbbbbbb",
        "vpc",
    ]
    assert not [rule for rule in egress if rule.get("CidrIp") == "0.0.0.0/0"]


def test_the_tasks_are_told_the_role_map_the_session_rule_their_service_and_to_audit(
    template: Synthesized,
) -> None:
    # GIVEN the task's environment, the service ARN as CloudFormation resolves it
    (task,) = template.resources("AWS::ECS::TaskDefinition").values()
    (container,) = task["Properties"]["ContainerDefinitions"]
    environment = {pair["Name"]: resolve(pair["Value"], template) for pair in container["Environment"]}
    # WHEN the server reads it as it does at start-up
    settings = Settings.from_env(environment)
    # THEN it enforces the same map as the auth policy, believes this service only, audits each
    # request on stdout and requires a person's session name (an e-mail by default)
    assert settings.caller_permissions == CallerPermissions.parse(CALLERS)
    assert settings.lattice_service_arn == SERVICE_ARN
    assert settings.audit_log == "stdout"
    assert settings.trust_front == "lattice"
    assert settings.caller_session_pattern is not None
    import re

    assert re.fullmatch(settings.caller_session_pattern, "alice.smith@example.com")
    assert not re.fullmatch(settings.caller_session_pattern, "botocore-session-1700000000")
    assert not re.fullmatch(settings.caller_session_pattern, "3f2a9c1e0b4d4f6e8a7b")


# --- 3: the caller's side ---------------------------------------------------------------------------


def test_each_caller_gets_the_identity_policy_of_exactly_its_routes(template: Synthesized) -> None:
    # GIVEN the stack's outputs
    outputs = template.template["Outputs"]
    permissions = CallerPermissions.parse(CALLERS)
    assert resolve(outputs["ApiServiceArn"]["Value"], template) == SERVICE_ARN
    for index, role in enumerate(permissions.role_arns):
        # WHEN the n-th caller's policy is read as its owner would paste it
        output = outputs[f"ApiCallerPolicy{index}"]
        assert role in output["Description"]
        policy = json.loads(resolve(output["Value"], template))
        # THEN it allows Invoke on its operations' routes with their methods, nothing else
        assert policy["Version"] == "2012-10-17"
        expected = {}
        for operation in permissions.operations_of_role(role):
            method, paths = routes_of(operation)
            expected[method, tuple(paths)] = operation
        found = {
            (s["Condition"]["StringEquals"]["vpc-lattice-svcs:RequestMethod"], tuple(s["Resource"])): s
            for s in policy["Statement"]
        }
        assert set(found) == set(expected)
        assert {s["Action"] for s in policy["Statement"]} == {"vpc-lattice-svcs:Invoke"}
        assert all(s["Effect"] == "Allow" for s in policy["Statement"])
    # AND support's policy cannot deposit or transfer
    support = json.loads(resolve(outputs["ApiCallerPolicy2"]["Value"], template))["Statement"]
    deposit = f"{SERVICE_ARN}/api/v1/wallets/8a6e0804-2bd0-4672-b79d-d97027f9071a/deposit"
    assert not allowed(support, "vpc-lattice-svcs:Invoke", deposit)
    assert allowed(support, "vpc-lattice-svcs:Invoke", deposit.replace("/deposit", "/balance"))


# --- 4: the audit trail --------------------------------------------------------------------------


def test_lattice_logs_every_request_to_s3_and_to_an_encrypted_log_group_kept_as_stated(
    template: Synthesized,
) -> None:
    # GIVEN the service's access-log subscriptions
    subscriptions = [
        s["Properties"] for s in template.resources("AWS::VpcLattice::AccessLogSubscription").values()
    ]
    destinations = {resolve(s["DestinationArn"], template) for s in subscriptions}
    assert {json.dumps(s["ResourceIdentifier"]) for s in subscriptions} == {
        json.dumps({"Fn::GetAtt": ["ApiLatticeService", "Id"]})
    }
    # THEN one goes to the lake bucket's access-log prefix, one to the access-log group
    group_id = template.logical_id("AWS::Logs::LogGroup", "ApiAccessLogGroup")
    assert destinations == {f"arn:aws:s3:::{BUCKET}/{ACCESS_LOG_PREFIX}", f"<{group_id}.Arn>"}
    # AND the log group keeps them as long as the S3 lifecycle does, encrypted with the logs key
    group = template.resources("AWS::Logs::LogGroup")[group_id]["Properties"]
    assert group["RetentionInDays"] == ACCESS_LOG_RETENTION_DAYS
    assert group["KmsKeyId"] == {"Fn::GetAtt": [template.logical_id("AWS::KMS::Key", "LogsKey"), "Arn"]}
    (bucket,) = [
        b["Properties"]
        for logical_id, b in template.resources("AWS::S3::Bucket").items()
        if logical_id.startswith("LakeBucket")
    ]
    rules = {rule["Id"]: rule for rule in bucket["LifecycleConfiguration"]["Rules"]}
    assert rules["expire-lattice-access-logs"]["Prefix"] == f"{ACCESS_LOG_PREFIX}/"
    assert rules["expire-lattice-access-logs"]["ExpirationInDays"] == ACCESS_LOG_RETENTION_DAYS
    # AND the delivery may put objects under that prefix only, for this account only
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in template.resources("AWS::S3::BucketPolicy").values()
        if "LakeBucket" in json.dumps(p["Properties"]["Bucket"])
    ]
    (delivery,) = [s for s in policy if s.get("Sid") == "LatticeAccessLogDelivery"]
    assert delivery["Principal"] == {"Service": "delivery.logs.amazonaws.com"}
    assert (
        resolve(delivery["Resource"], template)
        == f"arn:aws:s3:::{BUCKET}/{ACCESS_LOG_PREFIX}/AWSLogs/{ACCOUNT}/*"
    )
    assert resolve(delivery["Condition"]["StringEquals"], template) == {
        "aws:SourceAccount": ACCOUNT,
        "s3:x-amz-acl": "bucket-owner-full-control",
    }


def test_the_access_log_table_is_the_audit_schema_over_the_s3_prefix(template: Synthesized) -> None:
    (table,) = [
        t["Properties"]["TableInput"]
        for t in template.resources("AWS::Glue::Table").values()
        if t["Properties"]["TableInput"]["Name"] == AUDIT_TABLE
    ]
    descriptor = table["StorageDescriptor"]
    assert [(c["Name"], c["Type"]) for c in descriptor["Columns"]] == list(AUDIT_COLUMNS)
    assert descriptor["Location"] == f"s3://{BUCKET}/{ACCESS_LOG_PREFIX}/"
    assert descriptor["SerdeInfo"]["SerializationLibrary"] == "org.openx.data.jsonserde.JsonSerDe"
    assert table["TableType"] == "EXTERNAL_TABLE"


# --- 5: results nobody else can write ------------------------------------------------------------


def test_the_analyst_policy_cannot_write_the_nightly_jobs_results_or_run_in_its_workgroup(
    template: Synthesized,
) -> None:
    # GIVEN the analyst policy's statements, resolved
    (policy,) = [
        p
        for logical_id, p in template.resources("AWS::IAM::ManagedPolicy").items()
        if logical_id.startswith("AnalystPolicy")
    ]
    statements = resolve(policy["Properties"]["PolicyDocument"]["Statement"], template)
    objects = f"arn:aws:s3:::{BUCKET}/"
    # THEN no statement lets it put, delete or overwrite what the nightly job writes and reads back
    for key in (
        f"{UNLOAD_PREFIX}/2026-11-26/20261127T013000/findings/part-0.parquet",
        f"{ATHENA_RESULTS_PREFIX}0f1e2d3c-query.csv",
        f"{ATHENA_RESULTS_PREFIX}0f1e2d3c-query.csv.metadata",
        "lake/reconciliation/dt=2026-11-26/reconciliation-x.parquet",
        f"{ACCESS_LOG_PREFIX}/AWSLogs/{ACCOUNT}/x.json.gz",
    ):
        for action in ("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"):
            assert not allowed(statements, action, objects + key), (action, key)
    # AND it writes (and reads) its own workgroup's results, and runs queries there only
    assert allowed(statements, "s3:PutObject", f"{objects}{ANALYST_RESULTS_PREFIX}q.csv")
    workgroup = f"arn:aws:athena:{REGION}:{ACCOUNT}:workgroup/"
    assert allowed(statements, "athena:StartQueryExecution", f"{workgroup}walletlake-analysts")
    assert not allowed(statements, "athena:StartQueryExecution", f"{workgroup}walletlake")
    assert allowed(statements, "athena:GetNamedQuery", f"{workgroup}walletlake")
    # AND the analysts' workgroup enforces its own results prefix, outside the nightly's UNLOADs
    workgroups = {
        w["Properties"]["Name"]: w["Properties"]["WorkGroupConfiguration"]
        for w in template.resources("AWS::Athena::WorkGroup").values()
    }
    analysts = workgroups["walletlake-analysts"]
    assert analysts["EnforceWorkGroupConfiguration"] is True
    assert (
        resolve(analysts["ResultConfiguration"]["OutputLocation"], template)
        == f"s3://{BUCKET}/{ANALYST_RESULTS_PREFIX}"
    )
    assert not UNLOAD_PREFIX.startswith(ANALYST_RESULTS_PREFIX)
    # AND the CLI's environment (what analysts `eval`) names the analysts' workgroup
    cli = resolve(template.template["Outputs"]["CliEnvironment"]["Value"], template)
    assert "WALLETLAKE_ATHENA_WORKGROUP=walletlake-analysts" in cli.split()


# --- 6: least privilege -------------------------------------------------------------------------


def test_the_snapshot_and_classify_functions_write_only_their_own_prefixes(template: Synthesized) -> None:
    objects = f"arn:aws:s3:::{BUCKET}/lake/"
    snapshot = resolve(policy_statements(template, role_of(template, SNAPSHOT_SEGMENT_HANDLER)), template)
    assert allowed(snapshot, "s3:PutObject", objects + "balance_snapshots/dt=2026-11-27/snapshot-1.parquet")
    for key in ("ledger/dt=2026-11-27/x.parquet", "iceberg/ledger/metadata/v9.json", "_reports/x"):
        assert not allowed(snapshot, "s3:PutObject", objects + key), key
    classify = resolve(policy_statements(template, role_of(template, RECONCILE_CLASSIFY_HANDLER)), template)
    for key in (
        "daily_balances/dt=2026-11-26/daily_balances.parquet",
        "reconciliation/dt=2026-11-26/reconciliation-20261127T013000.000Z.parquet",
        "_reports/reconciliation/dt=2026-11-26/summary.json",
    ):
        assert allowed(classify, "s3:PutObject", objects + key), key
    for key in (
        "ledger/dt=2026-11-26/x.parquet",
        "balance_snapshots/dt=2026-11-26/x.parquet",
        "iceberg/ledger/m.json",
    ):
        assert not allowed(classify, "s3:PutObject", objects + key), key
    assert allowed(classify, "s3:GetObject", objects + "ledger/dt=2026-11-26/x.parquet")


def test_every_endpoint_has_a_policy_naming_the_stacks_resources(template: Synthesized) -> None:
    endpoints = {
        logical_id: resolve(e["Properties"]["PolicyDocument"]["Statement"], template)
        for logical_id, e in template.resources("AWS::EC2::VPCEndpoint").items()
    }
    assert len(endpoints) == 6
    by_name = {
        next(n for n in ("DynamoDb", "S3", "EcrApi", "EcrDocker", "Logs", "Glue") if n in lid): s
        for lid, s in endpoints.items()
    }
    task_role = f"<{template.logical_id('AWS::IAM::Role', 'ApiTaskRole')}.Arn>"
    execution_role = f"<{template.logical_id('AWS::IAM::Role', 'ApiTaskExecutionRole')}.Arn>"
    (dynamodb,) = by_name["DynamoDb"]
    assert dynamodb["Principal"] == {"AWS": task_role}
    records = f"<{template.logical_id('AWS::DynamoDB::Table', 'IdempotencyTable')}.Arn>"
    assert sorted(dynamodb["Resource"]) == sorted(
        [
            *(
                f"<{template.logical_id('AWS::DynamoDB::Table', name)}.Arn>"
                for name in ("WalletsTable", "IdempotencyTable", "OwnersTable")
            ),
            *(f"{records}/index/{index.name}" for index in IDEMPOTENCY_TABLE.indexes),
        ]
    )
    assert not [a for a in dynamodb["Action"] if a in ("dynamodb:Scan", "dynamodb:DeleteItem", "dynamodb:*")]
    s3, ledger = by_name["S3"]  # ECR's layers; the ledger's files (tests/cdk/test_history_access.py)
    assert s3["Resource"] == f"arn:aws:s3:::prod-{REGION}-starport-layer-bucket/*"
    assert s3["Action"] == "s3:GetObject"
    assert (ledger["Action"], ledger["Principal"]) == ("s3:GetObject", {"AWS": task_role})
    for name in ("EcrApi", "EcrDocker", "Logs"):
        assert {json.dumps(s["Principal"]) for s in by_name[name]} == {json.dumps({"AWS": execution_role})}
    logs_resources = as_list(by_name["Logs"][0]["Resource"])
    assert logs_resources[0] == f"<{template.logical_id('AWS::Logs::LogGroup', 'ApiServiceLogs')}.Arn>"


def test_each_data_class_has_its_own_key_and_roles_use_keys_through_their_service_only(
    template: Synthesized,
) -> None:
    keys = {
        name: template.logical_id("AWS::KMS::Key", name)
        for name in ("DataKey", "TableKey", "ResultsKey", "QueueKey", "LogsKey")
    }
    arn = {name: {"Fn::GetAtt": [logical_id, "Arn"]} for name, logical_id in keys.items()}
    # THEN the tables, the bucket, the queue, the workgroups and the log groups each use their own
    for table in template.resources("AWS::DynamoDB::Table").values():
        assert table["Properties"]["SSESpecification"]["KMSMasterKeyId"] == arn["TableKey"]
    (bucket,) = [
        b for lid, b in template.resources("AWS::S3::Bucket").items() if lid.startswith("LakeBucket")
    ]
    (encryption,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption["ServerSideEncryptionByDefault"]["KMSMasterKeyID"] == arn["DataKey"]
    (queue,) = template.resources("AWS::SQS::Queue").values()
    assert queue["Properties"]["KmsMasterKeyId"] == arn["QueueKey"]
    for workgroup in template.resources("AWS::Athena::WorkGroup").values():
        configuration = workgroup["Properties"]["WorkGroupConfiguration"]["ResultConfiguration"]
        assert configuration["EncryptionConfiguration"]["KmsKey"] == arn["ResultsKey"]
    groups = template.resources("AWS::Logs::LogGroup").values()
    assert groups
    assert all(group["Properties"]["KmsKeyId"] == arn["LogsKey"] for group in groups)
    # AND no role or managed policy may use a data key but through the service holding the data
    data_keys = [json.dumps(arn[name]) for name in ("DataKey", "TableKey", "ResultsKey", "QueueKey")]
    documents = [p["Properties"]["PolicyDocument"] for p in template.resources("AWS::IAM::Policy").values()]
    documents += [
        p["Properties"]["PolicyDocument"] for p in template.resources("AWS::IAM::ManagedPolicy").values()
    ]
    checked = 0
    for document in documents:
        for statement in document["Statement"]:
            if any(json.dumps(resource) in data_keys for resource in as_list(statement["Resource"])):
                checked += 1
                via = statement["Condition"]["StringEquals"]["kms:ViaService"]
                assert resolve(via, template).split(".")[0] in ("dynamodb", "s3", "sqs"), statement
    assert checked >= 10


# --- 7: the alarm ----------------------------------------------------------------------------


def test_any_refused_request_alarms_the_on_call(template: Synthesized) -> None:
    alarm_id = template.logical_id("AWS::CloudWatch::Alarm", REFUSED_REQUESTS_ALARM)
    alarm = template.resources("AWS::CloudWatch::Alarm")[alarm_id]["Properties"]
    (expression,) = [m for m in alarm["Metrics"] if m.get("Expression")]
    assert expression["Expression"] == "unauthenticated + forbidden"
    inputs = {m["Id"]: m["MetricStat"] for m in alarm["Metrics"] if "MetricStat" in m}
    assert {stat["Metric"]["MetricName"] for stat in inputs.values()} == {
        api_metrics.PUBLISHED[api_metrics.UNAUTHENTICATED],
        api_metrics.PUBLISHED[api_metrics.FORBIDDEN],
    }
    assert {"RequestsUnauthenticated", "RequestsForbidden"} == {
        stat["Metric"]["MetricName"] for stat in inputs.values()
    }
    for stat in inputs.values():
        assert stat["Metric"]["Namespace"] == "walletlake"
        assert stat["Metric"]["Dimensions"] == [{"Name": "service", "Value": "wallet-api"}]
        assert stat["Stat"] == "Sum"
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["EvaluationPeriods"] == 1
    assert alarm["AlarmActions"] == [{"Ref": template.logical_id("AWS::SNS::Topic", "AlertsTopic")}]
    assert "docs/operations.md" in alarm["AlarmDescription"]


def test_the_stream_mapping_keeps_the_logical_id_cdks_event_source_gave_it(template: Synthesized) -> None:
    # GIVEN the consumer's mapping, now granted without CDK's DynamoEventSource (whose grants of
    # the table's and the queue's keys had no kms:ViaService)
    (logical_id,) = template.resources("AWS::Lambda::EventSourceMapping")
    # THEN its logical id is the one that construct gave it: a deploy updates it in place, never
    # replaces it (a new mapping would read the stream again from TRIM_HORIZON)
    assert logical_id.startswith("StreamConsumerFunctionDynamoDBEventSourceWalletLakeWalletsTable")
    # AND the role reads the stream and sends to the queue, each key through its service only
    statements = policy_statements(template, role_of(template, "walletlake.handlers.stream.handler"))
    actions = {action for statement in statements for action in as_list(statement["Action"])}
    assert {"dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:DescribeStream"} <= actions
    assert {"sqs:SendMessage"} <= actions
    for statement in statements:
        if any(action.startswith("kms:") for action in as_list(statement["Action"])):
            assert "kms:ViaService" in statement["Condition"]["StringEquals"], statement


def test_who_did_what_is_a_named_query_over_the_access_log_table(template: Synthesized) -> None:
    # GIVEN the named queries of the nightly job's workgroup (analysts read them, run them in theirs)
    queries = {
        q["Properties"]["Name"]: q["Properties"]
        for q in template.resources("AWS::Athena::NamedQuery").values()
    }
    # THEN who_did_what reads the Glue table Lattice's access logs land in, in the lake's database
    query = queries["who_did_what"]
    assert f"FROM {AUDIT_TABLE}" in query["QueryString"]
    assert query["Database"] == "walletlake"
    tables = [t["Properties"]["TableInput"]["Name"] for t in template.resources("AWS::Glue::Table").values()]
    assert AUDIT_TABLE in tables
