"""The CDK app's pure parts (context parsing, layer ARNs, code assets) and its context variants.

The variants (JWT authorizer, provisioned capacity) build only the construct they change in a
bare stack, which takes a second instead of a full synthesis.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Match, Template

from contracts.caller_permissions import DEFAULT_OPERATIONS
from contracts.settings import ENVIRONMENT_VARIABLES, Settings
from wallet.authorization import judge
from walletlake_cdk import lambda_code
from walletlake_cdk.api_service import front_environment
from walletlake_cdk.assembly import validation_failures
from walletlake_cdk.config import (
    CALLER_VPCS_REQUIRED,
    CALLERS_REQUIRED,
    DEFAULT_CALLER_SESSION_PATTERN,
    LATTICE_PREFIX_LIST_REQUIRED,
    SUBJECTS_NEED_JWT,
    DeploymentConfig,
    DeploymentConfigError,
)
from walletlake_cdk.functions import build_function_assets, log_retention, settings_environment
from walletlake_cdk.ledger_table import build_ledger_table
from walletlake_cdk.write_api import build_write_api

ROOT = Path(__file__).resolve().parents[2]

# --- context --------------------------------------------------------------------------------


CALLER = "arn:aws:iam::123456789012:role/payments-api-caller"
#: What the Lattice front requires besides its callers (a caller VPC, Lattice's prefix list).
LATTICE_DEFAULTS = {
    "api_callers": CALLER,
    "caller_vpc_ids": "vpc-0123456789abcdef0",
    "lattice_prefix_list_id": "pl-0123456789abcdef0",
}


def config_with_callers(get: Callable[[str], Any]) -> DeploymentConfig:
    """``DeploymentConfig.from_context`` with the Lattice front's required callers (unless given)."""
    return DeploymentConfig.from_context(lambda key: get(key) or LATTICE_DEFAULTS.get(key))


def test_the_tags_retention_is_a_context_value_checked_as_the_functions_read_it() -> None:
    from contracts.settings import SettingsError, environment_for

    # GIVEN -c audit_tag_retention_days=30, and a value the functions would refuse
    config = config_with_callers({"audit_tag_retention_days": "30"}.get)
    refused = config_with_callers({"audit_tag_retention_days": "1"}.get)
    # THEN the deployed settings carry it, and the refused one fails the synth in one line
    assert config.settings.audit_tag_retention_days == 30
    assert environment_for(audit_tag_retention_days=30) == {"WALLETLAKE_AUDIT_TAG_RETENTION_DAYS": "30"}
    with pytest.raises(
        SettingsError, match=r"WALLETLAKE_AUDIT_TAG_RETENTION_DAYS must be an integer in 2\.\.36500"
    ):
        environment_for(audit_tag_retention_days=refused.settings.audit_tag_retention_days)


def test_context_strings_become_typed_settings_and_names() -> None:
    # GIVEN context as the CDK CLI passes it (-c key=value gives strings)
    context = {
        "stream_batch_size": "500",
        "stream_max_record_age_hours": "6",
        "api_auth": "jwt",
        "jwt_issuer": "https://issuer.example.com/",
        "jwt_audience": "wallet-api, backoffice",
        "table_name": "wallets-staging",
        "lake_prefix": "/lake-staging/",
    }
    # WHEN the config is built
    config = config_with_callers(context.get)
    # THEN numbers are numbers, lists are split, names go into the shared settings
    assert config.stream_batch_size == 500
    assert config.stream_max_record_age_seconds == 6 * 3600
    assert config.jwt_audience == ("wallet-api", "backoffice")
    assert config.settings == Settings().replace(
        table="wallets-staging", lake_prefix="lake-staging", query_engine="athena"
    )


def test_defaults_are_the_documented_ones() -> None:
    # GIVEN no context at all
    config = config_with_callers(lambda key: None)
    # THEN the deployment is on-demand, IAM-authorized, and the consumer gives up well within 24 h
    assert config.billing_mode == "on_demand"
    assert config.api_auth == "iam"
    assert config.stream_max_record_age_hours < 24
    assert config.settings.table == Settings().table
    assert config.lambda_deps == "install"
    # AND the lake is Iceberg, read one batch per shard at a time, committed every 30 s
    assert config.lake_format == "iceberg"
    assert config.settings.lake_format == "iceberg"
    assert config.stream_parallelization == 1
    assert config.commit_interval_seconds == 30
    assert config.orphan_file_retention_days >= 1


def test_the_plain_parquet_lake_stays_deployable_with_its_own_parallelization() -> None:
    # GIVEN -c lake_format=parquet with two batches per shard
    config = config_with_callers({"lake_format": "parquet", "stream_parallelization": "2"}.get)
    # THEN it is accepted: only the Iceberg committer needs a shard's batches in order
    assert config.lake_format == "parquet"
    assert not config.iceberg
    assert config.stream_parallelization == 2


def test_iceberg_functions_name_the_format_and_the_accounts_catalog_as_warehouse() -> None:
    # GIVEN the deployed (Iceberg) settings
    environment = settings_environment(DeploymentConfig(api_front="alb").settings, "b")
    # THEN every function is told the format, and the warehouse is the account id (Glue's catalog)
    assert environment["WALLETLAKE_LAKE_FORMAT"] == "iceberg"
    assert environment["WALLETLAKE_ICEBERG_WAREHOUSE"].startswith("${Token[AWS.AccountId")
    assert "WALLETLAKE_ICEBERG_CATALOG_URI" not in environment


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"api_auth": "jwt"}, "jwt_issuer"),
        ({"stream_max_record_age_hours": "24"}, "24-hour retention"),
        ({"stream_batch_size": "lots"}, "stream_batch_size must be an integer"),
        ({"billing_mode": "reserved"}, "billing_mode"),
        ({"lambda_deps": "docker"}, "lambda_deps"),
        ({"stream_parallelization": "11"}, "stream_parallelization"),
        ({"snapshot_segments": "0"}, "snapshot_segments must be 1..10000"),
        ({"compaction_max_concurrency": "10001"}, "compaction_max_concurrency must be 1..10000"),
        ({"snapshot_read_units_per_second": "100"}, "at least one per segment"),
        ({"nightly_timeout_hours": "25"}, "nightly_timeout_hours"),
        ({"compaction_unit_minutes": "7"}, "compaction_unit_minutes must be one of"),
        ({"lake_format": "delta"}, "lake_format must be iceberg or parquet"),
        ({"stream_parallelization": "2"}, "must be 1 with lake_format=iceberg"),
        ({"commit_interval_seconds": "60"}, "commit_interval_seconds must be 5..50"),
        ({"orphan_file_retention_days": "0"}, "orphan_file_retention_days must be at least 1"),
    ],
)
def test_unusable_context_is_refused_naming_the_key(context: dict[str, str], message: str) -> None:
    # GIVEN a context value the app cannot deploy with
    # WHEN the config is built THEN it fails, naming what is wrong
    with pytest.raises(DeploymentConfigError, match=message):
        config_with_callers(context.get)


def test_function_environment_round_trips_through_settings() -> None:
    # GIVEN deployment settings with every name changed
    settings = Settings().replace(
        table="t", lake_prefix="p", glue_database="g", athena_workgroup="w", hot_ttl_seconds=60
    )
    # WHEN the functions' environment is built and read back the way the code reads it
    environment = settings_environment(settings, "b")
    # THEN the code sees exactly the deployed names, and only documented variables are used
    assert set(environment) <= set(ENVIRONMENT_VARIABLES)
    expected = settings.replace(bucket="b", query_engine="athena")
    if "WALLETLAKE_ICEBERG_WAREHOUSE" in environment:  # the account id (a token at synth)
        expected = expected.replace(iceberg_warehouse=environment["WALLETLAKE_ICEBERG_WAREHOUSE"])
    assert Settings.from_env(environment) == expected
    assert environment["WALLETLAKE_LAKE_FORMAT"] == settings.lake_format


# --- layers ---------------------------------------------------------------------------------


def test_each_handler_gets_what_its_imports_need_beyond_the_runtime() -> None:
    # GIVEN the deployed handlers
    # WHEN their packages are derived from their import closures
    api = lambda_code.function_packages("walletlake.handlers.api.handler")
    unit = lambda_code.function_packages("walletlake.handlers.compaction.unit_handler")
    classify = lambda_code.function_packages("walletlake.handlers.nightly.reconcile_classify_handler")
    consumer = lambda_code.function_packages("walletlake.handlers.stream.handler")
    committer = lambda_code.function_packages("walletlake.handlers.commit.handler")
    # THEN the API gets what wallet/dynamodb.py imports (the missing httptools and awscrt of the
    # hand-kept list), compaction gets DuckDB, and nothing ships boto3 (the runtime has it)
    assert api.dependencies is not None
    assert {"fastapi", "mangum", "orjson", "httptools", "awscrt"} <= set(api.dependencies.distributions)
    assert unit.dependencies is not None
    assert {"duckdb", "pyarrow", "numpy", "aws-lambda-powertools"} <= set(unit.dependencies.distributions)
    assert classify.dependencies is not None
    assert {"pandas", "awswrangler", "pyarrow"} <= set(classify.dependencies.distributions)
    # AND the DuckDB query engine, which deployed functions never select, is not shipped with them;
    # sqlglot is: the second pass on Athena reads the Iceberg tables FOR VERSION AS OF the night's
    # snapshots, which queries.time_travel writes into the SQL
    assert "duckdb" not in classify.dependencies.distributions
    assert "sqlglot" in classify.dependencies.distributions
    # AND the committer and the consumer get pyiceberg (the catalog) and pyarrow (footers, files)
    assert committer.dependencies is not None
    assert {"pyiceberg", "pyarrow"} <= set(committer.dependencies.distributions)
    assert consumer.dependencies is not None
    assert {"pyiceberg", "pyarrow"} <= set(consumer.dependencies.distributions)
    for packages in (api, unit, classify, consumer, committer):
        assert packages.dependencies is not None
        assert not set(packages.dependencies.distributions) & lambda_code.RUNTIME_DISTRIBUTIONS


def test_a_new_import_changes_the_handlers_layer(tmp_path: Path) -> None:
    # GIVEN a copy of the project where the consumer's module gained an import of a new package
    import shutil

    for package in lambda_code.PROJECT_PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package)
    batch = tmp_path / "stream_processor" / "batch.py"
    batch.write_text(batch.read_text() + "\n\ndef _late() -> None:\n    import duckdb  # noqa: F401\n")
    # WHEN the consumer's packages are derived from that copy
    packages = lambda_code.function_packages("walletlake.handlers.stream.handler", source_root=tmp_path)
    # THEN the new distribution is in its layer (a function-level import counts)
    assert packages.dependencies is not None
    assert "duckdb" in packages.dependencies.distributions


def test_an_import_no_distribution_provides_fails_the_synth(tmp_path: Path) -> None:
    import shutil

    for package in lambda_code.PROJECT_PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package)
    handler = tmp_path / "walletlake" / "handlers" / "compaction.py"
    handler.write_text(handler.read_text() + "\nimport not_a_real_package  # noqa: F401,E402\n")
    with pytest.raises(LookupError, match="not_a_real_package"):
        lambda_code.function_packages("walletlake.handlers.compaction.unit_handler", source_root=tmp_path)


def test_type_checking_imports_are_not_shipped(tmp_path: Path) -> None:
    from walletlake_cdk.handler_imports import imported_modules

    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import mypy_boto3_s3\n"
        "else:\n    import json\nfrom . import sibling\n"
    )
    assert imported_modules(source, "pkg.m") == {
        "typing",
        "typing.TYPE_CHECKING",
        "json",
        "pkg",
        "pkg.sibling",
    }


# --- code assets ----------------------------------------------------------------------------


def test_project_code_asset_holds_the_packages_and_is_content_addressed(tmp_path: Path) -> None:
    # GIVEN the project's sources
    # WHEN the code folder is built twice
    first = lambda_code.project_code_dir(cache_root=tmp_path)
    second = lambda_code.project_code_dir(cache_root=tmp_path)
    # THEN it is reused, holds every package (SQL files included) and no bytecode caches
    assert first == second
    assert sorted(path.name for path in first.iterdir()) == sorted(lambda_code.PROJECT_PACKAGES)
    assert (first / "contracts" / "wallets_table.py").read_text() == (
        ROOT / "contracts" / "wallets_table.py"
    ).read_text()
    assert {path.name for path in (first / "queries" / "sql").glob("*.sql")} == {
        path.name for path in (ROOT / "queries" / "sql").glob("*.sql")
    }
    assert not list(first.rglob("__pycache__"))


def test_dependency_layers_come_from_the_cache_without_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN pip must not run (no network in tests)
    def no_pip(*args: object, **kwargs: object) -> None:
        raise AssertionError("pip was run")

    monkeypatch.setattr(lambda_code, "pip_install_for_lambda", no_pip)
    api = lambda_code.function_packages("walletlake.handlers.api.handler").dependencies
    assert api is not None
    # WHEN the placeholder is asked for THEN it is a layer folder with no packages
    placeholder = lambda_code.dependency_layer_dir(api, "skip", cache_root=tmp_path)
    assert [path.name for path in (placeholder / "python").iterdir()] == ["README.txt"]
    # WHEN a populated cache exists for the same requirements THEN it is used as it is
    cached = lambda_code.dependency_cache_dir(api, cache_root=tmp_path)
    (cached / "python" / "fastapi").mkdir(parents=True)
    assert lambda_code.dependency_layer_dir(api, "install", cache_root=tmp_path) == cached


def test_dependency_pins_never_exceed_the_tested_versions() -> None:
    # GIVEN the API's third-party distributions, installed in this environment
    from importlib.metadata import version

    api = lambda_code.function_packages("walletlake.handlers.api.handler").dependencies
    assert api is not None
    # THEN the layer installs the tested version, or the newest older one Amazon Linux 2 can load
    assert f"fastapi<={version('fastapi')}" in api.requirements()


def test_pruning_keeps_what_pyarrow_links_and_drops_flight(tmp_path: Path) -> None:
    # GIVEN a layer folder shaped like pyarrow's wheel
    names = [
        "pyarrow/libarrow.so.2000",
        "pyarrow/libarrow_substrait.so.2000",
        "pyarrow/libarrow_python.so",
        "pyarrow/libarrow_python.so.2000",
        "pyarrow/libarrow_python.so.2000.0.0",
        "pyarrow/libarrow_flight.so.2000",
        "pyarrow/_flight.cpython-311-x86_64-linux-gnu.so",
        "pyarrow/tests/test_x.py",
        "pyarrow/include/arrow/api.h",
        "numpy/_core/tests/test_y.py",
        "pyarrow/lib.pyx",
    ]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x" * 10)
    # WHEN it is pruned
    freed = lambda_code.prune(tmp_path)
    # THEN only the loader's names of the libraries remain (Substrait is linked by every module)
    left = sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*") if path.is_file())
    assert left == [
        "pyarrow/libarrow.so.2000",
        "pyarrow/libarrow_python.so.2000",
        "pyarrow/libarrow_substrait.so.2000",
    ]
    assert freed == 80


# --- small pure helpers ---------------------------------------------------------------------


@pytest.mark.parametrize(("days", "expected"), [(90, "THREE_MONTHS"), (100, "THREE_MONTHS"), (0, "ONE_DAY")])
def test_log_retention_rounds_down_to_an_allowed_value(days: int, expected: str) -> None:
    assert log_retention(days) == cdk.aws_logs.RetentionDays[expected]


# --- context variants -----------------------------------------------------------------------


def test_provisioned_mode_scales_capacity_between_the_bounds() -> None:
    # GIVEN provisioned billing from context
    config = config_with_callers(
        {"billing_mode": "provisioned", "write_capacity": "1000", "max_write_capacity": "5000"}.get
    )
    stack = cdk.Stack(cdk.App(), "Provisioned")
    # WHEN the table is built
    build_ledger_table(stack, config, kms.Key(stack, "Key"))
    template = Template.from_stack(stack)
    # THEN it has provisioned throughput with target-tracking auto scaling up to the maximum
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "BillingMode": Match.absent(),
            "ProvisionedThroughput": {"ReadCapacityUnits": 2000, "WriteCapacityUnits": 1000},
        },
    )
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {"ScalableDimension": "dynamodb:table:WriteCapacityUnits", "MinCapacity": 1000, "MaxCapacity": 5000},
    )
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalingPolicy", 2)


def test_jwt_context_swaps_the_iam_authorizer_for_a_jwt_one() -> None:
    # GIVEN api_auth=jwt with an issuer and an audience
    config = config_with_callers(
        {
            "api_auth": "jwt",
            "jwt_issuer": "https://issuer.example.com/",
            "jwt_audience": "wallet-api",
            "lambda_deps": "skip",
        }.get
    )
    stack = cdk.Stack(cdk.App(), "Jwt")
    table = dynamodb.Table(
        stack, "Table", partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING)
    )
    # WHEN the API is built
    build_write_api(stack, config, build_function_assets(stack, config), table, {})
    template = Template.from_stack(stack)
    # THEN the route requires a JWT from that issuer for that audience
    template.has_resource_properties(
        "AWS::ApiGatewayV2::Route", {"RouteKey": "$default", "AuthorizationType": "JWT"}
    )
    template.has_resource_properties(
        "AWS::ApiGatewayV2::Authorizer",
        {
            "AuthorizerType": "JWT",
            "JwtConfiguration": {"Issuer": "https://issuer.example.com/", "Audience": ["wallet-api"]},
        },
    )


def test_warm_throughput_is_set_only_when_asked_for() -> None:
    # GIVEN an on-demand table pre-warmed for the seed's load
    config = config_with_callers({"warm_write_units_per_second": "120000"}.get)
    stack = cdk.Stack(cdk.App(), "Warm")
    # WHEN the table is built
    build_ledger_table(stack, config, kms.Key(stack, "Key"))
    # THEN its warm throughput is the requested writes, reads left to the default
    Template.from_stack(stack).has_resource_properties(
        "AWS::DynamoDB::Table",
        {"BillingMode": "PAY_PER_REQUEST", "WarmThroughput": {"WriteUnitsPerSecond": 120000}},
    )


def test_a_refused_synthesis_is_reported_one_line_per_construct(tmp_path: Path) -> None:
    # GIVEN CDK's validation report of a synthesis refused over an unsuppressed finding
    report = tmp_path / "validation-report.json"
    report.write_text(
        json.dumps(
            {
                "pluginReports": [
                    {
                        "violations": [
                            {
                                "ruleName": "Annotation::error-annotation",
                                "description": "AwsSolutions-S1: The S3 Bucket has no server access logs.",
                                "violatingConstructs": [{"constructPath": "WalletLake/Bucket/Resource"}],
                            }
                        ]
                    }
                ]
            }
        )
    )
    # WHEN it is summarized THEN each violation names its construct and rule
    assert validation_failures(report) == ["WalletLake/Bucket/Resource: AwsSolutions-S1"]


def test_every_unit_handler_the_state_machines_invoke_is_a_project_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib

    from walletlake_cdk import nightly

    # GIVEN the handler strings the unit functions are deployed with
    handlers = [value for name, value in vars(nightly).items() if name.endswith("_HANDLER")]
    assert len(handlers) == 7
    for handler in handlers:
        module_name, _, function_name = handler.rpartition(".")
        module = importlib.import_module(module_name)
        # THEN each names a function Lambda can call with (event, context)
        assert callable(getattr(module, function_name)), handler
    # AND planning the night reads its knobs from the environment the CDK app sets
    from support.lambda_context import FakeLambdaContext

    from walletlake.handlers import nightly as nightly_handlers

    environment = Settings(snapshot_segments=5, snapshot_read_units_per_second=1000).to_env(
        nightly_handlers.REQUIRED_VARIABLES
    )
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    night = importlib.reload(nightly_handlers).plan_night_handler({"date": "2026-11-20"}, FakeLambdaContext())
    assert night["date"] == "2026-11-20"
    assert [item["segment"] for item in night["segments"]] == [0, 1, 2, 3, 4]
    assert {item["max_read_units_per_second"] for item in night["segments"]} == {200.0}
    assert {item["snapshot_at"] for item in night["segments"]} == {night["snapshot_at"]}


def test_the_alb_front_is_internal_and_scales_on_requests_per_target() -> None:
    # GIVEN api_front=alb in a stack with a known region (three zones to spread over)
    from walletlake_cdk.api_service import CONTAINER_PORT, DEREGISTRATION_DELAY_SECONDS, build_api_service

    config = config_with_callers({"api_front": "alb", "lambda_deps": "skip"}.get)
    stack = cdk.Stack(cdk.App(), "Alb", env=cdk.Environment(account="123456789012", region="eu-west-1"))
    table = dynamodb.Table(
        stack, "T", partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING)
    )
    # WHEN the fleet is built
    built = build_api_service(
        stack,
        config,
        table,
        {"WALLETLAKE_TABLE": "wallets"},
        idempotency_table=table,
        owners_table=table,
        access_logs=None,
    )
    template = Template.from_stack(stack)
    # THEN an internal load balancer fronts it, with no Lattice service
    assert built.load_balancer is not None
    assert built.lattice_service is None
    template.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::LoadBalancer", {"Scheme": "internal", "Type": "application"}
    )
    template.resource_count_is("AWS::VpcLattice::Service", 0)
    # AND targets drain for the deregistration delay and are checked on /healthz
    template.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::TargetGroup",
        {
            "Port": CONTAINER_PORT,
            "HealthCheckPath": "/healthz",
            "TargetGroupAttributes": Match.array_with(
                [{"Key": "deregistration_delay.timeout_seconds", "Value": str(DEREGISTRATION_DELAY_SECONDS)}]
            ),
        },
    )
    # AND it scales on requests per target as well as on CPU
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "TargetTrackingScalingPolicyConfiguration": Match.object_like(
                {
                    "PredefinedMetricSpecification": Match.object_like(
                        {"PredefinedMetricType": "ALBRequestCountPerTarget"}
                    ),
                    "TargetValue": 1_400 * 60,
                }
            )
        },
    )


def test_a_fleet_needs_two_zones_and_a_fargate_size() -> None:
    with pytest.raises(DeploymentConfigError, match="api_azs"):
        config_with_callers({"api_azs": "1"}.get)
    with pytest.raises(DeploymentConfigError, match="api_task_cpu"):
        config_with_callers({"api_task_cpu": "3000"}.get)
    with pytest.raises(DeploymentConfigError, match="api_front"):
        config_with_callers({"api_front": "apigw"}.get)


def test_the_api_image_lock_holds_every_distribution_the_server_imports() -> None:
    # GIVEN the committed lock and what the command line's import closure needs today
    from walletlake_cdk import image_lock

    locked = {
        line.split("==")[0]
        for line in image_lock.LOCK_PATH.read_text().splitlines()
        if line and not line.startswith("#")
    }
    needed = {line.split("==")[0] for line in image_lock.locked_requirements()}
    # THEN nothing the server imports is missing from the image (regenerate with
    # `PYTHONPATH=cdk python -m walletlake_cdk.image_lock` when this fails)
    assert needed <= locked, sorted(needed - locked)
    assert {"fastapi", "uvicorn", "uvloop", "httptools", "awscrt", "boto3"} <= locked
    assert all(
        "==" in line for line in image_lock.LOCK_PATH.read_text().splitlines() if not line.startswith("#")
    )


def test_oidc_subjects_are_callers_of_the_jwt_front_only_and_judged_by_the_same_map() -> None:
    subject = "https://id.example.com/#alice"
    jwt = {
        "api_front": "lambda",
        "api_auth": "jwt",
        "jwt_issuer": "https://id.example.com/",
        "jwt_audience": "a",
    }
    # GIVEN a map naming an OIDC subject: the JWT front takes it, the others refuse it in one line
    config = DeploymentConfig.from_context({**jwt, "api_callers": f"{subject}=read"}.get)
    for front in ({"api_front": "lambda"}, {}):
        with pytest.raises(DeploymentConfigError) as refused:
            config_with_callers({**front, "api_callers": f"{subject}=read"}.get)
        assert str(refused.value) == SUBJECTS_NEED_JWT
    # WHEN the function judges requests with the settings it is deployed with
    settings = Settings.from_env(front_environment(config))

    def event(sub: str) -> dict[str, Any]:
        claims = {"iss": "https://id.example.com/", "sub": sub}
        return {"requestContext": {"authorizer": {"jwt": {"claims": claims}}}}

    path = "/api/v1/wallets/8a6e0804-2bd0-4672-b79d-d97027f9071a/balance"
    verdicts = [
        judge(settings.replace(caller_session_pattern=None), scope)
        for scope in (
            {"method": "GET", "path": path, "headers": [], "aws.event": event("alice")},
            {"method": "GET", "path": path, "headers": [], "aws.event": event("mallory")},
            {
                "method": "PUT",
                "path": path.replace("balance", "deposit"),
                "headers": [],
                "aws.event": event("alice"),
            },
        )
    ]
    # THEN the named subject reads, another subject is no caller, and the subject may not deposit
    assert [verdict and verdict.code for verdict in verdicts] == [
        None,
        "caller_not_permitted",
        "operation_not_permitted",
    ]


def test_behind_api_gateway_a_principal_of_the_account_not_named_may_not_deposit() -> None:
    # GIVEN the function's settings as deployed with the lambda front and a treasury role
    config = config_with_callers(
        {
            "api_front": "lambda",
            "api_callers": f"{CALLER}=read,arn:aws:iam::123456789012:role/treasury=deposit",
        }.get
    )
    settings = Settings.from_env(front_environment(config))

    def deposit(user_arn: str) -> dict[str, Any]:
        event = {"requestContext": {"authorizer": {"iam": {"userArn": user_arn}}}}
        path = "/api/v1/wallets/8a6e0804-2bd0-4672-b79d-d97027f9071a/deposit"
        return {"method": "PUT", "path": path, "headers": [], "aws.event": event}

    verdicts = {
        name: judge(settings, deposit(arn))
        for name, arn in {
            "any role of the account": "arn:aws:sts::123456789012:assumed-role/ops/alice@example.com",
            "the reader": "arn:aws:sts::123456789012:assumed-role/payments-api-caller/alice@example.com",
            "the treasury, no person": "arn:aws:sts::123456789012:assumed-role/treasury/i-0abc",
            "the treasury": "arn:aws:sts::123456789012:assumed-role/treasury/alice@example.com",
        }.items()
    }
    # THEN only the role named for deposits, in a person's session, may deposit
    assert {name: verdict and verdict.code for name, verdict in verdicts.items()} == {
        "any role of the account": "caller_not_permitted",
        "the reader": "operation_not_permitted",
        "the treasury, no person": "session_not_a_person",
        "the treasury": None,
    }


def test_the_lattice_front_admits_only_named_roles() -> None:
    # GIVEN no callers, a wildcard, an account root, a bad VPC id
    # THEN the Lattice front refuses each in one line; the ALB front (no verified caller) needs none
    with pytest.raises(DeploymentConfigError) as missing:
        DeploymentConfig.from_context({}.get)
    assert str(missing.value) == CALLERS_REQUIRED
    assert "-c api_callers=arn:" in str(missing.value)
    for callers in ("*", "arn:aws:iam::123456789012:root", "123456789012"):
        with pytest.raises(DeploymentConfigError, match="IAM role ARN"):
            DeploymentConfig.from_context({"api_callers": callers}.get)
    with pytest.raises(DeploymentConfigError, match="caller_vpc_ids"):
        config_with_callers({"caller_vpc_ids": "vpc-1"}.get)
    assert DeploymentConfig.from_context({"api_front": "alb"}.get).api_callers == ()
    with pytest.raises(DeploymentConfigError) as lambda_missing:
        DeploymentConfig.from_context({"api_front": "lambda"}.get)
    assert str(lambda_missing.value) == CALLERS_REQUIRED
    # AND two callers and two VPCs are read as lists
    config = config_with_callers(
        {"api_callers": f"{CALLER},{CALLER}-2", "caller_vpc_ids": "vpc-0123456789abcdef0, vpc-0a1b2c3d"}.get
    )
    assert config.api_callers == (CALLER, f"{CALLER}-2")
    assert config.caller_vpc_ids == ("vpc-0123456789abcdef0", "vpc-0a1b2c3d")


def test_the_lattice_front_reads_each_callers_operations_and_needs_its_vpcs_and_prefix_list() -> None:
    # GIVEN a role named for deposits and reads, and a bare one
    config = config_with_callers({"api_callers": f"{CALLER}=deposit+read,{CALLER}-2"}.get)
    # THEN the first may do exactly those, the bare one the defaults (never a deposit)
    permissions = config.caller_permissions
    assert permissions.operations_of_role(CALLER) == ("deposit", "read")
    assert permissions.operations_of_role(f"{CALLER}-2") == DEFAULT_OPERATIONS
    assert "deposit" not in DEFAULT_OPERATIONS
    assert permissions.roles_for("deposit") == (CALLER,)
    # AND an unknown operation, a session rule that is no expression, a missing VPC or prefix list,
    # a malformed prefix list id each stop synthesis with one line naming the option
    with pytest.raises(DeploymentConfigError, match="'withdraw' is not an operation"):
        config_with_callers({"api_callers": f"{CALLER}=withdraw"}.get)
    with pytest.raises(DeploymentConfigError, match="caller_session_pattern"):
        config_with_callers({"caller_session_pattern": "(unclosed"}.get)
    with pytest.raises(DeploymentConfigError) as no_vpc:
        DeploymentConfig.from_context(
            {"api_callers": CALLER, "lattice_prefix_list_id": "pl-0123456789abcdef0"}.get
        )
    assert str(no_vpc.value) == CALLER_VPCS_REQUIRED
    # (without lattice_prefix_list_id the app looks the list up when it knows the account and region)
    no_list = DeploymentConfig.from_context(
        {"api_callers": CALLER, "caller_vpc_ids": "vpc-0123456789abcdef0"}.get
    )
    assert no_list.lattice_prefix_list_id is None
    assert "com.amazonaws.<region>.vpc-lattice" in LATTICE_PREFIX_LIST_REQUIRED
    with pytest.raises(DeploymentConfigError, match="s3_prefix_list_id must be a prefix list id"):
        config_with_callers({"s3_prefix_list_id": "0.0.0.0/0"}.get)
    # AND the default session rule is an e-mail address: a person, not an SDK's or a task's default
    pattern = re.compile(DEFAULT_CALLER_SESSION_PATTERN)
    assert pattern.fullmatch("alice@example.com")
    assert pattern.fullmatch("a.b+treasury@bank.co.uk")
    for machine in ("botocore-session-1700000000", "aws-go-sdk-1700000000", "f3a9c1e0b4d4f6e8a7b2"):
        assert not pattern.fullmatch(machine), machine


def test_the_idempotency_table_name_comes_from_context() -> None:
    assert config_with_callers(
        {"idempotency_table_name": "records-staging"}.get
    ).settings.idempotency_table == ("records-staging")
    assert config_with_callers({}.get).settings.idempotency_table == Settings().idempotency_table
