"""What a Lambda handler imports, read from the project's source: the basis of each function's packages.

A function's dependency set is derived here, not listed by hand: starting at the handler's module,
every project module it can import (at module level or inside a function, but not under
``if TYPE_CHECKING:``) is followed, and every import that is neither the standard library nor the
project is a third-party top-level module. :mod:`walletlake_cdk.lambda_code` maps those to the
installed distributions and decides what the runtime and the published layers already provide,
so a new ``import`` in any module a handler reaches changes that function's layer at the next synth
(and the deploy check proves the result imports and runs).

Static reading is deliberate: importing the handler here would need every dependency installed
in the synthesizing environment and would run module-level code.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from collections.abc import Iterable
from pathlib import Path


@dataclasses.dataclass(frozen=True, slots=True)
class ImportClosure:
    """The project modules a handler reaches and the third-party top-level modules they import."""

    modules: frozenset[str]
    third_party: frozenset[str]


class ProjectSource:
    """The project's packages on disk, by dotted module name."""

    def __init__(self, root: Path, packages: Iterable[str]) -> None:
        self.root = root
        self.packages = tuple(packages)

    def is_project(self, module: str) -> bool:
        """True for a module of one of the project's packages."""
        return module.split(".", 1)[0] in self.packages

    def path(self, module: str) -> Path | None:
        """The source file of a project module (a package's ``__init__.py``), or None if absent."""
        base = self.root.joinpath(*module.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None

    def is_package(self, module: str) -> bool:
        """True when ``module`` is a folder with an ``__init__.py``."""
        return (self.root.joinpath(*module.split(".")) / "__init__.py").is_file()


def handler_closure(
    handler: str, source: ProjectSource, *, excluded: frozenset[str] = frozenset()
) -> ImportClosure:
    """The import closure of a Lambda ``Handler`` setting (``package.module.function``)."""
    module, _, _ = handler.rpartition(".")
    if source.path(module) is None:
        raise ValueError(f"handler {handler!r}: module {module} is not in the project")
    return import_closure([module], source, excluded=excluded)


def import_closure(
    entry_modules: Iterable[str], source: ProjectSource, *, excluded: frozenset[str] = frozenset()
) -> ImportClosure:
    """Follow project imports from ``entry_modules``; collect third-party top-level names.

    ``excluded`` project modules are not followed (modules the deployment never loads).
    """
    seen: set[str] = set()
    third_party: set[str] = set()
    pending = [name for entry in entry_modules for name in _with_parents(entry)]
    while pending:
        module = pending.pop()
        if module in seen or module in excluded:
            continue
        path = source.path(module)
        if path is None:
            continue
        seen.add(module)
        for imported in imported_modules(path, module, is_package=source.is_package(module)):
            if source.is_project(imported):
                pending.extend(_with_parents(imported))
            elif not _is_stdlib(imported):
                third_party.add(imported.split(".", 1)[0])
    return ImportClosure(modules=frozenset(seen), third_party=frozenset(third_party))


def imported_modules(path: Path, module: str, *, is_package: bool = False) -> set[str]:
    """Every module a source file may import, absolute, skipping ``if TYPE_CHECKING:`` blocks.

    ``from a import b`` yields both ``a`` and ``a.b``: ``b`` may be a submodule, and a name that
    is not one is simply not found as a file later.
    """
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            if base:
                found.add(base)
            found.update(f"{base}.{alias.name}" if base else alias.name for alias in node.names)
    return found


def _runtime_nodes(tree: ast.AST) -> Iterable[ast.AST]:
    """All nodes except the bodies of ``if TYPE_CHECKING:`` (type-only imports never run)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".") if package else []
    base = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
    return ".".join([*base, *([node.module] if node.module else [])])


def _with_parents(module: str) -> list[str]:
    """``a.b.c`` → ``a``, ``a.b``, ``a.b.c``: importing a module runs its packages' ``__init__``."""
    parts = module.split(".")
    return [".".join(parts[: index + 1]) for index in range(len(parts))]


def _is_stdlib(module: str) -> bool:
    return module.split(".", 1)[0] in sys.stdlib_module_names
