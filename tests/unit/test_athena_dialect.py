"""The local engine gives Athena's (Trino's) answers, or refuses in one line: a corpus of Athena queries.

Each query runs as the DuckDB engine runs it (:func:`queries._athena_dialect.to_duckdb`, the engine's
macros) over a four-row ledger typed as Athena reads the Iceberg table (``created_at`` a
``timestamp(6) with time zone``, ``dt`` a string). The expected value beside each query is what
Trino's documentation says it returns, worked out by hand from the rows below, not what DuckDB
printed: a value moved to a zone (``AT TIME ZONE``) is checked through its text or its fields.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest

from contracts.lake_tables import STREAM_TABLES
from queries import list_queries
from queries._athena_dialect import AthenaDialectError, lake_schema, local_gap, to_duckdb
from queries._duckdb import connect
from queries._lake_views import with_views
from queries._parameters import render
from queries._table_clauses import split_table_clauses

UTC = dt.UTC
SCHEMA = lake_schema(frozenset(STREAM_TABLES))

#: The ledger the corpus reads: a deposit at 04:24 UTC (23:24 the day before in New York), a transfer
#: at 23:30 UTC (two legs), a deposit at 01:00:00.250 UTC the next day (20:00 in New York the day before).
LEDGER_ROWS = """
    ('t1:credit', 't1', 'deposit',  'w1', NULL, 'credit', 1500000,  1500000, 1, 1500000,
     TIMESTAMPTZ '2026-11-26 04:24:00+00', '2026-11-26'),
    ('t2:debit',  't2', 'transfer', 'w1', 'w2', 'debit',   500000,  -500000, 2, 1000000,
     TIMESTAMPTZ '2026-11-26 23:30:00+00', '2026-11-26'),
    ('t2:credit', 't2', 'transfer', 'w2', 'w1', 'credit',  500000,   500000, 1,  500000,
     TIMESTAMPTZ '2026-11-26 23:30:00+00', '2026-11-26'),
    ('t3:credit', 't3', 'deposit',  'w2', NULL, 'credit', 2000000,  2000000, 2, 2500000,
     TIMESTAMPTZ '2026-11-27 01:00:00.250+00', '2026-11-27')
"""


@pytest.fixture(scope="module")
def connection() -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB as the engine makes it (UTC session, Trino macros) with the four-row ledger."""
    con = connect()
    con.execute(
        "CREATE TABLE ledger AS SELECT * FROM (VALUES "
        + LEDGER_ROWS
        + ") AS rows(entry_id, txn_id, txn_type, wallet_id, counterparty_wallet_id, direction, amount, delta,"
        " wallet_version, balance_after, created_at, dt)"
    )
    yield con
    con.close()


def _run(connection: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = connection.sql(to_duckdb(sql, SCHEMA)).to_arrow_table().to_pylist()
    return rows


def _scalar(connection: duckdb.DuckDBPyConnection, sql: str) -> Any:
    rows = _run(connection, sql)
    assert len(rows) == 1, rows
    assert len(rows[0]) == 1, rows
    return next(iter(rows[0].values()))


#: (Athena SQL, the single value Trino returns).
SCALARS: list[tuple[str, Any]] = [
    # ---- the examples: a zoned column moved to New York
    (
        "SELECT format_datetime(max(created_at AT TIME ZONE 'America/New_York'), 'yyyy-MM-dd HH:mm:ss.SSS') "
        "FROM ledger",
        "2026-11-26 20:00:00.250",
    ),
    (
        "SELECT count(*) FROM ledger "
        "WHERE date(created_at AT TIME ZONE 'America/New_York') = DATE '2026-11-26'",
        3,
    ),
    (
        "SELECT count(*) FROM ledger "
        "WHERE date(created_at AT TIME ZONE 'America/New_York') = DATE '2026-11-25'",
        1,
    ),
    ("SELECT max(created_at) FROM ledger", dt.datetime(2026, 11, 27, 1, 0, 0, 250000, tzinfo=UTC)),
    # ---- dates, zones, instants
    ("SELECT count(*) FROM ledger WHERE created_at >= TIMESTAMP '2026-11-26 12:00:00 UTC'", 3),
    ("SELECT count(*) FROM ledger WHERE created_at < TIMESTAMP '2026-11-26 00:00:00 America/New_York'", 1),
    ("SELECT count(*) FROM ledger WHERE created_at < TIMESTAMP '2026-11-26 05:00:00'", 1),
    ("SELECT date(created_at) FROM ledger WHERE txn_id = 't3'", dt.date(2026, 11, 27)),
    ("SELECT hour(created_at AT TIME ZONE 'Asia/Tokyo') FROM ledger WHERE txn_id = 't3'", 10),
    ("SELECT day(created_at AT TIME ZONE 'America/Los_Angeles') FROM ledger WHERE txn_id = 't1'", 25),
    ("SELECT to_iso8601(created_at) FROM ledger WHERE txn_id = 't3'", "2026-11-27T01:00:00.250000Z"),
    ("SELECT to_iso8601(DATE '2026-11-26')", "2026-11-26"),
    (
        "SELECT format_datetime(created_at, 'yyyy-MM-dd HH:mm:ss.SSS') FROM ledger WHERE txn_id = 't3'",
        "2026-11-27 01:00:00.250",
    ),
    (
        "SELECT format_datetime(created_at, 'dd MMM yyyy, h:mm a') FROM ledger WHERE txn_id = 't1'",
        "26 Nov 2026, 4:24 AM",
    ),
    ("SELECT format_datetime(created_at, 'EEEE') FROM ledger WHERE txn_id = 't1'", "Thursday"),
    (
        "SELECT date_format(created_at, '%Y-%m-%d %H:%i:%s') FROM ledger WHERE txn_id = 't3'",
        "2026-11-27 01:00:00",
    ),
    ("SELECT date_diff('day', TIMESTAMP '2026-01-01 23:00:00', TIMESTAMP '2026-01-02 01:00:00')", 0),
    ("SELECT date_diff('hour', TIMESTAMP '2026-01-01 23:00:00', TIMESTAMP '2026-01-02 01:00:00')", 2),
    ("SELECT date_diff('day', DATE '2026-11-01', DATE '2026-11-26')", 25),
    ("SELECT date_diff('second', min(created_at), max(created_at)) FROM ledger", 74160),
    ("SELECT date_add('day', 1, DATE '2026-02-28')", dt.date(2026, 3, 1)),
    ("SELECT date_add('month', 1, DATE '2026-01-31')", dt.date(2026, 2, 28)),
    ("SELECT DATE '2026-11-26' + INTERVAL '1' DAY", dt.date(2026, 11, 27)),
    ("SELECT date_trunc('month', DATE '2026-11-26')", dt.date(2026, 11, 1)),
    (
        "SELECT date_add('hour', 3, created_at) FROM ledger WHERE txn_id = 't1'",
        dt.datetime(2026, 11, 26, 7, 24, tzinfo=UTC),
    ),
    (
        "SELECT date_trunc('day', created_at) FROM ledger WHERE txn_id = 't3'",
        dt.datetime(2026, 11, 27, tzinfo=UTC),
    ),
    ("SELECT from_unixtime(86400)", dt.datetime(1970, 1, 2, tzinfo=UTC)),
    ("SELECT to_unixtime(TIMESTAMP '1970-01-02 00:00:00 UTC')", 86400.0),
    (
        "SELECT from_iso8601_timestamp('2026-11-26T10:00:00-05:00') = TIMESTAMP '2026-11-26 15:00:00 UTC'",
        True,
    ),
    ("SELECT from_iso8601_date('2026-11-26')", dt.date(2026, 11, 26)),
    (
        "SELECT with_timezone(TIMESTAMP '2026-07-01 12:00:00', 'America/New_York') = "
        "TIMESTAMP '2026-07-01 16:00:00 UTC'",
        True,
    ),
    (
        "SELECT format_datetime("
        "at_timezone(TIMESTAMP '2026-07-01 16:00:00 UTC', 'America/New_York'), 'HH:mm')",
        "12:00",
    ),
    ("SELECT day_of_week(DATE '2026-11-26')", 4),
    ("SELECT day_of_year(DATE '2026-02-01')", 32),
    ("SELECT week(DATE '2026-01-01')", 1),
    ("SELECT year(created_at) FROM ledger WHERE txn_id = 't3'", 2026),
    ("SELECT last_day_of_month(DATE '2026-02-10')", dt.date(2026, 2, 28)),
    ("SELECT date_parse('2026-11-26 10:30', '%Y-%m-%d %H:%i')", dt.datetime(2026, 11, 26, 10, 30)),
    ("SELECT count(*) FROM ledger WHERE dt BETWEEN '2026-11-26' AND '2026-11-26'", 3),
    # ---- integers and decimals: money stays exact
    ("SELECT 7 / 2", 3),
    ("SELECT -7 / 2", -3),
    ("SELECT 7 % 3", 1),
    ("SELECT amount / 3 FROM ledger WHERE entry_id = 't2:debit'", 166666),
    ("SELECT CAST(7 AS DOUBLE) / 2", 3.5),
    ("SELECT avg(amount) FROM ledger", 1125000.0),
    ("SELECT sum(amount) FROM ledger", 4500000),
    (
        "SELECT CAST(CAST(1500000 AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6))",
        Decimal("1.500000"),
    ),
    (
        "SELECT sum("
        "CAST(CAST(amount AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6))) "
        "FROM ledger",
        Decimal("4.500000"),
    ),
    ("SELECT CAST('12.50' AS DECIMAL(10, 2)) + CAST('0.25' AS DECIMAL(10, 2))", Decimal("12.75")),
    ("SELECT round(CAST('2.345' AS DECIMAL(10, 3)), 2)", Decimal("2.35")),
    ("SELECT CAST(0.1 AS DOUBLE) + CAST(0.2 AS DOUBLE)", 0.30000000000000004),
    ("SELECT greatest(1, 5, 3)", 5),
    ("SELECT try_cast('x' AS bigint)", None),
    # ---- aggregates and strings
    ("SELECT count(DISTINCT txn_id) FROM ledger", 3),
    ("SELECT count_if(direction = 'debit') FROM ledger", 1),
    ("SELECT sum(delta) FROM ledger WHERE txn_type = 'transfer'", 0),
    ('SELECT json_extract_scalar(\'{"tier":{"S":"gold"}}\', \'$.tier.S\')', "gold"),
    ("SELECT substr('walletlake', 1, 6)", "wallet"),
    ("SELECT split_part('a:b:c', ':', 2)", "b"),
    ("SELECT lpad('7', 3, '0')", "007"),
    ("SELECT regexp_extract('txn-123', '\\d+')", "123"),
    ("SELECT 'a' || 'b'", "ab"),
    ("SELECT if(2 > 1, 'big', 'small')", "big"),
    ("SELECT coalesce(counterparty_wallet_id, 'none') FROM ledger WHERE entry_id = 't1:credit'", "none"),
    # ---- arrays (1-based) and maps
    ("SELECT cardinality(ARRAY[1, 2, 3])", 3),
    ("SELECT element_at(ARRAY['a', 'b'], 2)", "b"),
    ("SELECT ARRAY['a', 'b'][1]", "a"),
    ("SELECT contains(ARRAY[1, 2], 2)", True),
    ("SELECT array_join(ARRAY['a', 'b'], ',')", "a,b"),
    ("SELECT array_max(ARRAY[1, 5, 3])", 5),
    ("SELECT array_sort(ARRAY[3, 1, 2])", [1, 2, 3]),
    ("SELECT slice(ARRAY[1, 2, 3, 4], 2, 2)", [2, 3]),
    ("SELECT ARRAY[1, 2] || ARRAY[3]", [1, 2, 3]),
    ("SELECT array_agg(DISTINCT wallet_id ORDER BY wallet_id) FROM ledger", ["w1", "w2"]),
    ("SELECT element_at(MAP(ARRAY['a', 'b'], ARRAY[1, 2]), 'b')", 2),
    ("SELECT element_at(MAP(ARRAY['a'], ARRAY[1]), 'z')", None),
    ("SELECT cardinality(MAP(ARRAY['a', 'b'], ARRAY[1, 2]))", 2),
    ("SELECT map_keys(MAP(ARRAY['a', 'b'], ARRAY[1, 2]))", ["a", "b"]),
    ("SELECT MAP(ARRAY['a'], ARRAY[1])['a']", 1),
]


@pytest.mark.parametrize(("sql", "expected"), SCALARS, ids=[sql[:70] for sql, _ in SCALARS])
def test_a_scalar_query_answers_as_trino_documents(
    connection: duckdb.DuckDBPyConnection, sql: str, expected: Any
) -> None:
    # WHEN the Athena query runs on the local engine THEN its one value is Trino's
    assert _scalar(connection, sql) == expected


#: (Athena SQL with several rows, the rows Trino returns, in order).
ROWS: list[tuple[str, list[tuple[Any, ...]]]] = [
    (
        "SELECT wallet_id, sum(delta) OVER (PARTITION BY wallet_id ORDER BY wallet_version) AS running "
        "FROM ledger ORDER BY wallet_id, wallet_version",
        [("w1", 1500000), ("w1", 1000000), ("w2", 500000), ("w2", 2500000)],
    ),
    (
        "SELECT entry_id, row_number() OVER (ORDER BY created_at, entry_id) AS n FROM ledger ORDER BY n",
        [("t1:credit", 1), ("t2:credit", 2), ("t2:debit", 3), ("t3:credit", 4)],
    ),
    (
        "SELECT entry_id, lag(amount) OVER (PARTITION BY wallet_id ORDER BY wallet_version) AS before "
        "FROM ledger ORDER BY wallet_id, wallet_version",
        [("t1:credit", None), ("t2:debit", 1500000), ("t2:credit", None), ("t3:credit", 500000)],
    ),
    (
        "SELECT entry_id, rank() OVER (ORDER BY amount DESC) AS r FROM ledger ORDER BY r, entry_id",
        [("t3:credit", 1), ("t1:credit", 2), ("t2:credit", 3), ("t2:debit", 3)],
    ),
    (
        "SELECT dt, count(*) OVER () AS total, count(*) OVER (PARTITION BY dt) AS in_day FROM ledger "
        "WHERE txn_type = 'deposit' ORDER BY dt",
        [("2026-11-26", 2, 1), ("2026-11-27", 2, 1)],
    ),
    ("SELECT x FROM UNNEST(ARRAY[3, 1, 2]) AS t(x) ORDER BY x", [(1,), (2,), (3,)]),
    (
        "SELECT date(created_at AT TIME ZONE 'America/New_York') AS day, count(DISTINCT txn_id) AS txns "
        "FROM ledger GROUP BY 1 ORDER BY 1",
        [(dt.date(2026, 11, 25), 1), (dt.date(2026, 11, 26), 2)],
    ),
    (
        "SELECT txn_type, count(*) FROM ledger GROUP BY txn_type ORDER BY txn_type",
        [("deposit", 2), ("transfer", 2)],
    ),
]


@pytest.mark.parametrize(("sql", "expected"), ROWS, ids=[sql[:70] for sql, _ in ROWS])
def test_a_query_of_rows_answers_as_trino_documents(
    connection: duckdb.DuckDBPyConnection, sql: str, expected: list[tuple[Any, ...]]
) -> None:
    assert [tuple(row.values()) for row in _run(connection, sql)] == expected


def test_unnamed_columns_are_named_as_athena_names_them(connection: duckdb.DuckDBPyConnection) -> None:
    # WHEN a result column is an expression without a name THEN it is _col<position>, as on Athena
    (row,) = _run(
        connection, "SELECT txn_id, count(*), max(amount) AS top FROM ledger WHERE txn_id = 't1' GROUP BY 1"
    )
    assert list(row) == ["txn_id", "_col1", "top"]


#: (Athena SQL that Athena refuses or the local engine cannot answer as Athena would, the line's gist).
REFUSED = [
    (
        "SELECT count(*) FROM ledger WHERE dt = DATE '2026-11-26'",
        "compare it with a string: dt = '2026-11-22'",
    ),
    (
        "SELECT count(*) FROM ledger WHERE dt BETWEEN DATE '2026-11-26' AND DATE '2026-11-27'",
        "compare it with a string",
    ),
    (
        "SELECT count(*) FROM ledger WHERE created_at > '2026-11-26'",
        "Athena refuses comparing a string with a timestamp",
    ),
    (
        "SELECT count(*) FROM ledger WHERE created_at IN ('2026-11-26 04:24:00')",
        "comparing a string with a timestamp",
    ),
    ("SELECT count(*) FROM ledger WHERE date(created_at) = '2026-11-26'", "comparing a string with a date"),
    (
        "WITH d AS (SELECT dt AS day FROM ledger) SELECT count(*) FROM d WHERE day = DATE '2026-11-26'",
        "with a date",
    ),
    ("SELECT CAST(amount AS DECIMAL(38, 0)) / 3 FROM ledger", "dividing decimals is not available locally"),
    ("SELECT format_datetime(created_at, 'yyyy ZZZ') FROM ledger", "not available locally; runs on Athena"),
]


@pytest.mark.parametrize(("sql", "gist"), REFUSED, ids=[sql[:70] for sql, _ in REFUSED])
def test_what_athena_refuses_is_refused_in_one_line(sql: str, gist: str) -> None:
    with pytest.raises(AthenaDialectError) as refused:
        to_duckdb(sql, SCHEMA)
    assert gist in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_trino_function_duckdb_lacks_is_one_line_naming_athena(
    connection: duckdb.DuckDBPyConnection,
) -> None:
    # GIVEN a Trino function DuckDB does not have
    with pytest.raises(duckdb.CatalogException) as missing:
        _run(connection, "SELECT human_readable_seconds(90)")
    # THEN the engine's line says it is a local gap, not an error in the statement
    assert local_gap(missing.value) == (
        "function human_readable_seconds: not available locally; "
        "runs on Athena (walletlake sql --engine athena)"
    )


# --------------------------------------------------------------------------- the docs' and the named queries'

_DOC_BLOCK = re.compile(r"^```sql\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _doc_blocks(project_root: Path) -> list[str]:
    text = (project_root / "docs" / "analysts.md").read_text(encoding="utf-8")
    return [match.group(1) for match in _DOC_BLOCK.finditer(text)]


def test_every_named_query_and_doc_block_passes_athenas_checks(project_root: Path) -> None:
    # GIVEN the project's own SQL: every named query with parameters of its types, every doc block
    samples = {"string": "w1", "date": "2026-11-22", "timestamp": "2026-11-22T09:00:00Z", "count": "3"}
    statements = [
        render(query.sql, query.bind({p.name: samples[p.type] for p in query.parameters}))
        for query in list_queries()
    ]
    statements += [
        with_views(split_table_clauses(block, "walletlake").sql) for block in _doc_blocks(project_root)
    ]
    assert len(statements) >= len(list_queries()) + 4
    # THEN each is Athena SQL the checks let through (none is refused as Athena would refuse it)
    for statement in statements:
        assert to_duckdb(statement, SCHEMA)


@pytest.fixture(scope="module")
def november() -> Iterator[duckdb.DuckDBPyConnection]:
    """The days the docs' examples read: two deposits on 1 November (05:00 and 07:00 UTC, either side
    of New York's return to standard time at 06:00 UTC) and a transfer at 03:30 UTC on the 2nd."""
    con = connect()
    con.execute(
        "CREATE TABLE ledger AS SELECT * FROM (VALUES "
        "('a1', 'w1', 1000000, TIMESTAMPTZ '2026-11-01 05:00:00+00', '2026-11-01'),"
        "('a2', 'w1', 2000000, TIMESTAMPTZ '2026-11-01 07:00:00+00', '2026-11-01'),"
        "('b1', 'w1', -500000, TIMESTAMPTZ '2026-11-02 03:30:00+00', '2026-11-02'),"
        "('b1', 'w2',  500000, TIMESTAMPTZ '2026-11-02 03:30:00+00', '2026-11-02')"
        ") AS rows(txn_id, wallet_id, delta, created_at, dt)"
    )
    yield con
    con.close()


def test_the_docs_examples_answer_as_trino_documents(
    november: duckdb.DuckDBPyConnection, project_root: Path
) -> None:
    blocks = {block.split("\n", 1)[0]: block for block in _doc_blocks(project_root)}
    pruning = next(block for block in blocks.values() if "prunes to 7 partitions" in block)
    new_york = next(block for block in blocks.values() if "per New York day" in block)
    # THEN the pruning example counts only what committed from 06:00 UTC on the 1st
    rows = november.sql(to_duckdb(pruning, SCHEMA)).to_arrow_table().to_pylist()
    assert sorted((row["wallet_id"], row["net"]) for row in rows) == [("w1", 1500000), ("w2", 500000)]
    # AND the New York example puts all three transactions on New York's 1 November (the last at
    # 22:30 EST: 03:30 UTC, after the clocks went back)
    rows = november.sql(to_duckdb(new_york, SCHEMA)).to_arrow_table().to_pylist()
    assert rows == [{"new_york_day": dt.date(2026, 11, 1), "transactions": 3, "last_at": "22:30:00"}]
