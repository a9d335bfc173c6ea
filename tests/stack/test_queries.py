"""The ``.sql`` files, their parameters and the two engines (DuckDB for real, Athena's call shape)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
import sqlglot
from awswrangler import _sql_formatter
from sqlglot import exp
from support.ledger_builder import USD, Book, s3_client, write_landing, write_table

from contracts.lake_tables import TABLES
from contracts.settings import Settings
from queries import ParameterError, get_query, list_queries, run_query
from queries._athena import AthenaEngine
from queries._catalog import expand_includes
from queries._duckdb import DuckDBEngine, s3_secret_sql
from queries._parameters import literal, parse_value, render
from walletlake import cli

DAY = dt.date(2026, 11, 20)
NEXT = dt.date(2026, 11, 21)
T0 = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.UTC)
EXAMPLES = {
    "string": "w'1",
    "timestamp": "2026-11-20T10:00:00Z",
    "date": "2026-11-20",
    "integer": "5",
    "count": "5",
}
#: The files this module answers for; every file in queries/sql/ is parsed and pruning-checked.
OWN_QUERIES = (
    "wallet_statement",
    "balance_as_of",
    "daily_volume",
    "top_wallets",
    "money_conservation",
    "reconcile_wallets",
    "reconcile_wallet_problems",
    "reconcile_transfers",
    "reconciliation_findings",
)


def _example_values(name: str) -> dict[str, Any]:
    return {p.name: parse_value(p.type, EXAMPLES[p.type]) for p in get_query(name).parameters}


# ---------------------------------------------------------------- the catalog, without the stack


def test_the_required_queries_exist_with_their_parameters() -> None:
    # GIVEN the catalog
    signatures = {query.name: query.signature() for query in list_queries()}
    # THEN each question the issue names is there, with its parameters and types
    assert signatures["wallet_statement"] == "wallet_id string, start timestamp, end timestamp"
    assert signatures["balance_as_of"] == "wallet_id string, at timestamp"
    assert signatures["daily_volume"] == "start_date date, end_date date"
    assert signatures["top_wallets"] == "start_date date, end_date date, limit count"
    assert signatures["money_conservation"] == "date date"
    assert "reconcile_wallets" in signatures
    assert "reconcile_transfers" in signatures
    assert all(query.description for query in list_queries())


@pytest.mark.parametrize("query", list_queries(), ids=lambda q: q.name)
def test_every_file_parses_as_trino_once_rendered(query: Any) -> None:
    # WHEN the file is rendered with example values, as Athena receives it
    sql = render(query.sql, _example_values(query.name))
    # THEN it is one valid Trino statement
    assert len(sqlglot.parse(sql, read="trino")) == 1


@pytest.mark.parametrize("query", list_queries(), ids=lambda q: q.name)
def test_every_scan_of_a_lake_table_bounds_dt(query: Any) -> None:
    # GIVEN the parsed query
    tree = sqlglot.parse_one(render(query.sql, _example_values(query.name)), read="trino")
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    # THEN every SELECT that reads a lake table has a WHERE naming dt (partition pruning in Athena)
    for select in tree.find_all(exp.Select):
        tables = [
            t.name
            for t in select.find_all(exp.Table)
            if t.name in TABLES and t.name not in ctes
            if t.find_ancestor(exp.Select) is select
        ]
        if tables:
            where = select.args.get("where")
            assert where is not None, f"{query.name}: a SELECT of {tables} has no WHERE"
            assert any(c.name == "dt" for c in where.find_all(exp.Column)), f"{query.name}: no dt bound"


@pytest.mark.parametrize("query", list_queries(), ids=lambda q: q.name)
def test_rendering_matches_awswrangler_named_style(query: Any) -> None:
    # GIVEN typed values for the query
    values = _example_values(query.name)
    # THEN DuckDB's rendering is exactly what awswrangler sends to Athena
    assert render(query.sql, values) == _sql_formatter._process_sql_params(
        query.sql, values, engine_type="presto"
    )


def test_include_lines_are_replaced_by_their_fragment() -> None:
    # GIVEN a query body that includes a fragment
    text = "-- q\nWITH\n-- @include entries\nlast AS (SELECT 1)\nSELECT * FROM last\n"

    # WHEN expanded
    expanded = expand_includes("q", text, {"entries": "first AS (SELECT 0),\n"})

    # THEN the fragment stands where the line was; an unknown fragment is an error naming the file
    assert expanded == "-- q\nWITH\nfirst AS (SELECT 0),\nlast AS (SELECT 1)\nSELECT * FROM last\n"
    with pytest.raises(ValueError, match=r"q\.sql: no fragment named 'missing'"):
        expand_includes("q", "-- @include missing\n", {})


def test_the_reconciliation_queries_share_their_entry_checks() -> None:
    # THEN both reconciliation queries hold the fragment's text, expanded, and no include line
    for name in ("reconcile_wallets", "reconcile_wallet_problems"):
        sql = get_query(name).sql
        assert "@include" not in sql
        assert "is_break" in sql
        assert "lag(wallet_version, 1, 0)" in sql


def test_parameters_parse_by_type() -> None:
    assert parse_value("timestamp", "2026-11-20T10:00:00Z") == dt.datetime(2026, 11, 20, 10)
    assert parse_value("timestamp", "2026-11-20T12:00:00.123456+02:00") == dt.datetime(
        2026, 11, 20, 10, 0, 0, 123000
    )
    assert parse_value("timestamp", "2026-11-20 10:00") == dt.datetime(2026, 11, 20, 10)
    assert parse_value("date", "2026-11-20") == "2026-11-20"
    assert parse_value("integer", " 12 ") == 12
    assert literal(dt.datetime(2026, 11, 20, 10)) == "TIMESTAMP '2026-11-20 10:00:00.000'"
    assert literal("o'neil") == "'o''neil'"
    for kind, text in (("timestamp", "yesterday"), ("date", "2026-13-01"), ("integer", "1.5")):
        with pytest.raises(ParameterError):
            parse_value(kind, text)


def test_binding_refuses_missing_and_unknown_parameters() -> None:
    query = get_query("daily_volume")
    with pytest.raises(ParameterError, match="needs end_date"):
        query.bind({"start_date": "2026-11-20"})
    with pytest.raises(ParameterError, match="no parameter wallet"):
        query.bind({"start_date": "2026-11-20", "end_date": "2026-11-20", "wallet": "x"})
    with pytest.raises(KeyError, match="no query named"):
        get_query("nope")


def test_athena_engine_hands_the_file_to_awswrangler_read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN awswrangler's Athena reader replaced by a recorder (no AWS account here)
    import awswrangler as wr

    calls: list[dict[str, Any]] = []

    def record(sql: str, **kwargs: Any) -> pd.DataFrame:
        calls.append({"sql": sql, **kwargs})
        return pd.DataFrame({"n": pd.array([1], dtype="Int64")})

    monkeypatch.setattr(wr.athena, "read_sql_query", record)
    settings = Settings().replace(glue_database="lakedb", athena_workgroup="wg")
    # WHEN a query runs on the Athena engine
    run_query("money_conservation", {"date": "2026-11-20"}, settings, AthenaEngine(settings))
    # THEN the file goes as written, with typed named parameters, in the workgroup, without CTAS
    (call,) = calls
    assert call["sql"] == get_query("money_conservation").sql
    assert call["database"] == "lakedb"
    assert call["workgroup"] == "wg"
    assert call["ctas_approach"] is False
    assert call["params"] == {"date": "2026-11-20"}
    assert call["paramstyle"] == "named"


# ---------------------------------------------------------------- DuckDB over a hand-built lake


@pytest.fixture
def book() -> Book:
    """Three wallets over two days: a, b and c, deposits and transfers with known balances."""
    book = Book()
    for wallet in "abc":
        book.open(wallet, T0)
    book.deposit("a", 100 * USD, T0)  # a1 = 100
    book.deposit("b", 50 * USD, T0 + dt.timedelta(minutes=1))  # b1 = 50
    book.transfer("a", "b", 30 * USD, T0 + dt.timedelta(minutes=2))  # a2 = 70, b2 = 80
    book.transfer("b", "c", 5 * USD, T0 + dt.timedelta(minutes=3))  # b3 = 75, c1 = 5
    book.deposit("c", 7 * USD, T0 + dt.timedelta(days=1))  # c2 = 12 (next day)
    book.transfer("c", "a", 2 * USD, T0 + dt.timedelta(days=1, minutes=1))  # c3 = 10, a3 = 72
    return book


@pytest.fixture
def engine(settings: Settings) -> Iterator[DuckDBEngine]:
    with DuckDBEngine(settings) as duck:
        yield duck


@pytest.mark.stack
def test_wallet_statement_has_the_running_balance(
    settings: Settings, book: Book, engine: DuckDBEngine
) -> None:
    # GIVEN the ledger landed, one file landed twice (a retried batch under another name)
    keys = write_landing(settings, book.rows, batch_rows=2)
    _copy(settings, keys[1], keys[1].replace(".parquet", "-again.parquet"))
    # WHEN b's statement for the first day is asked
    frame = run_query(
        "wallet_statement",
        {"wallet_id": "b", "start": "2026-11-20T00:00:00Z", "end": "2026-11-21T00:00:00Z"},
        settings,
        engine,
    )
    # THEN each entry appears once, in version order, with the running balance
    assert frame["wallet_version"].tolist() == [1, 2, 3]
    assert frame["delta"].tolist() == [50 * USD, 30 * USD, -5 * USD]
    assert frame["running_balance"].tolist() == [50 * USD, 80 * USD, 75 * USD]
    assert frame["running_balance"].tolist() == frame["balance_after"].tolist()
    assert frame["counterparty_wallet_id"].tolist()[1:] == ["a", "c"]
    assert str(frame["amount"].dtype) == "Int64"


@pytest.mark.stack
def test_wallet_statement_window_starts_mid_history(
    settings: Settings, book: Book, engine: DuckDBEngine
) -> None:
    write_landing(settings, book.rows)
    # WHEN a's statement starts after its first entry and spans both days
    frame = run_query(
        "wallet_statement",
        {"wallet_id": "a", "start": "2026-11-20T09:01:00Z", "end": "2026-11-22T00:00:00Z"},
        settings,
        engine,
    )
    # THEN the running balance starts from the balance before the first entry shown
    assert frame["wallet_version"].tolist() == [2, 3]
    assert frame["running_balance"].tolist() == [70 * USD, 72 * USD]


@pytest.mark.stack
def test_balance_as_of(settings: Settings, book: Book, engine: DuckDBEngine) -> None:
    # GIVEN the ledger and the first day's reconciled closes
    write_landing(settings, book.rows)
    write_table(
        settings,
        "daily_balances",
        DAY,
        "daily_balances.parquet",
        [
            {
                "wallet_id": "a",
                "closing_balance": 70 * USD,
                "closing_version": 2,
                "entries": 2,
                "net_delta": 70 * USD,
            },
            {
                "wallet_id": "c",
                "closing_balance": 5 * USD,
                "closing_version": 1,
                "entries": 1,
                "net_delta": 5 * USD,
            },
        ],
    )

    def balance(wallet: str, at: str) -> tuple[Any, Any, Any]:
        row = run_query("balance_as_of", {"wallet_id": wallet, "at": at}, settings, engine).iloc[0]
        return _value(row["balance"]), _value(row["version"]), _value(row["source"])

    # THEN within a day with entries the ledger answers; the instant is inclusive
    assert balance("b", "2026-11-20T09:02:00Z") == (80 * USD, 2, "ledger")
    assert balance("b", "2026-11-20T09:01:59.999Z") == (50 * USD, 1, "ledger")
    # AND on the next day, before the wallet's first entry of it, the previous close answers
    assert balance("a", "2026-11-21T08:00:00Z") == (70 * USD, 2, "daily_balances")
    assert balance("a", "2026-11-21T23:00:00+00:00") == (72 * USD, 3, "ledger")
    # AND with neither, nothing is made up
    assert balance("b", "2026-11-21T08:00:00Z") == (None, None, None)


def _wallet_rows(book: Book) -> list[dict[str, Any]]:
    return [
        {"wallet_id": state.wallet_id, "user_id": state.user_id, "created_at": state.created_at}
        for state in book.wallets.values()
    ]


@pytest.mark.stack
def test_balance_at_reads_the_ledger_when_no_close_covers_the_instant(
    settings: Settings, book: Book, engine: DuckDBEngine
) -> None:
    # GIVEN the ledger and no reconciled day at all
    write_landing(settings, book.rows)

    def balance(wallet: str, at: str) -> tuple[Any, ...]:
        row = run_query("balance_at", {"wallet_id": wallet, "at": at}, settings, engine).iloc[0]
        return _value(row["balance"]), row["balance_usd"], _value(row["version"])

    # THEN the day after, before b's first entry of it, the ledger's history answers (balance_as_of
    # has nothing: no reconciled close)
    assert balance("b", "2026-11-21T08:00:00Z") == (75 * USD, decimal.Decimal("75.000000"), 3)
    assert balance("a", "2026-11-21T23:00:00Z") == (72 * USD, decimal.Decimal("72.000000"), 3)
    assert balance("b", "2026-11-20T09:01:59.999Z") == (50 * USD, decimal.Decimal("50.000000"), 1)
    # AND a wallet the lake has no record of by the instant (no creation, no entry) is no row, not a
    # balance of 0 (walletlake query refuses it in one line)
    assert run_query("balance_at", {"wallet_id": "c", "at": "2026-11-19T00:00:00Z"}, settings, engine).empty
    # AND once created, before any entry, the wallet held nothing
    idle = {"wallet_id": "d", "user_id": "user-d", "created_at": T0}
    write_table(settings, "wallets", DAY, "w.parquet", [idle])
    assert balance("d", "2026-11-20T23:00:00Z") == (0, decimal.Decimal("0.000000"), 0)
    # AND balance_as_of says it has no source, with its USD column null too
    as_of = run_query("balance_as_of", {"wallet_id": "b", "at": "2026-11-21T08:00:00Z"}, settings, engine)
    assert as_of.iloc[0]["balance_usd"] is None or pd.isna(as_of.iloc[0]["balance_usd"])


@pytest.mark.stack
def test_a_users_wallets_and_every_current_balance(
    settings: Settings, book: Book, engine: DuckDBEngine
) -> None:
    # GIVEN the ledger, the wallets (owned by user-a, user-b, user-c) and one wallet without entries
    write_landing(settings, book.rows)
    idle = {"wallet_id": "d", "user_id": "user-d", "created_at": T0 + dt.timedelta(days=1)}
    write_table(settings, "wallets", DAY, "w.parquet", _wallet_rows(book))
    write_table(settings, "wallets", DAY + dt.timedelta(days=1), "w.parquet", [idle])
    # WHEN a user's wallets are asked by user_id
    owned = run_query("user_wallets", {"user_id": "user-c"}, settings, engine)
    # THEN the wallet comes with its balance now, in micro-USD and in exact USD
    assert owned[["wallet_id", "balance", "version"]].to_dict("records") == [
        {"wallet_id": "c", "balance": 10 * USD, "version": 3}
    ]
    assert owned.iloc[0]["balance_usd"] == decimal.Decimal("10.000000")
    assert run_query("user_wallets", {"user_id": "nobody"}, settings, engine).empty
    # AND every wallet's current balance, the idle one at 0
    balances = run_query("current_balances", {}, settings, engine)
    assert balances[["wallet_id", "balance", "version"]].to_dict("records") == [
        {"wallet_id": "b", "balance": 75 * USD, "version": 3},
        {"wallet_id": "a", "balance": 72 * USD, "version": 3},
        {"wallet_id": "c", "balance": 10 * USD, "version": 3},
        {"wallet_id": "d", "balance": 0, "version": 0},
    ]
    assert balances["balance_usd"].tolist() == [
        decimal.Decimal(v) for v in ("75.000000", "72.000000", "10.000000", "0.000000")
    ]
    # AND no column an analyst reads as dollars is a float
    assert not any(str(kind).startswith("float") for kind in balances.dtypes)


@pytest.mark.stack
def test_daily_volume_and_top_wallets(settings: Settings, book: Book, engine: DuckDBEngine) -> None:
    keys = write_landing(settings, book.rows)
    _copy(settings, keys[0], keys[0].replace(".parquet", "-copy.parquet"))  # copies count once
    # WHEN the volume over both days is asked
    volume = run_query(
        "daily_volume", {"start_date": "2026-11-20", "end_date": "2026-11-21"}, settings, engine
    )
    # THEN each day has its money in and out, transfers (once each) and active wallets
    assert volume.to_dict("records") == [
        {
            "day": "2026-11-20",
            "money_in_movements": 2,
            "money_in": 150 * USD,
            "money_out_movements": 0,
            "money_out": 0,
            "transfers": 2,
            "transfer_amount": 35 * USD,
            "active_wallets": 3,
            "money_in_usd": decimal.Decimal("150.000000"),
            "money_out_usd": decimal.Decimal("0.000000"),
            "transfer_usd": decimal.Decimal("35.000000"),
        },
        {
            "day": "2026-11-21",
            "money_in_movements": 1,
            "money_in": 7 * USD,
            "money_out_movements": 0,
            "money_out": 0,
            "transfers": 1,
            "transfer_amount": 2 * USD,
            "active_wallets": 2,
            "money_in_usd": decimal.Decimal("7.000000"),
            "money_out_usd": decimal.Decimal("0.000000"),
            "transfer_usd": decimal.Decimal("2.000000"),
        },
    ]
    # AND the top wallets by money moved, limited
    top = run_query(
        "top_wallets", {"start_date": "2026-11-20", "end_date": "2026-11-21", "limit": "2"}, settings, engine
    )
    assert top[["wallet_id", "entries", "total_amount", "net_amount"]].to_dict("records") == [
        {"wallet_id": "a", "entries": 3, "total_amount": 132 * USD, "net_amount": 72 * USD},
        {"wallet_id": "b", "entries": 3, "total_amount": 85 * USD, "net_amount": 75 * USD},
    ]
    # AND a range without data is empty, not an error
    empty = run_query(
        "daily_volume", {"start_date": "2026-01-01", "end_date": "2026-01-02"}, settings, engine
    )
    assert empty.empty


@pytest.mark.stack
def test_money_conservation(settings: Settings, book: Book, engine: DuckDBEngine) -> None:
    # GIVEN a clean first day and a second day where one transfer's credit leg is bigger than its debit
    rows = [dict(row) for row in book.rows]
    credit = next(
        r
        for r in rows
        if r["created_at"].date() == NEXT and r["direction"] == "credit" and r["txn_type"] == "transfer"
    )
    credit["amount"] += 1
    credit["delta"] += 1
    write_landing(settings, rows)
    # WHEN conservation is checked per day
    first = run_query("money_conservation", {"date": "2026-11-20"}, settings, engine).iloc[0].to_dict()
    second = run_query("money_conservation", {"date": "2026-11-21"}, settings, engine).iloc[0].to_dict()
    # THEN the first day balances exactly
    assert first == {
        "day": "2026-11-20",
        "entries": 6,
        "money_in_entries": 2,
        "money_in": 150 * USD,
        "money_out_entries": 0,
        "money_out": 0,
        "transfer_debits": 2,
        "debit_amount": 35 * USD,
        "transfer_credits": 2,
        "credit_amount": 35 * USD,
        "unregistered_entries": 0,
        "net_change": 150 * USD,
        "unbalanced_transfers": 0,
        "conserved": True,
    }
    # AND the second does not: one transfer is off by one micro-dollar
    assert second["debit_amount"] == 2 * USD
    assert second["credit_amount"] == 2 * USD + 1
    assert second["unbalanced_transfers"] == 1
    assert second["net_change"] == 7 * USD + 1
    assert second["conserved"] is False


@pytest.mark.stack
def test_reconciliation_findings_lists_a_day(settings: Settings, engine: DuckDBEngine) -> None:
    run_at = dt.datetime(2026, 11, 21, 1, tzinfo=dt.UTC)
    write_table(
        settings,
        "reconciliation",
        DAY,
        "reconciliation.parquet",
        [
            {
                "wallet_id": None,
                "status": "ok",
                "expected": None,
                "actual": None,
                "detail": "transfers: ok",
                "run_at": run_at,
            },
            {
                "wallet_id": "b",
                "status": "lagging",
                "expected": 4,
                "actual": 3,
                "detail": "4",
                "run_at": run_at,
            },
            {
                "wallet_id": "a",
                "status": "missing",
                "expected": 3,
                "actual": 1,
                "detail": "2..3",
                "run_at": run_at,
            },
        ],
    )
    frame = run_query("reconciliation_findings", {"date": "2026-11-20"}, settings, engine)
    assert frame["status"].tolist() == ["missing", "lagging", "ok"]
    assert frame["expected"].tolist()[:2] == [3, 4]


@pytest.mark.stack
def test_tables_without_objects_are_empty_views_with_the_glue_columns(
    settings: Settings, engine: DuckDBEngine
) -> None:
    # GIVEN an empty lake
    # WHEN every table is read
    for table, schema in TABLES.items():
        frame = engine.run(f"SELECT * FROM {table} WHERE dt = :d", {"d": "2026-11-20"})
        # THEN no row, and the columns Glue declares, dt last
        assert frame.empty
        assert list(frame.columns) == [*schema.names, "dt"]


@pytest.mark.stack
def test_sums_come_back_as_int64_not_128_bit(settings: Settings, book: Book, engine: DuckDBEngine) -> None:
    write_landing(settings, book.rows)
    frame = engine.run(
        "SELECT sum(amount) AS total, count(*) AS n FROM ledger WHERE dt = :d", {"d": "2026-11-20"}
    )
    assert str(frame["total"].dtype) == "Int64"
    assert frame["total"].tolist() == [(100 + 50 + 30 + 30 + 5 + 5) * USD]


@pytest.mark.stack
def test_duckdb_secret_points_at_the_sdk_endpoint(settings: Settings) -> None:
    import os

    import boto3

    # GIVEN the SDK configured by the embedded stack's AWS_ENDPOINT_URL_S3
    secret = s3_secret_sql(boto3.Session(region_name=settings.region), settings.region)
    # THEN DuckDB's S3 secret uses that endpoint, path-style, without TLS, and the SDK's credentials
    endpoint = os.environ["AWS_ENDPOINT_URL_S3"].removeprefix("http://")
    assert f"ENDPOINT '{endpoint}'" in secret
    assert "URL_STYLE 'path'" in secret
    assert "USE_SSL false" in secret
    assert f"KEY_ID '{os.environ['AWS_ACCESS_KEY_ID']}'" in secret


@pytest.mark.stack
def test_query_command_prints_table_csv_and_json(
    settings: Settings, book: Book, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN the CLI pointed at this test's lake
    write_landing(settings, book.rows)
    monkeypatch.setenv("WALLETLAKE_BUCKET", settings.bucket)
    monkeypatch.setenv("WALLETLAKE_LAKE_PREFIX", settings.lake_prefix)
    argv = [
        "query",
        "top_wallets",
        "-p",
        "start_date=2026-11-20",
        "--param",
        "end_date=2026-11-20",
        "-p",
        "limit=1",
    ]
    # WHEN it prints JSON
    assert cli.main([*argv, "--format", "json", "--engine", "duckdb"]) == 0
    rows = json.loads(capsys.readouterr().out)
    # THEN rows are objects and integers are strings of digits (exact in any JSON reader)
    assert rows == [
        {
            "wallet_id": "a",
            "entries": "2",
            "total_amount": str(130 * USD),
            "credit_amount": str(100 * USD),
            "debit_amount": str(30 * USD),
            "net_amount": str(70 * USD),
            "total_usd": "130.000000",
            "net_usd": "70.000000",
        }
    ]
    # AND csv and table formats print the same row
    assert cli.main([*argv, "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        f"a,2,{130 * USD},{100 * USD},{30 * USD},{70 * USD},130.000000,70.000000"
    )
    assert cli.main(argv) == 0
    assert "130000000" in capsys.readouterr().out
    # AND a bad parameter is a one-line error with exit code 2, before any SQL runs
    assert cli.main(["query", "top_wallets", "-p", "start_date=2026-11-20"]) == 2
    assert "needs end_date, limit" in capsys.readouterr().err
    limits = ["-p", "start_date=2026-11-20", "-p", "end_date=2026-11-20", "-p", "limit=-1"]
    assert cli.main(["query", "top_wallets", *limits]) == 2
    assert capsys.readouterr().err == (
        "walletlake query: error: top_wallets: limit: -1 is not a count (an integer of 1 or more)\n"
    )
    # AND an unknown query's message carries no repr quotes
    assert cli.main(["query", "nope"]) == 2
    assert capsys.readouterr().err.startswith("walletlake query: error: no query named nope; known: ")


def test_query_list_names_every_query_and_parameter(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["query", "--list"]) == 0
    out = capsys.readouterr().out
    for name in OWN_QUERIES:
        assert f"{name}(" in out
    assert "--param limit=<count>" in out


def _copy(settings: Settings, source: str, target: str) -> None:
    s3_client(settings).copy_object(
        Bucket=settings.bucket, Key=target, CopySource={"Bucket": settings.bucket, "Key": source}
    )


def _value(value: Any) -> Any:
    return None if value is pd.NA or value is None or (isinstance(value, float) and pd.isna(value)) else value
