"""`walletlake sql` as an analyst types it: ad hoc SELECTs on the Iceberg lake through DuckDB.

The lake is filled as the stream fills it (DynamoDB Local → consumer → committer) in two commits,
so that "as of the first commit" and "now" differ by known rows.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from support.fresh_resources import fresh_settings, remove_resources
from support.stream_records import TableWriter

from contracts.settings import Settings
from lake.committer import commit_landed
from lake.iceberg_catalog import load_table, open_catalog
from stream_processor.consumer import drain

pytestmark = pytest.mark.stack


def _land_and_commit(settings: Settings) -> None:
    drain(settings, batch_size=50)
    commit_landed(settings, boto3.client("s3", region_name=settings.region), open_catalog(settings))


def _sql(settings: Settings, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "walletlake.cli", "sql", *args],
        env={**os.environ, **settings.to_env()},
        input=stdin,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _json(done: subprocess.CompletedProcess[str]) -> list[dict[str, str | None]]:
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, str | None]] = json.loads(done.stdout)
    return rows


@pytest.fixture(scope="module")
def two_commits(stack: object) -> Iterator[dict[str, object]]:
    """An Iceberg lake with 3 wallets and 4 deposits in a first commit, 1 wallet and 2 deposits more
    in a second; the instant between the two and the first ledger snapshot id."""
    from walletlake.local import provision

    settings = fresh_settings(lake_format="iceberg")
    provision(settings)
    writer = TableWriter(settings.table)
    writer.workload(wallets=3, deposits=4, transfers=0)
    _land_and_commit(settings)
    first = load_table(settings, "ledger").current_snapshot()
    assert first is not None
    between = dt.datetime.fromtimestamp(first.timestamp_ms / 1000, dt.UTC) + dt.timedelta(milliseconds=500)
    time.sleep(1.0)  # the second commit must be later than `between` by the catalog's clock
    writer.workload(wallets=1, deposits=2, transfers=0, seed=8)
    _land_and_commit(settings)
    yield {"settings": settings, "first_snapshot": first.snapshot_id, "between": between}
    remove_resources(settings)


def test_a_join_across_tables_by_athena_names(two_commits: dict[str, object]) -> None:
    settings = two_commits["settings"]
    assert isinstance(settings, Settings)
    today = dt.datetime.now(dt.UTC).date().isoformat()
    # WHEN an analyst joins ledger and wallets, one of them named with its database as Athena does
    statement = (
        f"SELECT w.user_id, count(*) AS entries, sum(l.amount) AS micro_usd "
        f"FROM {settings.glue_database}.ledger l JOIN wallets w ON w.wallet_id = l.wallet_id "
        f"WHERE l.dt = '{today}' GROUP BY w.user_id ORDER BY entries DESC, w.user_id"
    )
    rows = _json(_sql(settings, statement, "--format", "json"))
    # THEN every deposit is counted once, per owner
    assert len(rows) == 4
    assert sum(int(str(row["entries"])) for row in rows) == 6
    assert all(row["user_id"] for row in rows)


def test_as_of_an_instant_and_a_snapshot_id_reads_the_first_commit(
    two_commits: dict[str, object], tmp_path: Path
) -> None:
    settings = two_commits["settings"]
    assert isinstance(settings, Settings)
    statement = "SELECT count(*) AS n FROM ledger"
    assert _json(_sql(settings, statement, "--format", "json")) == [{"n": "6"}]
    between = two_commits["between"]
    assert isinstance(between, dt.datetime)
    instant = between.isoformat().replace("+00:00", "Z")
    assert _json(_sql(settings, statement, "--as-of", instant, "--format", "json")) == [{"n": "4"}]
    # AND a snapshot id pins its table; the others are read as they were then (3 wallets, not 4)
    first = str(two_commits["first_snapshot"])
    file = tmp_path / "q.sql"
    file.write_text(
        "SELECT (SELECT count(*) FROM ledger) AS entries, (SELECT count(*) FROM wallets) AS wallets;\n"
    )
    rows = _json(_sql(settings, "--file", str(file), "--as-of", first, "--format", "json"))
    assert rows == [{"entries": "4", "wallets": "3"}]


def test_for_timestamp_as_of_runs_locally_per_table(two_commits: dict[str, object]) -> None:
    settings = two_commits["settings"]
    assert isinstance(settings, Settings)
    between = two_commits["between"]
    assert isinstance(between, dt.datetime)
    moment = between.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    # WHEN the statement comes on standard input, the ledger read at the instant, wallets now
    statement = (
        f"SELECT (SELECT count(*) FROM ledger FOR TIMESTAMP AS OF TIMESTAMP '{moment} UTC') AS then_entries, "
        f"(SELECT count(*) FROM wallets) AS wallets_now"
    )
    rows = _json(_sql(settings, "--format", "json", stdin=statement))
    assert rows == [{"then_entries": "4", "wallets_now": "4"}]
    # AND FOR VERSION AS OF the first snapshot reads the same
    version = f"SELECT count(*) AS n FROM ledger FOR VERSION AS OF {two_commits['first_snapshot']}"
    assert _json(_sql(settings, version, "--format", "json")) == [{"n": "4"}]
    # AND csv has a header and the value
    assert _sql(settings, version, "--format", "csv").stdout.splitlines() == ["n", "4"]


@pytest.mark.parametrize(
    ("statement", "says"),
    [
        ("SELEC 1", "Invalid expression"),
        ("SELECT nope FROM ledger", "nope"),
        ("SELECT * FROM no_such_table", "no_such_table"),
        ("DELETE FROM ledger WHERE true", "only queries run here"),
        ("SELECT 1; SELECT 2", "one statement at a time"),
    ],
)
def test_bad_sql_is_one_line_and_exit_2(two_commits: dict[str, object], statement: str, says: str) -> None:
    settings = two_commits["settings"]
    assert isinstance(settings, Settings)
    done = _sql(settings, statement)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("walletlake sql: error: ")
    assert says in lines[0]
    assert "Traceback" not in done.stderr


def test_a_bad_as_of_is_refused_before_any_query(two_commits: dict[str, object]) -> None:
    settings = two_commits["settings"]
    assert isinstance(settings, Settings)
    done = _sql(settings, "SELECT 1 AS one", "--as-of", "yesterday")
    assert done.returncode == 2
    assert "--as-of takes a snapshot id or an ISO-8601 instant" in done.stderr
    unknown = _sql(settings, "SELECT 1 AS one", "--as-of", "1234567890123")
    assert unknown.returncode == 2
    assert "no Iceberg table of the lake has a snapshot 1234567890123" in unknown.stderr
