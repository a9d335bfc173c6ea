"""Fixtures shared by the whole suite: the embedded stack and per-test resources in it.

One session-scoped stack (DynamoDB Local + moto server on free loopback ports) serves every
integration test; each test that needs a table or bucket gets its own names, provisioned from the
same definitions as production, and removes only what it made.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest
from support.botocore_models import share_one_loader
from support.fresh_resources import Removals, fresh_settings
from support.session_dynamodb import restart_in_memory, slowed_down

from contracts.settings import LAKE_FORMAT_VARIABLE, Settings
from walletlake.local import EmbeddedStack, patched_environ, provision

#: The lake format tests get unless they ask for one: the plain-Parquet lake, which the tests written
#: before the Iceberg lake exercise (it stays the source ``walletlake lake migrate`` reads). Tests of
#: the Iceberg lake ask for it (``make_settings(lake_format="iceberg")``) and pass it to any process
#: they start.
TEST_LAKE_FORMAT = "parquet"

# Before any session is made: each botocore model is parsed once per test process, not per session.
share_one_loader()

# DynamoDB Local's JVM compiles with its first tier only: a test's stack lives seconds to minutes,
# and the second tier's compiler threads cost more CPU than it saves in that time. Every JVM the
# suite starts inherits it (the session's stacks, a test's own, `walletlake local up` in a test).
# Measured on this 2-core machine, four stack modules alternated twice: DynamoDB Local's CPU 37.3 and
# 35.5 s with both tiers, 27.3 and 26.9 s with the first alone (the answers are the server's, not
# the compiler's). A benchmark's stack keeps both tiers: it measures the server at its speed.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedStack]:
    """The embedded stack, with the SDK's endpoint variables pointing at it for the session.

    Its DynamoDB Local keeps the tables in memory: nothing of the session's outlives it, and a test
    of what survives a restart starts a stack of its own on disk (tests/stack/test_stack_durability.py).
    """
    environment = {LAKE_FORMAT_VARIABLE: TEST_LAKE_FORMAT}
    with (
        EmbeddedStack(
            tmp_path_factory.mktemp("stack"), dynamodb_in_memory=True, dynamodb_quick_jit=True
        ) as embedded,
        patched_environ({**embedded.environment(), **environment}),
    ):
        yield embedded


@pytest.fixture(scope="session")
def removals(stack: EmbeddedStack) -> Iterator[Removals]:
    """Removes a test's resources in the background, so the next test starts at once.

    Every removal is waited for, and a failed one fails the session here, before the stack stops:
    nothing is left behind silently, and no removal outlives the servers it talks to.
    """
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="removals") as pool:
        pending = Removals(pool)
        yield pending
    pending.raise_failures()


@pytest.fixture(scope="module", autouse=True)
def fresh_dynamodb(request: pytest.FixtureRequest) -> None:
    """A module of stack tests starts on a fresh DynamoDB Local once the session's has slowed down.

    Why and when: :mod:`support.session_dynamodb`. Before the restart every pending removal has run,
    so none meets the server gone; the module's own fixtures come after this one (autouse first).
    """
    if "stack" not in request.fixturenames:
        return
    stack: EmbeddedStack = request.getfixturevalue("stack")
    if slowed_down(stack):
        request.getfixturevalue("removals").wait()
        restart_in_memory(stack)


@pytest.fixture
def make_settings(stack: EmbeddedStack, removals: Removals) -> Iterator[Callable[..., Settings]]:
    """Factory of settings naming fresh, provisioned resources; removes them after the test."""
    made: list[Settings] = []

    def _make(**overrides: object) -> Settings:
        settings = fresh_settings(**overrides)
        provision(settings)
        made.append(settings)
        return settings

    yield _make
    for settings in made:
        removals(settings)


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    """Settings of one fresh set of resources for this test."""
    return make_settings()


@pytest.fixture(scope="session")
def project_root() -> Path:
    """The repository root (for .sql files, notebooks and scripts)."""
    return Path(__file__).resolve().parents[1]


@pytest.fixture
def queue_url(stack: EmbeddedStack) -> Iterator[str]:
    """A fresh SQS queue on the stack's moto server (a dead-letter queue for the replay tests)."""
    assert stack.endpoints is not None
    sqs = boto3.client("sqs", endpoint_url=stack.endpoints.aws)
    url = sqs.create_queue(QueueName=f"dlq-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    yield url
    sqs.delete_queue(QueueUrl=url)


# --------------------------------------------------------------------------- spreading over xdist workers


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules of the longest work first, so no worker is left with a long one while the other idles.

    xdist hands out a module's tests together (``--dist loadscope`` in ``pyproject.toml``: what a
    module's tests share, a `walletlake demo` or the deploy check's synthesis and image, is set up
    once, not on both workers), in this order (``--no-loadscope-reorder``): modules holding a test
    marked ``slow``, then those using the embedded stack, then the rest, each in collection order.
    The sort is stable and ranks a module as a whole, so its tests stay together and in their order.
    The modules of tests/cdk reading shared syntheses are one scope (:func:`xdist_scope`).
    """
    ranks: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        ranks[module] = min(ranks.get(module, 2), _rank(item))
    items.sort(key=lambda item: ranks[item.nodeid.split("::", 1)[0]])


#: The modules of tests/cdk that read syntheses of the app (``support.cdk_synthesis``) are one xdist
#: scope, so one worker synthesizes each context once for all of them. The deploy check synthesizes
#: its own app (real dependency layers) and stays a scope of its own.
SYNTHESIS_SCOPE = "tests/cdk"
OWN_SCOPES_IN_CDK = ("tests/cdk/test_deploy_check.py",)


def xdist_scope(nodeid: str) -> str:
    """A test's xdist scope (``--dist loadscope``): its module, or tests/cdk for the synthesis readers.

    >>> xdist_scope("tests/cdk/test_cdk.py::test_x"), xdist_scope("tests/stack/test_bank.py::test_y")
    ('tests/cdk', 'tests/stack/test_bank.py')
    """
    module = nodeid.split("::", 1)[0]
    if module.startswith(f"{SYNTHESIS_SCOPE}/") and module not in OWN_SCOPES_IN_CDK:
        return SYNTHESIS_SCOPE
    return module


class _ScopeScheduling:
    """xdist's ``loadscope`` with :func:`xdist_scope`'s scopes (registered only when xdist is)."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "loadscope":
            return None
        from xdist.scheduler import LoadScopeScheduling

        class Scheduling(LoadScopeScheduling):  # type: ignore[misc]
            def _split_scope(self, nodeid: str) -> str:
                return xdist_scope(nodeid)

        return Scheduling(config, log)


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_ScopeScheduling(), "walletlake-scope-scheduling")


def _rank(item: pytest.Item) -> int:
    if item.get_closest_marker("slow"):
        return 0
    return 1 if item.get_closest_marker("stack") else 2
