#!/usr/bin/env python3
"""Synthesize the walletlake CDK app: ``python cdk/app.py`` (what ``cdk.json``'s ``app`` runs).

Honours ``CDK_OUTDIR`` (the CDK CLI sets it; without it the assembly goes to ``cdk/cdk.out``),
``CDK_DEFAULT_ACCOUNT``/``CDK_DEFAULT_REGION`` (set by the CLI from your credentials; without
them the stack is environment-agnostic) and the context in ``cdk.json`` plus ``-c key=value``.
Exits non-zero when cdk-nag (or anything else) left an error annotation.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from walletlake_cdk.assembly import main

if __name__ == "__main__":
    raise SystemExit(main())
