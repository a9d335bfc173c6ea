"""A misfit file lands again, exactly once, with the command the runbook gives.

docs/operations.md ("Misfit files"), as typed: a newer writer lands a wallets file with a column
the table does not have yet; the committer keeps it aside and moves on; the upgrade adds the
column; ``walletlake lake reland`` lands the file's rows as a source named by the file; a rerun,
and every later cycle, lands nothing more.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.stream_records import TableWriter, assert_exact_ledger

import lake.iceberg_landing
import lake.iceberg_tables
from contracts.lake_layout import misfits_location
from contracts.lake_tables import EXTRA_ATTRIBUTES
from contracts.settings import Settings
from lake.committer import commit_landed
from lake.iceberg_catalog import load_table, open_catalog
from lake.iceberg_landing import table_layouts
from lake.iceberg_tables import ensure_tables
from lake.objects import list_keys
from stream_processor.consumer import drain

pytestmark = pytest.mark.stack

NEW_COLUMN = EXTRA_ATTRIBUTES
_BIN = str(Path(sys.executable).parent)


def commit(settings: Settings) -> Any:
    client = boto3.client("s3", region_name=settings.region)
    return commit_landed(settings, client, open_catalog(settings), empty_after_seconds=0)


def wallet_ids(settings: Settings) -> list[str]:
    rows = load_table(settings, "wallets", open_catalog(settings)).scan().to_arrow()
    return sorted(rows.column("wallet_id").to_pylist())


def walletlake(settings: Settings, *argv: str) -> subprocess.CompletedProcess[str]:
    """The command line as an operator types it, in its own process."""
    environ = {**os.environ, **settings.to_env(), "PATH": f"{_BIN}:{os.environ.get('PATH', '')}"}
    return subprocess.run(
        ["walletlake", *argv], env=environ, capture_output=True, text=True, check=False, timeout=300
    )


@pytest.fixture
def lake_with_a_misfit(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> tuple[Settings, TableWriter, str]:
    """A lake whose tables lack NEW_COLUMN, and a wallets file of a newer writer (with the column,
    written without the table's field ids) that the committer kept aside as a misfit."""
    contract = lake.iceberg_tables.iceberg_arrow_schema

    def without_new_column(table: str) -> pa.Schema:
        schema = contract(table)
        return schema.remove(schema.get_field_index(NEW_COLUMN)) if NEW_COLUMN in schema.names else schema

    real = lake.iceberg_landing.to_iceberg_rows

    def old_rows(table: str, rows: pa.Table, day: str, current: Any = None) -> pa.Table:
        """What the old decoder wrote: rows without the column."""
        if NEW_COLUMN in rows.column_names:
            rows = rows.drop_columns([NEW_COLUMN])
        return real(table, rows, day, current)

    def newer_writer(table: str, rows: pa.Table, day: str, current: Any = None) -> pa.Table:
        if table != "wallets":
            return old_rows(table, rows, day, current)
        carried = pa.array(['{"tier":{"S":"gold"}}'] * rows.num_rows, pa.string())
        plain = rows.drop_columns([NEW_COLUMN]) if NEW_COLUMN in rows.column_names else rows
        return plain.append_column(NEW_COLUMN, carried)

    with monkeypatch.context() as old_code:
        old_code.setattr(lake.iceberg_tables, "iceberg_arrow_schema", without_new_column)
        old_code.setattr(lake.iceberg_landing, "to_iceberg_rows", old_rows)
        settings = make_settings(lake_format="iceberg")
        table_layouts.cache_clear()
        writer = TableWriter(settings.table)
        writer.workload(wallets=2, deposits=2, transfers=0)
        drain(settings, batch_size=100)
        commit(settings)
        old_code.setattr(lake.iceberg_landing, "to_iceberg_rows", newer_writer)
        newer = writer.open_wallet()
        writer.deposit(newer, 1_000_000)
        drain(settings, batch_size=100)
        report = commit(settings)
        table_layouts.cache_clear()
    assert report.misfit_files == 1
    return settings, writer, newer


def test_a_misfit_relands_once_with_the_runbooks_command(
    lake_with_a_misfit: tuple[Settings, TableWriter, str],
) -> None:
    settings, writer, newer = lake_with_a_misfit
    s3 = boto3.client("s3", region_name=settings.region)
    folder = misfits_location(settings.bucket, settings.lake_prefix).removeprefix(f"s3://{settings.bucket}/")
    (misfit,) = list_keys(s3, settings.bucket, f"{folder}/wallets/", ".parquet")
    # GIVEN the misfit's rows are not in the table, and its batch is past (the ledger has its entry)
    assert newer not in wallet_ids(settings)
    assert_exact_ledger(
        load_table(settings, "ledger", open_catalog(settings)).scan().to_arrow(), writer.model.entries
    )

    # WHEN the operator re-lands before the upgrade
    early = walletlake(settings, "lake", "reland", "--table", "wallets")
    # THEN it is refused in one line naming the column, and nothing is landed
    assert early.returncode == 1, early.stdout + early.stderr
    assert f"refused: still does not fit: wallets: the table has no column {NEW_COLUMN}" in early.stdout
    assert newer not in wallet_ids(settings)

    # WHEN the upgrade runs (provisioning adds the column) and the operator re-lands, as typed
    ensure_tables(open_catalog(settings), settings.glue_database)
    dry = walletlake(settings, "lake", "reland", "--dry-run")
    done = walletlake(settings, "lake", "reland")
    # THEN the dry run says what it would do and writes nothing; the re-land lands the file's rows
    # and commits them, with the column the newer writer gave them
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "would reland (1 rows as replay/misfit~wallets~" in dry.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    assert "misfits: 1 found, 1 relanded" in done.stdout
    rows = load_table(settings, "wallets", open_catalog(settings)).scan().to_arrow().to_pylist()
    relanded = [row for row in rows if row["wallet_id"] == newer]
    assert len(relanded) == 1
    assert json.loads(relanded[0][NEW_COLUMN]) == {"tier": {"S": "gold"}}

    # WHEN it is run again, as JSON, and the committer runs more cycles
    again = walletlake(settings, "lake", "reland", "--json")
    commit(settings)
    commit(settings)
    # THEN nothing more lands: the file is named as already re-landed, and the row is there once
    assert again.returncode == 0, again.stdout + again.stderr
    (state,) = json.loads(again.stdout)["misfits"]
    assert state["state"] == "already relanded"
    assert state["misfit"] == f"s3://{settings.bucket}/{misfit}"
    assert wallet_ids(settings).count(newer) == 1
    assert sorted(wallet_ids(settings)) == sorted(writer.model.wallets)


def test_a_misfit_relanded_after_a_crash_before_its_commit_is_committed_once(
    lake_with_a_misfit: tuple[Settings, TableWriter, str],
) -> None:
    from lake.misfits import reland_misfits

    settings, _writer, newer = lake_with_a_misfit
    s3 = boto3.client("s3", region_name=settings.region)
    ensure_tables(open_catalog(settings), settings.glue_database)
    # GIVEN a re-land that landed the file and died before any commit
    first = reland_misfits(settings, s3, open_catalog(settings))
    assert [reland.state for reland in first] == ["relanded"]
    # WHEN it is rerun before the committer ran, then the committer runs
    second = reland_misfits(settings, s3, open_catalog(settings))
    report = commit(settings)
    # THEN the rerun landed nothing (the source's record is there), and the commit took the row once
    assert [reland.state for reland in second] == ["already relanded"]
    wallets = next(table for table in report.tables if table.table == "wallets")
    assert (wallets.rows, wallets.misfit_files) == (1, 0)
    assert wallet_ids(settings).count(newer) == 1
    # AND a rerun after the commit lands nothing either (the table holds the source's position)
    third = reland_misfits(settings, s3, open_catalog(settings))
    assert [reland.state for reland in third] == ["already relanded"]


@pytest.fixture
def lake_with_its_own_misfit(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> tuple[Settings, TableWriter, str]:
    """A lake whose wallets table lacks NEW_COLUMN, and a wallets file walletlake's own landing
    wrote from the contract (Iceberg's microsecond timestamps, the contract's field ids), as a
    landing process that could not evolve the table does (on AWS the consumer may not change the
    catalog), kept aside by the committer as a misfit."""
    contract = lake.iceberg_tables.iceberg_arrow_schema
    real = lake.iceberg_landing.to_iceberg_rows

    def without_new_column(table: str) -> pa.Schema:
        schema = contract(table)
        return schema.remove(schema.get_field_index(NEW_COLUMN)) if NEW_COLUMN in schema.names else schema

    def old_rows(table: str, rows: pa.Table, day: str, current: Any = None) -> pa.Table:
        return real(
            table, rows.drop_columns([NEW_COLUMN]) if NEW_COLUMN in rows.column_names else rows, day, current
        )

    with monkeypatch.context() as old_code:
        old_code.setattr(lake.iceberg_tables, "iceberg_arrow_schema", without_new_column)
        old_code.setattr(lake.iceberg_landing, "to_iceberg_rows", old_rows)
        settings = make_settings(lake_format="iceberg")
        table_layouts.cache_clear()
        writer = TableWriter(settings.table)
        writer.workload(wallets=2, deposits=2, transfers=0)
        drain(settings, batch_size=100)
        commit(settings)
        table_layouts.cache_clear()

    def from_the_contract(table: str, rows: pa.Table, day: str, current: Any = None) -> pa.Table:
        if table != "wallets":
            return old_rows(table, rows, day, current)
        carried = pa.array(['{"tier":{"S":"gold"}}'] * rows.num_rows, pa.string())
        plain = rows.drop_columns([NEW_COLUMN]) if NEW_COLUMN in rows.column_names else rows
        return real(table, plain.append_column(NEW_COLUMN, carried), day, None)

    with monkeypatch.context() as newer_code:
        newer_code.setattr(lake.iceberg_landing, "to_iceberg_rows", from_the_contract)
        newer_code.setattr(lake.iceberg_tables, "evolve_table", lambda table: False)
        newer = writer.open_wallet()
        writer.deposit(newer, 1_000_000)
        drain(settings, batch_size=100)
        report = commit(settings)
        table_layouts.cache_clear()
    assert report.misfit_files == 1
    return settings, writer, newer


def test_walletlakes_own_misfit_relands_once_beside_a_broken_one(
    lake_with_its_own_misfit: tuple[Settings, TableWriter, str],
) -> None:
    settings, writer, newer = lake_with_its_own_misfit
    s3 = boto3.client("s3", region_name=settings.region)
    folder = misfits_location(settings.bucket, settings.lake_prefix).removeprefix(f"s3://{settings.bucket}/")
    (misfit,) = list_keys(s3, settings.bucket, f"{folder}/wallets/", ".parquet")
    body = s3.get_object(Bucket=settings.bucket, Key=misfit)["Body"].read()
    assert pq.read_schema(pa.BufferReader(body)).field("created_at").type.unit == "us"
    # GIVEN a second misfit that is not Parquet at all (torn), beside walletlake's own
    broken = f"{folder}/wallets/broken.parquet"
    s3.put_object(Bucket=settings.bucket, Key=broken, Body=b"PAR1 torn before its footer")

    # WHEN the upgrade adds the column and the operator re-lands, as typed
    ensure_tables(open_catalog(settings), settings.glue_database)
    done = walletlake(settings, "lake", "reland")

    # THEN the good file is re-landed and committed (its timestamps read in their own unit), the
    # torn one is named as failed on stderr, and the run exits 1
    assert done.returncode == 1, done.stdout + done.stderr
    assert "misfits: 2 found, 1 relanded" in done.stdout
    assert "walletlake lake reland: wallets broken.parquet: failed: " in done.stderr
    rows = load_table(settings, "wallets", open_catalog(settings)).scan().to_arrow().to_pylist()
    (relanded,) = [row for row in rows if row["wallet_id"] == newer]
    assert json.loads(relanded[NEW_COLUMN]) == {"tier": {"S": "gold"}}
    created = {row["wallet_id"]: row["created_at"] for row in rows}
    assert created[newer].year == dt.datetime.now(dt.UTC).year
    assert sorted(wallet_ids(settings)) == sorted(writer.model.wallets)
    assert_exact_ledger(
        load_table(settings, "ledger", open_catalog(settings)).scan().to_arrow(), writer.model.entries
    )


def tidy_source(s3: Any, settings: Settings, source: str) -> None:
    """Delete a source's landing records as the tidy does, and its folder: S3 has no folders, but
    SeaweedFS keeps an emptied one, which a listing would still show as a source with records."""
    from lake.landing_log import keys_after, log_prefix

    keys = keys_after(s3, settings.bucket, settings.lake_prefix, source, None)
    s3.delete_objects(Bucket=settings.bucket, Delete={"Objects": [{"Key": key} for key in keys]})
    s3.delete_object(Bucket=settings.bucket, Key=f"{log_prefix(settings.lake_prefix)}{source}/")


def test_a_relanded_misfits_source_is_forgotten_and_a_rerun_still_adds_nothing(
    lake_with_its_own_misfit: tuple[Settings, TableWriter, str],
) -> None:
    from lake.commit_progress import read_progress
    from lake.misfits import RELAND_STREAM, reland_misfits

    settings, writer, newer = lake_with_its_own_misfit
    s3 = boto3.client("s3", region_name=settings.region)
    ensure_tables(open_catalog(settings), settings.glue_database)
    (relanded,) = reland_misfits(settings, s3, open_catalog(settings))
    commit(settings)
    source = f"{RELAND_STREAM}/{relanded.source}"
    assert source in read_progress(load_table(settings, "wallets", open_catalog(settings)))

    # GIVEN its landing record tidied (past 25 hours) and two days without a commit of it
    tidy_source(s3, settings, source)
    # (the next commit of the table comes from a batch of another source, with no rows)
    lake.iceberg_landing.land_rows(s3, settings, {}, event_source_arn="tick", shard="s-1", first=1, last=1)
    later = time.time() + 49 * 3600
    client = boto3.client("s3", region_name=settings.region)
    commit_landed(settings, client, open_catalog(settings), clock=lambda: later, empty_after_seconds=0)

    # THEN the committer forgot the source, like a stream shard's (metadata does not grow per file)
    progress = read_progress(load_table(settings, "wallets", open_catalog(settings)))
    assert source not in progress
    assert not [name for name in progress if name.startswith(f"{RELAND_STREAM}/misfit~")]

    # WHEN the re-land runs again (the misfit file is still there)
    (again,) = reland_misfits(settings, s3, open_catalog(settings))
    commit(settings)
    # THEN the row's identity decides: the table holds it, nothing is landed, the wallet is there once
    assert (again.state, again.rows, again.held) == ("already relanded", 0, 1)
    assert wallet_ids(settings).count(newer) == 1
    assert_exact_ledger(
        load_table(settings, "ledger", open_catalog(settings)).scan().to_arrow(), writer.model.entries
    )
