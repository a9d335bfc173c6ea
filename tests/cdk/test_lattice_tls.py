"""Lattice to the API tasks over HTTPS: the target group, the health checks and the task agree.

Behind VPC Lattice the caller's identity header crosses the VPC to a task; the synthesized template
must encrypt that hop end to end: Lattice forwards and health-checks over HTTPS, on the one port
the task listens on and its security group admits, and the task definition turns the server's TLS
on with a certificate it makes at start where it can write one (its root filesystem is read-only).
The other fronts keep plain HTTP (an ALB's target group is HTTP; a function has no server).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk.assertions import Template
from support.cdk_synthesis import Synthesis
from test_cdk import CONTEXT, Synthesized
from test_cdk_units import config_with_callers

from contracts.settings import TLS_VARIABLE, Settings
from walletlake_cdk.api_service import (
    CONTAINER_PORT,
    HEALTH_PATH,
    PORT_NAME,
    TLS_SCRATCH_DIR,
    build_api_service,
    front_environment,
)
from walletlake_cdk.lattice_front import TARGET_PROTOCOL, TASK_TLS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def synthesized(synthesize: Callable[..., Synthesis]) -> Synthesized:
    """The whole app as deployed by default (``api_front=lattice``)."""
    return Synthesized(synthesize())


def _container(template: dict[str, Any]) -> dict[str, Any]:
    (container,) = [
        definition
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::ECS::TaskDefinition"
        for definition in resource["Properties"]["ContainerDefinitions"]
    ]
    return container


def _environment(container: dict[str, Any]) -> dict[str, Any]:
    return {item["Name"]: item["Value"] for item in container.get("Environment", [])}


def test_lattice_forwards_and_health_checks_over_https_on_the_port_the_task_listens_on(
    synthesized: Synthesized,
) -> None:
    # GIVEN the default deployment's Lattice target group and the API task
    _, target_group = synthesized.only("AWS::VpcLattice::TargetGroup")
    config = target_group["Properties"]["Config"]
    container = _container(synthesized.template)
    # THEN Lattice speaks HTTPS/1.1 to the tasks, and checks their health over HTTPS on /healthz
    assert TARGET_PROTOCOL == "HTTPS"
    assert (config["Protocol"], config["ProtocolVersion"]) == ("HTTPS", "HTTP1")
    health = config["HealthCheck"]
    assert (health["Enabled"], health["Protocol"], health["ProtocolVersion"]) == (True, "HTTPS", "HTTP1")
    assert health["Path"] == HEALTH_PATH == "/healthz"
    # AND on the one port: the target group's, the container's mapping (which ECS registers by
    # name) and the port the command makes the server listen on
    assert config["Port"] == CONTAINER_PORT
    (mapping,) = container["PortMappings"]
    assert (mapping["ContainerPort"], mapping["Name"]) == (CONTAINER_PORT, PORT_NAME)
    command = container["Command"]
    assert command[:4] == ["python", "-m", "walletlake.cli", "serve"]
    assert command[command.index("--port") + 1] == str(CONTAINER_PORT)
    (registration,) = synthesized.only("AWS::ECS::Service")[1]["Properties"]["VpcLatticeConfigurations"]
    assert registration["PortName"] == PORT_NAME
    # AND the tasks' security group admits Lattice's prefix list on that port alone
    ingress = [
        rule["Properties"] for rule in synthesized.resources("AWS::EC2::SecurityGroupIngress").values()
    ]
    inline = [
        rule
        for group in synthesized.resources("AWS::EC2::SecurityGroup").values()
        for rule in group["Properties"].get("SecurityGroupIngress", [])
    ]
    from_lattice = [rule for rule in ingress + inline if "SourcePrefixListId" in rule]
    assert [(rule["FromPort"], rule["ToPort"]) for rule in from_lattice] == [(CONTAINER_PORT, CONTAINER_PORT)]
    assert [rule["SourcePrefixListId"] for rule in from_lattice] == [CONTEXT["lattice_prefix_list_id"]]


def test_the_task_turns_tls_on_with_a_certificate_it_makes_in_memory(synthesized: Synthesized) -> None:
    # GIVEN the API task's container definition
    container = _container(synthesized.template)
    environment = _environment(container)
    # THEN the server makes its own key and certificate at start (Lattice validates none) ...
    assert TASK_TLS == "self-signed"
    assert environment[TLS_VARIABLE] == "self-signed"
    assert "WALLETLAKE_TLS_CERT_FILE" not in environment
    assert "WALLETLAKE_TLS_KEY_FILE" not in environment
    # ... under /dev/shm: the root filesystem stays read-only, and the key is never on a disk
    assert container["ReadonlyRootFilesystem"] is True
    assert environment["TMPDIR"] == TLS_SCRATCH_DIR == "/dev/shm"
    # AND the server reads exactly that from its environment (the variables the template resolves
    # at synth; the service ARN is a CloudFormation attribute)
    plain = {name: value for name, value in environment.items() if isinstance(value, str)}
    settings = Settings.from_env(plain)
    assert (settings.tls, settings.tls_cert_file, settings.tls_key_file) == ("self-signed", None, None)
    assert settings.trust_front == "lattice"
    # AND the container's own health check asks /healthz over HTTPS, checking no certificate
    check = container["HealthCheck"]["Command"]
    assert check[:3] == ["CMD", "python", "-c"]
    assert f"'https://127.0.0.1:{CONTAINER_PORT}{HEALTH_PATH}'" in check[3]
    assert "context=ssl._create_unverified_context()" in check[3]
    assert "http://" not in check[3]


def test_the_alb_and_lambda_fronts_keep_plain_http(tmp_path: Path) -> None:
    # GIVEN the internal-ALB front, built as the stack builds it (its environment from the front)
    config = config_with_callers({"api_front": "alb", "lambda_deps": "skip"}.get)
    stack = cdk.Stack(
        cdk.App(outdir=str(tmp_path)), "Alb", env=cdk.Environment(account="123456789012", region="eu-west-1")
    )
    table = dynamodb.Table(
        stack, "T", partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING)
    )
    environment = {"WALLETLAKE_TABLE": "wallets", **front_environment(config)}
    # WHEN the fleet is built
    build_api_service(
        stack, config, table, environment, idempotency_table=table, owners_table=table, access_logs=None
    )
    template = Template.from_stack(stack).to_json()
    # THEN the balancer's targets are HTTP and health-checked over HTTP
    (group,) = [
        resource["Properties"]
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::ElasticLoadBalancingV2::TargetGroup"
    ]
    assert group["Protocol"] == "HTTP"
    assert group.get("HealthCheckProtocol", "HTTP") == "HTTP"
    # AND the task speaks plain HTTP: no TLS variable, no scratch folder, an HTTP health check
    container = _container(template)
    assert TLS_VARIABLE not in _environment(container)
    assert "TMPDIR" not in _environment(container)
    assert f"'http://127.0.0.1:{CONTAINER_PORT}{HEALTH_PATH}'" in container["HealthCheck"]["Command"][3]
    # AND the API function (api_front=lambda) is told nothing of TLS: it runs no server
    function = config_with_callers({"api_front": "lambda", "lambda_deps": "skip"}.get)
    assert TLS_VARIABLE not in front_environment(function)
