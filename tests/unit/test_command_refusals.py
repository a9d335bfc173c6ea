"""What a command refuses before it runs: days that cannot be reconciled, a stack that is gone."""

from __future__ import annotations

import datetime as dt
import socket
import subprocess
from pathlib import Path

import pytest

from queries._table_clauses import split_table_clauses
from walletlake.days import unreconcilable_reason
from walletlake.stack_probe import not_answering_message, silent_endpoint

TODAY = dt.date(2026, 11, 22)
FIRST = dt.date(2026, 11, 1)


@pytest.mark.parametrize(
    ("day", "first_day", "provisional", "says"),
    [
        (TODAY, FIRST, False, "2026-11-22 is not over yet (UTC)"),
        (TODAY + dt.timedelta(days=1), FIRST, True, "has not started yet"),
        (FIRST - dt.timedelta(days=1), FIRST, False, "before the lake's first day (2026-11-01)"),
        (TODAY - dt.timedelta(days=1), None, False, "the lake holds no wallet yet"),
    ],
)
def test_refused_days(day: dt.date, first_day: dt.date | None, provisional: bool, says: str) -> None:
    reason = unreconcilable_reason(day, today=TODAY, first_day=first_day, provisional=provisional)
    assert reason is not None
    assert says in reason
    assert "\n" not in reason


def test_closed_days_and_a_provisional_today_are_reconciled() -> None:
    assert unreconcilable_reason(FIRST, today=TODAY, first_day=FIRST) is None
    assert unreconcilable_reason(TODAY - dt.timedelta(days=1), today=TODAY, first_day=FIRST) is None
    assert unreconcilable_reason(TODAY, today=TODAY, first_day=FIRST, provisional=True) is None


def test_a_closed_loopback_port_is_named_and_remote_endpoints_are_not_probed() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        open_url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with socket.socket() as gone:
            gone.bind(("127.0.0.1", 0))
            closed_url = f"http://127.0.0.1:{gone.getsockname()[1]}"
        # GIVEN exports of which one loopback listener is gone
        environ = {
            "AWS_ENDPOINT_URL_DYNAMODB": open_url,
            "AWS_ENDPOINT_URL_S3": closed_url,
            "AWS_ENDPOINT_URL_GLUE": "https://glue.us-east-1.amazonaws.com",
        }
        # THEN that one is named; with all answering (or none set) nothing is
        assert silent_endpoint(environ) == closed_url
        assert silent_endpoint({"AWS_ENDPOINT_URL_DYNAMODB": open_url}) is None
        assert silent_endpoint({}) is None
    assert not_answering_message(closed_url) == (
        f"the embedded stack at {closed_url} is not answering: "
        "start `walletlake local up` and source its exports"
    )


def test_athena_names_and_clauses_become_views_and_pins() -> None:
    clauses = split_table_clauses(
        "SELECT * FROM awsdatacatalog.lakedb.ledger "
        "FOR TIMESTAMP AS OF TIMESTAMP '2026-11-22 09:00:00 UTC' l "
        "JOIN lakedb.wallets FOR VERSION AS OF 7 w ON w.wallet_id = l.wallet_id JOIN other.ledger o ON true",
        "lakedb",
    )
    assert clauses.versions == {"wallets": 7}
    assert clauses.timestamps == {"ledger": "CAST('2026-11-22 09:00:00 UTC' AS TIMESTAMP(0) WITH TIME ZONE)"}
    assert "FROM ledger AS l JOIN wallets AS w" in clauses.sql
    assert "other.ledger" in clauses.sql
    with pytest.raises(ValueError, match="ledger is read at two points"):
        split_table_clauses("SELECT 1 FROM ledger FOR VERSION AS OF 1, ledger FOR VERSION AS OF 2", "lakedb")


def test_the_credentials_line_names_the_endpoint_variables_a_shell_lacks() -> None:
    from walletlake.cli import credentials_hint

    # GIVEN a shell with only the S3 endpoint exported
    line = credentials_hint({"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:8333"})
    # THEN the others are named, with what to type
    assert line == (
        "Unable to locate credentials, and AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_DYNAMODB_STREAMS, "
        "AWS_ENDPOINT_URL_GLUE, WALLETLAKE_ICEBERG_CATALOG_URI are not set, so this went to AWS: for the "
        'embedded stack, `source .walletlake.env` (or `eval "$(walletlake local env)"`); for AWS, '
        "configure credentials"
    )


def test_help_calls_the_lake_iceberg(capsys: pytest.CaptureFixture[str]) -> None:
    from walletlake.cli import build_parser

    build_parser().print_help()
    first = capsys.readouterr().out.splitlines()[2]
    assert first == "A wallet ledger on DynamoDB and its exact Apache Iceberg lake on S3."


@pytest.mark.parametrize(
    ("name", "params", "says"),
    [
        (
            "balance_at",
            {"wallet_id": "w", "at": "2026-11-22"},
            "balance_at: at: 2026-11-22 is a date, not an instant: give the time too (2026-11-22T00:00:00Z",
        ),
        (
            "daily_volume",
            {"start_date": "2026-11-22", "end_date": "2026-11-21"},
            "daily_volume: start_date 2026-11-22 is after end_date 2026-11-21",
        ),
        (
            "wallet_statement",
            {"wallet_id": "w", "start": "2026-11-22T10:00:00Z", "end": "2026-11-22T09:00:00Z"},
            "wallet_statement: start 2026-11-22T10:00:00 is after end 2026-11-22T09:00:00",
        ),
    ],
)
def test_parameters_about_nothing_are_refused_before_any_sql(
    name: str, params: dict[str, str], says: str
) -> None:
    from queries import ParameterError, get_query

    with pytest.raises(ParameterError) as refused:
        get_query(name).bind(params)
    assert says in str(refused.value)


def test_as_of_a_number_is_a_snapshot_id_however_short() -> None:
    from queries.as_of import parse_point

    assert parse_point("123") == 123


def test_what_the_docs_make_in_a_checkout_is_ignored_by_git(project_root: Path) -> None:
    # GIVEN the files the README and docs/analysts.md have a user write into the checkout
    made = [
        ".walletlake.env",
        "reconciliation.json",
        ".tools",
        ".walletlake/exports.env",
        "demo-output/report.html",
    ]
    # THEN git ignores every one
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", *made],
        cwd=project_root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.split() == made
