"""DynamoDB Local's launcher: compiled once into the tools folder, or run from source without javac.

No JVM here: ``javac`` is a stand-in script that writes the class file and counts its calls.
"""

from __future__ import annotations

import stat
from pathlib import Path

from walletlake.local._tools import DYNAMODB_LOCAL_LAUNCHER as LAUNCHER
from walletlake.local._tools import compiled_launcher, dynamodb_local_argv


def _jdk(tmp_path: Path, javac_body: str | None) -> str:
    """A ``bin/`` with a ``java`` (never run) and, if given, a ``javac`` script; the java path."""
    bin_dir = tmp_path / "jdk" / "bin"
    bin_dir.mkdir(parents=True)
    java = bin_dir / "java"
    java.write_text("#!/bin/sh\nexit 1\n")
    if javac_body is not None:
        javac = bin_dir / "javac"
        javac.write_text(f"#!/bin/sh\n{javac_body}\n")
        javac.chmod(javac.stat().st_mode | stat.S_IXUSR)
    return str(java)


# The stand-in javac: `javac -cp JAR -d DIR SOURCE` writes DIR/LoopbackDynamoDBLocal.class.
_WRITES_CLASS = 'echo call >> "$(dirname "$0")/calls"; touch "$4/LoopbackDynamoDBLocal.class"'


def test_the_launcher_is_compiled_once_and_run_from_its_class(tmp_path: Path) -> None:
    # GIVEN a JDK with javac
    java = _jdk(tmp_path, _WRITES_CLASS)
    jar_dir = tmp_path / "dynamodb_local_2026-01-16"
    # WHEN two stacks start, one after the other
    first = compiled_launcher(java, jar_dir, LAUNCHER, root=tmp_path / "tools")
    second = compiled_launcher(java, jar_dir, LAUNCHER, root=tmp_path / "tools")
    # THEN javac ran once, and DynamoDB Local starts from the class, its jar first on the class path
    assert first is not None
    assert first == second
    assert (tmp_path / "jdk" / "bin" / "calls").read_text().splitlines() == ["call"]
    argv = dynamodb_local_argv(java, jar_dir, 8000, tmp_path / "db", "127.0.0.1", LAUNCHER, first)
    assert argv[argv.index("-cp") + 1] == f"{jar_dir / 'DynamoDBLocal.jar'}:{first}"
    assert argv[argv.index("-cp") + 2 : argv.index("-cp") + 4] == ["LoopbackDynamoDBLocal", "127.0.0.1"]


def test_without_javac_or_when_it_fails_the_source_launcher_runs(tmp_path: Path) -> None:
    jar_dir = tmp_path / "dynamodb_local_2026-01-16"
    # GIVEN a Java runtime with no javac beside it, and one whose javac fails
    no_javac = _jdk(tmp_path / "jre", None)
    failing = _jdk(tmp_path / "broken", "exit 1")
    # THEN there is no compiled launcher, and nothing half-made is left behind
    assert compiled_launcher(no_javac, jar_dir, LAUNCHER, root=tmp_path / "tools") is None
    assert compiled_launcher(failing, jar_dir, LAUNCHER, root=tmp_path / "tools") is None
    assert not [path for path in (tmp_path / "tools").rglob("*") if path.is_file()]
    # AND DynamoDB Local is started through Java's source launcher, as before
    argv = dynamodb_local_argv(no_javac, jar_dir, 8000, tmp_path / "db", "127.0.0.1", LAUNCHER)
    assert argv[argv.index("-cp") + 1 : argv.index("-cp") + 4] == [
        str(jar_dir / "DynamoDBLocal.jar"),
        str(LAUNCHER),
        "127.0.0.1",
    ]


def test_a_stack_in_memory_gives_dynamodb_local_no_data_folder(tmp_path: Path) -> None:
    on_disk = dynamodb_local_argv("java", tmp_path, 8000, tmp_path / "db", "127.0.0.1", LAUNCHER)
    in_memory = dynamodb_local_argv(
        "java", tmp_path, 8000, tmp_path / "db", "127.0.0.1", LAUNCHER, in_memory=True
    )
    assert on_disk[on_disk.index("-dbPath") + 1] == str(tmp_path / "db")
    assert "-inMemory" not in on_disk
    assert "-inMemory" in in_memory
    assert "-dbPath" not in in_memory
    assert [arg for arg in on_disk if arg not in ("-dbPath", str(tmp_path / "db"))] == [
        arg for arg in in_memory if arg != "-inMemory"
    ]


def test_a_quick_jit_stops_the_jvms_compiler_at_c1_before_the_main_class(tmp_path: Path) -> None:
    peak = dynamodb_local_argv("java", tmp_path, 8000, tmp_path / "db", "127.0.0.1", LAUNCHER)
    quick = dynamodb_local_argv(
        "java", tmp_path, 8000, tmp_path / "db", "127.0.0.1", LAUNCHER, quick_jit=True
    )
    assert "-XX:TieredStopAtLevel=1" not in peak
    # a JVM option: it must come before the class path and main class, or Java passes it to main
    assert quick.index("-XX:TieredStopAtLevel=1") < quick.index("-cp")
    assert [arg for arg in quick if arg != "-XX:TieredStopAtLevel=1"] == peak
