"""Build and synthesize the CDK app (``cdk/app.py`` and the tests both come through here)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Final

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from walletlake_cdk.config import DeploymentConfig, DeploymentConfigError
from walletlake_cdk.stack import WalletLakeStack

CDK_DIR: Final = Path(__file__).resolve().parents[1]
DEFAULT_STACK_NAME: Final = "WalletLake"


def cdk_json_context(cdk_json: Path = CDK_DIR / "cdk.json") -> dict[str, Any]:
    """The ``context`` of ``cdk.json`` (feature flags and defaults), so ``python cdk/app.py``
    synthesizes exactly what ``npx cdk synth`` does."""
    context: dict[str, Any] = json.loads(cdk_json.read_text()).get("context", {})
    return context


def build_app(
    context: dict[str, Any] | None = None, outdir: str | None = None
) -> tuple[cdk.App, WalletLakeStack]:
    """The app with the walletlake stack and cdk-nag's AwsSolutions checks applied.

    ``context`` adds to (and overrides) ``cdk.json``'s; context given to the CDK CLI with ``-c``
    overrides both. ``outdir`` is used only when ``CDK_OUTDIR`` is unset.
    """
    app_kwargs: dict[str, Any] = {"context": {**cdk_json_context(), **(context or {})}}
    if not os.environ.get("CDK_OUTDIR"):
        app_kwargs["outdir"] = outdir or str(CDK_DIR / "cdk.out")
    app = cdk.App(**app_kwargs)
    config = DeploymentConfig.from_context(app.node.try_get_context)
    account = os.environ.get("CDK_DEFAULT_ACCOUNT")
    region = os.environ.get("CDK_DEFAULT_REGION")
    stack = WalletLakeStack(
        app,
        app.node.try_get_context("stack_name") or DEFAULT_STACK_NAME,
        config=config,
        env=cdk.Environment(account=account, region=region) if account or region else None,
    )
    cdk.Tags.of(app).add("project", "walletlake")
    cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    return app, stack


def error_messages(assembly: cdk.cx_api.CloudAssembly) -> list[str]:
    """Every error annotation (cdk-nag findings left unsuppressed, invalid constructs) in the assembly."""
    found: list[str] = []
    for artifact in assembly.stacks:
        for message in artifact.messages:
            if message.level == cdk.cx_api.SynthesisMessageLevel.ERROR:
                found.append(f"{message.id}: {message.entry.data}")
    return found


def validation_failures(report: Path) -> list[str]:
    """One line per violation of CDK's validation report (what ``synth`` refused to emit)."""
    found: list[str] = []
    for plugin in json.loads(report.read_text()).get("pluginReports", []):
        for violation in plugin.get("violations", []):
            rule = violation.get("description", violation.get("ruleName", "")).split(": ", 1)[0]
            for construct in violation.get("violatingConstructs", []):
                found.append(f"{construct.get('constructPath')}: {rule}")
    return found


def main() -> int:
    """Synthesize; fail when anything left an error annotation (or, in one line, on a bad context value)."""
    try:
        app, _ = build_app()
    except DeploymentConfigError as refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    try:
        assembly = app.synth()
    except RuntimeError as refused:
        # With the app's feature flags, error annotations (unsuppressed cdk-nag findings) make
        # synth refuse to write the assembly; it leaves a validation report instead.
        report = Path(app.outdir) / "validation-report.json"
        if "ValidationFailed" not in str(refused) or not report.is_file():
            raise
        for line in validation_failures(report):
            print(f"error: {line}", file=sys.stderr)
        print(f"synthesis refused; full report: {report}", file=sys.stderr)
        return 1
    errors = error_messages(assembly)
    for message in errors:
        print(f"error: {message}", file=sys.stderr)
    if errors:
        print(f"{len(errors)} error annotation(s); see above", file=sys.stderr)
        return 1
    print(f"synthesized {', '.join(stack.stack_name for stack in assembly.stacks)} into {assembly.directory}")
    return 0
