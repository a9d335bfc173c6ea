"""``python -m walletlake_cdk.deploy_check`` (what ``make deploy-check`` runs).

Synthesizes the app with real dependency layers (``lambda_deps=install``: the same pip step a
deploy uses, cached under ``.cache/``), and its low-load variant (``api_front=lambda``), starts an
embedded stack of its own on free loopback ports, runs
:func:`~walletlake_cdk.deploy_check.check.run_scenario` (the API task from its image's files, every
function, both state machines) and the variant's API function, and prints one line for the task
(image size, start time, memory against the task's, SIGTERM exit) and one per function: unzipped
size of code and layers against Lambda's 250 MB, cold import time, peak memory against the
function's ``MemorySize``, and the result. Exits 1 when anything failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from walletlake_cdk.assembly import build_app
from walletlake_cdk.deploy_check.assembly import CloudAssembly
from walletlake_cdk.deploy_check.check import (
    API_HANDLER,
    ContainerReport,
    DeployCheck,
    DeployCheckError,
    FunctionReport,
    run_scenario,
)
from walletlake_cdk.deploy_check.lattice_step import CHECK_CONTEXT
from walletlake_cdk.deploy_check.state_machines import Execution
from walletlake_cdk.lambda_code import PROJECT_ROOT


def synthesize(outdir: Path, **context: str) -> CloudAssembly:
    """The app as ``cdk deploy`` would synthesize it (real layers), into ``outdir``, with the check's
    callers (:data:`~walletlake_cdk.deploy_check.lattice_step.CHECK_CONTEXT`)."""
    app, stack = build_app({"lambda_deps": "install", **CHECK_CONTEXT, **context}, outdir=str(outdir))
    app.synth()
    return CloudAssembly(outdir, stack.stack_name)


def main(argv: list[str] | None = None) -> int:
    """Run the check and print the report."""
    parser = argparse.ArgumentParser(prog="make deploy-check", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--assembly", type=Path, help="an already synthesized cdk.out (built with real layers)"
    )
    arguments = parser.parse_args(argv)
    from walletlake.local import EmbeddedStack, patched_environ

    work = PROJECT_ROOT / ".cache" / "deploy-check"
    work.mkdir(parents=True, exist_ok=True)
    os.environ.pop("CDK_OUTDIR", None)
    print("synthesizing the app with real dependency layers …", flush=True)
    assembly = CloudAssembly(arguments.assembly) if arguments.assembly else synthesize(work / "cdk.out")
    print("… and its low-load variant (-c api_front=lambda) …", flush=True)
    lambda_variant = synthesize(work / "cdk.out-lambda-api", api_front="lambda")
    failure = None
    outcome: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="deploy-check-stack-") as data:
        print("starting an embedded stack …", flush=True)
        with EmbeddedStack(Path(data)) as stack, patched_environ(stack.environment()):
            check = DeployCheck(assembly, stack.environment(), work)
            variant = DeployCheck(lambda_variant, stack.environment(), work)
            try:
                outcome = run_scenario(check)
                check.stop_container()
                variant.provision()
                variant.api_step()
            except DeployCheckError as error:
                failure = str(error)
            finally:
                check.close()
                variant.close()
            api_function = [report for report in variant.reports() if report.handler == API_HANDLER]
            reports = [*check.reports(), *api_function]
    if check.container_report is not None:
        print(check.container_report.line())
    for report in reports:
        print(report.line())
    _print_lattice_step(outcome.get("lattice"))
    for name in ("hourly", "nightly"):
        execution = outcome.get(name)
        if isinstance(execution, Execution):
            states = " → ".join(execution.states_entered)
            print(f"{name} state machine: {execution.status}; states entered: {states}")
    if failure:
        print(f"deploy check FAILED: {failure}", file=sys.stderr)
    failed: list[FunctionReport | ContainerReport] = [report for report in reports if not report.passed]
    if check.container_report is None or not check.container_report.passed:
        failed.extend([check.container_report] if check.container_report else [])
    if failed and not failure:
        names = ", ".join(report.logical_id for report in failed)
        print(f"deploy check FAILED: {names}", file=sys.stderr)
    return 1 if failure or failed else 0


def _print_lattice_step(lattice: object) -> None:
    """The callers' answers, through the Lattice stand-in and straight to the task."""
    if isinstance(lattice, dict):
        answers = ", ".join(f"{case} {status}" for case, status in lattice.items() if isinstance(status, int))
        print(f"Lattice stand-in and the task's own checks: {answers}")


if __name__ == "__main__":
    raise SystemExit(main())
