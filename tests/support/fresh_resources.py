"""Settings naming a fresh set of resources on the embedded stack, one spelling for every fixture.

A test (or a module's fixture) that needs its own tables, bucket and Glue database gets them here,
so the names it provisions and the names it removes afterwards cannot drift apart.
"""

from __future__ import annotations

import uuid

from contracts.settings import Settings


def fresh_settings(**overrides: object) -> Settings:
    """Settings from the environment with every per-test resource under a new random suffix."""
    suffix = uuid.uuid4().hex[:10]
    return Settings.from_env().replace(
        table=f"wallets-{suffix}",
        checkpoint_table=f"checkpoints-{suffix}",
        lease_table=f"leases-{suffix}",
        bucket=f"lake-{suffix}",
        glue_database=f"walletlake_{suffix}",
        query_engine="duckdb",
        **overrides,
    )
