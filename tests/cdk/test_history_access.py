"""The API tasks read the ledger's Iceberg table for a wallet's history: only that, through their endpoints.

Synthesized with the Lattice front (the fleet) and test_cdk_security.py's callers: its synthesis.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from support.cdk_synthesis import Synthesis
from test_cdk import Synthesized, as_list, policy_statements
from test_cdk_security import BUCKET, CALLERS, VPCS, resolve

from walletlake_cdk.stream_consumer import ICEBERG_READ_ACTIONS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def template(synthesize: Callable[..., Synthesis]) -> Synthesized:
    return Synthesized(synthesize(api_callers=CALLERS, caller_vpc_ids=",".join(VPCS)))


def _endpoint(template: Synthesized, name: str) -> dict[str, Any]:
    (endpoint,) = [e for lid, e in template.resources("AWS::EC2::VPCEndpoint").items() if name in lid]
    return endpoint


def test_the_tasks_may_read_the_ledger_and_its_catalog_entry_and_nothing_else_of_the_lake(
    template: Synthesized,
) -> None:
    (task,) = template.resources("AWS::ECS::TaskDefinition").values()
    role_id = task["Properties"]["TaskRoleArn"]["Fn::GetAtt"][0]
    statements = resolve(policy_statements(template, role_id), template)
    # THEN the task role reads the ledger's files and nothing else of the bucket
    s3 = [s for s in statements if any(a.startswith("s3:") for a in as_list(s["Action"]))]
    assert [(as_list(s["Action"]), as_list(s["Resource"])) for s in s3] == [
        (["s3:GetObject"], [f"arn:aws:s3:::{BUCKET}/lake/iceberg/ledger/*"])
    ]
    # AND reaches the catalog to load the ledger only: no write, no other table
    (glue,) = [s for s in statements if any(a.startswith("glue:") for a in as_list(s["Action"]))]
    assert sorted(as_list(glue["Action"])) == sorted(ICEBERG_READ_ACTIONS)
    tables = [r for r in as_list(glue["Resource"]) if ":table/" in r]
    assert [table.rsplit("/", 1)[1] for table in tables] == ["ledger"]


def test_glue_is_reached_through_an_endpoint_that_lets_through_only_the_tasks_reads(
    template: Synthesized,
) -> None:
    glue = _endpoint(template, "Glue")
    assert "glue" in json.dumps(glue["Properties"]["ServiceName"])
    (statement,) = resolve(glue["Properties"]["PolicyDocument"]["Statement"], template)
    assert sorted(as_list(statement["Action"])) == sorted(ICEBERG_READ_ACTIONS)
    assert (
        statement["Principal"]["AWS"].endswith("ApiTaskRole")
        or "ApiTaskRole" in statement["Principal"]["AWS"]
    )
    # AND the S3 gateway lets the tasks' ledger reads through beside ECR's layers
    s3 = resolve(_endpoint(template, "S3")["Properties"]["PolicyDocument"]["Statement"], template)
    assert {(s["Action"], json.dumps(s["Resource"])) for s in s3} >= {
        ("s3:GetObject", json.dumps(f"arn:aws:s3:::{BUCKET}/lake/iceberg/ledger/*"))
    }
