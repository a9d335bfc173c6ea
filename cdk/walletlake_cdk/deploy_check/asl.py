"""The state machines' definitions checked against the Amazon States Language by ``asl-validator``.

CloudFormation accepts any string as a definition; Step Functions rejects a malformed one only
when the stack deploys, and the CDK checks nothing it did not build itself (a ``CustomState``, a
JSONPath in a payload template, a ``Next`` naming a missing state). ``asl-validator`` (npm,
pinned in ``cdk/package.json`` next to the CDK CLI) checks a definition against the language's
JSON schemas and its transition rules before any AWS account sees it.

Its command line has no machine-readable output: it prints ``✕ State machine definition
"<file>" is invalid:`` and one ``CODE: message`` line per problem to stderr, and exits 0 (all
valid), 1 (at least one invalid) or 2 (it could not run). So each definition gets its own run: the exit
code is the verdict, and only the problem lines of that one run are read from its output.

Example
-------
>>> validate({"Broken": {"StartAt": "Missing", "States": {"Done": {"Type": "Succeed"}}}})  # doctest: +SKIP
{'Broken': ['MISSING_TRANSITION_TARGET: State Done is not reachable',
            "MISSING_TRANSITION_TARGET: Missing 'StartAt'|'Next'|'Default' target: Missing"]}
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from walletlake_cdk.assembly import CDK_DIR

_logger = logging.getLogger(__name__)

#: npm's cache stays in the project, where the Makefile puts it too.
NPM_CACHE: Final = CDK_DIR.parent / ".cache" / "npm"
VALIDATOR_PACKAGE: Final = "asl-validator"

#: The validator's exit codes (its README's "Return status").
_VALID: Final = 0
_INVALID: Final = 1

_INVALID_HEADER: Final = re.compile(r'State machine definition ".*" is invalid:')
_PROBLEM: Final = re.compile(r"^[A-Z][A-Z_]+: ")

_INSTALL_TIMEOUT_SECONDS: Final = 600
_VALIDATE_TIMEOUT_SECONDS: Final = 120


class ValidatorError(RuntimeError):
    """The validator could not be installed or run; a definition was not judged at all."""


def validator_command(cdk_dir: Path = CDK_DIR) -> list[str]:
    """The command that runs the pinned ``asl-validator``, installed into ``cdk/node_modules`` first.

    A clean clone has no ``node_modules``, and a checkout may hold an older validator than
    ``package.json`` pins; either way ``npm ci`` installs exactly what ``package-lock.json`` says,
    so the suite judges definitions with the same validator everywhere.
    """
    if shutil.which("node") is None:
        raise ValidatorError(
            f"node not found: {VALIDATOR_PACKAGE} runs on node 20+ (apt-get install nodejs npm)"
        )
    if _installed_version(cdk_dir) != _pinned_version(cdk_dir):
        _npm_install(cdk_dir)
        installed, pinned = _installed_version(cdk_dir), _pinned_version(cdk_dir)
        if installed != pinned:
            raise ValidatorError(
                f"npm installed {VALIDATOR_PACKAGE} {installed}, not the {pinned} that "
                f"{cdk_dir / 'package.json'} pins"
            )
    return [str(cdk_dir / "node_modules" / ".bin" / VALIDATOR_PACKAGE)]


def validate(definitions: Mapping[str, Mapping[str, Any]], cdk_dir: Path = CDK_DIR) -> dict[str, list[str]]:
    """Every definition's problems by logical id, as ``CODE: message`` lines (empty when valid).

    Each definition is written to its own file and judged by its own run, so a problem is never
    attributed to the wrong state machine whatever the validator prints. Raises
    :class:`ValidatorError` when the validator itself fails, so a crash never reads as "valid".
    """
    command = validator_command(cdk_dir)
    problems: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="asl-") as scratch:
        for index, (logical_id, definition) in enumerate(definitions.items()):
            path = Path(scratch) / f"definition-{index}.json"
            path.write_text(json.dumps(definition, indent=1))
            problems[logical_id] = _judge(command, path, logical_id)
    return problems


def _judge(command: list[str], path: Path, logical_id: str) -> list[str]:
    """One run of the validator over one file: its exit code decides, its stderr explains."""
    result = subprocess.run(
        [*command, "--json-path", str(path)],
        capture_output=True,
        text=True,
        timeout=_VALIDATE_TIMEOUT_SECONDS,
        check=False,
    )
    _logger.debug("%s on %s: exit %s", VALIDATOR_PACKAGE, logical_id, result.returncode)
    if result.returncode == _VALID:
        return []
    if result.returncode == _INVALID:
        return problem_lines(result.stderr) or [result.stderr.strip() or "invalid, with no explanation"]
    raise ValidatorError(
        f"{VALIDATOR_PACKAGE} failed on {logical_id} (exit {result.returncode}): {result.stderr.strip()}"
    )


def problem_lines(stderr: str) -> list[str]:
    """The ``CODE: message`` lines after the "is invalid:" header of the validator's stderr.

    A line that does not start with a code continues the problem before it (a message with a
    line break), so one problem is always one string.
    """
    problems: list[str] = []
    seen_header = False
    for raw in stderr.splitlines():
        line = raw.strip()
        if _INVALID_HEADER.search(line):
            seen_header = True
        elif seen_header and _PROBLEM.match(line):
            problems.append(line)
        elif seen_header and line and problems:
            problems[-1] = f"{problems[-1]} {line}"
    return problems


def _pinned_version(cdk_dir: Path) -> str:
    """The exact version ``package.json`` pins (one definition of it: the file npm reads)."""
    manifest = json.loads((cdk_dir / "package.json").read_text())
    pinned = manifest.get("devDependencies", {}).get(VALIDATOR_PACKAGE)
    if pinned is None:
        raise ValidatorError(f"{cdk_dir / 'package.json'} does not pin {VALIDATOR_PACKAGE}")
    return str(pinned)


def _installed_version(cdk_dir: Path) -> str | None:
    """The version in ``node_modules``, or None when the package or its command is missing."""
    package = cdk_dir / "node_modules" / VALIDATOR_PACKAGE
    if not (cdk_dir / "node_modules" / ".bin" / VALIDATOR_PACKAGE).exists():
        return None
    try:
        return str(json.loads((package / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def _npm_install(cdk_dir: Path) -> None:
    """``npm ci`` (``npm install`` without a lock file) in ``cdk/``, npm's cache in ``.cache/npm``."""
    npm = shutil.which("npm")
    if npm is None:
        raise ValidatorError(
            f"npm not found: it installs {VALIDATOR_PACKAGE} into {cdk_dir / 'node_modules'} once "
            "(apt-get install nodejs npm, or run `npm ci --prefix cdk` where npm is)"
        )
    verb = "ci" if (cdk_dir / "package-lock.json").is_file() else "install"
    _logger.info("installing %s: npm %s --prefix %s", VALIDATOR_PACKAGE, verb, cdk_dir)
    env = {**os.environ, "npm_config_cache": str(NPM_CACHE), "npm_config_update_notifier": "false"}
    result = subprocess.run(
        [npm, verb, "--no-audit", "--no-fund", "--prefix", str(cdk_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=_INSTALL_TIMEOUT_SECONDS,
        check=False,
    )
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise ValidatorError(f"npm {verb} --prefix {cdk_dir} failed: {last}")
