"""Settings naming a fresh set of resources on the embedded stack, one spelling for every fixture.

A test (or a module's fixture) that needs its own tables, bucket and Glue database gets them here,
so the names it provisions and the names it removes afterwards cannot drift apart.

Every DynamoDB table is the test's own, the idempotency table included: one shared by the whole
session collected every test's records, and DynamoDB Local's TTL sweeper walks every TTL table of
its server 20 items at a time, so a table that only grows keeps one of its few sweep threads busy
for the rest of the run.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait

import boto3

from contracts.settings import IDEMPOTENCY_TABLE_VARIABLE, OWNERS_TABLE_VARIABLE, TABLE_VARIABLE, Settings

#: What a ``walletlake serve`` started by hand needs to write only into the test's own tables.
WRITE_PATH_VARIABLES = (TABLE_VARIABLE, IDEMPOTENCY_TABLE_VARIABLE, OWNERS_TABLE_VARIABLE)


def fresh_settings(**overrides: object) -> Settings:
    """Settings from the environment with every per-test resource under a new random suffix."""
    suffix = uuid.uuid4().hex[:10]
    return Settings.from_env().replace(
        table=f"wallets-{suffix}",
        idempotency_table=f"idempotency-{suffix}",
        owners_table=f"owners-{suffix}",
        checkpoint_table=f"checkpoints-{suffix}",
        lease_table=f"leases-{suffix}",
        bucket=f"lake-{suffix}",
        glue_database=f"walletlake_{suffix}",
        query_engine="duckdb",
        **overrides,
    )


def write_path_env(settings: Settings) -> dict[str, str]:
    """The variables pointing a hand-started API server at ``settings``' wallets and idempotency tables."""
    return settings.to_env(WRITE_PATH_VARIABLES)


def remove_resources(settings: Settings) -> None:
    """Delete the tables and the bucket ``fresh_settings`` named (what is already gone is skipped)."""
    removal(settings)()


class Removals:
    """Resource removals running on ``pool``, each waited for before the stack's servers go.

    :meth:`wait` lets a caller that is about to restart a server wait for those pending.
    """

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self._pool = pool
        self._pending: list[Future[None]] = []

    def __call__(self, settings: Settings) -> None:
        self._pending.append(self._pool.submit(removal(settings)))

    def wait(self) -> None:
        """Return once every removal scheduled so far has run (failed or not)."""
        futures_wait(self._pending)

    def raise_failures(self) -> None:
        """Wait for every removal; raise if any failed (nothing may be left behind silently)."""
        self.wait()
        failed = [future.exception() for future in self._pending if future.exception() is not None]
        if failed:
            raise RuntimeError(
                f"{len(failed)} of {len(self._pending)} test resource removals failed: {failed[0]!r}"
            )


def removal(settings: Settings) -> Callable[[], None]:
    """What deletes ``settings``' tables and bucket, its clients made now, to be run now or later.

    The clients are made by the caller's thread, from the endpoints it sees: a removal run later
    (``tests/conftest.py``'s ``removals``) cannot follow a later test's patched environment to
    another server. The deletions run side by side: each waits on its server.
    """
    dynamodb = boto3.client("dynamodb", region_name=settings.region)
    bucket = boto3.resource("s3", region_name=settings.region).Bucket(settings.bucket)
    tables = (
        settings.table,
        settings.idempotency_table,
        settings.owners_table,
        settings.checkpoint_table,
        settings.lease_table,
    )

    def drop(table: str) -> None:
        with contextlib.suppress(dynamodb.exceptions.ResourceNotFoundException):
            dynamodb.delete_table(TableName=table)

    def empty_and_drop_bucket() -> None:
        bucket.objects.all().delete()
        bucket.delete()

    def remove() -> None:
        with ThreadPoolExecutor(max_workers=len(tables) + 1, thread_name_prefix="remove") as pool:
            done = [pool.submit(drop, table) for table in tables] + [pool.submit(empty_and_drop_bucket)]
            for future in done:
                future.result()

    return remove
