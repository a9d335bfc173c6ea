"""The CDK app's tests: they import ``walletlake_cdk`` (from ``cdk/``) and run node through jsii.

jsii unpacks its packages under ``JSII_RUNTIME_PACKAGE_CACHE_ROOT``: kept in the project (the
Makefile exports the same path), never the home folder; the node end-of-life banner is silenced.
Set here, before any test module of this folder imports aws_cdk.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("JSII_RUNTIME_PACKAGE_CACHE_ROOT", str(ROOT / ".cache" / "jsii"))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
if str(ROOT / "cdk") not in sys.path:
    sys.path.insert(0, str(ROOT / "cdk"))
