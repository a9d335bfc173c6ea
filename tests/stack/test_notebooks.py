"""The analyst notebooks run headless, unchanged, against a lake on the embedded stack.

The lake is the Iceberg lake (the default an analyst gets): the notebooks print the same figures
they printed over the plain-Parquet layout, which these tests were first written against.

Each notebook is executed with nbclient in a kernel running this project's interpreter, with the
environment an analyst would have after ``walletlake local up``: the SDK's endpoint variables and
the ``WALLETLAKE_*`` names of the lake. A cell that raises fails the test. The lake is a small,
fully known one (``sample_lake``), so the test can also check that the notebooks found the data:
the parameters they pick themselves (dates, wallet) and the figures they print.

Jupyter and IPython keep their state (kernelspecs, runtime files, history) in a temporary folder,
never in the home directory, and the kernel is this virtualenv's Python whatever else the machine
has registered as ``python3``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from support.sample_lake import SampleLake, make_sample, write_sample

from contracts.settings import Settings
from walletlake.local import EmbeddedStack, patched_environ

pytestmark = [pytest.mark.stack, pytest.mark.slow]

NOTEBOOKS = ("ledger_analytics.ipynb", "reconciliation.ipynb")
CELL_TIMEOUT_SECONDS = 120


@pytest.fixture(scope="module")
def jupyter_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Jupyter/IPython folders in a temp dir, with a ``python3`` kernelspec for this interpreter."""
    root = tmp_path_factory.mktemp("jupyter")
    kernel_dir = root / "data" / "kernels" / "python3"
    kernel_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "walletlake (test)",
        "language": "python",
    }
    (kernel_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    return {
        "JUPYTER_PATH": str(root / "data"),
        "JUPYTER_DATA_DIR": str(root / "data"),
        "JUPYTER_CONFIG_DIR": str(root / "config"),
        "JUPYTER_RUNTIME_DIR": str(root / "runtime"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "IPYTHONDIR": str(root / "ipython"),
        "MPLCONFIGDIR": str(root / "matplotlib"),
        # Jupyter's inline backend: Agg rendering, no display, figures kept as PNG outputs.
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    }


@pytest.fixture
def jupyter_environ(jupyter_env: dict[str, str]) -> Iterator[None]:
    """Point this process's Jupyter machinery (kernelspec lookup) at the temp folders."""
    with patched_environ(jupyter_env):
        yield


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    """The Iceberg lake's settings for each test."""
    return make_settings(lake_format="iceberg")


@dataclasses.dataclass
class CommittedSample:
    """The sample and when each of its days was committed."""

    lake: SampleLake
    commits: list[dt.datetime]


@pytest.fixture
def committed(settings: Settings) -> CommittedSample:
    """A three-day lake ending yesterday (UTC), so a notebook's default window finds it."""
    first_day = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=3)
    lake = make_sample(first_day=first_day)
    return CommittedSample(lake, write_sample(settings, lake))


@pytest.fixture
def sample(committed: CommittedSample) -> SampleLake:
    return committed.lake


def _kernel_env(stack: EmbeddedStack, settings: Settings, jupyter_env: dict[str, str]) -> dict[str, str]:
    """What an analyst's shell holds after ``walletlake local up``: endpoints and lake names."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("WALLETLAKE_")}
    env.update(stack.environment())
    env.update(jupyter_env)
    env.update(
        {
            "WALLETLAKE_BUCKET": settings.bucket,
            "WALLETLAKE_LAKE_PREFIX": settings.lake_prefix,
            "WALLETLAKE_GLUE_DATABASE": settings.glue_database,
            "WALLETLAKE_TABLE": settings.table,
            "WALLETLAKE_LAKE_FORMAT": settings.lake_format,
        }
    )
    return env


def _execute(
    path: Path, env: dict[str, str], keep: Path, parameters: dict[str, object] | None = None
) -> nbformat.NotebookNode:
    """Run the notebook (``parameters`` replace its parameter cell's values, as papermill would);
    the executed copy (outputs, plots) is kept in ``keep`` to look at."""
    notebook = nbformat.read(path, as_version=4)
    for name, value in (parameters or {}).items():
        cell = notebook.cells[1]
        lines = [
            f"{name} = {value!r}" if line.startswith(f"{name} = ") else line
            for line in cell.source.splitlines()
        ]
        assert lines != cell.source.splitlines(), f"no parameter {name} in the notebook's parameter cell"
        cell.source = "\n".join(lines)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_SECONDS,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    try:
        client.execute(env=env)
    finally:
        nbformat.write(notebook, keep / path.name)
    return notebook


def _text_of(notebook: nbformat.NotebookNode) -> str:
    """Every text output of every cell, joined (streams, plain-text results, HTML tables)."""
    parts: list[str] = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                parts.append(output.get("text", ""))
            data: dict[str, Any] = output.get("data", {})
            parts.extend(str(data[kind]) for kind in ("text/plain", "text/html") if kind in data)
    return "\n".join(parts)


def _images_of(notebook: nbformat.NotebookNode) -> int:
    return sum(
        "image/png" in output.get("data", {}) for cell in notebook.cells for output in cell.get("outputs", [])
    )


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebooks_are_stored_without_outputs(project_root: Path, name: str) -> None:
    notebook = nbformat.read(project_root / "notebooks" / name, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code, "a notebook with no code"
    assert all(not cell.outputs and cell.execution_count is None for cell in code)
    # AND no SQL lives in a cell: queries come from queries/sql through run_query
    for cell in code:
        assert "SELECT" not in cell.source.upper().replace("SELECTED", "")


def test_ledger_analytics_runs_against_the_embedded_stack(
    stack: EmbeddedStack,
    settings: Settings,
    sample: SampleLake,
    jupyter_env: dict[str, str],
    jupyter_environ: None,
    project_root: Path,
    tmp_path: Path,
) -> None:
    # GIVEN a known lake, WHEN the notebook runs headless with only the analyst's environment
    notebook = _execute(
        project_root / "notebooks" / "ledger_analytics.ipynb",
        _kernel_env(stack, settings, jupyter_env),
        tmp_path,
    )
    text = _text_of(notebook)
    # THEN it found the lake's days by itself and reported them
    first, last = sample.days[0].isoformat(), sample.days[-1].isoformat()
    assert f"ledger days in window: {first} .. {last}" in text
    # AND the statement is of the busiest wallet, whose final balance it printed exactly
    statement_wallet = _busiest_wallet(sample)
    assert f"statement of {statement_wallet}" in text
    assert f"closing balance {sample.balances()[statement_wallet]:,} micro-USD" in text
    # AND it drew its plots
    assert _images_of(notebook) >= 5


def test_reconciliation_runs_against_the_embedded_stack(
    stack: EmbeddedStack,
    settings: Settings,
    committed: CommittedSample,
    jupyter_env: dict[str, str],
    jupyter_environ: None,
    project_root: Path,
    tmp_path: Path,
) -> None:
    sample = committed.lake
    # GIVEN an as-of moment after the commit of every day but the last
    as_of = committed.commits[-2].isoformat()
    notebook = _execute(
        project_root / "notebooks" / "reconciliation.ipynb",
        _kernel_env(stack, settings, jupyter_env),
        tmp_path,
        parameters={"AS_OF": as_of},
    )
    text = _text_of(notebook)
    # THEN the as-of query saw the wallet's rows of the days committed by then, and all of them now
    wallet = _busiest_wallet(sample)
    rows = [row for row in sample.ledger if row["wallet_id"] == wallet]
    earlier = sum(row["created_at"].date() < sample.days[-1] for row in rows)
    moment = dt.datetime.fromisoformat(as_of).isoformat()
    assert f"{wallet} as of {moment}: {earlier} ledger rows (now: {len(rows)})" in text
    assert earlier < len(rows)
    # THEN it picked the latest run (all ok), not the earlier failed one
    assert f"latest run: {sample.days[-1].isoformat()}" in text
    assert "verdict: PASSED" in text
    # AND drilled into a wallet whose chain holds
    assert "chain breaks: 0, repeated versions: 0, gaps: 0" in text
    assert _images_of(notebook) >= 3


def _busiest_wallet(sample: SampleLake) -> str:
    """The wallet ``top_wallets`` ranks first over the whole sample (most volume moved)."""
    volume: dict[str, int] = {}
    for row in sample.ledger:
        volume[row["wallet_id"]] = volume.get(row["wallet_id"], 0) + row["amount"]
    return max(sorted(volume), key=lambda wallet: volume[wallet])


def test_reconciliation_on_a_lake_never_reconciled_says_so_and_goes_on(
    stack: EmbeddedStack,
    settings: Settings,
    jupyter_env: dict[str, str],
    jupyter_environ: None,
    project_root: Path,
    tmp_path: Path,
) -> None:
    # GIVEN a lake with ledger rows but no reconciliation run yet (a new deployment's first day)
    first_day = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=3)
    write_sample(settings, dataclasses.replace(make_sample(first_day=first_day), reconciliation=[]))
    # WHEN the reconciliation notebook runs (it would raise on an error)
    notebook = _execute(
        project_root / "notebooks" / "reconciliation.ipynb",
        _kernel_env(stack, settings, jupyter_env),
        tmp_path,
    )
    text = _text_of(notebook)
    # THEN a cell says there is no run yet, and the later cells still ran, with empty plots
    assert "no reconciliation run between" in text
    assert "no findings: no run in the window" in text
    assert "chain breaks: 0, repeated versions: 0, gaps: 0" in text
    assert "worst p99 in window" in text
    assert _images_of(notebook) >= 3


#: The README's command that runs a notebook and keeps what it shows.
_KEEP_OUTPUTS = (
    ".venv/bin/jupyter execute --output ../demo-output/ledger_analytics notebooks/ledger_analytics.ipynb"
)


def test_the_documented_command_keeps_the_outputs_in_demo_output(
    stack: EmbeddedStack,
    settings: Settings,
    sample: SampleLake,
    jupyter_env: dict[str, str],
    project_root: Path,
    tmp_path: Path,
) -> None:
    # GIVEN a checkout's notebooks folder (copied, so the run writes beside it, not in the project)
    (tmp_path / "notebooks").mkdir()
    source = project_root / "notebooks" / "ledger_analytics.ipynb"
    (tmp_path / "notebooks" / source.name).write_bytes(source.read_bytes())
    # WHEN the README's commands run as typed (its .venv is this interpreter's)
    readme = (project_root / "README.md").read_text(encoding="utf-8")
    commands = [
        line.replace(".venv/bin/", f"{Path(sys.executable).parent}/")
        for line in readme.splitlines()
        if line in ("mkdir -p demo-output", _KEEP_OUTPUTS)
    ]
    assert len(commands) == 2, "the README no longer shows how to keep a notebook's outputs"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", "\n".join(commands)],
        env={
            **_kernel_env(stack, settings, jupyter_env),
            "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # THEN the executed copy in demo-output holds what the notebook found, and its plots
    executed = nbformat.read(tmp_path / "demo-output" / "ledger_analytics.ipynb", as_version=4)
    first, last = sample.days[0].isoformat(), sample.days[-1].isoformat()
    assert f"ledger days in window: {first} .. {last}" in _text_of(executed)
    assert _images_of(executed) >= 5
    # AND the notebook itself stays without outputs
    assert all(not cell.get("outputs") for cell in nbformat.read(source, as_version=4).cells)


def _stopped_stack_env(
    stack: EmbeddedStack, settings: Settings, jupyter_env: dict[str, str]
) -> dict[str, str]:
    """An analyst's environment whose stack has stopped: every endpoint a closed loopback port."""
    with socket.socket() as gone:
        gone.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{gone.getsockname()[1]}"
    env = _kernel_env(stack, settings, jupyter_env)
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_GLUE", "AWS_ENDPOINT_URL_DYNAMODB"):
        env[name] = closed
    env["WALLETLAKE_ICEBERG_CATALOG_URI"] = closed
    return env


def test_a_stopped_stack_is_one_line_in_a_notebook_and_in_the_python_api(
    stack: EmbeddedStack,
    settings: Settings,
    jupyter_env: dict[str, str],
    jupyter_environ: None,
    project_root: Path,
    tmp_path: Path,
) -> None:
    env = _stopped_stack_env(stack, settings, jupyter_env)
    closed = env["AWS_ENDPOINT_URL_S3"]
    line = (
        f"StackNotAnsweringError: the embedded stack at {closed} is not answering: "
        "start `walletlake local up` and source its exports"
    )
    # WHEN the notebook runs with the stack gone
    notebook = nbformat.read(project_root / "notebooks" / "ledger_analytics.ipynb", as_version=4)
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT_SECONDS, kernel_name="python3", allow_errors=True)
    client.execute(env=env)
    errors = [
        output
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.output_type == "error"
    ]
    # THEN its first query's cell shows one line, not the SDK's retries and traceback
    assert errors, "no cell failed"
    assert errors[0].traceback == [line]
    # AND the Python API of docs/analysts.md says the same in its last line, after a short traceback
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from contracts.settings import Settings\nfrom queries import run_query\n"
            "run_query('daily_volume', {'start_date': '2026-11-15', 'end_date': '2026-11-21'},\n"
            "          Settings.from_env())",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == f"queries._reachability.{line}"
    assert len(lines) < 15
