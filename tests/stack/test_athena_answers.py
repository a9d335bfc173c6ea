"""The analyst's answer is Athena's answer, typed as an analyst types it (issue 37).

One Iceberg lake is filled as the stream fills it (DynamoDB Local → consumer → committer), snapshotted
twice and reconciled three times; then every check runs ``walletlake`` in bash as a user would and reads
its output: timestamps zoned, time zones moved the right way, Athena's refusals, Trino's functions,
the Iceberg metadata tables, every reconciliation run kept, the latest snapshot view, and the lookups
that refuse in one line.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import boto3
import pytest
from support.fresh_resources import fresh_settings, remove_resources
from support.stream_records import TableWriter

from lake.committer import commit_landed
from lake.iceberg_catalog import open_catalog
from stream_processor.consumer import drain

pytestmark = pytest.mark.stack

_BIN = str(Path(sys.executable).parent)
NEW_YORK = ZoneInfo("America/New_York")


@pytest.fixture(scope="module")
def lake(stack: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """An Iceberg lake of 5 wallets and 30 movements, snapshotted twice; its shell environment."""
    from walletlake.local import provision

    settings = fresh_settings(lake_format="iceberg")
    provision(settings)
    TableWriter(settings.table).workload(wallets=5, deposits=10, transfers=10)
    drain(settings, batch_size=50)
    commit_landed(settings, boto3.client("s3", region_name=settings.region), open_catalog(settings))
    environ = {**os.environ, **settings.to_env(), "PATH": f"{_BIN}:{os.environ.get('PATH', '')}"}
    folder = tmp_path_factory.mktemp("athena-answers")
    for _ in range(2):
        snapshot = _bash("walletlake snapshot", environ, folder)
        assert snapshot.returncode == 0, snapshot.stderr
    yield {"settings": settings, "environ": environ, "folder": folder, "day": _today()}
    remove_resources(settings)


def _today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


def _bash(command: str, environ: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        env=environ,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _typed(lake: dict[str, Any], command: str) -> subprocess.CompletedProcess[str]:
    filled = command.replace("$DAY", lake["day"]).replace("$DB", lake["settings"].glue_database)
    return _bash(filled, lake["environ"], lake["folder"])


def _rows(lake: dict[str, Any], command: str) -> list[dict[str, Any]]:
    done = _typed(lake, command)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def _refused(lake: dict[str, Any], command: str, exit_code: int = 2) -> str:
    """The one line a refused command prints, checked to be one line, with no usage and no trace."""
    done = _typed(lake, command)
    assert done.returncode == exit_code, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "usage:" not in done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


# --------------------------------------------------------------------------- 1. timestamps as on Athena


def test_created_at_is_zoned_and_moves_to_new_york_as_on_athena(lake: dict[str, Any]) -> None:
    # GIVEN every entry's commit time, as JSON
    entries = _rows(
        lake, "walletlake sql \"SELECT entry_id, created_at FROM ledger WHERE dt = '$DAY'\" --format json"
    )
    assert len(entries) == 30
    # THEN each carries its zone (UTC, microseconds)
    instants = [dt.datetime.fromisoformat(row["created_at"]) for row in entries]
    assert all(moment.utcoffset() == dt.timedelta(0) for moment in instants)
    assert all(row["created_at"].endswith("+00:00") for row in entries)
    # WHEN the analyst asks for the latest in New York time
    (latest,) = _rows(
        lake,
        "walletlake sql \"SELECT max(created_at AT TIME ZONE 'America/New_York') AS last_ny "
        "FROM ledger WHERE dt = '$DAY'\" --format json",
    )
    # THEN it is New York's wall clock of the latest instant, not the instant read as New York time
    expected = max(instants).astimezone(NEW_YORK).replace(tzinfo=None)
    assert dt.datetime.fromisoformat(latest["last_ny"]) == expected
    # AND counting one New York day gives the rows whose New York date it is
    by_day = Counter(moment.astimezone(NEW_YORK).date().isoformat() for moment in instants)
    for ny_day, count in by_day.items():
        (counted,) = _rows(
            lake,
            "walletlake sql \"SELECT count(*) AS n FROM ledger WHERE dt = '$DAY' "
            f"AND date(created_at AT TIME ZONE 'America/New_York') = DATE '{ny_day}'\" --format json",
        )
        assert counted == {"n": str(count)}
    # AND csv carries the zone too
    done = _typed(
        lake,
        "walletlake sql \"SELECT max(created_at) AS last_at FROM ledger WHERE dt = '$DAY'\" --format csv",
    )
    assert done.stdout.splitlines()[0] == "last_at"
    assert dt.datetime.fromisoformat(done.stdout.splitlines()[1]) == max(instants)
    assert done.stdout.splitlines()[1].endswith("+00:00")


def test_trino_functions_answer_locally_as_on_athena(lake: dict[str, Any]) -> None:
    (row,) = _rows(
        lake,
        "walletlake sql \"SELECT format_datetime(max(created_at), 'yyyy-MM-dd') AS day, "
        "to_iso8601(max(created_at)) AS iso, date_diff('day', min(created_at), max(created_at)) AS days, "
        "date_format(max(created_at), '%Y') AS year FROM ledger WHERE dt = '$DAY'\" --format json",
    )
    assert row["day"] == lake["day"]
    assert row["iso"].startswith(lake["day"] + "T")
    assert row["iso"].endswith("Z")
    assert row["days"] == "0"
    assert row["year"] == lake["day"][:4]


# --------------------------------------------------------------------------- 3. held to Athena's dialect


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (
            "walletlake sql \"SELECT count(*) FROM ledger WHERE dt = DATE '$DAY'\"",
            "compare it with a string: dt = '2026-11-22'",
        ),
        (
            "walletlake sql \"SELECT count(*) FROM ledger WHERE created_at > '$DAY'\"",
            "Athena refuses comparing a string with a timestamp",
        ),
        ('walletlake sql "SELECT human_readable_seconds(90) AS t"', "not available locally; runs on Athena"),
        ('walletlake sql "SELECT count(*) FROM $DB.ledgr"', "$DB.ledgr: no such table in $DB"),
        ('walletlake sql "SELECT 1 AS one" --as-of 123', "no Iceberg table of the lake has a snapshot 123"),
    ],
)
def test_what_athena_rejects_is_refused_in_one_line(lake: dict[str, Any], command: str, says: str) -> None:
    assert says.replace("$DB", lake["settings"].glue_database) in _refused(lake, command)


def test_iceberg_metadata_tables_exist_locally(lake: dict[str, Any]) -> None:
    (total,) = _rows(
        lake, "walletlake sql \"SELECT count(*) AS n FROM ledger WHERE dt = '$DAY'\" --format json"
    )
    (snapshots,) = _rows(
        lake,
        "walletlake sql 'SELECT count(*) AS n, max(operation) AS operation FROM \"ledger$snapshots\"' "
        "--format json",
    )
    (history,) = _rows(lake, "walletlake sql 'SELECT count(*) AS n FROM \"ledger$history\"' --format json")
    (files,) = _rows(
        lake, "walletlake sql 'SELECT sum(record_count) AS n FROM $DB.\"ledger$files\"' --format json"
    )
    (partitions,) = _rows(
        lake, "walletlake sql 'SELECT sum(record_count) AS n FROM \"ledger$partitions\"' --format json"
    )
    assert int(snapshots["n"]) >= 1
    assert snapshots["operation"] == "append"
    assert history["n"] == snapshots["n"]
    assert files["n"] == partitions["n"] == total["n"] == "30"


# --------------------------------------------------------------------------- 2. history kept


def test_every_reconciliation_run_is_kept_and_the_findings_are_the_latest(lake: dict[str, Any]) -> None:
    # GIVEN the day reconciled three times (provisionally: it is open)
    for _ in range(3):
        done = _typed(lake, "walletlake reconcile --date $DAY --provisional --json")
        assert done.returncode == 0, done.stderr
    # THEN reconciliation_runs lists three runs of the day
    runs = _rows(
        lake,
        "walletlake query reconciliation_runs --param start_date=$DAY --param end_date=$DAY --format json",
    )
    assert len(runs) >= 3
    assert len({run["run_at"] for run in runs}) == len(runs)
    assert {(run["wallets"], run["passed"]) for run in runs} == {("5", True)}
    # AND the findings are the latest run's only
    findings = _rows(lake, "walletlake query reconciliation_findings --param date=$DAY --format json")
    assert {row["run_at"] for row in findings} == {max(run["run_at"] for run in runs)}


def test_balance_snapshots_latest_sums_a_day_once(lake: dict[str, Any]) -> None:
    # GIVEN the day snapshotted twice: balance_snapshots keeps both scans
    (every,) = _rows(
        lake, "walletlake sql \"SELECT count(*) AS n FROM balance_snapshots WHERE dt = '$DAY'\" --format json"
    )
    assert every == {"n": "10"}
    # WHEN the day is summed through the view
    (latest,) = _rows(
        lake,
        'walletlake sql "SELECT count(*) AS n, sum(balance) AS total FROM balance_snapshots_latest '
        "WHERE dt = '$DAY'\" --format json",
    )
    # THEN each wallet counts once: the money the wallets hold now
    balances = _rows(lake, "walletlake query current_balances --format json")
    assert latest == {"n": "5", "total": str(sum(int(row["balance"]) for row in balances))}


# --------------------------------------------------------------------------- 5. lookups that refuse


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (
            "walletlake query balance_at --param wallet_id=no-such-wallet --param at=$DAYT23:59:59Z",
            "no wallet no-such-wallet in the lake by",
        ),
        (
            "walletlake query balance_at --param wallet_id=w --param at=$DAY",
            "is a date, not an instant: give the time too",
        ),
        (
            "walletlake query daily_volume --param start_date=$DAY --param end_date=2020-01-01",
            "start_date $DAY is after end_date 2020-01-01",
        ),
        ("walletlake query user_wallets --param user_id=nobody", "no wallet of user nobody in the lake"),
        ("walletlake reconcile --date 2026-02-30", "--date: '2026-02-30' is not a date (YYYY-MM-DD)"),
    ],
)
def test_a_lookup_about_nothing_is_refused_in_one_line(lake: dict[str, Any], command: str, says: str) -> None:
    assert says.replace("$DAY", lake["day"]) in _refused(lake, command)


def test_balance_at_of_a_real_wallet_still_answers(lake: dict[str, Any]) -> None:
    (wallet,) = _rows(
        lake, "walletlake sql \"SELECT min(wallet_id) AS w FROM ledger WHERE dt = '$DAY'\" --format json"
    )
    (row,) = _rows(
        lake,
        f"walletlake query balance_at --param wallet_id={wallet['w']} --param at=$(date -u +%FT%TZ) "
        "--format json",
    )
    assert int(row["version"]) >= 1


def test_without_the_exports_the_credentials_line_names_the_missing_variables(lake: dict[str, Any]) -> None:
    # GIVEN a shell that never sourced the stack's exports (and has no AWS credentials)
    bare = {
        key: value for key, value in lake["environ"].items() if not key.startswith(("AWS_", "WALLETLAKE_"))
    }
    bare |= {
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
        "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    done = _bash(
        "walletlake query daily_volume --param start_date=2026-11-01 --param end_date=2026-11-02 "
        "--engine athena",
        bare,
        lake["folder"],
    )
    # THEN one line says why and what to do
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert "Unable to locate credentials" in line
    assert "AWS_ENDPOINT_URL_S3" in line
    assert "AWS_ENDPOINT_URL_GLUE" in line
    assert "source .walletlake.env" in line
