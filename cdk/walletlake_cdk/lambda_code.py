"""The Lambda code assets: the project's own packages, and each function's third-party packages.

No Docker: the project's packages are plain Python, copied as they are; third-party packages
the AWS-published layers do not carry are installed for the Lambda platform with pip
(``--platform`` tags of Amazon Linux 2's glibc 2.26, ``--only-binary=:all:``), which downloads
wheels built for it instead of building anything locally.

**What a function gets is derived, in one place** (:func:`function_packages`): the handler's import
closure (:mod:`walletlake_cdk.handler_imports`) names its third-party modules; the runtime provides
boto3 and its dependencies; everything else is installed into a layer of the function's own (one
per distinct set, shared by the functions needing it). So a new ``import`` anywhere a handler
reaches changes that function's layer at the next synth, and the deploy check
(``make deploy-check``) proves the result imports and runs.

No AWS-published layer is used (``docs/operations.md``, "What each function ships", has the
measurements): the SDK for pandas layer is built on Amazon Linux 2 from its own pyarrow build
without zstd (which the lake's Parquet uses) and cannot be rebuilt file for file offline, and
the Powertools layer brings 27 MB of extras for the 8 MB the handlers use. Layers built here from
published wheels are the exact bytes the deploy check runs.

Both land under ``.cache/`` inside the project, keyed by a hash of their inputs, so a second
synth reuses them without touching the network. With the context flag ``lambda_deps=skip``
(what the template tests use) the dependency layers are empty placeholders: the template is the
same apart from asset hashes, and synth needs no network at all.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import hashlib
import importlib.metadata
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from walletlake_cdk.handler_imports import ProjectSource, handler_closure

_logger = logging.getLogger(__name__)

#: The project root (this file is ``cdk/walletlake_cdk/lambda_code.py``).
PROJECT_ROOT: Final = Path(__file__).resolve().parents[2]
CACHE_ROOT: Final = PROJECT_ROOT / ".cache" / "cdk"

#: The project's packages every function ships (the same list as pyproject's package find).
PROJECT_PACKAGES: Final = ("contracts", "wallet", "stream_processor", "lake", "queries", "walletlake")

#: The Python 3.11 runtime runs on Amazon Linux 2 (glibc 2.26): wheels tagged for glibc 2.17
#: (manylinux2014) up to 2.26 load there; newer ones (manylinux_2_28: pyarrow 21+) do not
#: (https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtimes.html).
PIP_PLATFORMS: Final = ("manylinux2014_x86_64", "manylinux_2_24_x86_64", "manylinux_2_26_x86_64")
PIP_PYTHON_VERSION: Final = "3.11"

#: Distributions the Python 3.11 runtime itself carries (boto3 and what it needs).
RUNTIME_DISTRIBUTIONS: Final = frozenset(
    {"boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3"}
)

#: Project modules a handler's closure reaches that never load on Lambda, with the reason.
#: The DuckDB query engine is chosen by ``WALLETLAKE_QUERY_ENGINE``, which every function's
#: environment sets to ``athena`` (``functions.settings_environment``); the deploy check runs each
#: function with that environment, so a deployed path that reached DuckDB anyway would fail there.
LOCAL_ONLY_MODULES: Final = {
    "queries._duckdb": "the embedded stack's query engine; deployed functions run Athena",
}

#: Files left out of a dependency layer: tests, C headers and Cython sources, the development
#: copies of versioned shared libraries (the loader asks for ``libX.so.2000`` only), and pyarrow's
#: Flight (only ``pyarrow.flight`` loads it; every other module links Substrait, which stays).
#: This is what makes DuckDB, pyarrow and numpy fit in Lambda's 250 MB together
#: (``docs/operations.md``); the deploy check proves the pruned layers import and run.
PRUNED: Final = (
    "*/tests/*",
    "*/include/*",
    "*.pyx",
    "*.pxd",
    "*.pxi",
    "pyarrow/libarrow_python.so",
    "pyarrow/libarrow_python.so.*.*.*",
    "pyarrow/libarrow_python_parquet_encryption.so",
    "pyarrow/libarrow_python_parquet_encryption.so.*.*.*",
    "pyarrow/libarrow_flight.so*",
    "pyarrow/libarrow_python_flight.so*",
    "pyarrow/_flight.*.so",
    "pyarrow/flight.py",
    "pyarrow/_pyarrow_cpp_tests.*.so",
)

#: Project code snapshots kept under ``.cache/cdk/app-code`` (older ones are removed).
KEPT_CODE_SNAPSHOTS: Final = 5

_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".mypy_cache")


@dataclasses.dataclass(frozen=True, slots=True)
class DependencySet:
    """Third-party distributions one group of functions needs beyond the runtime.

    Attributes
    ----------
    name:
        Names the cache folder and the layer.
    distributions:
        Top-level distributions; each is pinned to the newest release not above the version
        installed in the project's environment that has a wheel for Lambda's platform (pip
        resolves their dependencies the same way), so Lambda runs what the tests ran wherever
        Amazon Linux 2 allows it.
    """

    name: str
    distributions: tuple[str, ...]

    def requirements(self) -> tuple[str, ...]:
        """``name<=version`` for every distribution installed here, the bare name otherwise."""
        return tuple(_pinned(name) for name in self.distributions)


@dataclasses.dataclass(frozen=True, slots=True)
class FunctionPackages:
    """What one handler runs on beyond the runtime: its own dependency layer (None: nothing)."""

    handler: str
    dependencies: DependencySet | None
    third_party: frozenset[str]


def function_packages(handler: str, source_root: Path = PROJECT_ROOT) -> FunctionPackages:
    """Derive a handler's layers from what it imports (the module docstring has the rules)."""
    source = ProjectSource(source_root, PROJECT_PACKAGES)
    closure = handler_closure(handler, source, excluded=frozenset(LOCAL_ONLY_MODULES))
    needed = {distribution for module in closure.third_party for distribution in distributions_of(module)}
    own = tuple(sorted(needed - RUNTIME_DISTRIBUTIONS))
    dependencies = DependencySet("-".join(own), own) if own else None
    return FunctionPackages(handler=handler, dependencies=dependencies, third_party=closure.third_party)


def distributions_of(module: str) -> tuple[str, ...]:
    """The installed distributions providing a top-level module (normalized names)."""
    found = _installed_modules().get(module)
    if not found:
        raise LookupError(
            f"no installed distribution provides the module {module!r}: add it to pyproject.toml's "
            "dependencies (a deployed handler imports it)"
        )
    return tuple(sorted({normalized(name) for name in found}))


@functools.cache
def _installed_modules() -> Mapping[str, list[str]]:
    """Top-level module → distributions, read once per process.

    ``packages_distributions`` reads every installed distribution's metadata and file list (about
    0.3 s here); a synth asks it for each third-party module of each function's closure, over a
    hundred times, which was most of a synth's time. What is installed does not change while a
    process synthesizes.
    """
    return importlib.metadata.packages_distributions()


def normalized(distribution: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _pinned(distribution: str) -> str:
    try:
        return f"{distribution}<={importlib.metadata.version(distribution)}"
    except importlib.metadata.PackageNotFoundError:
        return distribution


def project_code_dir(cache_root: Path = CACHE_ROOT, source_root: Path = PROJECT_ROOT) -> Path:
    """A folder holding the project's packages, content-addressed so concurrent synths never clash."""
    digest = hashlib.sha256()
    files: list[Path] = []
    for package in PROJECT_PACKAGES:
        for path in sorted((source_root / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
                files.append(path)
    for path in files:
        digest.update(str(path.relative_to(source_root)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    target = cache_root / "app-code" / digest.hexdigest()[:20]
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    for package in PROJECT_PACKAGES:
        shutil.copytree(source_root / package, staging / package, ignore=_IGNORED)
    _publish(staging, target)
    _prune(target.parent, keep=KEPT_CODE_SNAPSHOTS)
    return target


def _prune(folder: Path, keep: int) -> None:
    """Remove all but the ``keep`` most recent snapshots (every source edit makes a new one)."""
    snapshots = sorted(
        (path for path in folder.iterdir() if path.is_dir() and not path.name.startswith(".")),
        key=lambda path: path.stat().st_mtime,
        reverse=True,
    )
    for stale in snapshots[keep:]:
        shutil.rmtree(stale, ignore_errors=True)


def dependency_layer_dir(dependencies: DependencySet, mode: str, cache_root: Path = CACHE_ROOT) -> Path:
    """A layer folder (``python/…``) with ``dependencies`` installed for the Lambda platform.

    ``mode`` is ``install`` (reuse the cache or run pip) or ``skip`` (an empty placeholder).
    """
    if mode == "skip":
        placeholder = cache_root / "layer-placeholder" / dependencies.name
        marker = placeholder / "python" / "README.txt"
        if not marker.is_file():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(
                f"Placeholder for the {dependencies.name} dependency layer: synthesized with "
                "lambda_deps=skip, not deployable.\n"
            )
        return placeholder
    requirements = dependencies.requirements()
    target = dependency_cache_dir(dependencies, cache_root)
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    pip_install_for_lambda(requirements, staging / "python", cache_root / "pip")
    remove_distributions(staging / "python", RUNTIME_DISTRIBUTIONS)
    prune(staging / "python")
    size = sum(path.stat().st_size for path in staging.rglob("*") if path.is_file())
    _logger.info("installed %s dependency layer (%.1f MB)", dependencies.name, size / 2**20)
    _publish(staging, target)
    return target


def dependency_cache_dir(dependencies: DependencySet, cache_root: Path = CACHE_ROOT) -> Path:
    """Where a dependency set's layer is cached: keyed by platform, Python and pinned requirements."""
    key = "\n".join(
        [
            *PIP_PLATFORMS,
            PIP_PYTHON_VERSION,
            *PRUNED,
            *sorted(RUNTIME_DISTRIBUTIONS),
            *dependencies.requirements(),
        ]
    )
    return cache_root / "layers" / f"{dependencies.name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def remove_distributions(folder: Path, names: frozenset[str]) -> list[str]:
    """Uninstall ``names`` from a ``--target`` folder by their RECORD (pip pulls boto3 in as a
    dependency; the runtime's own copy is the one that must load, as AWS's layers do)."""
    removed = []
    for info in sorted(folder.glob("*.dist-info")):
        name = normalized(info.name.removesuffix(".dist-info").rsplit("-", 1)[0])
        if name not in names:
            continue
        record = info / "RECORD"
        for line in record.read_text().splitlines() if record.is_file() else []:
            path = folder / line.split(",", 1)[0]
            if path.is_file():
                path.unlink()
        shutil.rmtree(info, ignore_errors=True)
        removed.append(name)
    for directory in sorted(folder.rglob("*"), key=lambda path: len(path.parts), reverse=True):
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()
    return removed


def prune(folder: Path, patterns: tuple[str, ...] = PRUNED) -> int:
    """Remove the files matching ``patterns`` (relative to ``folder``); returns the bytes freed."""
    freed = 0
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_file() and any(fnmatch.fnmatch(relative, pattern) for pattern in patterns):
            freed += path.stat().st_size
            path.unlink()
    return freed


def run_pip(arguments: list[str], pip_cache: Path) -> subprocess.CompletedProcess[str]:
    """``pip install --quiet ARGUMENTS`` with this interpreter, its cache inside the project."""
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *arguments]
    environment = {**os.environ, "PIP_CACHE_DIR": str(pip_cache)}
    return subprocess.run(command, env=environment, capture_output=True, text=True, check=False)


def platform_arguments(platforms: tuple[str, ...], python_version: str = PIP_PYTHON_VERSION) -> list[str]:
    """pip's arguments selecting binary wheels of CPython ``python_version`` for ``platforms``."""
    tags = [argument for platform in platforms for argument in ("--platform", platform)]
    return [*tags, "--implementation", "cp", "--python-version", python_version, "--only-binary=:all:"]


def pip_install_for_lambda(
    requirements: tuple[str, ...], target: Path, pip_cache: Path, *, no_deps: bool = False
) -> None:
    """Install wheels for Lambda's platform into ``target`` (the one pip step every layer uses)."""
    completed = run_pip(
        [
            "--no-compile",
            *platform_arguments(PIP_PLATFORMS),
            "--target",
            str(target),
            *(["--no-deps"] if no_deps else []),
            *requirements,
        ],
        pip_cache,
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"pip could not install {' '.join(requirements)} for {', '.join(PIP_PLATFORMS)}:\n"
            f"{completed.stderr.strip()}\n(offline? synthesize with -c lambda_deps=skip to check the "
            "template without deployable layers)"
        )


def _publish(staging: Path, target: Path) -> None:
    """Move a finished folder into place; another synth that got there first wins."""
    try:
        staging.rename(target)
    except OSError:
        if not target.is_dir():
            raise
        shutil.rmtree(staging, ignore_errors=True)
