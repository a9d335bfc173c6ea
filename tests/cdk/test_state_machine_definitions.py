"""Every state machine the CDK app synthesizes is valid Amazon States Language (``asl-validator``).

The app is synthesized once per lake format (``support.cdk_synthesis``); the definitions are read back
from the template with CloudFormation's intrinsics resolved (``deploy_check.assembly``), so the
validator sees the JSON Step Functions would receive. The validator (npm, pinned in
``cdk/package.json``) is installed into ``cdk/node_modules`` on first use.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cdk_synthesis import Synthesis

from walletlake_cdk.deploy_check.asl import validate
from walletlake_cdk.deploy_check.assembly import CloudAssembly

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

#: The state machines of each lake format: Iceberg tables are compacted by Glue's optimizers (no
#: hourly machine); the plain-Parquet lake keeps its hourly compaction.
MACHINE_PREFIXES = {"iceberg": ("Nightly",), "parquet": ("Hourly", "Nightly")}

Definition = dict[str, Any]


@pytest.fixture(scope="module", params=sorted(MACHINE_PREFIXES))
def lake_format(request: pytest.FixtureRequest) -> str:
    """The lake format the app is synthesized for (``-c lake_format``)."""
    return str(request.param)


@pytest.fixture(scope="module")
def definitions(synthesize: Callable[..., Synthesis], lake_format: str) -> dict[str, Definition]:
    """Every state machine's definition of the synthesized template, by logical id (read afresh)."""
    synthesis = synthesize(lake_format=lake_format)
    return CloudAssembly(synthesis.directory, synthesis.stack_name).state_machines()


def machine(definitions: dict[str, Definition], prefix: str) -> str:
    """The logical id of the one state machine whose id starts with ``prefix``."""
    matches = [logical_id for logical_id in definitions if logical_id.startswith(prefix)]
    assert len(matches) == 1, f"{prefix}: {sorted(definitions)}"
    return matches[0]


def start_at_missing_state(definition: Definition) -> str:
    """Point ``StartAt`` at a state that does not exist; the name the validator must report."""
    definition["StartAt"] = "NoSuchState"
    return "NoSuchState"


def task_without_resource(definition: Definition) -> str:
    """Drop the ``Resource`` of the first top-level Task; the state path the validator must report."""
    name = next(name for name, state in definition["States"].items() if state["Type"] == "Task")
    del definition["States"][name]["Resource"]
    return f"/States/{name}/"


def test_the_template_has_one_machine_per_schedule(
    definitions: dict[str, Definition], lake_format: str
) -> None:
    # GIVEN the synthesized template's state machines
    # WHEN they are matched to the schedules of its lake format
    found = {prefix: machine(definitions, prefix) for prefix in MACHINE_PREFIXES[lake_format]}
    # THEN there is exactly one per schedule and no other
    assert sorted(definitions) == sorted(found.values())


def test_every_definition_is_valid(definitions: dict[str, Definition]) -> None:
    # GIVEN every synthesized state machine's definition
    # WHEN the validator judges them
    problems = validate(definitions)
    # THEN it finds no problem
    assert problems == {logical_id: [] for logical_id in definitions}


@pytest.mark.parametrize("breakage", [start_at_missing_state, task_without_resource])
def test_validator_rejects_a_broken_definition(
    definitions: dict[str, Definition], breakage: Callable[[Definition], str]
) -> None:
    # GIVEN the nightly definition and a copy of it broken in one place
    hourly = definitions[machine(definitions, "Nightly")]
    broken = copy.deepcopy(hourly)
    expected = breakage(broken)
    # WHEN the validator judges both in one call
    problems = validate({"Intact": hourly, "Broken": broken})
    # THEN only the broken copy has problems, and they name what was broken
    assert problems["Intact"] == []
    assert problems["Broken"], "the validator accepted a broken definition"
    assert any(expected in problem for problem in problems["Broken"]), problems["Broken"]
