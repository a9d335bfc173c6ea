"""The write path as seed 000 deploys it: long-running API servers on ECS Fargate, across AZs.

Seed 000's design is a fleet of stateless application servers (several Availability Zones, never
above 50 % CPU). A long-running server is also what makes walletlake's group commit happen
(``wallet/commit_queue.py``): requests waiting on a busy process or wallet leave together in one
TransactWriteItems, which a Lambda invocation serving one request never can. So the default front
of the write path is this service; ``api_front=lambda`` keeps the API Gateway + Lambda tier for
low loads (README, "What it costs", says where each is cheaper).

What it deploys:

* **Network.** A VPC over ``api_azs`` Availability Zones (three by default) with *isolated* private
  subnets only: no NAT and no internet route. DynamoDB and S3 are reached through gateway
  endpoints (free, and the image's layers come from ECR's S3), ECR and CloudWatch Logs through
  interface endpoints, so no request of the write path ever crosses a NAT.
* **Tasks.** ``walletlake serve`` on Fargate, ARM64 (Graviton: about 20 % cheaper per vCPU-hour
  than x86 at the same measured CPU per request), one uvicorn worker per vCPU, its own log group
  (the server's EMF lines become CloudWatch metrics there). A task role that may only do the write
  path's four item actions on the table, its key usable through DynamoDB only.
* **Scaling.** Between ``api_min_tasks`` and ``api_max_tasks``: target tracking on CPU at 50 % (the
  seed's rule) and on requests per task.
* **Front and authentication.** ``lattice`` (default): a VPC Lattice service network and service,
  both ``AWS_IAM``, the service's auth policy allowing each role of ``api_callers`` its operations'
  routes only, from the callers' VPCs (:mod:`walletlake_cdk.lattice_front`, which also writes the
  access-log subscriptions and the callers' policies). The tasks trust Lattice's
  ``x-amzn-lattice-identity`` for this service only, enforce the same role map, and serve no
  operator routes (:func:`front_environment`). Lattice reaches them over HTTPS, which they
  terminate with a certificate made at start (:data:`~walletlake_cdk.lattice_front.TASK_TLS`;
  their health checks, Lattice's and the container's, speak it too). ``alb``: an internal
  Application Load Balancer instead (network-level access only, for callers inside the VPC;
  writes attributed to ``unverified:internal-alb``), cheaper per request.
* **Endpoints and egress.** Each VPC endpoint's policy names this stack's resources; the tasks may
  send HTTPS to the endpoints only (:func:`_limit_endpoints`, :func:`_task_security_group`).
* **Draining.** A Lattice target group has no deregistration-delay setting (CloudFormation's
  ``TargetGroupConfig``); Lattice stops routing to a deregistered target and lets its in-flight
  requests finish. The server's drain (``WALLETLAKE_DRAIN_SECONDS``, 25 s) is set on the task and
  fits the container's 30 s stop timeout, which is also the ALB's deregistration delay.
* **Image.** Built at deploy time by the CDK CLI (``cdk deploy`` runs ``docker build`` for the
  asset and pushes it to the bootstrap ECR repository) from ``docker/api.Dockerfile``: the
  project's own locked dependencies (``docker/api-requirements.txt``, generated from the
  environment the tests ran in) installed with ``--no-deps``. Synthesis only stages the build
  context; it needs no Docker.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_vpclattice as lattice
from constructs import Construct

from contracts.settings import DEFAULT_TLS, LATTICE_SERVICE_ARN_VARIABLE, TLS_VARIABLE, environment_for
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.functions import log_retention
from walletlake_cdk.idempotency_table import HISTORY_ACTIONS, IDEMPOTENCY_ACTIONS, index_arns
from walletlake_cdk.lambda_code import PROJECT_ROOT
from walletlake_cdk.lattice_front import (
    CONTAINER_PORT,
    HEALTH_PATH,
    PORT_NAME,
    TASK_TLS,
    AccessLogDestinations,
    Front,
    build_lattice_front,
)
from walletlake_cdk.owners_table import OWNERS_ACTIONS
from walletlake_cdk.storage import TABLE_KEY_ACTIONS, grant_key_via
from walletlake_cdk.write_api import TABLE_ACTIONS

__all__ = [
    "CONTAINER_PORT",
    "HEALTH_PATH",
    "PORT_NAME",
    "ApiService",
    "api_command",
    "build_api_service",
    "container_health_command",
    "front_environment",
]

#: The Dockerfile and the lock file the image is built from (relative to the project root).
DOCKERFILE: Final = "docker/api.Dockerfile"
#: What the build context leaves out: everything but the packages, the lock and the Dockerfile.
_BUILD_EXCLUDES: Final = (
    ".git",
    ".venv",
    ".cache",
    ".tools",
    ".walletlake",
    "cdk",
    "tests",
    "bench",
    "notebooks",
    "docs",
    "demo-output",
    # tools' caches: never the image's, and one written meanwhile (mypy's SQLite journal) would
    # vanish under the asset's copy
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    "**/__pycache__",
    "**/*.pyc",
)
#: Seconds a deregistered task keeps answering in-flight requests (the ALB's deregistration delay
#: and the container's stop timeout); the server drains within it.
DEREGISTRATION_DELAY_SECONDS: Final = 30
#: ``WALLETLAKE_DRAIN_SECONDS`` of the tasks: SIGTERM to exit, inside the stop timeout above.
DRAIN_SECONDS: Final = DEREGISTRATION_DELAY_SECONDS - 5
#: Who writes through the internal ALB are attributed to: it authenticates no one.
UNVERIFIED_ALB_PRINCIPAL: Final = "unverified:internal-alb"
#: The load balancer's idle timeout; the server's keep-alive is longer, so the balancer closes first.
IDLE_TIMEOUT_SECONDS: Final = 60
#: ``TMPDIR`` of a task that speaks TLS: where ``walletlake serve`` writes the key and certificate it
#: makes at start. The root filesystem is read-only; ``/dev/shm`` is the container's own memory
#: filesystem (writable by any user, gone with the task), so the key never touches a disk.
TLS_SCRATCH_DIR: Final = "/dev/shm"  # noqa: S108  # the server makes a private 0700 folder in it
#: Where ECR keeps image layers, which the tasks download through the S3 gateway endpoint ("Amazon
#: ECR interface VPC endpoints", Amazon ECR User Guide: the minimum S3 endpoint policy).
ECR_LAYER_BUCKET: Final = "prod-{region}-starport-layer-bucket"


@dataclasses.dataclass(frozen=True)
class ApiService:
    """The service and what the alarms, dashboard and outputs need of it."""

    vpc: ec2.Vpc
    cluster: ecs.Cluster
    service: ecs.FargateService
    task_role: iam.Role
    execution_role: iam.IRole
    log_group: logs.LogGroup
    scaling: ecs.ScalableTaskCount
    endpoint: str
    requests: cloudwatch.IMetric
    server_errors: cloudwatch.IMetric
    latency: cloudwatch.IMetric
    task_definition: ecs.FargateTaskDefinition
    lattice_service: lattice.CfnService | None
    lattice_role: iam.Role | None
    load_balancer: elbv2.ApplicationLoadBalancer | None


@dataclasses.dataclass(frozen=True)
class Network:
    """The fleet's VPC and its endpoints (their policies are set once the resources exist)."""

    vpc: ec2.Vpc
    gateways: dict[str, ec2.GatewayVpcEndpoint]
    interfaces: dict[str, ec2.InterfaceVpcEndpoint]


def build_network(scope: Construct, config: DeploymentConfig) -> Network:
    """Isolated subnets in ``api_azs`` AZs; gateway endpoints (DynamoDB, S3), interface ones (ECR, logs)."""
    vpc = ec2.Vpc(
        scope,
        "ApiVpc",
        max_azs=config.api_azs,
        nat_gateways=0,
        # Left as AWS creates it: nothing uses the default security group (every interface here
        # has its own), and restricting it takes a Node.js custom-resource function in the template
        # that is not walletlake's code and that the deploy check could not run as deployed.
        restrict_default_security_group=False,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="api", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=22)
        ],
        flow_logs={
            "rejected": ec2.FlowLogOptions(
                destination=ec2.FlowLogDestination.to_cloud_watch_logs(
                    logs.LogGroup(
                        scope,
                        "ApiVpcFlowLogs",
                        retention=log_retention(config.log_retention_days),
                        removal_policy=RemovalPolicy.DESTROY,
                    )
                ),
                traffic_type=ec2.FlowLogTrafficType.REJECT,
            )
        },
    )
    gateways = {
        "DynamoDbEndpoint": vpc.add_gateway_endpoint(
            "DynamoDbEndpoint", service=ec2.GatewayVpcEndpointAwsService.DYNAMODB
        ),
        "S3Endpoint": vpc.add_gateway_endpoint("S3Endpoint", service=ec2.GatewayVpcEndpointAwsService.S3),
    }
    interfaces = {
        name: vpc.add_interface_endpoint(name, service=service, private_dns_enabled=True)
        for name, service in (
            ("EcrApiEndpoint", ec2.InterfaceVpcEndpointAwsService.ECR),
            ("EcrDockerEndpoint", ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER),
            ("LogsEndpoint", ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS),
        )
    }
    return Network(vpc=vpc, gateways=gateways, interfaces=interfaces)


def _limit_endpoints(
    network: Network,
    *,
    table_arns: list[str],
    task_role: iam.IRole,
    execution_role: iam.IRole,
    repository_arn: str,
    log_group: logs.ILogGroup,
) -> None:
    """Each endpoint lets through only what the tasks do with this stack's resources.

    An endpoint policy is a filter on top of the callers' own policies ("Control access to VPC
    endpoints using endpoint policies", AWS PrivateLink Guide): DynamoDB, the task role's item
    actions on its tables (and the records' history indexes); ECR, the execution role's pull of
    the image's repository (and the authorization token, which has no resource); CloudWatch Logs,
    the execution role's writes to the tasks' log group; S3, the reads of ECR's layer bucket the
    pull makes (presigned by ECR, so no principal of this account signs them: the statement is
    bounded by its resource instead).
    """
    network.gateways["DynamoDbEndpoint"].add_to_policy(
        iam.PolicyStatement(
            principals=[iam.ArnPrincipal(task_role.role_arn)],
            actions=sorted({*TABLE_ACTIONS, *IDEMPOTENCY_ACTIONS, *HISTORY_ACTIONS, *OWNERS_ACTIONS}),
            resources=table_arns,
        )
    )
    network.gateways["S3Endpoint"].add_to_policy(
        iam.PolicyStatement(
            principals=[iam.AnyPrincipal()],
            actions=["s3:GetObject"],
            resources=[f"arn:{Aws.PARTITION}:s3:::{ECR_LAYER_BUCKET.format(region=Aws.REGION)}/*"],
        )
    )
    pull = iam.ArnPrincipal(execution_role.role_arn)
    for name in ("EcrApiEndpoint", "EcrDockerEndpoint"):
        endpoint = network.interfaces[name]
        endpoint.add_to_policy(
            iam.PolicyStatement(
                principals=[pull],
                actions=[
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                    "ecr:BatchCheckLayerAvailability",
                ],
                resources=[repository_arn],
            )
        )
        endpoint.add_to_policy(
            iam.PolicyStatement(principals=[pull], actions=["ecr:GetAuthorizationToken"], resources=["*"])
        )
    network.interfaces["LogsEndpoint"].add_to_policy(
        iam.PolicyStatement(
            principals=[pull],
            actions=["logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[log_group.log_group_arn, f"{log_group.log_group_arn}:log-stream:*"],
        )
    )


def _task_security_group(scope: Construct, config: DeploymentConfig, network: Network) -> ec2.SecurityGroup:
    """No egress but HTTPS to the endpoints: the interface ones in the VPC, the gateway ones' prefix
    lists when given (``dynamodb_prefix_list_id``, ``s3_prefix_list_id``), else HTTPS to any address,
    which the isolated subnets' routes (local and the gateway endpoints only) confine to them."""
    group = ec2.SecurityGroup(
        scope, "ApiTasks", vpc=network.vpc, description="walletlake API tasks", allow_all_outbound=False
    )
    group.add_egress_rule(
        ec2.Peer.ipv4(network.vpc.vpc_cidr_block), ec2.Port.tcp(443), "interface endpoints (ECR, logs)"
    )
    gateway_lists = [config.dynamodb_prefix_list_id, config.s3_prefix_list_id]
    if all(gateway_lists):
        for prefix_list in gateway_lists:
            assert prefix_list is not None
            group.add_egress_rule(ec2.Peer.prefix_list(prefix_list), ec2.Port.tcp(443), "gateway endpoint")
    else:
        group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "gateway endpoints (DynamoDB, S3): no other route"
        )
    return group


def build_api_service(
    scope: Construct,
    config: DeploymentConfig,
    table: dynamodb.Table,
    environment: dict[str, str],
    *,
    idempotency_table: dynamodb.Table,
    owners_table: dynamodb.Table,
    access_logs: AccessLogDestinations | None,
) -> ApiService:
    """The ECS service of ``walletlake serve`` tasks behind VPC Lattice (or an internal ALB)."""
    network = build_network(scope, config)
    vpc = network.vpc
    cluster = ecs.Cluster(scope, "ApiCluster", vpc=vpc, container_insights_v2=ecs.ContainerInsights.ENABLED)
    log_group = logs.LogGroup(
        scope,
        "ApiServiceLogs",
        retention=log_retention(config.log_retention_days),
        removal_policy=RemovalPolicy.RETAIN,
    )
    task_role = iam.Role(
        scope,
        "ApiTaskRole",
        assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
        description="walletlake API tasks: the write path's item actions on the table",
    )
    task_role.add_to_principal_policy(
        iam.PolicyStatement(actions=list(TABLE_ACTIONS), resources=[table.table_arn])
    )
    if table.encryption_key is not None:
        grant_key_via(task_role, table.encryption_key, "dynamodb", *TABLE_KEY_ACTIONS)
    task = ecs.FargateTaskDefinition(
        scope,
        "ApiTask",
        cpu=config.api_task_cpu,
        memory_limit_mib=config.api_task_memory_mb,
        task_role=task_role,
        runtime_platform=ecs.RuntimePlatform(
            cpu_architecture=ecs.CpuArchitecture.ARM64,
            operating_system_family=ecs.OperatingSystemFamily.LINUX,
        ),
    )
    image = ecr_assets.DockerImageAsset(
        scope,
        "ApiImage",
        directory=str(PROJECT_ROOT),
        file=DOCKERFILE,
        platform=ecr_assets.Platform.LINUX_ARM64,
        exclude=list(_BUILD_EXCLUDES),
    )
    workers = max(1, config.api_task_cpu // 1024)
    tls = environment.get(TLS_VARIABLE, DEFAULT_TLS) != "off"
    task.add_container(
        "api",
        image=ecs.ContainerImage.from_docker_image_asset(image),
        command=api_command(workers),
        environment={**environment, **({"TMPDIR": TLS_SCRATCH_DIR} if tls else {})},
        logging=ecs.LogDriver.aws_logs(stream_prefix="api", log_group=log_group),
        port_mappings=[ecs.PortMapping(container_port=CONTAINER_PORT, name=PORT_NAME)],
        health_check=ecs.HealthCheck(
            command=container_health_command(tls=tls),
            interval=Duration.seconds(10),
            timeout=Duration.seconds(5),
            retries=3,
            start_period=Duration.seconds(20),
        ),
        stop_timeout=Duration.seconds(DEREGISTRATION_DELAY_SECONDS),
        readonly_root_filesystem=True,
    )
    execution_role = task.obtain_execution_role()
    _limit_endpoints(
        network,
        table_arns=[
            table.table_arn,
            idempotency_table.table_arn,
            owners_table.table_arn,
            *index_arns(idempotency_table),
        ],
        task_role=task_role,
        execution_role=execution_role,
        repository_arn=image.repository.repository_arn,
        log_group=log_group,
    )
    security_group = _task_security_group(scope, config, network)
    service = ecs.FargateService(
        scope,
        "ApiService",
        cluster=cluster,
        task_definition=task,
        desired_count=config.api_min_tasks,
        min_healthy_percent=100,
        max_healthy_percent=200,
        circuit_breaker=ecs.DeploymentCircuitBreaker(enable=True, rollback=True),
        vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
        security_groups=[security_group],
        availability_zone_rebalancing=ecs.AvailabilityZoneRebalancing.ENABLED,
    )
    scaling = service.auto_scale_task_count(
        min_capacity=config.api_min_tasks, max_capacity=config.api_max_tasks
    )
    scaling.scale_on_cpu_utilization(
        "CpuTarget",
        target_utilization_percent=config.api_target_cpu_percent,
        scale_in_cooldown=Duration.minutes(5),
        scale_out_cooldown=Duration.minutes(1),
    )
    if config.api_front == "alb":
        front = _alb_front(scope, config, vpc, service, security_group, scaling)
    else:
        assert access_logs is not None
        front = build_lattice_front(scope, config, vpc, service, security_group, scaling, access_logs)
        assert front.lattice_service is not None
        assert task.default_container is not None
        # Set from the service's ARN token, outside environment_for: its ARN check cannot read a
        # token at synth (CloudFormation resolves it to arn:aws:vpc-lattice:...:service/svc-...).
        task.default_container.add_environment(LATTICE_SERVICE_ARN_VARIABLE, front.lattice_service.attr_arn)
    return ApiService(
        vpc=vpc,
        cluster=cluster,
        service=service,
        task_role=task_role,
        execution_role=execution_role,
        task_definition=task,
        log_group=log_group,
        scaling=scaling,
        endpoint=front.endpoint,
        requests=front.requests,
        server_errors=front.server_errors,
        latency=front.latency,
        lattice_service=front.lattice_service,
        lattice_role=front.lattice_role,
        load_balancer=front.load_balancer,
    )


def api_command(workers: int) -> list[str]:
    """The container's command: the server on all interfaces, one worker per vCPU."""
    return [
        "python",
        "-m",
        "walletlake.cli",
        "serve",
        "--host",
        "0.0.0.0",  # noqa: S104  # inside the task's own network namespace; the SG admits only the front
        "--port",
        str(CONTAINER_PORT),
        "--workers",
        str(workers),
    ]


def container_health_command(*, tls: bool) -> list[str]:
    """The container's health check: ``/healthz`` on loopback, over HTTPS when the server speaks it.

    Over TLS it checks no certificate, as Lattice does not: the task made its own at start.
    """
    if not tls:
        probe = f"urllib.request.urlopen('http://127.0.0.1:{CONTAINER_PORT}{HEALTH_PATH}', timeout=2)"
        return ["CMD", "python", "-c", f"import urllib.request; {probe}"]
    probe = (
        f"urllib.request.urlopen('https://127.0.0.1:{CONTAINER_PORT}{HEALTH_PATH}', timeout=2, "
        "context=ssl._create_unverified_context())"
    )
    return ["CMD", "python", "-c", f"import ssl, urllib.request; {probe}"]


def front_environment(config: DeploymentConfig) -> dict[str, str]:
    """What the API (tasks or function) is told about its front: whose identity it may believe, and
    that the operator routes (documents, counters) are not served through it.

    Behind Lattice the tasks trust ``x-amzn-lattice-identity`` (only Lattice reaches them: the
    security group admits its range alone) and speak HTTPS to it (:data:`TASK_TLS`: that header
    crosses the VPC); behind the internal ALB nothing verifies a caller, so
    writes are attributed to the fixed name :data:`UNVERIFIED_ALB_PRINCIPAL`; the Lambda function
    reads the IAM identity API Gateway verified from its event.
    """
    trust = {"lattice": "lattice", "alb": "none", "lambda": "apigateway"}[config.api_front]
    values: dict[str, object] = {"trust_front": trust, "admin_routes": False}
    if config.api_front in ("lattice", "lambda"):
        # The role map and the session-name rule the server enforces (403, nothing written), and
        # one JSON audit line per request on stdout (the tasks' or the function's encrypted log
        # group): every front that names its callers has the server check them again. The
        # Lattice service ARN is set from its token where the service is made (build_api_service).
        values["caller_permissions"] = config.caller_permissions
        values["caller_session_pattern"] = config.caller_session_pattern
        values["audit_log"] = "stdout"
    if config.api_front == "lattice":
        values["tls"] = TASK_TLS
    if config.api_front == "alb":
        values["default_principal"] = UNVERIFIED_ALB_PRINCIPAL
    if config.api_front != "lambda":
        values["drain_seconds"] = DRAIN_SECONDS
    return environment_for(**values)


def _alb_front(
    scope: Construct,
    config: DeploymentConfig,
    vpc: ec2.Vpc,
    service: ecs.FargateService,
    security_group: ec2.SecurityGroup,
    scaling: ecs.ScalableTaskCount,
) -> Front:
    """An internal ALB (reachable from inside the VPC only): cheaper, without IAM authentication."""
    balancer = elbv2.ApplicationLoadBalancer(
        scope,
        "ApiLoadBalancer",
        vpc=vpc,
        internet_facing=False,
        idle_timeout=Duration.seconds(IDLE_TIMEOUT_SECONDS),
    )
    listener = balancer.add_listener("Http", port=80, open=False)
    listener.connections.allow_from(ec2.Peer.ipv4(vpc.vpc_cidr_block), ec2.Port.tcp(80), "callers in the VPC")
    target_group = listener.add_targets(
        "ApiTargets",
        port=CONTAINER_PORT,
        protocol=elbv2.ApplicationProtocol.HTTP,
        targets=[service.load_balancer_target(container_name="api", container_port=CONTAINER_PORT)],
        health_check=elbv2.HealthCheck(
            path=HEALTH_PATH, interval=Duration.seconds(10), healthy_threshold_count=2
        ),
        deregistration_delay=Duration.seconds(DEREGISTRATION_DELAY_SECONDS),
    )
    scaling.scale_on_request_count(
        "RequestsPerTask",
        requests_per_target=config.api_requests_per_task_per_second * 60,
        target_group=target_group,
        scale_in_cooldown=Duration.minutes(5),
        scale_out_cooldown=Duration.minutes(1),
    )
    return Front(
        endpoint=balancer.load_balancer_dns_name,
        requests=balancer.metrics.request_count(statistic="Sum"),
        server_errors=balancer.metrics.http_code_target(
            elbv2.HttpCodeTarget.TARGET_5XX_COUNT, statistic="Sum"
        ),
        latency=balancer.metrics.target_response_time(statistic="p99"),
        load_balancer=balancer,
    )
