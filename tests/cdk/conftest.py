"""The CDK app's tests: they import ``walletlake_cdk`` (from ``cdk/``) and run node through jsii.

jsii unpacks its packages under ``JSII_RUNTIME_PACKAGE_CACHE_ROOT``: kept in the project (the
Makefile exports the same path), never the home folder; the node end-of-life banner is silenced.
Set here, before any test module of this folder imports aws_cdk.

The app is synthesized once per context and test process (``synthesize``), whichever modules read it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("JSII_RUNTIME_PACKAGE_CACHE_ROOT", str(ROOT / ".cache" / "jsii"))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
if str(ROOT / "cdk") not in sys.path:
    sys.path.insert(0, str(ROOT / "cdk"))

if TYPE_CHECKING:
    from support.cdk_synthesis import Synthesis


@pytest.fixture(scope="session")
def synthesize(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Synthesis]:
    """``synthesize(**context)``: the app of ``support.cdk_synthesis.CONTEXT`` and ``context``,
    synthesized the first time a module of this process asks for that context, then shared."""
    # Imported here, once the paths and jsii's cache above are set.
    from support.cdk_synthesis import context_key, synthesize_app

    made: dict[tuple[tuple[str, str], ...], Synthesis] = {}

    def _synthesize(**context: str) -> Synthesis:
        key = context_key(**context)
        if key not in made:
            made[key] = synthesize_app(tmp_path_factory.mktemp("cdk.out"), **context)
        return made[key]

    return _synthesize
