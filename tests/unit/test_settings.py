"""Settings come from WALLETLAKE_* variables with docs/architecture.md's defaults, checked at cold start."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.settings import (
    BUCKET_VARIABLE,
    COMMIT_INTERVAL_SECONDS_VARIABLE,
    COMPACTION_UNIT_MINUTES_VARIABLE,
    DEFAULT_HOT_TTL_SECONDS,
    DEPLOYED_VARIABLES,
    ENVIRONMENT_VARIABLES,
    ICEBERG_WAREHOUSE_VARIABLE,
    LAKE_FORMAT_VARIABLE,
    LAMBDA_FUNCTION_VARIABLE,
    LEASE_TABLE_VARIABLE,
    SERVER_VARIABLES,
    SNAPSHOT_READ_UNITS_VARIABLE,
    SNAPSHOT_SEGMENTS_VARIABLE,
    UNLOAD_PREFIX_VARIABLE,
    VARIABLES,
    HandlerSettings,
    Settings,
    SettingsError,
    environment_for,
)

#: Every Lambda handler module with what the CDK app sets for its functions.
HANDLER_MODULES = {
    "walletlake.handlers.api": DEPLOYED_VARIABLES,
    "walletlake.handlers.stream": DEPLOYED_VARIABLES,
    "walletlake.handlers.compaction": (*DEPLOYED_VARIABLES, COMPACTION_UNIT_MINUTES_VARIABLE),
    "walletlake.handlers.nightly": (
        *DEPLOYED_VARIABLES,
        SNAPSHOT_SEGMENTS_VARIABLE,
        SNAPSHOT_READ_UNITS_VARIABLE,
        UNLOAD_PREFIX_VARIABLE,
    ),
    "walletlake.handlers.commit": (
        *DEPLOYED_VARIABLES,
        LAKE_FORMAT_VARIABLE,
        ICEBERG_WAREHOUSE_VARIABLE,
        COMMIT_INTERVAL_SECONDS_VARIABLE,
    ),
    "walletlake.handlers.lease": (*DEPLOYED_VARIABLES, LEASE_TABLE_VARIABLE),
}

#: Settings as a deployment would have them, every knob away from its default.
DEPLOYED = Settings(
    table="t",
    bucket="b",
    lake_prefix="p",
    glue_database="g",
    athena_workgroup="w",
    query_engine="athena",
    hot_ttl_seconds=60,
    compaction_unit_minutes=5,
    snapshot_segments=200,
    snapshot_read_units_per_second=60_000,
    unload_prefix="athena-results/unload/x",
    bind_host="0.0.0.0",
    drain_seconds=25,
    keep_alive_seconds=65,
    max_requests_in_flight=64,
    metrics_interval_seconds=30,
)


def test_defaults_match_the_architecture() -> None:
    # GIVEN no variables WHEN settings are read
    settings = Settings.from_env({})
    # THEN every default is the documented one, and with no local endpoint the engine is Athena
    assert settings.table == "wallets"
    assert settings.bucket == "walletlake-lake"
    assert settings.lake_prefix == "lake"
    assert settings.glue_database == "walletlake"
    assert settings.athena_workgroup == "walletlake"
    assert settings.query_engine == "athena"
    assert settings.hot_ttl_seconds == DEFAULT_HOT_TTL_SECONDS == 28_800
    assert settings.checkpoint_table == "walletlake-checkpoints"
    assert settings.region == "us-east-1"
    # AND the AWS jobs' knobs keep what the handlers did before they were settings
    assert settings.compaction_unit_minutes == 60
    assert settings.snapshot_segments == 4
    assert settings.snapshot_read_units_per_second is None  # unpaced
    assert settings.unload_prefix == "athena-results/unload/reconcile"
    # AND the server is safe on a laptop (loopback) and fits behind an ALB (idle timeout 60 s,
    # deregistration delay longer than the 25 s drain)
    assert settings.bind_host == "127.0.0.1"
    assert (settings.drain_seconds, settings.keep_alive_seconds) == (25, 65)
    assert (settings.max_requests_in_flight, settings.metrics_interval_seconds) == (128, 60)


def test_the_server_variables_are_the_serve_flags_defaults() -> None:
    settings = Settings.from_env(
        {
            "WALLETLAKE_BIND_HOST": "0.0.0.0",
            "WALLETLAKE_DRAIN_SECONDS": "3",
            "WALLETLAKE_KEEP_ALIVE_SECONDS": "4000",
            "WALLETLAKE_MAX_REQUESTS_IN_FLIGHT": "1",
            "WALLETLAKE_METRICS_INTERVAL_SECONDS": "0",
        }
    )
    assert (settings.bind_host, settings.drain_seconds, settings.keep_alive_seconds) == ("0.0.0.0", 3, 4000)
    assert (settings.max_requests_in_flight, settings.metrics_interval_seconds) == (1, 0)
    assert Settings.from_env({"WALLETLAKE_BIND_HOST": "::"}).bind_host == "::"
    assert Settings.from_env({"WALLETLAKE_BIND_HOST": "api.internal"}).bind_host == "api.internal"
    assert set(SERVER_VARIABLES) <= set(ENVIRONMENT_VARIABLES)


def test_a_local_s3_endpoint_selects_duckdb() -> None:
    assert Settings.from_env({"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:5000"}).query_engine == "duckdb"


def test_variables_override_defaults() -> None:
    settings = Settings.from_env(
        {
            "WALLETLAKE_TABLE": "t",
            "WALLETLAKE_LAKE_PREFIX": "/p/",
            "WALLETLAKE_HOT_TTL_SECONDS": "5",
            "WALLETLAKE_QUERY_ENGINE": "athena",
            "WALLETLAKE_COMPACTION_UNIT_MINUTES": "15",
            "WALLETLAKE_SNAPSHOT_SEGMENTS": "10000",
            "WALLETLAKE_SNAPSHOT_READ_UNITS_PER_SECOND": "2.5e4",
            "WALLETLAKE_UNLOAD_PREFIX": "/results/unload/",
            "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:5000",
            "AWS_DEFAULT_REGION": "eu-west-1",
        }
    )
    assert (settings.table, settings.lake_prefix, settings.hot_ttl_seconds) == ("t", "p", 5)
    assert (settings.query_engine, settings.region) == ("athena", "eu-west-1")
    assert (settings.compaction_unit_minutes, settings.snapshot_segments) == (15, 10_000)
    assert settings.snapshot_read_units_per_second == 25_000.0
    assert settings.unload_prefix == "results/unload"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WALLETLAKE_HOT_TTL_SECONDS", "8h"),
        ("WALLETLAKE_HOT_TTL_SECONDS", "0"),
        ("WALLETLAKE_HOT_TTL_SECONDS", "60\nWALLETLAKE_TABLE=x"),
        ("WALLETLAKE_QUERY_ENGINE", "spark"),
        ("WALLETLAKE_WRITES_IN_FLIGHT", "1001"),
        ("WALLETLAKE_LAKE_PREFIX", "/"),
        ("WALLETLAKE_COMPACTION_UNIT_MINUTES", "7"),
        ("WALLETLAKE_COMPACTION_UNIT_MINUTES", "1h"),
        ("WALLETLAKE_SNAPSHOT_SEGMENTS", "0"),
        ("WALLETLAKE_SNAPSHOT_SEGMENTS", "10001"),
        ("WALLETLAKE_SNAPSHOT_SEGMENTS", "4.5"),
        ("WALLETLAKE_SNAPSHOT_READ_UNITS_PER_SECOND", "0"),
        ("WALLETLAKE_SNAPSHOT_READ_UNITS_PER_SECOND", "-100"),
        ("WALLETLAKE_SNAPSHOT_READ_UNITS_PER_SECOND", "fast"),
        ("WALLETLAKE_SNAPSHOT_READ_UNITS_PER_SECOND", "inf"),
        ("WALLETLAKE_UNLOAD_PREFIX", "s3://bucket/unload"),
        ("WALLETLAKE_UNLOAD_PREFIX", "//"),
        ("WALLETLAKE_BIND_HOST", "0.0.0.0:8080"),
        ("WALLETLAKE_BIND_HOST", "a host"),
        ("WALLETLAKE_DRAIN_SECONDS", "2"),
        ("WALLETLAKE_DRAIN_SECONDS", "25s"),
        ("WALLETLAKE_KEEP_ALIVE_SECONDS", "0"),
        ("WALLETLAKE_KEEP_ALIVE_SECONDS", "4001"),
        ("WALLETLAKE_MAX_REQUESTS_IN_FLIGHT", "0"),
        ("WALLETLAKE_METRICS_INTERVAL_SECONDS", "-1"),
        ("WALLETLAKE_METRICS_INTERVAL_SECONDS", "1.5"),
    ],
)
def test_bad_values_are_refused_in_one_line_naming_variable_and_value(name: str, value: str) -> None:
    # WHEN a variable holds a value the code cannot use
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({name: value})
    # THEN the error is one line that starts with the variable and quotes the value
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{name} must be ")
    assert message.endswith(f", not {value!r}")


def test_required_variables_that_are_missing_or_empty_are_named_in_one_line() -> None:
    # GIVEN every deployed variable but the bucket (and the workgroup set empty)
    environment = DEPLOYED.to_env(DEPLOYED_VARIABLES)
    del environment[BUCKET_VARIABLE]
    # WHEN settings are read requiring them THEN the one missing is named
    with pytest.raises(SettingsError) as refused:
        Settings.from_env(environment, require=DEPLOYED_VARIABLES)
    assert str(refused.value) == "WALLETLAKE_BUCKET is required but not set"
    # AND an empty value counts as unset, and several are named together
    environment["WALLETLAKE_ATHENA_WORKGROUP"] = ""
    with pytest.raises(SettingsError) as refused:
        Settings.from_env(environment, require=DEPLOYED_VARIABLES)
    assert str(refused.value) == "WALLETLAKE_BUCKET, WALLETLAKE_ATHENA_WORKGROUP are required but not set"
    # AND a name that is no walletlake variable is a programming error, not a missing variable
    with pytest.raises(ValueError, match="not a walletlake variable: WALLETLAKE_TABEL"):
        Settings.from_env(environment, require=["WALLETLAKE_TABEL"])


def test_every_field_has_one_documented_variable_and_round_trips() -> None:
    # GIVEN the variable table
    fields = {field.name for field in dataclasses.fields(Settings)} - {"region"}  # the SDK's
    # THEN every field but the region is set by exactly one variable, and each is documented
    assert sorted(variable.field for variable in VARIABLES) == sorted(fields)
    assert list(ENVIRONMENT_VARIABLES) == [variable.name for variable in VARIABLES]
    assert all(name.startswith("WALLETLAKE_") for name in ENVIRONMENT_VARIABLES)
    # AND settings written as variables read back unchanged; an unpaced snapshot sets no variable
    assert Settings.from_env(DEPLOYED.to_env()) == DEPLOYED
    unpaced = DEPLOYED.replace(snapshot_read_units_per_second=None)
    assert SNAPSHOT_READ_UNITS_VARIABLE not in unpaced.to_env()
    assert Settings.from_env(unpaced.to_env()) == unpaced


def test_environment_for_checks_values_as_the_code_reads_them() -> None:
    # GIVEN the per-function values the CDK app writes
    assert environment_for(compaction_unit_minutes=5, snapshot_read_units_per_second=None) == {
        "WALLETLAKE_COMPACTION_UNIT_MINUTES": "5"
    }
    # THEN a value the function would refuse fails where it is written (the synth)
    with pytest.raises(SettingsError, match="WALLETLAKE_COMPACTION_UNIT_MINUTES must be one of"):
        environment_for(compaction_unit_minutes=7)
    # AND a field no variable sets is refused
    with pytest.raises(TypeError, match=r"Settings\.region"):
        environment_for(region="eu-west-1")


def test_handler_settings_are_read_at_construction_on_lambda_and_at_first_use_elsewhere() -> None:
    # GIVEN an environment missing the bucket
    environment = DEPLOYED.to_env(DEPLOYED_VARIABLES)
    del environment[BUCKET_VARIABLE]
    # WHEN a handler module's settings are built outside Lambda THEN nothing is read yet
    elsewhere = HandlerSettings(DEPLOYED_VARIABLES, environment)
    # AND the first use fails as Lambda's cold start would
    with pytest.raises(SettingsError, match="WALLETLAKE_BUCKET is required"):
        elsewhere()
    # WHEN they are built on Lambda THEN construction (the module's import) fails
    with pytest.raises(SettingsError, match="WALLETLAKE_BUCKET is required"):
        HandlerSettings(DEPLOYED_VARIABLES, {**environment, LAMBDA_FUNCTION_VARIABLE: "f"})
    # AND once read, settings do not change with the environment
    environment[BUCKET_VARIABLE] = "b"
    settings = HandlerSettings(DEPLOYED_VARIABLES, environment)
    first = settings()
    environment[BUCKET_VARIABLE] = "other"
    assert settings() is first
    assert first.bucket == "b"


def cold_start(module: str, environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Import ``module`` in a fresh interpreter on a Lambda-like environment, as the init phase does."""
    return subprocess.run(
        [sys.executable, "-c", f"import {module}"],
        env={
            "PATH": "/usr/bin:/bin",
            "AWS_DEFAULT_REGION": "us-east-1",
            LAMBDA_FUNCTION_VARIABLE: module.replace(".", "-"),
            **environment,
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_handler_module_is_listed() -> None:
    # GIVEN the modules of walletlake/handlers that hold Lambda entry points
    folder = Path(__file__).resolve().parents[2] / "walletlake" / "handlers"
    modules = {f"walletlake.handlers.{path.stem}" for path in folder.glob("*.py")} - {
        "walletlake.handlers.__init__",
        "walletlake.handlers.clients",
    }
    # THEN each is cold-started by the tests below
    assert modules == set(HANDLER_MODULES)


@pytest.mark.parametrize("module", sorted(HANDLER_MODULES))
def test_a_handler_module_fails_its_cold_start_naming_a_missing_variable(module: str) -> None:
    # GIVEN the environment its deployment sets, without the last variable it requires
    required = HANDLER_MODULES[module]
    environment = DEPLOYED.to_env(required)
    del environment[required[-1]]
    # WHEN Lambda imports the handler module
    failed = cold_start(module, environment)
    # THEN the import fails, its last line naming the variable
    assert failed.returncode != 0
    assert failed.stderr.strip().splitlines()[-1] == (
        f"contracts.setting_names.SettingsError: {required[-1]} is required but not set"
    )


@pytest.mark.parametrize("module", sorted(HANDLER_MODULES))
def test_a_handler_module_fails_its_cold_start_naming_a_malformed_variable(module: str) -> None:
    # GIVEN the environment its deployment sets, with an unusable TTL
    environment = {**DEPLOYED.to_env(HANDLER_MODULES[module]), "WALLETLAKE_HOT_TTL_SECONDS": "8h"}
    # WHEN Lambda imports the handler module THEN the import fails naming the variable and value
    failed = cold_start(module, environment)
    assert failed.returncode != 0
    assert failed.stderr.strip().splitlines()[-1] == (
        "contracts.setting_names.SettingsError: "
        "WALLETLAKE_HOT_TTL_SECONDS must be a positive integer, not '8h'"
    )


@pytest.mark.parametrize("module", sorted(HANDLER_MODULES))
def test_a_handler_module_starts_with_what_its_deployment_sets(module: str) -> None:
    # GIVEN exactly the variables its deployment sets WHEN Lambda imports it THEN it starts
    started = cold_start(module, DEPLOYED.to_env(HANDLER_MODULES[module]))
    assert started.returncode == 0, started.stderr


def test_an_idempotency_window_shorter_than_the_hot_ttl_is_refused_with_one_line() -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env(
            {"WALLETLAKE_HOT_TTL_SECONDS": "28800", "WALLETLAKE_IDEMPOTENCY_WINDOW_SECONDS": "3600"}
        )
    assert "\n" not in str(refused.value)
    assert "WALLETLAKE_IDEMPOTENCY_WINDOW_SECONDS (3600)" in str(refused.value)
    window = Settings.from_env({"WALLETLAKE_IDEMPOTENCY_WINDOW_SECONDS": "28800"})
    assert window.idempotency_window_seconds == 28_800
    assert Settings().idempotency_window_seconds == 172_800


def test_the_idempotency_table_is_named_by_its_variable_and_deployed_with_the_others() -> None:
    # GIVEN the variable WHEN settings are read THEN the write path's records go to that table
    assert Settings.from_env({"WALLETLAKE_IDEMPOTENCY_TABLE": "records-x"}).idempotency_table == "records-x"
    assert Settings().idempotency_table == "walletlake-idempotency"
    # AND every deployed process (the API tasks and function among them) is given it
    assert "WALLETLAKE_IDEMPOTENCY_TABLE" in DEPLOYED_VARIABLES
    assert Settings(idempotency_table="t").to_env(["WALLETLAKE_IDEMPOTENCY_TABLE"]) == {
        "WALLETLAKE_IDEMPOTENCY_TABLE": "t"
    }
