"""``python -m walletlake_cdk.deploy_check`` (what ``make deploy-check`` runs).

Synthesizes the app with real dependency layers (``lambda_deps=install``: the same pip step a
deploy uses, cached under ``.cache/``), starts an embedded stack of its own on free loopback ports,
runs :func:`~walletlake_cdk.deploy_check.check.run_scenario`, and prints one line per function:
unzipped size of code and layers against Lambda's 250 MB, cold import time, peak memory against
the function's ``MemorySize``, and the result. Exits 1 when any function or state machine failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from walletlake_cdk.assembly import build_app
from walletlake_cdk.deploy_check.assembly import CloudAssembly
from walletlake_cdk.deploy_check.check import DeployCheck, DeployCheckError, run_scenario
from walletlake_cdk.lambda_code import PROJECT_ROOT


def synthesize(outdir: Path) -> CloudAssembly:
    """The app as ``cdk deploy`` would synthesize it (real layers), into ``outdir``."""
    app, stack = build_app({"lambda_deps": "install"}, outdir=str(outdir))
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
    with tempfile.TemporaryDirectory(prefix="deploy-check-stack-") as data:
        print("starting an embedded stack …", flush=True)
        with EmbeddedStack(Path(data)) as stack, patched_environ(stack.environment()):
            check = DeployCheck(assembly, stack.environment(), work)
            failure = None
            try:
                outcome = run_scenario(check)
            except DeployCheckError as error:
                failure, outcome = str(error), {}
            finally:
                check.close()
            reports = check.reports()
    for report in reports:
        print(report.line())
    for name in ("hourly", "nightly"):
        if name in outcome:
            execution = outcome[name]
            states = " → ".join(execution.states_entered)
            print(f"{name} state machine: {execution.status}; states entered: {states}")
    if failure:
        print(f"deploy check FAILED: {failure}", file=sys.stderr)
    failed = [report for report in reports if not report.passed]
    if failed and not failure:
        print(f"deploy check FAILED: {', '.join(report.logical_id for report in failed)}", file=sys.stderr)
    return 1 if failure or failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
