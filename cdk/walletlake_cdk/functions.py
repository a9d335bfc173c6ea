"""How every walletlake Lambda function is built: runtime, layers, logs, role and settings.

Each function gets its own role with no managed policy (only what its module grants it), its own
log group with a retention, and JSON logs whose platform lines (START/END/REPORT) are dropped:
at 20,000 requests/s those lines alone would cost more in CloudWatch Logs ingestion than the
API's Lambda compute (README, "What it costs").
"""

from __future__ import annotations

import dataclasses
import re
from typing import Final

from aws_cdk import Aws, Duration, RemovalPolicy, Size
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from contracts import lambda_metrics
from contracts.settings import (
    DEPLOYED_VARIABLES,
    ICEBERG_WAREHOUSE_VARIABLE,
    LAKE_FORMAT_VARIABLE,
    Settings,
)
from walletlake_cdk import lambda_code
from walletlake_cdk.config import DeploymentConfig

RUNTIME = lambda_.Runtime.PYTHON_3_11
ARCHITECTURE = lambda_.Architecture.X86_64


@dataclasses.dataclass
class FunctionAssets:
    """Code and layers shared by the functions (each asset is uploaded once).

    The layer a function gets is derived from its handler's imports
    (:func:`walletlake_cdk.lambda_code.function_packages`), shared by every function needing the
    same distributions.
    """

    scope: Construct
    config: DeploymentConfig
    code: lambda_.Code
    dependency_layers: dict[str, lambda_.LayerVersion] = dataclasses.field(default_factory=dict)

    def layers_for(self, handler: str) -> list[lambda_.ILayerVersion]:
        """The handler's layers: its dependency layer, if its imports need anything beyond the runtime."""
        packages = lambda_code.function_packages(handler)
        if packages.dependencies is None:
            return []
        return [self._dependency_layer(packages.dependencies)]

    def _dependency_layer(self, dependencies: lambda_code.DependencySet) -> lambda_.LayerVersion:
        if dependencies.name not in self.dependency_layers:
            words = "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", dependencies.name))
            self.dependency_layers[dependencies.name] = _dependency_layer(
                self.scope, f"Dependencies{words}", dependencies, self.config
            )
        return self.dependency_layers[dependencies.name]


def build_function_assets(scope: Construct, config: DeploymentConfig) -> FunctionAssets:
    """The project code asset; dependency layers are made per handler as functions ask for them."""
    return FunctionAssets(
        scope=scope, config=config, code=lambda_.Code.from_asset(str(lambda_code.project_code_dir()))
    )


def _dependency_layer(
    scope: Construct, construct_id: str, dependencies: lambda_code.DependencySet, config: DeploymentConfig
) -> lambda_.LayerVersion:
    folder = lambda_code.dependency_layer_dir(dependencies, config.lambda_deps)
    return lambda_.LayerVersion(
        scope,
        construct_id,
        code=lambda_.Code.from_asset(str(folder)),
        compatible_runtimes=[RUNTIME],
        compatible_architectures=[ARCHITECTURE],
        description=f"walletlake: {', '.join(dependencies.requirements())} for Amazon Linux 2"[:256],
    )


def settings_environment(settings: Settings, bucket_name: str) -> dict[str, str]:
    """The variables every function gets (:data:`~contracts.settings.DEPLOYED_VARIABLES`), plus
    the lake's format and, for the Iceberg lake, the catalog's warehouse.

    Written by :meth:`Settings.to_env`, so ``Settings.from_env()`` in the function reads back the
    deployed resources, on Athena; the handler modules require these at cold start. The Iceberg
    catalog is Glue's Iceberg REST endpoint in the function's region (the settings' default URI,
    so no variable), whose warehouse is the account's own catalog: its id, ``Aws.ACCOUNT_ID``.
    """
    names = [*DEPLOYED_VARIABLES, LAKE_FORMAT_VARIABLE]
    if settings.lake_format == "iceberg":
        names.append(ICEBERG_WAREHOUSE_VARIABLE)
    return settings.replace(
        bucket=bucket_name, query_engine="athena", iceberg_warehouse=Aws.ACCOUNT_ID
    ).to_env(names)


@dataclasses.dataclass(frozen=True)
class PythonFunction:
    """A function with its role and log group (alarms and grants need all three)."""

    function: lambda_.Function
    role: iam.Role
    log_group: logs.LogGroup


def python_function(
    scope: Construct,
    construct_id: str,
    *,
    config: DeploymentConfig,
    assets: FunctionAssets,
    handler: str,
    description: str,
    environment: dict[str, str],
    memory_mb: int,
    timeout: Duration,
    service: str,
    application_log_level: lambda_.ApplicationLogLevel = lambda_.ApplicationLogLevel.INFO,
    ephemeral_storage_mb: int = 512,
    reserved_concurrency: int | None = None,
) -> PythonFunction:
    """A Python 3.11 x86_64 function on the project's code with its own least-privilege role."""
    log_group = logs.LogGroup(
        scope,
        f"{construct_id}Logs",
        retention=log_retention(config.log_retention_days),
        removal_policy=RemovalPolicy.RETAIN,
    )
    role = iam.Role(
        scope,
        f"{construct_id}Role",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=f"walletlake {service}: only what its module grants",
    )
    log_group.grant_write(role)
    function = lambda_.Function(
        scope,
        construct_id,
        runtime=RUNTIME,
        architecture=ARCHITECTURE,
        code=assets.code,
        handler=handler,
        description=description,
        layers=assets.layers_for(handler),
        memory_size=memory_mb,
        reserved_concurrent_executions=reserved_concurrency,
        ephemeral_storage_size=Size.mebibytes(ephemeral_storage_mb),
        timeout=timeout,
        role=role,
        log_group=log_group,
        logging_format=lambda_.LoggingFormat.JSON,
        application_log_level_v2=application_log_level,
        system_log_level_v2=lambda_.SystemLogLevel.WARN,
        environment={
            **environment,
            "POWERTOOLS_SERVICE_NAME": service,
            "POWERTOOLS_METRICS_NAMESPACE": lambda_metrics.NAMESPACE,
        },
    )
    return PythonFunction(function=function, role=role, log_group=log_group)


#: CloudWatch Logs accepts a fixed set of retentions (in days), in this order.
_RETENTIONS: Final = (
    (1, "ONE_DAY"),
    (3, "THREE_DAYS"),
    (5, "FIVE_DAYS"),
    (7, "ONE_WEEK"),
    (14, "TWO_WEEKS"),
    (30, "ONE_MONTH"),
    (60, "TWO_MONTHS"),
    (90, "THREE_MONTHS"),
    (120, "FOUR_MONTHS"),
    (150, "FIVE_MONTHS"),
    (180, "SIX_MONTHS"),
    (365, "ONE_YEAR"),
    (400, "THIRTEEN_MONTHS"),
    (545, "EIGHTEEN_MONTHS"),
    (731, "TWO_YEARS"),
    (1096, "THREE_YEARS"),
    (1827, "FIVE_YEARS"),
    (2192, "SIX_YEARS"),
    (2557, "SEVEN_YEARS"),
    (2922, "EIGHT_YEARS"),
    (3288, "NINE_YEARS"),
    (3653, "TEN_YEARS"),
)


def log_retention(days: int) -> logs.RetentionDays:
    """The longest CloudWatch Logs retention not above ``days`` (at least one day)."""
    chosen = _RETENTIONS[0][1]
    for allowed, name in _RETENTIONS:
        if allowed <= days:
            chosen = name
    return logs.RetentionDays[chosen]
