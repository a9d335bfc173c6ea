"""The Lambda code assets: the project's own packages, and what the published layers lack.

No Docker: the project's packages are plain Python, copied as they are; third-party packages
the AWS-published layers do not carry are installed for the Lambda platform with pip
(``--platform manylinux2014_x86_64 --only-binary=:all:``), which downloads wheels built for
Amazon Linux instead of building anything locally.

Both land under ``.cache/`` inside the project, keyed by a hash of their inputs, so a second
synth reuses them without touching the network. With the context flag ``lambda_deps=skip``
(what the tests use) the dependency layers are empty placeholders: the template is the same
apart from asset hashes, and synth needs no network at all.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

_logger = logging.getLogger(__name__)

#: The project root (this file is ``cdk/walletlake_cdk/lambda_code.py``).
PROJECT_ROOT: Final = Path(__file__).resolve().parents[2]
CACHE_ROOT: Final = PROJECT_ROOT / ".cache" / "cdk"

#: The project's packages every function ships (the same list as pyproject's package find).
PROJECT_PACKAGES: Final = ("wallet", "stream_processor", "lake", "queries", "walletlake")

PIP_PLATFORM: Final = "manylinux2014_x86_64"
PIP_PYTHON_VERSION: Final = "3.11"

#: A Lambda function's code plus all its layers must stay under 250 MB unzipped; the SDK for
#: pandas layer alone takes about 200 MB, so what we add next to it has to stay small.
PIPELINE_DEPENDENCY_BUDGET_BYTES: Final = 30 * 1024 * 1024

#: Project code snapshots kept under ``.cache/cdk/app-code`` (older ones are removed).
KEPT_CODE_SNAPSHOTS: Final = 5

_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".mypy_cache")


@dataclasses.dataclass(frozen=True, slots=True)
class DependencySet:
    """Third-party distributions one group of functions needs beyond the runtime and layers.

    Attributes
    ----------
    name:
        Names the cache folder and the layer.
    distributions:
        Top-level distributions; each is pinned to the version installed in the project's
        environment, so Lambda runs what the tests ran (pip resolves their dependencies).
    budget_bytes:
        Largest unzipped size allowed, or None for no limit.
    """

    name: str
    distributions: tuple[str, ...]
    budget_bytes: int | None = None

    def requirements(self) -> tuple[str, ...]:
        """``name==version`` for every distribution installed here, the bare name otherwise."""
        return tuple(_pinned(name) for name in self.distributions)


#: The write path: FastAPI through the Mangum ASGI adapter (not in any published layer).
API_DEPENDENCIES: Final = DependencySet("api", ("fastapi", "mangum", "orjson"))
#: Stream consumer and nightly job: pandas/pyarrow/awswrangler come from the SDK for pandas layer.
#: DuckDB is deliberately absent: on AWS the query engine is Athena, and DuckDB (about 60 MB)
#: would not fit next to the pandas layer.
PIPELINE_DEPENDENCIES: Final = DependencySet(
    "pipeline", ("orjson", "sqlglot"), budget_bytes=PIPELINE_DEPENDENCY_BUDGET_BYTES
)


def _pinned(distribution: str) -> str:
    try:
        return f"{distribution}=={importlib.metadata.version(distribution)}"
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
    _pip_install(requirements, staging / "python", cache_root / "pip")
    size = sum(path.stat().st_size for path in staging.rglob("*") if path.is_file())
    if dependencies.budget_bytes is not None and size > dependencies.budget_bytes:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(
            f"the {dependencies.name} dependency layer is {size / 2**20:.1f} MB, over its "
            f"{dependencies.budget_bytes / 2**20:.0f} MB budget (Lambda's 250 MB limit with the pandas layer)"
        )
    _logger.info("installed %s dependency layer (%.1f MB)", dependencies.name, size / 2**20)
    _publish(staging, target)
    return target


def dependency_cache_dir(dependencies: DependencySet, cache_root: Path = CACHE_ROOT) -> Path:
    """Where a dependency set's layer is cached: keyed by platform, Python and pinned requirements."""
    key = "\n".join([PIP_PLATFORM, PIP_PYTHON_VERSION, *dependencies.requirements()])
    return cache_root / "layers" / f"{dependencies.name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def _pip_install(requirements: tuple[str, ...], target: Path, pip_cache: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        "--platform",
        PIP_PLATFORM,
        "--implementation",
        "cp",
        "--python-version",
        PIP_PYTHON_VERSION,
        "--only-binary=:all:",
        "--target",
        str(target),
        *requirements,
    ]
    environment = {**os.environ, "PIP_CACHE_DIR": str(pip_cache)}
    completed = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise RuntimeError(
            f"pip could not install {' '.join(requirements)} for {PIP_PLATFORM}:\n"
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
