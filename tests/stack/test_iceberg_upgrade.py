"""A lake written by an older walletlake receives a new column, an unknown attribute and a misfit.

The old lake is made as today's ``main`` makes it: the tables created from a contract without the
column (``extra_attributes`` here; ``initiated_by`` will come the same way), data landed and
committed with it. Then the upgrade path runs as a deploy runs it (provisioning:
:func:`lake.iceberg_tables.ensure_tables`; every new landing process: its table layouts), and
the new writer's rows flow: old rows read the column as null, new rows carry it, no commit is
blocked. A landed file that does not fit its table is quarantined beside it, and the next
cycle commits.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import boto3
import pyarrow as pa
import pytest
from support.stream_records import TableWriter, assert_exact_ledger

import lake.iceberg_landing
import lake.iceberg_tables
from contracts.lake_layout import misfits_location
from contracts.lake_tables import EXTRA_ATTRIBUTES
from contracts.settings import Settings
from contracts.wallets_table import Attr, wallet_key
from lake.committer import commit_landed
from lake.iceberg_catalog import load_table, open_catalog
from lake.iceberg_landing import table_layouts
from lake.iceberg_tables import ensure_tables
from lake.objects import list_keys
from queries._duckdb import DuckDBEngine
from stream_processor.consumer import drain

pytestmark = pytest.mark.stack

NEW_COLUMN = EXTRA_ATTRIBUTES


def commit(settings: Settings) -> Any:
    client = boto3.client("s3", region_name=settings.region)
    return commit_landed(settings, client, open_catalog(settings), empty_after_seconds=0)


def scan(settings: Settings, table: str) -> pa.Table:
    return load_table(settings, table, open_catalog(settings)).scan().to_arrow()


@pytest.fixture
def old_lake(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> tuple[Settings, TableWriter]:
    """A lake provisioned and written by a walletlake whose contract lacks NEW_COLUMN."""
    contract = lake.iceberg_tables.iceberg_arrow_schema

    def without_new_column(table: str) -> pa.Schema:
        schema = contract(table)
        return schema.remove(schema.get_field_index(NEW_COLUMN)) if NEW_COLUMN in schema.names else schema

    landing = lake.iceberg_landing.to_iceberg_rows

    def old_rows(table: str, rows: pa.Table, day: str, current: Any = None) -> pa.Table:
        """What the old decoder wrote: rows without the column."""
        if NEW_COLUMN in rows.column_names:
            rows = rows.drop_columns([NEW_COLUMN])
        return landing(table, rows, day, current)

    with monkeypatch.context() as old_code:
        old_code.setattr(lake.iceberg_tables, "iceberg_arrow_schema", without_new_column)
        old_code.setattr(lake.iceberg_landing, "to_iceberg_rows", old_rows)
        settings = make_settings(lake_format="iceberg")
        for table in ("ledger", "wallets"):
            assert NEW_COLUMN not in load_table(settings, table, open_catalog(settings)).schema().column_names
        writer = TableWriter(settings.table)
        writer.workload(wallets=3, deposits=6, transfers=6)
        drain(settings, batch_size=10)
        report = commit(settings)
        assert any(table.rows for table in report.tables)
        table_layouts.cache_clear()  # the old process is gone
    return settings, writer


def test_an_old_lake_takes_the_new_column_and_the_unknown_attribute(
    old_lake: tuple[Settings, TableWriter],
) -> None:
    settings, writer = old_lake
    old_entries = {row["entry_id"] for row in scan(settings, "ledger").to_pylist()}

    # WHEN the new version is deployed: provisioning evolves the tables by name (idempotent)
    done = ensure_tables(open_catalog(settings), settings.glue_database)
    again = ensure_tables(open_catalog(settings), settings.glue_database)
    # AND a newer writer puts an attribute no decoder knows on a wallet, which then moves
    tiered = sorted(writer.model.wallets)[0]
    writer.client.update_item(
        TableName=settings.table,
        Key={Attr.PK: {"S": wallet_key(tiered)}},
        UpdateExpression="SET tier = :t",
        ExpressionAttributeValues={":t": {"S": "gold"}},
    )
    writer.deposit(tiered, 1_000_000)
    writer.workload(wallets=2, deposits=4, transfers=4, seed=11)
    drain(settings, batch_size=10)
    report = commit(settings)

    # THEN the column was added once (provisioning says so), by name, after the old ones
    assert any(f"columns added: {NEW_COLUMN}" in line for line in done if ".ledger:" in line)
    assert not any("columns added" in line or "properties set" in line for line in again)
    # AND the commit went through for every table
    assert all(table.misfit_files == 0 for table in report.tables)
    assert any(table.table == "ledger" and table.rows for table in report.tables)
    # AND old rows read the new column as null; the new rows have it, the moved wallet's its attribute
    rows = scan(settings, "ledger").to_pylist()
    assert_exact_ledger(scan(settings, "ledger"), writer.model.entries)
    assert all(row[NEW_COLUMN] is None for row in rows if row["entry_id"] in old_entries)
    carried = [json.loads(row[NEW_COLUMN]) for row in rows if row[NEW_COLUMN] is not None]
    assert carried
    assert all(extra == {"tier": {"S": "gold"}} for extra in carried)
    assert {row["wallet_id"] for row in rows if row[NEW_COLUMN] is not None} == {tiered}
    assert all(row["entry_id"] not in old_entries for row in rows if row[NEW_COLUMN] is not None)
    # AND the query engine reads old and new files alike (the old files by field id: null)
    with DuckDBEngine(settings) as engine:
        counted = engine.arrow(
            f"SELECT count(*) AS n, count({NEW_COLUMN}) AS extras FROM ledger", {}
        ).to_pylist()
    assert counted == [{"n": len(rows), "extras": len(carried)}]


def test_a_landed_file_that_does_not_fit_is_quarantined_and_the_next_cycle_commits(
    old_lake: tuple[Settings, TableWriter], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, writer = old_lake
    ensure_tables(open_catalog(settings), settings.glue_database)
    before_wallets = scan(settings, "wallets").num_rows

    # GIVEN a batch whose wallets file a broken writer wrote with a column the table lacks (and
    # no field ids), beside a good ledger file
    real = lake.iceberg_landing.to_iceberg_rows

    def broken(table: str, rows: pa.Table, day: str, current: Any = None) -> pa.Table:
        if table == "wallets":
            return pa.table(
                {"wallet_id": rows.column("wallet_id"), "surprise": pa.nulls(rows.num_rows, pa.string())}
            )
        return real(table, rows, day, current)

    monkeypatch.setattr(lake.iceberg_landing, "to_iceberg_rows", broken)
    bad_wallet = writer.open_wallet()
    writer.deposit(bad_wallet, 2_000_000)
    drain(settings, batch_size=100)
    monkeypatch.setattr(lake.iceberg_landing, "to_iceberg_rows", real)

    # WHEN the committer runs
    first = commit(settings)

    # THEN the misfit is quarantined in the table's misfits folder with its reason, left out of the
    # commit, and the batch's ledger rows (and every other table) committed
    wallets_commit = next(table for table in first.tables if table.table == "wallets")
    assert wallets_commit.misfit_files == 1
    s3 = boto3.client("s3", region_name=settings.region)
    folder = misfits_location(settings.bucket, settings.lake_prefix).removeprefix(f"s3://{settings.bucket}/")
    kept = list_keys(s3, settings.bucket, f"{folder}/wallets/")
    assert len(kept) == 2
    (note,) = [key for key in kept if key.endswith(".reason.json")]
    reason = json.loads(s3.get_object(Bucket=settings.bucket, Key=note)["Body"].read())
    assert reason["table"] == "wallets"
    assert reason["reason"]
    assert scan(settings, "wallets").num_rows == before_wallets
    assert bad_wallet in {row["wallet_id"] for row in scan(settings, "ledger").to_pylist()}

    # WHEN the next batches land and the next cycle runs
    writer.deposit(bad_wallet, 1_000_000)
    good_wallet = writer.open_wallet()
    drain(settings, batch_size=100)
    second = commit(settings)

    # THEN it commits (the misfit is not retried), and the lake holds every entry once
    assert all(table.misfit_files == 0 for table in second.tables)
    assert good_wallet in scan(settings, "wallets").column("wallet_id").to_pylist()
    assert_exact_ledger(scan(settings, "ledger"), writer.model.entries)
