"""mypy reads exactly the aws_cdk modules the CDK app imports (pyproject.toml says why).

A module left off the list would be skipped: every construct of it would be Any to mypy and its
calls unchecked. A module on the list that nothing imports any more costs mypy time for nothing.
"""

from __future__ import annotations

import ast
import importlib.util
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CDK = ROOT / "cdk"


def _sources() -> list[Path]:
    skipped = {"node_modules", "cdk.out"}
    return [path for path in CDK.rglob("*.py") if not skipped & set(path.relative_to(CDK).parts)]


def _submodules() -> frozenset[str]:
    """aws_cdk's own modules, from its folder (found without importing it: no jsii kernel)."""
    spec = importlib.util.find_spec("aws_cdk")
    assert spec is not None
    assert spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations)))
    return frozenset(path.parent.name for path in folder.glob("*/__init__.py"))


def imported_aws_cdk_modules(sources: list[Path], submodules: frozenset[str]) -> set[str]:
    """``aws_cdk`` and every ``aws_cdk.<module>`` the sources import, however they spell it."""
    found: set[str] = set()
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "aws_cdk" or alias.name.startswith("aws_cdk."):
                        found.add(".".join(alias.name.split(".")[:2]))
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "aws_cdk":
                    found.add("aws_cdk")
                    found.update(f"aws_cdk.{a.name}" for a in node.names if a.name in submodules)
                elif node.module.startswith("aws_cdk."):
                    found.add(".".join(node.module.split(".")[:2]))
    return found


def _followed() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    overrides = config["tool"]["mypy"]["overrides"]
    followed = [o for o in overrides if o.get("follow_imports") == "normal"]
    assert len(followed) == 1, "one override lists the aws_cdk modules mypy reads"
    modules: list[str] = followed[0]["module"]
    skipped = [o for o in overrides if o.get("follow_imports") == "skip"]
    assert [o["module"] for o in skipped] == [["aws_cdk.*"]]
    return set(modules)


def test_mypy_follows_exactly_the_aws_cdk_modules_the_app_imports() -> None:
    imported = imported_aws_cdk_modules(_sources(), _submodules())
    # the app really uses aws_cdk: an empty set would mean the scan found nothing
    assert {"aws_cdk", "aws_cdk.aws_iam", "aws_cdk.aws_lambda"} <= imported
    followed = _followed()
    missing = sorted(imported - followed)
    assert not missing, f"add to pyproject.toml's follow_imports list: {missing}"
    assert not followed - imported, f"no module under cdk/ imports {sorted(followed - imported)}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from aws_cdk import aws_ec2 as ec2, Duration\n", {"aws_cdk", "aws_cdk.aws_ec2"}),
        ("import aws_cdk.assertions as assertions\n", {"aws_cdk.assertions"}),
        ("from aws_cdk.aws_lambda import Function\n", {"aws_cdk.aws_lambda"}),
        ("import aws_cdk as cdk\n", {"aws_cdk"}),
        ("from .aws_cdk import aws_s3\nimport aws_cdk_lib\n", set()),
    ],
)
def test_every_spelling_of_an_aws_cdk_import_is_found(
    tmp_path: Path, source: str, expected: set[str]
) -> None:
    path = tmp_path / "stack.py"
    path.write_text(source, encoding="utf-8")
    submodules = frozenset({"aws_ec2", "aws_s3", "aws_lambda", "assertions"})
    assert imported_aws_cdk_modules([path], submodules) == expected
