"""Draw walletlake's import graph as a reviewer reads it: arrows that run up, cycles, largest modules.

Usage::

    PYTHONPATH=cdk .venv/bin/python scripts/import_graph.py [--root DIR]

``--root`` points at another checkout (``git worktree add /tmp/before <commit>``) so the same
command draws the graph before and after a change. The layer order is read from this checkout's
``pyproject.toml`` (the import-linter contract, docs/architecture.md, "Layers"); a package
that a checkout does not have is skipped, so older checkouts draw with the same ruler. Only
imports between the project's own packages count: stdlib and third-party imports are no part of
the layering. Prints, in this order:

- package-to-package edges with the number of module imports behind each, marked ``UP`` where
  the importer sits in a lower layer than what it imports;
- cycles: strongly connected components of the package graph and, inside each package, of the
  module graph (an import inside a function counts, as it does at run time);
- the ten largest modules by line count.

Exits 0 always: it draws, and import-linter in ``make lint`` is what fails a build.
"""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

import grimp

#: The layering, top to bottom, as ``make lint`` enforces it: pyproject.toml's import-linter
#: ``layers`` contract (packages on one line, "a | b", are siblings that may not import each other).
_PYPROJECT: Final = Path(__file__).resolve().parent.parent / "pyproject.toml"


def layers(pyproject: Path = _PYPROJECT) -> tuple[tuple[str, ...], ...]:
    """The layers of the ``layers`` contract in ``pyproject``, top first."""
    with pyproject.open("rb") as handle:
        config = tomllib.load(handle)["tool"]["importlinter"]
    (contract,) = [each for each in config["contracts"] if each["type"] == "layers"]
    return tuple(tuple(name.strip() for name in line.split("|")) for line in contract["layers"])


LAYERS: Final = layers()


def _rank(package: str) -> int:
    for index, layer in enumerate(LAYERS):
        if package in layer:
            return len(LAYERS) - index
    raise KeyError(package)


def _strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative so a long import chain cannot hit the recursion limit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _package_of(module: str) -> str:
    return module.split(".", 1)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    sys.path[:0] = [str(root), str(root / "cdk")]
    os.chdir(root)

    packages = [
        name
        for layer in LAYERS
        for name in layer
        if (root / name / "__init__.py").exists() or (root / "cdk" / name / "__init__.py").exists()
    ]
    graph = grimp.build_graph(*packages, cache_dir=None)

    module_edges: dict[str, set[str]] = defaultdict(set)
    package_edges: dict[tuple[str, str], int] = defaultdict(int)
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            module_edges[importer].add(imported)
            source, target = _package_of(importer), _package_of(imported)
            if source != target:
                package_edges[(source, target)] += 1

    print(f"import graph of {root} ({len(graph.modules)} modules)")
    print("\npackage edges (module imports behind each; UP = importer in a lower layer):")
    up = 0
    for (source, target), count in sorted(package_edges.items()):
        upward = _rank(source) < _rank(target) or (_rank(source) == _rank(target) and source != target)
        up += upward
        print(f"  {'UP ' if upward else '   '}{source} -> {target}: {count}")
    print(f"arrows up or across a layer: {up}")

    package_graph: dict[str, set[str]] = defaultdict(set)
    for source, target in package_edges:
        package_graph[source].add(target)
    print("\ncycles between packages:")
    package_cycles = _strongly_connected(package_graph)
    for component in package_cycles:
        print("  " + " <-> ".join(component))
    print(f"  {len(package_cycles)} cycle(s)")

    print("\ncycles between modules of one package:")
    module_cycles = 0
    for package in packages:
        inside = {
            module: {target for target in targets if _package_of(target) == package}
            for module, targets in module_edges.items()
            if _package_of(module) == package
        }
        for component in _strongly_connected(inside):
            module_cycles += 1
            print("  " + " <-> ".join(component))
    print(f"  {module_cycles} cycle(s)")

    print("\nlargest modules (lines):")
    sizes: list[tuple[int, str]] = []
    for package in packages:
        base = root / package if (root / package).is_dir() else root / "cdk" / package
        for path in base.rglob("*.py"):
            with path.open(encoding="utf-8") as handle:
                sizes.append((sum(1 for _ in handle), str(path.relative_to(root))))
    for lines, path in sorted(sizes, reverse=True)[:10]:
        print(f"  {lines:5d}  {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
