"""The idempotency table as the CDK app deploys it: the contract's key and TTL, no stream, the write
path's grants and the variable naming it, read from the synthesized template.

Synthesized per front (the ECS fleet, the default; the Lambda tier), with no Docker, no network and
no AWS credentials: the syntheses tests/cdk/test_cdk.py reads (``support.cdk_synthesis``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template
from support.cdk_synthesis import Synthesis

from contracts.idempotency_table import IDEMPOTENCY_TABLE
from contracts.owners_table import OWNERS_TABLE
from contracts.settings import DEPLOYED_VARIABLES, IDEMPOTENCY_TABLE_VARIABLE, OWNERS_TABLE_VARIABLE, Settings
from contracts.wallets_table import TableSpec
from walletlake_cdk.assembly import error_messages
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.idempotency_table import HISTORY_ACTIONS, IDEMPOTENCY_ACTIONS, build_idempotency_table
from walletlake_cdk.owners_table import OWNERS_ACTIONS
from walletlake_cdk.write_api import API_HANDLER

pytestmark = pytest.mark.slow

CALLER = "arn:aws:iam::123456789012:role/payments-api-caller"
#: What the Lattice front requires besides its callers (a caller VPC, Lattice's prefix list).
LATTICE_DEFAULTS = {
    "api_callers": CALLER,
    "caller_vpc_ids": "vpc-0123456789abcdef0",
    "lattice_prefix_list_id": "pl-0123456789abcdef0",
}
SETTINGS = Settings()


def config_with_callers(get: Callable[[str], Any]) -> DeploymentConfig:
    """``DeploymentConfig.from_context`` with the Lattice front's required callers (unless given)."""
    return DeploymentConfig.from_context(lambda key: get(key) or LATTICE_DEFAULTS.get(key))


@pytest.fixture(scope="module", params=["lattice", "lambda"])
def synthesized(request: pytest.FixtureRequest, synthesize: Callable[..., Synthesis]) -> dict[str, Any]:
    synthesis = synthesize(api_front=request.param)
    assert error_messages(synthesis.assembly) == []
    return {"front": request.param, "template": synthesis.template()}


def _resources(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    return {key: value for key, value in template["Resources"].items() if value["Type"] == resource_type}


def _idempotency_table(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (logical_id, resource)
        for logical_id, resource in _resources(template, "AWS::DynamoDB::Table").items()
        if resource["Properties"].get("TableName") == SETTINGS.idempotency_table
    ]
    return found


def _write_path_role_and_environment(front: str, template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The write path's role logical id and the environment its code runs with."""
    if front != "lambda":
        (task,) = _resources(template, "AWS::ECS::TaskDefinition").values()
        container = task["Properties"]["ContainerDefinitions"][0]
        environment = {entry["Name"]: entry["Value"] for entry in container["Environment"]}
        return task["Properties"]["TaskRoleArn"]["Fn::GetAtt"][0], environment
    (function,) = [
        resource["Properties"]
        for resource in _resources(template, "AWS::Lambda::Function").values()
        if resource["Properties"]["Handler"] == API_HANDLER
    ]
    return function["Role"]["Fn::GetAtt"][0], function["Environment"]["Variables"]


def _statements_of(template: dict[str, Any], role_id: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in _resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_the_records_table_is_the_contract_with_ttl_and_no_stream(synthesized: dict[str, Any]) -> None:
    # GIVEN the synthesized app
    # WHEN the idempotency table is read
    _, table = _idempotency_table(synthesized["template"])
    properties = table["Properties"]
    # THEN key and TTL are the contract's, it has no stream, and it is protected like the ledger
    assert properties["KeySchema"] == [{"AttributeName": IDEMPOTENCY_TABLE.partition_key, "KeyType": "HASH"}]
    assert properties["AttributeDefinitions"] == [
        {"AttributeName": key.name, "AttributeType": key.type} for key in IDEMPOTENCY_TABLE.key_attributes
    ]
    # AND the history's two indexes are the contract's: a wallet's requests and its received
    # transfers by time, projecting what an entry needs and nothing else
    indexes = {index["IndexName"]: index for index in properties["GlobalSecondaryIndexes"]}
    assert set(indexes) == {index.name for index in IDEMPOTENCY_TABLE.indexes} == {"by_wallet", "by_payee"}
    for spec in IDEMPOTENCY_TABLE.indexes:
        index = indexes[spec.name]
        assert index["KeySchema"] == [
            {"AttributeName": spec.partition_key.name, "KeyType": "HASH"},
            {"AttributeName": spec.sort_key.name, "KeyType": "RANGE"},
        ]
        assert index["Projection"]["ProjectionType"] == "INCLUDE"
        assert sorted(index["Projection"]["NonKeyAttributes"]) == sorted(spec.projected)
    assert "StreamSpecification" not in properties
    assert properties["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert properties["DeletionProtectionEnabled"] is True
    assert properties["SSESpecification"]["SSEType"] == "KMS"
    assert table["DeletionPolicy"] == "Retain"
    # AND only the wallets table has a stream: the consumer is never invoked for a record
    streams = [
        resource
        for resource in _resources(synthesized["template"], "AWS::DynamoDB::Table").values()
        if "StreamSpecification" in resource["Properties"]
    ]
    assert [resource["Properties"]["TableName"] for resource in streams] == [SETTINGS.table]


def test_the_write_path_may_put_and_get_records_and_is_told_the_tables_name(
    synthesized: dict[str, Any],
) -> None:
    # GIVEN the write path's role and environment (the fleet's task, or the API function)
    template = synthesized["template"]
    table_id, _ = _idempotency_table(template)
    role_id, environment = _write_path_role_and_environment(synthesized["front"], template)
    # WHEN the statements on the records table are collected
    on_records = [
        statement
        for statement in _statements_of(template, role_id)
        if {"Fn::GetAtt": [table_id, "Arn"]} in _as_list(statement["Resource"])
    ]
    # THEN it may put and get records and nothing else there
    assert len(on_records) == 1
    assert sorted(_as_list(on_records[0]["Action"])) == sorted(IDEMPOTENCY_ACTIONS)
    assert on_records[0]["Effect"] == "Allow"
    # AND it may query the history's two indexes, by name, and nothing else there
    on_indexes = [
        statement
        for statement in _statements_of(template, role_id)
        if any("/index/" in json.dumps(resource) for resource in _as_list(statement["Resource"]))
    ]
    assert len(on_indexes) == 1
    assert _as_list(on_indexes[0]["Action"]) == list(HISTORY_ACTIONS)
    assert {
        json.dumps(resource).split("/index/")[1].strip('"]}') for resource in on_indexes[0]["Resource"]
    } == {index.name for index in IDEMPOTENCY_TABLE.indexes}
    # AND its environment names the table, so Settings.from_env in the process finds it
    assert environment[IDEMPOTENCY_TABLE_VARIABLE] == SETTINGS.idempotency_table
    assert IDEMPOTENCY_TABLE_VARIABLE in DEPLOYED_VARIABLES


def test_the_owners_table_is_the_contract_and_only_the_api_may_put_and_query_it(
    synthesized: dict[str, Any],
) -> None:
    # GIVEN the owners' table as deployed, and the API's role and environment
    template = synthesized["template"]
    (table_id, table) = next(
        (logical_id, resource)
        for logical_id, resource in _resources(template, "AWS::DynamoDB::Table").items()
        if resource["Properties"].get("TableName") == SETTINGS.owners_table
    )
    properties = table["Properties"]
    role_id, environment = _write_path_role_and_environment(synthesized["front"], template)
    # THEN its keys are the contract's (owner, wallet), with no stream, no TTL, protected and kept
    assert properties["KeySchema"] == [
        {"AttributeName": OWNERS_TABLE.partition_key, "KeyType": "HASH"},
        {"AttributeName": "wallet_id", "KeyType": "RANGE"},
    ]
    assert "StreamSpecification" not in properties
    assert "TimeToLiveSpecification" not in properties
    assert properties["DeletionProtectionEnabled"] is True
    assert table["DeletionPolicy"] == "Retain"
    # AND the API's role may put entries and query them, and no other role names the table
    naming = [
        policy["Properties"]["Roles"]
        for policy in _resources(template, "AWS::IAM::Policy").values()
        if table_id in json.dumps(policy["Properties"]["PolicyDocument"])
    ]
    assert naming == [[{"Ref": role_id}]]
    (statement,) = [
        s
        for s in _statements_of(template, role_id)
        if {"Fn::GetAtt": [table_id, "Arn"]} in _as_list(s["Resource"])
    ]
    assert sorted(_as_list(statement["Action"])) == sorted(OWNERS_ACTIONS)
    assert environment[OWNERS_TABLE_VARIABLE] == SETTINGS.owners_table


def test_no_other_role_may_touch_the_records(synthesized: dict[str, Any]) -> None:
    # GIVEN every IAM policy of the app
    template = synthesized["template"]
    table_id, _ = _idempotency_table(template)
    role_id, _ = _write_path_role_and_environment(synthesized["front"], template)
    # THEN the only policy naming the records table is the write path's
    naming = [
        policy["Properties"]["Roles"]
        for policy in _resources(template, "AWS::IAM::Policy").values()
        if table_id in json.dumps(policy["Properties"]["PolicyDocument"])
    ]
    assert naming == [[{"Ref": role_id}]]


def test_a_spec_with_a_stream_is_refused() -> None:
    # GIVEN a spec that would give the records a stream
    stack = cdk.Stack(cdk.App(), "Refused")
    spec = TableSpec(partition_key="pk", stream_view_type="NEW_AND_OLD_IMAGES", ttl_attribute="expires_at")
    # WHEN the table is built THEN it is refused (the consumer would be invoked for every record)
    with pytest.raises(ValueError, match="no stream"):
        build_idempotency_table(
            stack,
            DeploymentConfig(
                api_callers=(CALLER,),
                caller_vpc_ids=("vpc-0123456789abcdef0",),
                lattice_prefix_list_id="pl-0123456789abcdef0",
            ),
            kms.Key(stack, "Key"),
            spec,
        )


def test_warm_write_units_prewarm_the_records_too() -> None:
    # GIVEN a deployment pre-warmed for launch day
    config = config_with_callers({"warm_write_units_per_second": "120000"}.get)
    stack = cdk.Stack(cdk.App(), "Warm")
    # WHEN the records table is built
    build_idempotency_table(stack, config, kms.Key(stack, "Key"))
    # THEN it takes the same warm writes (a record per transaction: a new table would throttle)
    Template.from_stack(stack).has_resource_properties(
        "AWS::DynamoDB::Table",
        {"BillingMode": "PAY_PER_REQUEST", "WarmThroughput": {"WriteUnitsPerSecond": 120000}},
    )
