"""What a ``walletlake`` process imports before its command runs: nothing heavy.

The suite starts a few hundred ``walletlake`` processes, and every one builds the whole parser:
a command module that imports pandas, pyarrow, DuckDB, sqlglot, pyiceberg or boto3 at its top
makes each of them pay about a second for it. Each case runs in a fresh interpreter, whose
``sys.modules`` holds only what the case imported.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import queries

#: What a command imports where it runs, never at parse time.
HEAVY = ("pandas", "pyarrow", "duckdb", "sqlglot", "pyiceberg", "boto3")

_LOADED = f"print(sorted(name for name in {HEAVY!r} if name in sys.modules))"


@pytest.mark.parametrize(
    "script",
    [
        "from walletlake.cli import build_parser; build_parser()",
        # --help exits after printing; what it imported is in sys.modules all the same
        "import contextlib, io\nfrom walletlake.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()): main(['--help'])",
        # a stackless command: lists the queries from their .sql files, no engine made
        "import contextlib, io\nfrom walletlake.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()): assert main(['query', '--list']) == 0",
    ],
    ids=["build_parser", "--help", "query --list"],
)
def test_the_command_line_starts_without_the_heavy_packages(script: str) -> None:
    # WHEN a fresh interpreter builds the parser (and runs what needs no engine)
    done = subprocess.run(
        [sys.executable, "-c", f"import sys\n{script}\n{_LOADED}"],
        capture_output=True,
        text=True,
        check=False,
    )
    # THEN it succeeded and imported none of them
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[-1] == "[]"


def test_every_public_name_of_queries_is_its_modules_own() -> None:
    # GIVEN the names queries loads on first use (PEP 562)
    for name in queries.__all__:
        # WHEN one is asked for, THEN it is the object its defining module holds
        value = getattr(queries, name)
        assert value is getattr(sys.modules[queries._ORIGINS[name]], name), name
    assert sorted(queries._ORIGINS) == sorted(queries.__all__)
