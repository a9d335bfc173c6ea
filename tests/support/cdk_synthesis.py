"""The CDK app synthesized once per test process and context, for every module of tests/cdk.

A synthesis takes seconds of node (jsii) and cdk-nag; the modules of tests/cdk only read what it
wrote (the template, the assembly's manifest and messages, the nag reports), so one synthesis of a
context serves every module asking for it (``tests/cdk/conftest.py``'s ``synthesize`` fixture).
The modules that share syntheses run on one xdist worker (``tests/conftest.py``,
its ``pytest_xdist_make_scheduler``), so the whole folder synthesizes each context once.

Each reader gets its own copy of the template (:meth:`Synthesis.template`): a test that edits what
it read cannot change what another module reads.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from unittest import mock

import aws_cdk as cdk

from walletlake_cdk.assembly import build_app
from walletlake_cdk.config import DEFAULT_DEPLOYED_LAKE_FORMAT

#: The context of the tests' app: no dependency layers built (no pip), a fixed bucket, one caller
#: from one VPC through Lattice's prefix list (what the default ``api_front=lattice`` requires).
CONTEXT: Final = {
    "lambda_deps": "skip",
    "bucket_name": "walletlake-lake-test",
    "alarm_email": "oncall@example.com",
    "api_callers": "arn:aws:iam::123456789012:role/payments-api-caller",
    "caller_vpc_ids": "vpc-0123456789abcdef0",
    "lattice_prefix_list_id": "pl-0123456789abcdef0",
}
#: The defaults of the context keys the tests vary, so ``api_front=lattice`` given or left out is one
#: synthesis (``walletlake_cdk.config.DeploymentConfig``'s defaults).
_DEFAULTS: Final = {"api_front": "lattice", "lake_format": DEFAULT_DEPLOYED_LAKE_FORMAT}
#: What the CDK CLI would pass the app; the tests' syntheses run without any of it.
_CLI_VARIABLES: Final = ("CDK_OUTDIR", "CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION", "CDK_CONTEXT_JSON")


@dataclass(frozen=True)
class Synthesis:
    """One synthesized app: its cloud assembly and the name of the walletlake stack in it."""

    assembly: cdk.cx_api.CloudAssembly
    stack_name: str

    @property
    def directory(self) -> Path:
        return Path(self.assembly.directory)

    @property
    def template_path(self) -> Path:
        return self.directory / self.assembly.get_stack_by_name(self.stack_name).template_file

    def template(self) -> dict[str, Any]:
        """The stack's CloudFormation template, read afresh (the caller's own copy)."""
        template: dict[str, Any] = json.loads(self.template_path.read_text())
        return template


def synthesize_app(outdir: Path, **context: str) -> Synthesis:
    """The app of :data:`CONTEXT` and ``context`` synthesized into ``outdir``, with no CLI variables."""
    with mock.patch.dict(os.environ):
        for name in _CLI_VARIABLES:
            os.environ.pop(name, None)
        app, stack = build_app({**CONTEXT, **context}, outdir=str(outdir))
        assembly = app.synth()
    return Synthesis(assembly, stack.stack_name)


def context_key(**context: str) -> tuple[tuple[str, str], ...]:
    """What tells two syntheses apart: the whole context, the varied keys' defaults filled in."""
    return tuple(sorted({**_DEFAULTS, **CONTEXT, **context}.items()))
