"""The deploy check: what the CDK app deploys, run from the files it ships, on the embedded stack.

The app is synthesized once per module with real dependency layers (the pip step a deploy runs,
cached under ``.cache/cdk``); every function is then imported and invoked by a fresh ``python -I
-S`` with only its code, its layers and the runtime's boto3 on ``sys.path``, and both state
machines run from their synthesized definitions on moto's ASL interpreter. The default app
deploys the Iceberg lake: the consumer gets tumbling-window events, the committer commits what
they landed, and the nightly machine snapshots and reconciles (no hourly compaction).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from contracts.audit_log import LATTICE_COLUMNS
from queries.reconciliation_runs import summary_key
from walletlake.local import EmbeddedStack
from walletlake_cdk import lambda_code
from walletlake_cdk.deploy_check.__main__ import synthesize
from walletlake_cdk.deploy_check.assembly import CloudAssembly, Layer
from walletlake_cdk.deploy_check.check import (
    API_HANDLER,
    COMMITTER_HANDLER,
    CONSUMER_HANDLER,
    DeployCheck,
    FunctionReport,
    http_api_event,
    run_scenario,
)
from walletlake_cdk.deploy_check.runtime import runtime_folder
from walletlake_cdk.deploy_check.sandbox import FunctionRunner, assemble, lambda_environment

ROOT = Path(__file__).resolve().parents[2]

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


def committed_ledger(check: DeployCheck) -> list[dict[str, Any]]:
    """The ledger table's rows as the Iceberg catalog serves them (what Athena would read)."""
    from lake.iceberg_catalog import load_table, open_catalog

    settings = check.local_settings()
    table = load_table(settings, "ledger", open_catalog(settings, boto3.Session(region_name=settings.region)))
    rows: list[dict[str, Any]] = (
        table.scan(selected_fields=("entry_id", "wallet_id", "wallet_version")).to_arrow().to_pylist()
    )
    return rows


def summary(check: DeployCheck, bucket: str, prefix: str) -> dict[str, Any]:
    body = check.client("s3").get_object(Bucket=bucket, Key=summary_key(prefix, TODAY))["Body"].read()
    found: dict[str, Any] = json.loads(body)
    return found


def test_every_deployed_function_runs_from_its_files_and_the_nightly_machine_succeeds(
    check: DeployCheck, scenario: dict[str, Any]
) -> None:
    # GIVEN the synthesized app (the Iceberg lake), run through the scenario production runs
    reports = {report.handler: report for report in check.reports()}
    # THEN every function of the template was invoked, never failed, and fits Lambda's limits
    assert set(reports) == {function.handler for function in check.functions}
    assert set(reports) == {
        CONSUMER_HANDLER,
        COMMITTER_HANDLER,
        "walletlake.handlers.nightly.plan_night_handler",
        "walletlake.handlers.nightly.snapshot_segment_handler",
        "walletlake.handlers.nightly.reconcile_plan_handler",
        "walletlake.handlers.nightly.reconcile_classify_handler",
    }
    assert API_HANDLER not in reports  # the write path is the fleet by default, not a function
    for report in reports.values():
        assert report.passed, report.line()
        assert report.unzipped_bytes < 250 * 2**20
        assert 0 < report.max_rss_mb < report.memory_mb
        assert report.import_seconds is not None
    # AND the API wrote through DynamoDB Local: the payee holds its deposit plus the transfer
    assert scenario["api"]["payee_balance"]["balance"] == "6250000"
    # AND no hourly compaction exists: Glue's optimizers compact the Iceberg tables
    assert "hourly" not in scenario
    assert not [name for name in check.assembly.state_machines() if name.startswith("Hourly")]
    # AND the nightly state machine ran the snapshot and the reconciliation, nothing else
    assert scenario["nightly"].status == "SUCCEEDED"
    # (the Parallel's two UNLOAD branches run at once: their order varies, so it is compared as a set)
    entered = list(scenario["nightly"].states_entered)
    assert set(entered[5:7]) == {"UnloadWallets", "UnloadTransfers"}
    assert [*entered[:5], "UNLOADS", *entered[7:]] == [
        "PlanNight",
        "SnapshotSegments",
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
    # AND the night's reconciliation found the lake exact
    settings = check.local_settings()
    night = summary(check, settings.bucket, settings.lake_prefix)
    assert night["ok"] is True
    # (4 entries of the API step, and the one deposit the Lattice step's callers were allowed)
    assert night["ledger_rows"] == 4 + 1


def test_the_consumer_lands_tumbling_window_batches_and_the_committer_commits_them(
    check: DeployCheck, scenario: dict[str, Any]
) -> None:
    # GIVEN the consumer's tumbling-window events (one per shard, each naming its shard)
    stream = scenario["stream"]
    assert stream["shards"]
    # THEN it answered each with the window's state and no failure
    assert all(answer == {"state": {}, "batchItemFailures": []} for answer in stream["answers"])
    # AND wrote one landing record per shard under the lake's landing log
    settings = check.local_settings()
    records = [key for key in stream["landed"] if key.startswith(f"{settings.lake_prefix}/_landed/")]
    assert len(records) == len(stream["shards"])
    # AND the committer, run from its own asset and layer with {"cycles": 1}, committed every row
    # they name (4 ledger entries and 2 wallets of the API step, the Lattice step's wallet and its
    # one deposit: every refused request wrote nothing)
    assert scenario["landed_rows"] == (4 + 2) + (1 + 1)
    assert scenario["commit"] == {"cycles": 1, "rows": scenario["landed_rows"]}
    committer = {report.handler: report for report in check.reports()}[COMMITTER_HANDLER]
    assert committer.passed, committer.line()
    # AND the ledger table serves each entry exactly once
    rows = committed_ledger(check)
    ours = {row["wallet_id"] for row in rows} & set(scenario["api"]["wallets"])
    assert ours == set(scenario["api"]["wallets"])
    mine = [row for row in rows if row["wallet_id"] in ours]
    assert len(mine) == len({row["entry_id"] for row in mine}) == 4
    # AND a second cycle commits nothing more (exactly once)
    assert check.commit_step(COMMITTER_HANDLER) == {"cycles": 1, "rows": 0}


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
    # AND the next request starts it again (what later steps rely on); /healthz answers the
    # health checks, which reach the task directly, and no caller: no route of the map is it, so
    # the front refuses it
    assert check.call("GET", "/healthz")["statusCode"] == 403
    assert check.container().request("GET", "/healthz")[0] == 200


def test_signed_callers_get_what_the_map_allows_and_the_task_refuses_what_lattice_did_not_vouch_for(
    scenario: dict[str, Any],
) -> None:
    # GIVEN the scenario's callers, through the Lattice stand-in (the template's auth policies)
    # and straight to the task (what a service with auth type NONE would deliver)
    lattice = scenario["lattice"]
    # THEN the named caller's operations are served, Lattice refuses what the map does not allow
    # (the reader's deposit, a role it does not name, unsigned, a forged signature)
    assert {name: lattice[name] for name in ("writer deposits", "reader reads")} == {
        "writer deposits": 204,
        "reader reads": 200,
    }
    # AND the owner's own views, as the task deploys them: its wallets and the wallet's history
    # (the step checks their contents: the one deposit, named as the writer's)
    assert (lattice["writer's wallets"], lattice["writer's history"]) == (200, 200)
    assert {
        lattice[name] for name in ("reader deposits", "stranger reads", "unsigned read", "forged signature")
    } == {403}
    # AND the task itself refuses every request Lattice did not vouch for, writing nothing
    assert lattice["direct: no Lattice header"] in (401, 403)
    assert lattice["direct: no identity"] == 401
    assert lattice["direct: anonymous"] == 401
    for name in (
        "reader's deposit, forged",
        "another Lattice service",
        "a machine's session",
        "stranger, forged",
    ):
        assert lattice[f"direct: {name}"] == 403, name
    # AND Lattice's access log names who asked what and why it was denied, in its own field names
    log = lattice["access_log"]
    assert [list(entry) for entry in log] == [[name for name, _ in LATTICE_COLUMNS]] * len(log)
    denied = {
        (entry["requestMethod"], entry["callerPrincipal"].rsplit("/", 2)[-2], entry["authDeniedReason"])
        for entry in log
        if entry["responseCode"] == 403 and entry["callerPrincipal"] != "-"
    }
    assert ("PUT", "walletlake-deploy-check-reader", "Service") in denied
    assert ("GET", "walletlake-deploy-check-stranger", "Network") in denied


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
    # fastapi, mangum and orjson; plus Powertools, which its handler has imported since),
    # built by the same pip step a deploy uses
    before = lambda_code.DependencySet(
        "api-as-shipped-before", ("fastapi", "mangum", "orjson", "aws-lambda-powertools")
    )
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
