"""The API fleet's VPC Lattice front: who may call, for what, from where, and the record of it.

One map (:class:`contracts.caller_permissions.CallerPermissions`, ``-c api_callers=…``) is enforced
twice, by Lattice here and by the server (``wallet/authorization.py``):

* **The service's auth policy** has one statement per role and operation: the role's ARN as the
  principal, the operation's routes as the service's resource paths
  (``arn:aws:vpc-lattice:<region>:<account>:service/<id>/<path>``), its method as a
  ``vpc-lattice-svcs:RequestMethod`` condition and the callers' VPCs as a
  ``vpc-lattice-svcs:SourceVpc`` condition ("Condition keys" and "Resource types" for auth policies,
  VPC Lattice User Guide, auth-policies.html). A deposit creates money: no role may deposit unless
  ``api_callers`` names it with ``deposit``.
* **The service network's auth policy** stays coarse, as the same guide advises (the network's
  policy as a guardrail, the fine-grained rules on the service): the named roles, authenticated.
  With ``AWS_IAM`` on both, a request needs an Allow from each; without a network policy every
  request is denied.
* **A caller's side**: AWS evaluates the caller's own identity policy too (an explicit allow of
  ``vpc-lattice-svcs:Invoke`` is required of an IAM principal), so the stack outputs, per role, the
  policy its owner attaches (:func:`caller_policy`) as JSON: a managed policy of this account could
  not be attached to a role of another.

Only the callers' VPCs are associated with the network: the API's own VPC calls nothing through
it, and Lattice's health checks reach the targets from Lattice's own addresses without any VPC
association (target groups, "Health checks", VPC Lattice User Guide). The tasks admit those
addresses by Lattice's AWS-managed prefix list (``com.amazonaws.<region>.vpc-lattice``; security
groups, VPC Lattice User Guide, security-groups.html), looked up by that name for the stack's
account and region (:func:`lattice_prefix_list_id`), or given as ``lattice_prefix_list_id``.

**Lattice to the tasks is HTTPS** (:data:`TARGET_PROTOCOL`): the target group and its health
checks, so the caller's identity header (``x-amzn-lattice-identity``) and every body are encrypted
on the hop inside the VPC too, not only between the caller and Lattice. The tasks terminate it
with a key and certificate each makes at start (``WALLETLAKE_TLS=self-signed``,
:data:`TASK_TLS`, ``walletlake/tls.py``): Lattice validates no target certificate, so a
self-signed one serves and nothing needs issuing, storing or rotating (VPC Lattice User Guide,
"Target groups in VPC Lattice", routing configuration:
https://docs.aws.amazon.com/vpc-lattice/latest/ug/target-groups.html). Same port as before
(:data:`CONTAINER_PORT`: the target group's, the container's mapping, ``serve --port`` and the
security group's ingress are the one constant); only the protocol on it changed. A deployment that
wants a CA-issued certificate on the task runs ``WALLETLAKE_TLS=files`` with the certificate
mounted (ACM Private CA); Lattice's side is the same.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Final

from aws_cdk import CfnOutput, Stack, Token
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_vpclattice as lattice
from constructs import Construct

from contracts.caller_permissions import OPERATIONS, ROUTES, CallerPermissions, Operation
from contracts.settings import TlsMode
from walletlake_cdk.config import LATTICE_PREFIX_LIST_REQUIRED, DeploymentConfig, DeploymentConfigError

#: The port ``walletlake serve`` listens on in the container.
CONTAINER_PORT: Final = 8080
PORT_NAME: Final = "api"
HEALTH_PATH: Final = "/healthz"
#: What Lattice speaks to the tasks, requests and health checks alike.
TARGET_PROTOCOL: Final = "HTTPS"
#: How the tasks behind Lattice get the certificate they present (``WALLETLAKE_TLS``).
TASK_TLS: Final[TlsMode] = "self-signed"
#: The action every auth policy and caller policy names.
INVOKE: Final = "vpc-lattice-svcs:Invoke"
#: Never an anonymous request, whatever else a statement says.
SIGNED_ONLY: Final = {"StringNotEqualsIgnoreCase": {"aws:PrincipalType": "anonymous"}}


@dataclasses.dataclass(frozen=True)
class Front:
    """What the front (Lattice or ALB) gives the service: its address and its metrics."""

    endpoint: str
    requests: cloudwatch.IMetric
    server_errors: cloudwatch.IMetric
    latency: cloudwatch.IMetric
    lattice_service: lattice.CfnService | None = None
    lattice_role: iam.Role | None = None
    load_balancer: elbv2.ApplicationLoadBalancer | None = None


@dataclasses.dataclass(frozen=True)
class AccessLogDestinations:
    """Where Lattice delivers the service's access logs (:mod:`walletlake_cdk.audit_trail`)."""

    s3_arn: str
    log_group_arn: str


def build_lattice_front(
    scope: Construct,
    config: DeploymentConfig,
    vpc: ec2.Vpc,
    service: ecs.FargateService,
    security_group: ec2.SecurityGroup,
    scaling: ecs.ScalableTaskCount,
    access_logs: AccessLogDestinations,
) -> Front:
    """A VPC Lattice service with per-role auth policies, its target group fed by ECS."""
    network = lattice.CfnServiceNetwork(scope, "ApiServiceNetwork", name="walletlake", auth_type="AWS_IAM")
    target_group = lattice.CfnTargetGroup(
        scope,
        "ApiTargetGroup",
        type="IP",
        name="walletlake-api",
        config=lattice.CfnTargetGroup.TargetGroupConfigProperty(
            vpc_identifier=vpc.vpc_id,
            port=CONTAINER_PORT,
            protocol=TARGET_PROTOCOL,
            protocol_version="HTTP1",
            ip_address_type="IPV4",
            health_check=lattice.CfnTargetGroup.HealthCheckConfigProperty(
                enabled=True,
                path=HEALTH_PATH,
                protocol=TARGET_PROTOCOL,
                protocol_version="HTTP1",
                health_check_interval_seconds=10,
                healthy_threshold_count=2,
                unhealthy_threshold_count=2,
            ),
        ),
    )
    api = lattice.CfnService(scope, "ApiLatticeService", name="walletlake-api", auth_type="AWS_IAM")
    lattice.CfnListener(
        scope,
        "ApiListener",
        service_identifier=api.attr_id,
        protocol="HTTPS",
        port=443,
        default_action=lattice.CfnListener.DefaultActionProperty(
            forward=lattice.CfnListener.ForwardProperty(
                target_groups=[
                    lattice.CfnListener.WeightedTargetGroupProperty(
                        target_group_identifier=target_group.attr_id, weight=100
                    )
                ]
            )
        ),
    )
    permissions = config.caller_permissions
    lattice.CfnAuthPolicy(
        scope,
        "ApiAuthPolicy",
        resource_identifier=api.attr_id,
        policy=service_auth_policy(permissions, api.attr_arn, config.caller_vpc_ids),
    )
    lattice.CfnAuthPolicy(
        scope,
        "ApiNetworkAuthPolicy",
        resource_identifier=network.attr_id,
        policy=network_auth_policy(permissions),
    )
    lattice.CfnServiceNetworkServiceAssociation(
        scope,
        "ApiServiceAssociation",
        service_identifier=api.attr_id,
        service_network_identifier=network.attr_id,
    )
    for index, caller_vpc in enumerate(config.caller_vpc_ids):
        lattice.CfnServiceNetworkVpcAssociation(
            scope,
            f"CallerVpcAssociation{index}",
            vpc_identifier=caller_vpc,
            service_network_identifier=network.attr_id,
        )
    # Every request the service saw, its auth policies' denials included (authDeniedReason), to S3
    # for the Athena table and to CloudWatch Logs for the on-call (walletlake_cdk.audit_trail).
    for name, destination in (("S3", access_logs.s3_arn), ("Logs", access_logs.log_group_arn)):
        lattice.CfnAccessLogSubscription(
            scope, f"ApiAccessLog{name}", resource_identifier=api.attr_id, destination_arn=destination
        )
    security_group.add_ingress_rule(
        ec2.Peer.prefix_list(lattice_prefix_list_id(scope, config)),
        ec2.Port.tcp(CONTAINER_PORT),
        "VPC Lattice (its managed prefix list) to the API tasks",
    )
    infrastructure = iam.Role(
        scope,
        "ApiLatticeInfrastructureRole",
        assumed_by=iam.ServicePrincipal("ecs.amazonaws.com"),
        description="lets ECS register the API tasks in the VPC Lattice target group",
        managed_policies=[
            iam.ManagedPolicy.from_aws_managed_policy_name("AmazonECSInfrastructureRolePolicyForVpcLattice")
        ],
    )
    cfn_service = service.node.default_child
    assert isinstance(cfn_service, ecs.CfnService)
    cfn_service.add_property_override(
        "VpcLatticeConfigurations",
        [
            {
                "RoleArn": infrastructure.role_arn,
                "TargetGroupArn": target_group.attr_arn,
                "PortName": PORT_NAME,
            }
        ],
    )
    _output_caller_policies(scope, permissions, api.attr_arn)
    CfnOutput(scope, "ApiServiceArn", value=api.attr_arn, description="the Lattice service callers invoke")
    _track_requests_per_task(scope, config, scaling, service, target_group.attr_arn)
    dimensions = {"Service": api.attr_arn}
    return Front(
        endpoint=api.attr_dns_entry_domain_name,
        requests=cloudwatch.Metric(
            namespace="AWS/VpcLattice",
            metric_name="TotalRequestCount",
            dimensions_map=dimensions,
            statistic="Sum",
        ),
        server_errors=cloudwatch.Metric(
            namespace="AWS/VpcLattice",
            metric_name="HTTPCode_5XX_Count",
            dimensions_map=dimensions,
            statistic="Sum",
        ),
        latency=cloudwatch.Metric(
            namespace="AWS/VpcLattice", metric_name="RequestTime", dimensions_map=dimensions, statistic="p99"
        ),
        lattice_service=api,
        lattice_role=infrastructure,
    )


def lattice_prefix_list_name(region: str) -> str:
    """The name of the region's AWS-managed prefix list of VPC Lattice's addresses."""
    return f"com.amazonaws.{region}.vpc-lattice"


def lattice_prefix_list_id(scope: Construct, config: DeploymentConfig) -> str:
    """The id of Lattice's managed prefix list: ``-c lattice_prefix_list_id``, else looked up by name.

    The lookup is a CDK context query (the CLI resolves it with the deployer's credentials and
    caches it in ``cdk.context.json``), so it needs the stack's account and region; an
    environment-agnostic stack without the override stops synthesis in one line.
    """
    if config.lattice_prefix_list_id is not None:
        return config.lattice_prefix_list_id
    stack = Stack.of(scope)
    if Token.is_unresolved(stack.account) or Token.is_unresolved(stack.region):
        raise DeploymentConfigError(LATTICE_PREFIX_LIST_REQUIRED)
    found = ec2.PrefixList.from_lookup(
        scope, "LatticePrefixList", prefix_list_name=lattice_prefix_list_name(stack.region)
    )
    return found.prefix_list_id


def operation_resources(service_arn: str, operation: Operation) -> list[str]:
    """The service's resource ARNs of an operation's routes (the service ARN, then the path)."""
    return [
        f"{service_arn}{path}"
        for route in ROUTES
        if route.operation == operation
        for path in route.lattice_paths
    ]


def operation_method(operation: Operation) -> str:
    """The one HTTP method of an operation's routes."""
    (method,) = {route.method for route in ROUTES if route.operation == operation}
    return method


def _statement_id(role_arn: str, operation: Operation, taken: set[str] | None = None) -> str:
    """``<RoleName><Operation>`` in letters and digits; a number appended when already ``taken``."""
    name = role_arn.rsplit("/", 1)[-1]
    base = re.sub(r"[^A-Za-z0-9]", "", f"{name.title()}{operation.title()}")
    sid, number = base, 1
    while taken is not None and sid in taken:
        number += 1
        sid = f"{base}{number}"
    if taken is not None:
        taken.add(sid)
    return sid


def service_auth_policy(
    permissions: CallerPermissions, service_arn: str, caller_vpc_ids: tuple[str, ...]
) -> dict[str, object]:
    """One Allow per role and operation: its routes, its method, from the callers' VPCs, signed.

    Nothing else is allowed: Lattice denies what no statement allows, so an operation a role was not
    named for (a deposit, by default) is refused before it reaches a task.

    Examples
    --------
    >>> permissions = CallerPermissions.parse("arn:aws:iam::111122223333:role/support=read")
    >>> service = "arn:aws:vpc-lattice:eu-west-1:111122223333:service/svc-1"
    >>> policy = service_auth_policy(permissions, service, ("vpc-1",))
    >>> [statement["Sid"] for statement in policy["Statement"]]
    ['SupportRead']
    """
    statements: list[dict[str, object]] = []
    taken: set[str] = set()
    for role_arn, operations in permissions.roles:
        for operation in OPERATIONS:
            if operation not in operations:
                continue
            statements.append(
                {
                    "Sid": _statement_id(role_arn, operation, taken),
                    "Effect": "Allow",
                    "Principal": {"AWS": role_arn},
                    "Action": INVOKE,
                    "Resource": operation_resources(service_arn, operation),
                    "Condition": {
                        "StringEquals": {
                            "vpc-lattice-svcs:RequestMethod": operation_method(operation),
                            "vpc-lattice-svcs:SourceVpc": list(caller_vpc_ids),
                        },
                        **SIGNED_ONLY,
                    },
                }
            )
    return _document(statements)


def network_auth_policy(permissions: CallerPermissions) -> dict[str, object]:
    """The network's guardrail: the named roles, authenticated; the service's policy decides the rest."""
    return _document(
        [
            {
                "Effect": "Allow",
                "Principal": {"AWS": list(permissions.role_arns)},
                "Action": INVOKE,
                "Resource": "*",
                "Condition": SIGNED_ONLY,
            }
        ]
    )


def caller_policy(permissions: CallerPermissions, role_arn: str, service_arn: str) -> dict[str, object]:
    """The identity policy ``role_arn``'s owner attaches: Invoke on exactly its operations' routes."""
    return _document(
        [
            {
                "Sid": _statement_id(role_arn, operation),
                "Effect": "Allow",
                "Action": INVOKE,
                "Resource": operation_resources(service_arn, operation),
                "Condition": {
                    "StringEquals": {"vpc-lattice-svcs:RequestMethod": operation_method(operation)}
                },
            }
            for operation in permissions.operations_of_role(role_arn)
        ]
    )


def _output_caller_policies(scope: Construct, permissions: CallerPermissions, service_arn: str) -> None:
    """``ApiCallerPolicy<n>``: the policy JSON of the n-th role of ``api_callers``, its role named."""
    stack = Stack.of(scope)
    for index, role_arn in enumerate(permissions.role_arns):
        CfnOutput(
            scope,
            f"ApiCallerPolicy{index}",
            description=f"identity policy for {role_arn} (attach it to that role)"[:1024],
            value=stack.to_json_string(caller_policy(permissions, role_arn, service_arn)),
        )


def _document(statements: list[dict[str, object]]) -> dict[str, object]:
    document: dict[str, object] = json.loads(json.dumps({"Version": "2012-10-17", "Statement": statements}))
    return document


def _track_requests_per_task(
    scope: Construct,
    config: DeploymentConfig,
    scaling: ecs.ScalableTaskCount,
    service: ecs.FargateService,
    target_group_arn: str,
) -> appscaling.CfnScalingPolicy:
    """Target tracking on Lattice requests per running task (metric math; CDK's L2 takes one metric).

    Lattice publishes ``TotalRequestCount`` per target group, not per target, so the policy divides
    it by Container Insights' ``RunningTaskCount`` (ALB's ``ALBRequestCountPerTarget`` does this
    itself: ``api_service._alb_front``).
    """
    target = scaling.node.find_child("Target")
    assert isinstance(target, appscaling.ScalableTarget)
    minute = 60
    query = appscaling.CfnScalingPolicy.TargetTrackingMetricDataQueryProperty
    stat = appscaling.CfnScalingPolicy.TargetTrackingMetricStatProperty
    metric = appscaling.CfnScalingPolicy.TargetTrackingMetricProperty
    dimension = appscaling.CfnScalingPolicy.TargetTrackingMetricDimensionProperty
    return appscaling.CfnScalingPolicy(
        scope,
        "ApiRequestsPerTask",
        policy_name="walletlake-api-requests-per-task",
        policy_type="TargetTrackingScaling",
        scaling_target_id=target.scalable_target_id,
        target_tracking_scaling_policy_configuration=appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
            target_value=config.api_requests_per_task_per_second * minute,
            scale_in_cooldown=300,
            scale_out_cooldown=60,
            customized_metric_specification=appscaling.CfnScalingPolicy.CustomizedMetricSpecificationProperty(
                metrics=[
                    query(
                        id="requests",
                        return_data=False,
                        metric_stat=stat(
                            stat="Sum",
                            metric=metric(
                                namespace="AWS/VpcLattice",
                                metric_name="TotalRequestCount",
                                dimensions=[dimension(name="TargetGroup", value=target_group_arn)],
                            ),
                        ),
                    ),
                    query(
                        id="tasks",
                        return_data=False,
                        metric_stat=stat(
                            stat="Average",
                            metric=metric(
                                namespace="ECS/ContainerInsights",
                                metric_name="RunningTaskCount",
                                dimensions=[
                                    dimension(name="ClusterName", value=service.cluster.cluster_name),
                                    dimension(name="ServiceName", value=service.service_name),
                                ],
                            ),
                        ),
                    ),
                    query(
                        id="per_task",
                        expression="requests / MAX([tasks, 1])",
                        label="requests per task per minute",
                        return_data=True,
                    ),
                ]
            ),
        ),
    )
