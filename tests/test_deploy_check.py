"""The deploy check: what the CDK app deploys, run from the files it ships, on the embedded stack.

The app is synthesized once per module with real dependency layers (the pip step a deploy runs,
cached under ``.cache/cdk``); every function is then imported and invoked by a fresh ``python -I
-S`` with only its code, its layers and the runtime's boto3 on ``sys.path``, and both state
machines run from their synthesized definitions on moto's ASL interpreter.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("JSII_RUNTIME_PACKAGE_CACHE_ROOT", str(ROOT / ".cache" / "jsii"))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
sys.path.insert(0, str(ROOT / "cdk"))

from queries.reconciliation import summary_key  # noqa: E402
from walletlake.compaction_lease import acquire, release  # noqa: E402
from walletlake.local import EmbeddedStack, provision  # noqa: E402
from walletlake.nightly import run_nightly  # noqa: E402
from walletlake_cdk import lambda_code  # noqa: E402
from walletlake_cdk.deploy_check.__main__ import synthesize  # noqa: E402
from walletlake_cdk.deploy_check.assembly import CloudAssembly, Layer  # noqa: E402
from walletlake_cdk.deploy_check.check import (  # noqa: E402
    API_HANDLER,
    CONSUMER_HANDLER,
    DeployCheck,
    FunctionReport,
    http_api_event,
    run_scenario,
)
from walletlake_cdk.deploy_check.runtime import runtime_folder  # noqa: E402
from walletlake_cdk.deploy_check.sandbox import FunctionRunner, assemble, lambda_environment  # noqa: E402
from walletlake_cdk.nightly import COMPACTION_UNIT_HANDLER  # noqa: E402

pytestmark = [pytest.mark.stack, pytest.mark.slow]

TODAY = dt.datetime.now(dt.UTC).date()


@pytest.fixture(scope="module")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> CloudAssembly:
    for name in ("CDK_OUTDIR", "CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION", "CDK_CONTEXT_JSON"):
        os.environ.pop(name, None)
    # 16 snapshot segments instead of 200: the same definition, functions and code paths, a tenth
    # of the Distributed Map's child executions per night (`make deploy-check` runs the default).
    return synthesize(tmp_path_factory.mktemp("cdk.out"), snapshot_segments="16")


@pytest.fixture(scope="module")
def check(
    assembly: CloudAssembly, stack: EmbeddedStack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DeployCheck]:
    deploy_check = DeployCheck(assembly, stack.environment(), tmp_path_factory.mktemp("deploy-check"))
    yield deploy_check
    deploy_check.close()


@pytest.fixture(scope="module")
def scenario(check: DeployCheck) -> dict[str, Any]:
    return run_scenario(check, today=TODAY)


@pytest.fixture(scope="module")
def lambda_variant(
    stack: EmbeddedStack, tmp_path_factory: pytest.TempPathFactory, scenario: dict[str, Any]
) -> Iterator[DeployCheck]:
    """The low-load variant (``api_front=lambda``): the API as API Gateway + Lambda."""
    assembly = synthesize(tmp_path_factory.mktemp("cdk.out-lambda"), api_front="lambda")
    deploy_check = DeployCheck(assembly, stack.environment(), tmp_path_factory.mktemp("deploy-check-lambda"))
    yield deploy_check
    deploy_check.close()


def lake_objects(check: DeployCheck, bucket: str, prefix: str) -> list[str]:
    s3 = check.client("s3")
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.extend(item["Key"] for item in page.get("Contents", []))
    return keys


def ledger_rows(check: DeployCheck, bucket: str, prefix: str) -> list[dict[str, Any]]:
    s3 = check.client("s3")
    rows = []
    for key in lake_objects(check, bucket, f"{prefix}/ledger/dt={TODAY.isoformat()}/"):
        table = pq.read_table(io.BytesIO(s3.get_object(Bucket=bucket, Key=key)["Body"].read()))
        rows.extend(table.select(["entry_id", "wallet_id", "wallet_version", "balance_after"]).to_pylist())
    return rows


def summary(check: DeployCheck, bucket: str, prefix: str) -> dict[str, Any]:
    body = check.client("s3").get_object(Bucket=bucket, Key=summary_key(prefix, TODAY))["Body"].read()
    found: dict[str, Any] = json.loads(body)
    return found


def test_every_deployed_function_runs_from_its_files_and_both_state_machines_succeed(
    check: DeployCheck, scenario: dict[str, Any]
) -> None:
    # GIVEN the synthesized app, run through the scenario production runs
    reports = {report.handler: report for report in check.reports()}
    # THEN every function of the template was invoked, never failed, and fits Lambda's limits
    assert set(reports) == {function.handler for function in check.functions}
    assert len(reports) == 8
    assert API_HANDLER not in reports  # the write path is the fleet by default, not a function
    for report in reports.values():
        assert report.passed, report.line()
        assert report.unzipped_bytes < 250 * 2**20
        assert 0 < report.max_rss_mb < report.memory_mb
        assert report.import_seconds is not None
    # AND the API wrote through DynamoDB Local: the payee holds its deposit plus the transfer
    assert scenario["api"]["payee_balance"]["balance"] == "6250000"
    # AND the consumer landed the stream's batch in the lake
    assert any("/ledger/" in key for key in scenario["stream"]["landed"])
    # AND both state machines ran every state of their happy path, the lease taken and given back
    assert scenario["hourly"].states_entered[0] == "HourlyTakeLease"
    assert scenario["hourly"].states_entered[-2:] == ("HourlyReleaseLease", "HoursCompacted")
    assert scenario["nightly"].status == "SUCCEEDED"
    # (the Parallel's two UNLOAD branches run at once: their order varies, so it is compared as a set)
    entered = list(scenario["nightly"].states_entered)
    assert set(entered[9:11]) == {"UnloadWallets", "UnloadTransfers"}
    assert [*entered[:9], "UNLOADS", *entered[11:]] == [
        "PlanNight",
        "SnapshotSegments",
        "NightlyTakeLease",
        "NightlyPlanUnits",
        "NightlyCompactUnits",
        "NightlyReleaseLease",
        "PlanReconciliation",
        "ReconcileDays",
        "ReconcileQueries",
        "UNLOADS",
        "ClassifyDay",
        "DayOk",
        "DayReconciled",
        "ReportSuccess",
        "Reconciled",
    ]
    # AND Athena got the very UNLOAD statements the reconcile plan rendered
    assert len(scenario["athena_statements"]) == 2
    assert all(statement.startswith("UNLOAD (") for statement in scenario["athena_statements"])
    # AND the night's reconciliation found the lake exact, from a compacted lake
    settings = check.local_settings()
    night = summary(check, settings.bucket, settings.lake_prefix)
    assert night["ok"] is True
    assert night["ledger_rows"] == 4
    rows = ledger_rows(check, settings.bucket, settings.lake_prefix)
    assert len(rows) == len({row["entry_id"] for row in rows}) == 4


def test_the_api_task_serves_from_its_image_files_and_stops_cleanly_on_sigterm(
    check: DeployCheck, scenario: dict[str, Any]
) -> None:
    # GIVEN the API task, built from the Dockerfile and lock its image asset stages, which served
    # the scenario's requests
    assert check.container_report is not None
    # WHEN ECS stops it (SIGTERM)
    code = check.stop_container()
    # THEN it exits 0 well within the deregistration delay, within the task's memory, and every
    # locked distribution has a wheel for the task's ARM64 platform
    report = check.container_report
    assert code == 0
    assert report.passed, report.line()
    assert report.missing_arm64 == ()
    assert 0 < report.peak_rss_mb < report.memory_mb
    # AND the next request starts it again (what later steps rely on)
    assert check.call("GET", "/healthz")["statusCode"] == 200


def test_the_low_load_variant_serves_the_api_from_its_function(lambda_variant: DeployCheck) -> None:
    # GIVEN -c api_front=lambda: API Gateway + Lambda instead of the fleet
    lambda_variant.provision()
    # WHEN API Gateway events make the same movements
    answers = lambda_variant.api_step()
    # THEN the function, run from its files, wrote them to DynamoDB Local
    assert answers["payee_balance"]["balance"] == "6250000"
    (report,) = [report for report in lambda_variant.reports() if report.handler == API_HANDLER]
    assert report.passed, report.line()
    assert report.invocations == 7
    assert not lambda_variant.task_containers()


def test_the_api_layer_as_shipped_before_the_fix_fails_the_check(
    lambda_variant: DeployCheck, tmp_path: Path
) -> None:
    # GIVEN the API function with the layer it shipped with before the fix (kept by hand:
    # fastapi, mangum and orjson), built by the same pip step a deploy uses
    before = lambda_code.DependencySet("api-as-shipped-before", ("fastapi", "mangum", "orjson"))
    folder = lambda_code.dependency_layer_dir(before, "install")
    api = dataclasses.replace(
        lambda_variant.function(API_HANDLER), layers=(Layer(arn="before", folder=folder),)
    )
    filesystem = assemble(api, [folder], runtime_folder(), tmp_path)
    runner = FunctionRunner(
        api,
        filesystem,
        lambda_environment(api, filesystem, lambda_variant.stack_environment),
        log_dir=tmp_path,
    )
    try:
        # WHEN API Gateway sends it a request
        invocation = runner.invoke(http_api_event("GET", "/api/v1/wallets/x/balance", None))
    finally:
        runner.close()
    # THEN it cannot even import its handler, exactly as the issue saw it on AWS
    assert invocation.error == "Runtime.ImportModuleError"
    assert "No module named 'httptools'" in invocation.payload["errorMessage"]
    report = FunctionReport("ApiFunction", API_HANDLER, 1024, filesystem.unzipped_bytes, None, 0.0, 1, 1, "x")
    assert not report.passed
    assert "FAILED 1/1" in report.line()


def test_a_compaction_unit_killed_mid_run_is_retried_and_loses_nothing(
    check: DeployCheck, scenario: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN more movements landed in the lake since the scenario's night
    check.api_step()
    check.stream_step(CONSUMER_HANDLER)
    # AND the compaction unit's next execution environment dies (SIGKILL) once, after writing its
    # outputs and before deleting its inputs: the worst moment of its crash-safe protocol
    unit = check.runner(check.function(COMPACTION_UNIT_HANDLER))
    marker = tmp_path / "killed"
    unit.fault = lambda environment: environment.update(
        DEPLOY_CHECK_KILL_BEFORE="DeleteObjects", DEPLOY_CHECK_KILL_MARKER=str(marker)
    )
    unit.recycle()
    before = len(unit.invocations)
    try:
        # WHEN the nightly state machine runs the day again
        with check.step_functions() as machines:
            night = check.run_machine(machines, "Nightly", {"date": TODAY.isoformat()})
    finally:
        unit.fault = None
    # THEN the kill happened, Lambda reported it, the state's Retry ran the unit again
    assert marker.read_text() == "DeleteObjects"
    errors = [each.error for each in unit.invocations[before:] if not each.ok]
    assert errors == ["Runtime.ExitError"]
    assert night.status == "SUCCEEDED", (night.error, night.cause)
    # AND every entry is in the lake exactly once, each wallet's versions are 1..N
    settings = check.local_settings()
    rows = ledger_rows(check, settings.bucket, settings.lake_prefix)
    assert len(rows) == len({row["entry_id"] for row in rows}) == 8
    versions: dict[str, list[int]] = {}
    for row in rows:
        versions.setdefault(row["wallet_id"], []).append(row["wallet_version"])
    assert all(sorted(found) == list(range(1, len(found) + 1)) for found in versions.values())
    # AND the night reconciles clean
    assert summary(check, settings.bucket, settings.lake_prefix)["ok"] is True


def test_the_hourly_run_ends_while_another_run_holds_the_compaction_lease(
    check: DeployCheck, scenario: dict[str, Any]
) -> None:
    # GIVEN the nightly run holding the compaction lease
    settings = check.local_settings()
    dynamodb = check.client("dynamodb")
    now = dt.datetime.now(dt.UTC)
    acquire(dynamodb, settings.lease_table, owner="nightly-run", ttl_seconds=600, now=now)
    plans = len(check.runner(check.function("walletlake.compaction_handlers.plan_handler")).invocations)
    try:
        # WHEN the hourly state machine starts
        with check.step_functions() as machines:
            hourly = check.run_machine(machines, "Hourly", {"closed_hours_of": "today"})
    finally:
        released = release(dynamodb, settings.lease_table, owner="nightly-run")
    # THEN it ends without planning or compacting anything, and the lease stayed the nightly's
    assert hourly.status == "SUCCEEDED"
    assert hourly.states_entered == ("HourlyTakeLease", "HourlyLeaseBusy")
    assert (
        len(check.runner(check.function("walletlake.compaction_handlers.plan_handler")).invocations) == plans
    )
    assert released is True
    # AND a lease whose holder died (expired) does not stop the next run
    acquire(
        dynamodb, settings.lease_table, owner="dead-run", ttl_seconds=1, now=now - dt.timedelta(minutes=5)
    )
    with check.step_functions() as machines:
        after = check.run_machine(machines, "Hourly", {"closed_hours_of": "today"})
    assert after.states_entered[:2] == ("HourlyTakeLease", "HourlyPlanUnits")
    assert after.status == "SUCCEEDED"


def test_the_state_machine_night_finds_what_the_command_line_night_finds(
    check: DeployCheck, scenario: dict[str, Any]
) -> None:
    # GIVEN two more batches in the lake, the first of whose ledger objects is then lost: its
    # wallets' later versions have no earlier ones (a gap: the reconciliation's second pass, which
    # the classify function runs through Athena, must explain it)
    settings = check.local_settings()
    ledger_prefix = f"{settings.lake_prefix}/ledger/dt={TODAY.isoformat()}/"
    before = set(lake_objects(check, settings.bucket, ledger_prefix))
    payer, payee = check.api_step()["wallets"]
    check.stream_step(CONSUMER_HANDLER)
    first_batch = set(lake_objects(check, settings.bucket, ledger_prefix)) - before
    assert first_batch
    check.call("PUT", f"/api/v1/wallets/{payer}/transfer/{payee}/", {"amount": "5", "nonce": "n2"})
    check.stream_step(CONSUMER_HANDLER)
    s3 = check.client("s3")
    for key in first_batch:
        s3.delete_object(Bucket=settings.bucket, Key=key)
    # AND one more movement the stream has not delivered yet (the snapshot is ahead of the lake)
    check.call("PUT", f"/api/v1/wallets/{payee}/deposit/", {"amount": "7", "nonce": "late"})
    # AND a copy of the lake, object for object, in a second bucket
    copy = settings.replace(bucket=f"{settings.bucket}-cli", glue_database=f"{settings.glue_database}_cli")
    provision(copy, boto3.Session(region_name=settings.region))
    for key in lake_objects(check, settings.bucket, f"{settings.lake_prefix}/"):
        s3.copy_object(Bucket=copy.bucket, Key=key, CopySource={"Bucket": settings.bucket, "Key": key})
    calls = len(check.athena_api.calls)
    # WHEN the nightly state machine runs on the first and walletlake's own nightly on the copy
    with check.step_functions() as machines:
        night = check.run_machine(machines, "Nightly", {"date": TODAY.isoformat()})
    local = run_nightly(copy, TODAY)
    # THEN both found the same problems, counts and totals, from the same compacted ledger
    by_machine = summary(check, settings.bucket, settings.lake_prefix)
    by_cli = local["reconciliation"]
    for field in ("ok", "counts", "wallets", "ledger_rows", "checks", "totals", "findings"):
        assert by_machine[field] == by_cli[field], field
    # (entries this recent are still within the stream's delivery bound: the gap is "lagging",
    # not yet "missing", and the night passes)
    lagging = {finding["wallet_id"] for finding in by_machine["findings"] if finding["status"] == "lagging"}
    assert lagging == {payer, payee}
    assert by_machine["ok"] is True
    assert night.status == "SUCCEEDED"
    # AND the classify function asked Athena (here DuckDB behind Athena's API) for the gap's details
    assert "GetQueryResults" in check.athena_api.calls[calls:]
    details = {finding["wallet_id"]: finding["detail"] for finding in by_machine["findings"]}
    assert details[payer].startswith("2 versions absent from the lake: 1..2; the table is at version 3")
    assert details[payee].startswith("3 versions absent from the lake: 1..2, 4; the table is at version 4")
    machine_rows = ledger_rows(check, settings.bucket, settings.lake_prefix)
    cli_rows = ledger_rows(check, copy.bucket, copy.lake_prefix)
    assert sorted(machine_rows, key=lambda row: row["entry_id"]) == sorted(
        cli_rows, key=lambda row: row["entry_id"]
    )
    assert len(machine_rows) == len({row["entry_id"] for row in machine_rows})
