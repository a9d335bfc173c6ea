"""The API task as the CDK app defines it: its container's command, environment and health check.

Stack tests that must run the server "as deployed" take these from a synthesized task definition
(the fleet built on a bare stack, as ``walletlake_cdk.stack`` builds it), not from a copy of their
values, so a change to the deployment is a change to what those tests run.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class DeployedTask:
    """The one container of the API task definition, as synthesized."""

    command: list[str]
    #: The variables the template sets to plain text (a CloudFormation reference is left out).
    environment: dict[str, str]
    health_check: list[str]
    #: Lattice's target group config (None with another front).
    target_group: dict[str, Any] | None

    def serve_args(self) -> list[str]:
        """The command's ``walletlake serve`` flags without ``--host`` and ``--port`` (a test's own)."""
        assert self.command[:4] == ["python", "-m", "walletlake.cli", "serve"], self.command
        rest = self.command[4:]
        kept: list[str] = []
        skip = False
        for index, word in enumerate(rest):
            if skip:
                skip = False
                continue
            if word in ("--host", "--port") and index + 1 < len(rest):
                skip = True
                continue
            kept.append(word)
        return kept


def synthesize_task(context: dict[str, str]) -> DeployedTask:
    """Build the API fleet for ``context`` (``-c`` values) on a bare stack and read its task back."""
    os.environ.setdefault("JSII_RUNTIME_PACKAGE_CACHE_ROOT", str(ROOT / ".cache" / "jsii"))
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    if str(ROOT / "cdk") not in sys.path:
        sys.path.insert(0, str(ROOT / "cdk"))
    import aws_cdk as cdk
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk.assertions import Template

    from walletlake_cdk.api_service import build_api_service, front_environment
    from walletlake_cdk.config import DeploymentConfig
    from walletlake_cdk.lattice_front import AccessLogDestinations

    config = DeploymentConfig.from_context(context.get)
    stack = cdk.Stack(cdk.App(), "Api", env=cdk.Environment(account="111122223333", region="us-east-1"))
    table = dynamodb.Table(
        stack, "T", partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING)
    )
    logs = AccessLogDestinations(
        s3_arn="arn:aws:s3:::access-logs", log_group_arn="arn:aws:logs:us-east-1:111122223333:log-group:x"
    )
    build_api_service(
        stack,
        config,
        table,
        {"WALLETLAKE_TABLE": "wallets", **front_environment(config)},
        idempotency_table=table,
        owners_table=table,
        access_logs=logs if config.api_front == "lattice" else None,
    )
    template = Template.from_stack(stack).to_json()
    resources = template["Resources"].values()
    (container,) = [
        definition
        for resource in resources
        if resource["Type"] == "AWS::ECS::TaskDefinition"
        for definition in resource["Properties"]["ContainerDefinitions"]
    ]
    groups = [r["Properties"]["Config"] for r in resources if r["Type"] == "AWS::VpcLattice::TargetGroup"]
    return DeployedTask(
        command=list(container["Command"]),
        environment={
            item["Name"]: item["Value"] for item in container["Environment"] if isinstance(item["Value"], str)
        },
        health_check=list(container["HealthCheck"]["Command"]),
        target_group=groups[0] if groups else None,
    )
