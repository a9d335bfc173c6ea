"""The write path on AWS: API Gateway HTTP API → Lambda (FastAPI through Mangum) → DynamoDB.

Authorization: the seed has no end users, but a money-moving API must not be open to the
internet. Its callers are services, so by default every route requires AWS IAM (SigV4): a caller
needs ``execute-api:Invoke`` on the API in its own policy and signs each request, and nothing
reaches Lambda unsigned. ``-c api_auth=jwt -c jwt_issuer=… -c jwt_audience=…`` swaps in a JWT
authorizer for callers holding OIDC tokens instead.

There is one ``$default`` route: the FastAPI app owns the routing (one definition of the
routes), API Gateway owns authentication, throttling and access logs.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from contracts import api_metrics
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.functions import FunctionAssets, PythonFunction, log_retention, python_function
from walletlake_cdk.storage import TABLE_KEY_ACTIONS, grant_key_via

#: The handler other modules export for Lambda (``walletlake/handlers/api.py``).
API_HANDLER: Final = "walletlake.handlers.api.handler"

#: What the write path does on the table, and nothing else: GetItem (a balance; a wallet claim or a
#: transaction item when a refusal did not return it) and TransactWriteItems, which IAM authorizes
#: per contained operation (Put of the transaction and claim items, Update of wallets,
#: ConditionCheck). Writes read nothing first, so BatchGetItem is not granted.
TABLE_ACTIONS: Final = (
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:ConditionCheckItem",
)

#: One compact JSON line per request (about 250 bytes; every byte is paid at ingestion).
ACCESS_LOG_FORMAT: Final = json.dumps(
    {
        "requestId": "$context.requestId",
        "ip": "$context.identity.sourceIp",
        "caller": "$context.identity.userArn",
        "time": "$context.requestTimeEpoch",
        "method": "$context.httpMethod",
        "path": "$context.path",
        "status": "$context.status",
        "bytes": "$context.responseLength",
        "latencyMs": "$context.responseLatency",
        "error": "$context.integrationErrorMessage",
    },
    separators=(",", ":"),
)


@dataclasses.dataclass(frozen=True)
class WriteApi:
    """The API, its stage and its function."""

    api: apigwv2.HttpApi
    stage: apigwv2.HttpStage
    handler: PythonFunction
    access_logs: logs.LogGroup


def build_write_api(
    scope: Construct,
    config: DeploymentConfig,
    assets: FunctionAssets,
    table: dynamodb.Table,
    environment: dict[str, str],
) -> WriteApi:
    """The HTTP API with IAM (or JWT) authorization, throttling and access logs."""
    handler = python_function(
        scope,
        "ApiFunction",
        config=config,
        assets=assets,
        handler=API_HANDLER,
        description="walletlake write path: FastAPI through Mangum",
        environment=environment,
        memory_mb=config.api_memory_mb,
        timeout=Duration.seconds(10),
        service=api_metrics.SERVICE,
        # Per-request INFO lines at 20,000 requests/s cost more than the compute; the access
        # log already records every request, and the write path logs what needs a human at WARN.
        application_log_level=lambda_.ApplicationLogLevel.WARN,
    )
    handler.role.add_to_principal_policy(
        iam.PolicyStatement(actions=list(TABLE_ACTIONS), resources=[table.table_arn])
    )
    if table.encryption_key is not None:
        grant_key_via(handler.role, table.encryption_key, "dynamodb", *TABLE_KEY_ACTIONS)

    api = apigwv2.HttpApi(
        scope,
        "WalletApi",
        description="walletlake write path",
        create_default_stage=False,
        default_integration=integrations.HttpLambdaIntegration(
            "ApiIntegration",
            handler.function,
            payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
        ),
        default_authorizer=_authorizer(config),
    )
    access_logs = logs.LogGroup(scope, "ApiAccessLogs", retention=log_retention(config.log_retention_days))
    stage = apigwv2.HttpStage(
        scope,
        "ApiStage",
        http_api=api,
        stage_name="$default",
        auto_deploy=True,
        detailed_metrics_enabled=True,
        throttle=apigwv2.ThrottleSettings(
            rate_limit=config.api_rate_limit, burst_limit=config.api_burst_limit
        ),
    )
    cfn_stage = stage.node.default_child
    assert isinstance(cfn_stage, apigwv2.CfnStage)
    cfn_stage.access_log_settings = apigwv2.CfnStage.AccessLogSettingsProperty(
        destination_arn=access_logs.log_group_arn, format=ACCESS_LOG_FORMAT
    )
    return WriteApi(api=api, stage=stage, handler=handler, access_logs=access_logs)


def _authorizer(config: DeploymentConfig) -> apigwv2.IHttpRouteAuthorizer:
    if config.api_auth == "jwt":
        assert config.jwt_issuer is not None  # checked by DeploymentConfig
        return authorizers.HttpJwtAuthorizer(
            "JwtAuthorizer", config.jwt_issuer, jwt_audience=list(config.jwt_audience)
        )
    return authorizers.HttpIamAuthorizer()
