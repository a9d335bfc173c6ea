"""The DuckDB engine over the Iceberg tables: the same answers as over Parquet, time travel, empty tables.

The Iceberg lake is filled the way the stream fills it: data files landed with a landing record
(:func:`lake.iceberg_landing.land_batch`), then appended by the committer
(:func:`lake.committer.commit_landed`), one snapshot per table and cycle.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from support.ledger_builder import STREAM_ARN, USD, Book, ledger_table, s3_client
from support.sample_lake import SampleLake, make_sample, write_sample

from contracts.lake_layout import partition_prefix
from contracts.lake_tables import TABLES
from contracts.settings import Settings
from lake import objects
from lake.committer import commit_landed
from lake.iceberg_catalog import cached_catalog
from lake.iceberg_landing import land_batch
from queries import get_query, list_queries, run_query
from queries._duckdb import DuckDBEngine, _referenced_tables
from queries.time_travel import current_versions

pytestmark = pytest.mark.stack

FIRST_DAY = dt.date(2026, 11, 20)
T0 = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.UTC)
STREAM_TABLES = ("ledger", "wallets", "quarantine")


def _land(settings: Settings, tables: Mapping[str, pa.Table], first_sequence: int) -> None:
    """Land one batch of rows into the Iceberg tables and commit it (one snapshot per table)."""
    records = [{"dynamodb": {"SequenceNumber": str(first_sequence + offset)}} for offset in range(2)]
    landed = land_batch(
        s3_client(settings),
        settings,
        records,
        lambda _pending: tables,
        event_source_arn=STREAM_ARN,
        shard="shardId-000001",
    )
    assert landed.record is not None
    report = commit_landed(settings, s3_client(settings), cached_catalog(settings))
    assert report.rows == sum(rows.num_rows for rows in tables.values())


def _rows(table: str, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    schema = TABLES[table]
    return pa.Table.from_pylist(
        [{name: row.get(name) for name in schema.names} for row in rows], schema=schema
    )


def _params(name: str, lake: SampleLake) -> dict[str, str]:
    """Textual values for every parameter a query takes, chosen so that the query has rows."""
    snapshot_at = lake.snapshots[0]["snapshot_at"]
    entries = Counter(row["wallet_id"] for row in lake.ledger)
    busiest = max(sorted(entries), key=entries.__getitem__)
    values = {
        "wallet_id": busiest,
        "at": f"{lake.days[1].isoformat()}T12:00:00Z",
        "start": f"{lake.days[0].isoformat()}T00:00:00Z",
        "end": f"{(lake.days[-1] + dt.timedelta(days=1)).isoformat()}T00:00:00Z",
        "start_date": lake.days[0].isoformat(),
        "end_date": lake.days[-1].isoformat(),
        "date": lake.days[1].isoformat(),
        "previous_date": lake.days[0].isoformat(),
        "snapshot_date": snapshot_at.date().isoformat(),
        "snapshot_at": snapshot_at.isoformat(),
        "limit": "5",
        "user_id": f"user-{busiest}",
    }
    return {parameter.name: values[parameter.name] for parameter in get_query(name).parameters}


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame in a total order (queries without ORDER BY may return rows in any order)."""
    return frame.sort_values(list(frame.columns), na_position="first").reset_index(drop=True)


def test_every_ledger_query_answers_the_same_on_iceberg_as_on_parquet(
    make_settings: Callable[..., Settings],
) -> None:
    # GIVEN three days of a known lake, with two ledger entries of the second day landed twice
    # (a retried batch) and one transfer whose credit leg is a micro-dollar too big, written as
    # plain Parquet into one lake
    lake = make_sample(first_day=FIRST_DAY, days=3, wallets=6, transactions_per_day=10)
    copies = lake.ledger_on(lake.days[1])[:2]
    bent = next(
        row
        for row in lake.ledger_on(lake.days[1])
        if row["txn_type"] == "transfer" and row["direction"] == "credit"
    )
    bent["amount"] += 1
    bent["delta"] += 1
    parquet = make_settings()
    write_sample(parquet, lake)
    key = f"{partition_prefix(parquet.lake_prefix, 'ledger', lake.days[1])}retried.parquet"
    objects.put_table(s3_client(parquet), parquet.bucket, key, _rows("ledger", copies))
    # AND into another whose ledger, wallets and quarantine are Iceberg tables the committer filled
    # in two cycles (the other tables stay Parquet)
    iceberg = make_settings(lake_format="iceberg")
    write_sample(iceberg, dataclasses.replace(lake, ledger=[], wallets=[], quarantine=[]))
    _land(
        iceberg,
        {
            "ledger": _rows("ledger", lake.ledger),
            "wallets": _rows("wallets", lake.wallets),
            "quarantine": _rows("quarantine", lake.quarantine),
        },
        first_sequence=1,
    )
    _land(iceberg, {"ledger": _rows("ledger", copies)}, first_sequence=10)

    compared: dict[str, int] = {}
    with DuckDBEngine(parquet) as on_parquet, DuckDBEngine(iceberg) as on_iceberg:
        # THEN the views have the same columns and types (the Iceberg timestamps zoned, as Athena reads
        # a timestamptz; the plain lake's a Hive timestamp), and the same rows
        for table in STREAM_TABLES:
            sql = f"SELECT * FROM {table} WHERE dt BETWEEN :a AND :b"
            window = {"a": lake.days[0].isoformat(), "b": lake.days[-1].isoformat()}
            expected, zoned = on_parquet.arrow(sql, window), on_iceberg.arrow(sql, window)
            actual = _utc_wall_clock(zoned)
            assert actual.schema == expected.schema
            assert actual.num_rows == expected.num_rows > 0
            assert _sorted(actual.to_pandas()).equals(_sorted(expected.to_pandas()))
        (total,) = on_iceberg.run("SELECT count(*) AS n FROM ledger WHERE dt >= :d", {"d": "2000-01-01"})["n"]
        assert total == len(lake.ledger) + len(copies)
        # AND every named query that reads the ledger or the wallets answers the same on both
        for query in list_queries():
            params = _params(query.name, lake)
            reads = _referenced_tables(on_iceberg.translate(query.sql, query.bind(params)))
            if not reads & {"ledger", "wallets"}:
                continue
            expected_frame = run_query(query.name, params, parquet, on_parquet)
            actual_frame = _utc_wall_clock_frame(run_query(query.name, params, iceberg, on_iceberg))
            assert list(actual_frame.columns) == list(expected_frame.columns), query.name
            assert list(actual_frame.dtypes) == list(expected_frame.dtypes), query.name
            pd.testing.assert_frame_equal(_sorted(actual_frame), _sorted(expected_frame), obj=query.name)
            compared[query.name] = len(actual_frame)
    # AND the comparison was not of empty answers: the queries that read the ledger all had rows,
    # the duplicated entries and the bent transfer among them
    assert set(compared) == {
        "balance_as_of",
        "balance_at",
        "current_balances",
        "user_wallets",
        "daily_volume",
        "ingest_lag",
        "money_conservation",
        "movements_by_principal",
        "reconcile_transfers",
        "reconcile_wallet_problems",
        "reconcile_wallets",
        "top_wallets",
        "wallet_statement",
        "wallet_versions",
    }
    assert all(compared.values()), compared
    problems = run_query("reconcile_wallet_problems", _params("reconcile_wallet_problems", lake), iceberg)
    assert {row["wallet_id"] for row in copies} <= set(problems["wallet_id"])
    transfers = run_query("reconcile_transfers", _params("reconcile_transfers", lake), iceberg)
    assert transfers["txn_id"].tolist() == [bent["txn_id"]]
    assert transfers["credit_delta"].tolist() == [bent["delta"]]


@pytest.fixture
def book() -> Book:
    """Three wallets; a deposit and a transfer on the first day, a transfer on the second."""
    book = Book()
    for wallet in "abc":
        book.open(wallet, T0)
    book.deposit("a", 100 * USD, T0)  # a1 = 100
    book.transfer("a", "b", 30 * USD, T0 + dt.timedelta(minutes=2))  # a2 = 70, b1 = 30
    book.transfer("b", "c", 5 * USD, T0 + dt.timedelta(days=1))  # b2 = 25, c1 = 5
    return book


def test_a_pinned_engine_reads_the_snapshots_recorded_and_nothing_committed_since(
    make_settings: Callable[..., Settings], book: Book
) -> None:
    # GIVEN the first day's entries committed, and the snapshots current then recorded
    settings = make_settings(lake_format="iceberg")
    first, second = book.rows[:3], book.rows[3:]
    _land(settings, {"ledger": ledger_table(first)}, first_sequence=1)
    recorded = current_versions(settings)
    # AND then the second day's entries and the wallets committed
    wallets = [
        {"wallet_id": state.wallet_id, "user_id": state.user_id, "created_at": state.created_at}
        for state in book.wallets.values()
    ]
    _land(settings, {"ledger": ledger_table(second), "wallets": _rows("wallets", wallets)}, first_sequence=10)
    now = current_versions(settings)
    # THEN only the ledger had a snapshot then; both the ledger and the wallets have a newer one now
    assert recorded["ledger"] is not None
    assert recorded["wallets"] is None
    assert recorded["quarantine"] is None
    assert now["ledger"] not in (None, recorded["ledger"])
    assert now["wallets"] is not None
    assert now["quarantine"] is None

    sql = "SELECT wallet_id, wallet_version, balance_after FROM ledger WHERE dt >= :d ORDER BY 1, 2"
    since = {"d": "2026-11-01"}
    statement = {"wallet_id": "b", "start": "2026-11-20T00:00:00Z", "end": "2026-11-22T00:00:00Z"}
    with DuckDBEngine(settings) as current, DuckDBEngine(settings, versions=recorded) as pinned:
        # WHEN the same queries are asked of an engine pinned to the recorded snapshots and of one
        # that is not
        # THEN the pinned one reads the first commit only, the wallets table as it was (empty)
        assert pinned.run(sql, since).values.tolist() == [
            ["a", 1, 100 * USD],
            ["a", 2, 70 * USD],
            ["b", 1, 30 * USD],
        ]
        assert pinned.run("SELECT * FROM wallets WHERE dt >= :d", since).empty
        assert run_query("wallet_statement", statement, settings, pinned)["balance_after"].tolist() == [
            30 * USD
        ]
        # AND the current one reads both commits
        assert current.run(sql, since).values.tolist() == [
            ["a", 1, 100 * USD],
            ["a", 2, 70 * USD],
            ["b", 1, 30 * USD],
            ["b", 2, 25 * USD],
            ["c", 1, 5 * USD],
        ]
        assert sorted(current.run("SELECT wallet_id FROM wallets WHERE dt >= :d", since)["wallet_id"]) == [
            "a",
            "b",
            "c",
        ]
        assert run_query("wallet_statement", statement, settings, current)["balance_after"].tolist() == [
            30 * USD,
            25 * USD,
        ]
        # AND as_of pins an engine after the fact, the same way
        with current.as_of({"ledger": recorded["ledger"]}) as later:
            assert later.run("SELECT count(*) AS n FROM ledger WHERE dt >= :d", since)["n"].tolist() == [3]
            assert later.run("SELECT count(*) AS n FROM wallets WHERE dt >= :d", since)["n"].tolist() == [3]


def test_pins_that_cannot_be_honoured_are_refused(make_settings: Callable[..., Settings], book: Book) -> None:
    settings = make_settings(lake_format="iceberg")
    _land(settings, {"ledger": ledger_table(book.rows)}, first_sequence=1)
    since = {"d": "2026-11-01"}
    # A snapshot the table does not have (expired, or another table's) is an error naming it
    with (
        DuckDBEngine(settings, versions={"ledger": 12345}) as engine,
        pytest.raises(ValueError, match="12345"),
    ):
        engine.run("SELECT count(*) FROM ledger WHERE dt >= :d", since)
    # A pin of a table that is not an Iceberg table, or on a Parquet lake, is refused at once
    with pytest.raises(ValueError, match="daily_balances"):
        DuckDBEngine(settings, versions={"daily_balances": 1})
    with pytest.raises(ValueError, match="lake_format is iceberg"):
        DuckDBEngine(settings.replace(lake_format="parquet"), versions={"ledger": 1})


def test_tables_without_a_snapshot_are_empty_views_with_the_parquet_columns(
    make_settings: Callable[..., Settings],
) -> None:
    # GIVEN an Iceberg lake whose tables have no commit yet, and an empty Parquet lake
    iceberg = make_settings(lake_format="iceberg")
    parquet = make_settings()
    assert current_versions(iceberg) == dict.fromkeys(STREAM_TABLES)
    with DuckDBEngine(iceberg) as on_iceberg, DuckDBEngine(parquet) as on_parquet:
        for table in STREAM_TABLES:
            # WHEN each table is read
            sql = f"SELECT * FROM {table} WHERE dt = :d"
            result = on_iceberg.arrow(sql, {"d": "2026-11-20"})
            # THEN no row, the lake's columns with dt last, typed as the Parquet lake's views (timestamps
            # zoned)
            assert result.num_rows == 0
            assert result.schema.names == [*TABLES[table].names, "dt"]
            assert _utc_wall_clock(result).schema == on_parquet.arrow(sql, {"d": "2026-11-20"}).schema
        # AND a query over them is an answer without rows, not an error
        assert run_query(
            "daily_volume", {"start_date": "2026-11-20", "end_date": "2026-11-21"}, iceberg, on_iceberg
        ).empty


def _utc_wall_clock(table: pa.Table) -> pa.Table:
    """The table with its zoned (UTC) timestamps as the UTC wall clock, as the plain lake reads them."""
    fields = []
    for field in table.schema:
        if pa.types.is_timestamp(field.type) and field.type.tz is not None:
            assert field.type.tz == "UTC"
            fields.append(pa.field(field.name, pa.timestamp(field.type.unit), field.nullable))
        else:
            fields.append(field)
    return table.cast(pa.schema(fields))


def _utc_wall_clock_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with its zoned (UTC) timestamp columns as the UTC wall clock."""
    for name in frame.columns:
        if isinstance(frame[name].dtype, pd.DatetimeTZDtype):
            assert str(frame[name].dtype.tz) == "UTC"
            frame[name] = frame[name].dt.tz_localize(None)
    return frame
