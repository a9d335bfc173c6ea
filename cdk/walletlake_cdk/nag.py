"""Findings of the template checkers that were reviewed and accepted, each with its reason.

cdk-nag 2.x runs ``AwsSolutionsChecks`` as an Aspect; every suppression is scoped to one construct
and, for the IAM wildcard rule, to the exact wildcard it accepts (``appliesTo``), so a new
wildcard anywhere still fails synthesis. cfn-lint reads per-resource ignores from the resource's
``Metadata``; the only one is for a pattern CDK itself generates.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from aws_cdk import CfnResource
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import IConstruct

from contracts.audit_log import ACCESS_LOG_PREFIX
from contracts.lake_layout import ICEBERG_FOLDER
from walletlake_cdk.storage import ANALYST_RESULTS_PREFIX, ATHENA_RESULTS_PREFIX

_KMS_FAMILY_REASON = (
    "kms:GenerateDataKey* and kms:ReEncrypt* are the action families CDK grants for a customer-managed "
    "key used by DynamoDB and SQS; the statement's resource is the one data key, nothing else."
)
_LAKE_OBJECTS_REASON = (
    "Lake objects are named per batch and day at run time (lake/{table}/dt=YYYY-MM-DD/…), access-log "
    "objects per delivery (access-logs/lattice/…); each wildcard is limited to the lake prefix (or one "
    "table's prefix under it) or the access-log prefix of this one bucket."
)
_ATHENA_RESULTS_REASON = (
    "Athena writes one result object per query under the workgroup's own results prefix; the wildcard "
    "is limited to that prefix."
)
_ICEBERG_OBJECTS_REASON = (
    "The Iceberg tables' files and the landing log are named per batch, commit and day at run time "
    "(lake/iceberg/{table}/data|metadata/…, lake/_landed/{stream}/{shard}/…); each wildcard is limited "
    "to one of those prefixes of this one bucket."
)
#: A Distributed Map's child executions, with the partition, region and account as tokens or literals.
_CHILD_EXECUTIONS = "/^Resource::arn:.+:states:.+:execution:.*\\*$/"
_PYTHON_RUNTIME_REASON = (
    "The project targets Python 3.11 (pyproject requires-python) and the AWS-published layers it runs "
    "on (SDK for pandas, Powertools) are pinned for python3.11; a runtime bump is a project-wide change."
)


@dataclasses.dataclass(frozen=True)
class ReviewedConstructs:
    """The constructs whose findings were reviewed."""

    lake_prefix: str
    api_role: iam.IRole
    consumer_role: iam.IRole
    nightly_roles: tuple[iam.IRole, ...]
    state_machines: tuple[sfn.StateMachine, ...]
    analyst_policy: iam.ManagedPolicy
    failure_queue: sqs.Queue
    functions: tuple[lambda_.Function, ...]
    committer_role: iam.IRole | None = None
    optimizer_role: iam.IRole | None = None


def suppress_reviewed_findings(reviewed: ReviewedConstructs) -> None:
    """Attach each accepted finding, with its reason, to the construct it was found on."""
    lake_objects = _bucket_objects(reviewed.lake_prefix + "/")
    athena_results = _bucket_objects(ATHENA_RESULTS_PREFIX)
    kms_families = ["Action::kms:GenerateDataKey*", "Action::kms:ReEncrypt*"]

    _iam5(reviewed.api_role, _KMS_FAMILY_REASON, kms_families)
    _iam5(
        reviewed.api_role,
        "A wallet's history reads the ledger's Iceberg files (its metadata and data files, named by "
        "the catalog at run time); the wildcard is the ledger's folder of this one bucket, read only.",
        [_bucket_objects(f"{reviewed.lake_prefix}/{ICEBERG_FOLDER}/ledger/")],
    )
    _iam5(reviewed.consumer_role, _KMS_FAMILY_REASON, kms_families)
    _iam5(reviewed.consumer_role, _LAKE_OBJECTS_REASON, [lake_objects])
    iceberg_objects = _bucket_objects_regex(
        re.escape(reviewed.lake_prefix).replace("/", "\\/") + "\\/(iceberg|_landed)\\/.*"
    )
    _iam5(reviewed.consumer_role, _ICEBERG_OBJECTS_REASON, [iceberg_objects])
    for role in (reviewed.committer_role, reviewed.optimizer_role):
        if role is not None:
            _iam5(role, _KMS_FAMILY_REASON, kms_families)
            _iam5(role, _ICEBERG_OBJECTS_REASON, [iceberg_objects])
    if reviewed.committer_role is not None:
        _iam5(
            reviewed.committer_role,
            "The committer's own objects are named at run time: its tidy's cursor under "
            "lake/_committer/, and copies of landed files that fit no table under "
            "lake/_misfits/{table}/ (named after the landed file); each wildcard is limited to one "
            "of those prefixes of this one bucket.",
            [
                _bucket_objects_regex(
                    re.escape(reviewed.lake_prefix).replace("/", "\\/") + "\\/(_committer|_misfits)\\/.*"
                )
            ],
        )
    if reviewed.optimizer_role is not None:
        _iam5(
            reviewed.optimizer_role,
            "Glue's table optimizers write their run logs to log groups named /aws-glue/iceberg-<kind>/… "
            'that Glue creates (Glue\'s "Table optimization prerequisites"); the wildcard is limited to '
            "those log groups of this account and region.",
            [{"regex": "/^Resource::arn:.+:logs:.+:log-group:\\/aws-glue\\/iceberg-\\*:\\*$/"}],
        )
    _iam5(
        reviewed.consumer_role,
        "dynamodb:ListStreams, which the DynamoDB event source mapping needs, supports no resource-level "
        "permission (Service Authorization Reference), so its resource must be '*'.",
        ["Resource::*"],
    )
    # The nightly units write only their own tables' prefixes (snapshots; the day's outputs), each
    # a sub-prefix of the lake's: the same reviewed wildcard, narrower.
    own_tables = _bucket_objects_regex(
        re.escape(reviewed.lake_prefix).replace("/", "\\/")
        + "\\/(balance_snapshots|daily_balances|reconciliation|_reports\\/reconciliation"
        + "|iceberg\\/\\*\\/metadata)\\/"
    )
    for role in reviewed.nightly_roles:
        _iam5(role, _KMS_FAMILY_REASON, kms_families)
        _iam5(role, _LAKE_OBJECTS_REASON, [lake_objects, own_tables])
        _iam5(role, _ATHENA_RESULTS_REASON, [athena_results])
    # Analysts read the lake and the API's access logs (objects Lattice names per delivery under
    # access-logs/lattice/), and write only their own workgroup's results.
    _iam5(
        reviewed.analyst_policy,
        _LAKE_OBJECTS_REASON,
        [lake_objects, _bucket_objects(f"{ACCESS_LOG_PREFIX}/")],
    )
    _iam5(reviewed.analyst_policy, _ATHENA_RESULTS_REASON, [_bucket_objects(ANALYST_RESULTS_PREFIX)])
    for state_machine in reviewed.state_machines:
        _reviewed_state_machine(state_machine, lake_objects, athena_results, kms_families)
    NagSuppressions.add_resource_suppressions(
        reviewed.failure_queue,
        [
            NagPackSuppression(
                id="AwsSolutions-SQS3",
                reason="This queue is itself the dead-letter destination (OnFailure) of the stream event "
                "source mapping; a DLQ of the DLQ would only move the same metadata again.",
            )
        ],
    )
    for function in reviewed.functions:
        NagSuppressions.add_resource_suppressions(
            function, [NagPackSuppression(id="AwsSolutions-L1", reason=_PYTHON_RUNTIME_REASON)]
        )
    # W3005 "dependency already enforced by GetAtt": CDK adds DependsOn on a function's (or state
    # machine's) role policy next to the GetAtt of the role, so the policy exists before the first
    # invocation; the redundant half of that pair is CDK's, and harmless.
    for construct in (*reviewed.functions, *reviewed.state_machines):
        ignore_lint_checks(construct, "W3005")


def _reviewed_state_machine(
    state_machine: sfn.StateMachine,
    lake_objects: dict[str, str],
    athena_results: dict[str, str],
    kms_families: list[str],
) -> None:
    role = state_machine.role
    _iam5(
        role,
        "X-Ray tracing (required by AwsSolutions-SF2): xray:PutTraceSegments and related actions support no "
        "resource-level permission.",
        ["Resource::*"],
    )
    _iam5(
        role,
        "CDK's LambdaInvoke grants lambda:InvokeFunction on each unit function and its versions "
        "(<arn>:*); each is that one function.",
        [{"regex": "/^Resource::<[A-Za-z]+Function[0-9A-F]+\\.Arn>:\\*$/"}],
    )
    _iam5(role, _KMS_FAMILY_REASON, kms_families)
    _iam5(role, _LAKE_OBJECTS_REASON, [lake_objects])
    _iam5(role, _ATHENA_RESULTS_REASON, [athena_results])
    _iam5(
        state_machine,
        "A Distributed Map describes and stops its own child executions, whose names are generated at run "
        "time; CDK scopes the grant to executions of this one state machine.",
        [{"regex": _CHILD_EXECUTIONS}],
    )


def ignore_lint_checks(construct: IConstruct, *checks: str) -> None:
    """Tell cfn-lint to skip ``checks`` on the construct's CloudFormation resource."""
    resource = construct.node.default_child
    if not isinstance(resource, CfnResource):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource")
    resource.add_metadata("cfn-lint", {"config": {"ignore_checks": list(checks)}})


def _bucket_objects(prefix: str) -> dict[str, str]:
    """``appliesTo`` matcher for ``<LakeBucket….Arn>/{prefix}*`` (the bucket's logical id has a hash)."""
    escaped = re.escape(prefix).replace("/", "\\/")
    return {"regex": f"/^Resource::<LakeBucket[0-9A-F]+\\.Arn>\\/{escaped}\\*$/"}


def _bucket_objects_regex(pattern: str) -> dict[str, str]:
    """``appliesTo`` matcher for any object pattern of the lake bucket matching ``pattern``."""
    return {"regex": f"/^Resource::<LakeBucket[0-9A-F]+\\.Arn>\\/{pattern}\\*$/"}


def _iam5(construct: IConstruct, reason: str, applies_to: Sequence[str | dict[str, str]]) -> None:
    NagSuppressions.add_resource_suppressions(
        construct,
        [NagPackSuppression(id="AwsSolutions-IAM5", reason=reason, applies_to=applies_to)],
        apply_to_children=True,
    )


def suppress_api_service_findings(
    task_definition: IConstruct, execution_role: iam.IRole, lattice_role: iam.IRole | None, vpc: IConstruct
) -> None:
    """The API fleet's reviewed findings (``walletlake_cdk.api_service``)."""
    NagSuppressions.add_resource_suppressions(
        task_definition,
        [
            NagPackSuppression(
                id="AwsSolutions-ECS2",
                reason="The container's variables are the WALLETLAKE_* resource names and knobs every "
                "Lambda function also gets (contracts.settings); none is a secret, and the task role, "
                "not a variable, carries the credentials.",
            )
        ],
    )
    _iam5(
        execution_role,
        "ecr:GetAuthorizationToken, which ECS needs to pull the image, supports no resource-level "
        "permission (Service Authorization Reference), so its resource must be '*'; the other "
        "statements name the image repository and the log group.",
        ["Resource::*"],
    )
    if lattice_role is not None:
        NagSuppressions.add_resource_suppressions(
            lattice_role,
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM4",
                    reason="AmazonECSInfrastructureRolePolicyForVpcLattice is the policy ECS documents for "
                    "registering a service's tasks in a VPC Lattice target group; the role is assumable "
                    "by ecs.amazonaws.com only.",
                    applies_to=[
                        "Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonECSInfrastructureRolePolicyForVpcLattice"
                    ],
                )
            ],
        )
    NagSuppressions.add_resource_suppressions(
        vpc,
        [
            NagPackSuppression(
                id="CdkNagValidationFailure",
                reason="The interface endpoints' security groups admit HTTPS from the VPC's own CIDR block "
                "(a token at synth, so AwsSolutions-EC23 cannot evaluate it); nothing outside the VPC.",
            )
        ],
        apply_to_children=True,
    )
