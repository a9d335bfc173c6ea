"""A lost catalog rebuilt from the lake's own files, as docs/operations.md ("A lost catalog") types it.

The catalog's entries are dropped and the tables' files kept (SeaweedFS's drop deletes the files,
so they are put back as they were: what a wiped catalog leaves). Provisioning then refuses, in one
line naming ``walletlake lake register``, to create an empty table over each table's history;
the command registers every table from its newest metadata file, with its snapshots, refs and
the committer's progress; every entry is there once, the pipeline carries on without doubling
anything, and the day reconciles clean.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from pyiceberg.exceptions import NoSuchTableError
from support.stream_records import TableWriter, assert_exact_ledger

from contracts.lake_tables import STREAM_TABLES
from contracts.settings import Settings
from lake.committer import commit_landed
from lake.iceberg_catalog import load_table, open_catalog
from lake.iceberg_landing import table_layouts
from lake.iceberg_tables import identifier
from stream_processor.consumer import drain
from walletlake.local import provision

pytestmark = pytest.mark.stack

_BIN = str(Path(sys.executable).parent)


def walletlake(settings: Settings, *argv: str) -> subprocess.CompletedProcess[str]:
    """The command line as an operator types it, in its own process."""
    environ = {**os.environ, **settings.to_env(), "PATH": f"{_BIN}:{os.environ.get('PATH', '')}"}
    return subprocess.run(
        ["walletlake", *argv], env=environ, capture_output=True, text=True, check=False, timeout=300
    )


def commit(settings: Settings) -> Any:
    s3 = boto3.client("s3", region_name=settings.region)
    return commit_landed(settings, s3, open_catalog(settings), empty_after_seconds=0)


def lose_the_catalog(settings: Settings) -> dict[str, bytes]:
    """Drop every table's catalog entry and keep its files (put back where they were); returns
    the files, by key."""
    s3 = boto3.client("s3", region_name=settings.region)
    catalog = open_catalog(settings)
    kept: dict[str, bytes] = {}
    for name in STREAM_TABLES:
        bucket, _, prefix = (
            load_table(settings, name, catalog).location().removeprefix("s3://").partition("/")
        )
        keys = [
            item["Key"]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/")
            for item in page.get("Contents", [])
        ]
        files = {key: s3.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys}
        catalog.drop_table(identifier(settings.glue_database, name))
        for key, body in files.items():
            s3.put_object(Bucket=bucket, Key=key, Body=body)
        kept.update({f"{bucket}/{key}": body for key, body in files.items()})
    table_layouts.cache_clear()
    return kept


def test_a_lost_catalog_is_refused_by_provisioning_and_registered_back(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(lake_format="iceberg")
    writer = TableWriter(settings.table)
    writer.workload(wallets=4, deposits=6, transfers=5)
    drain(settings, batch_size=7)
    commit(settings)
    writer.workload(wallets=3, deposits=3, transfers=2)
    drain(settings, batch_size=7)
    commit(settings)
    before = {name: load_table(settings, name, open_catalog(settings)).metadata for name in STREAM_TABLES}
    assert len(before["ledger"].snapshots) >= 2

    # GIVEN the catalog lost every table, their files kept
    kept = lose_the_catalog(settings)

    # WHEN provisioning runs (`walletlake local up`, the committer's cold start)
    lines = provision(settings)
    # THEN it refuses each table in one line naming the command, and creates nothing over the files
    refused = [line for line in lines if line.startswith("REFUSED iceberg table")]
    assert len(refused) == len(STREAM_TABLES), lines[-4:]
    assert all("run `walletlake lake register`" in line for line in refused)
    for name in STREAM_TABLES:
        with pytest.raises(NoSuchTableError):
            open_catalog(settings).load_table(identifier(settings.glue_database, name))
    s3 = boto3.client("s3", region_name=settings.region)
    for path, body in kept.items():
        bucket, _, key = path.partition("/")
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body

    # WHEN the operator registers the tables, as typed (a dry run first)
    dry = walletlake(settings, "lake", "register", "--dry-run")
    done = walletlake(settings, "lake", "register")
    again = walletlake(settings, "lake", "register", "--json")

    # THEN every table is back as its newest metadata file describes it
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert dry.stdout.count(": would register from s3://") == len(STREAM_TABLES), dry.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(": registered from s3://") == len(STREAM_TABLES), done.stdout
    assert again.returncode == 0, again.stdout + again.stderr
    assert {table["state"] for table in json.loads(again.stdout)["tables"]} == {"in the catalog"}
    for name, metadata in before.items():
        got = load_table(settings, name, open_catalog(settings)).metadata
        assert got.schema().fields == metadata.schema().fields
        assert {s.snapshot_id for s in got.snapshots} == {s.snapshot_id for s in metadata.snapshots}
        assert got.refs == metadata.refs
        assert got.properties == metadata.properties  # the committer's progress among them
    assert_exact_ledger(
        load_table(settings, "ledger", open_catalog(settings)).scan().to_arrow(), writer.model.entries
    )

    # AND the pipeline carries on from the progress it had: nothing lost, nothing twice
    assert not [line for line in provision(settings) if line.startswith("REFUSED")]
    writer.workload(wallets=3, deposits=2, transfers=2)
    drain(settings, batch_size=7)
    commit(settings)
    assert_exact_ledger(
        load_table(settings, "ledger", open_catalog(settings)).scan().to_arrow(), writer.model.entries
    )
    wallets = load_table(settings, "wallets", open_catalog(settings)).scan().to_arrow().column("wallet_id")
    assert sorted(wallets.to_pylist()) == sorted(writer.model.wallets)
    assert walletlake(settings, "snapshot").returncode == 0
    day = dt.datetime.now(dt.UTC).date().isoformat()
    reconciled = walletlake(
        settings, "reconcile", "--date", day, "--provisional", "--max-lag-seconds", "60", "--json"
    )
    assert reconciled.returncode == 0, reconciled.stdout + reconciled.stderr
    assert json.loads(reconciled.stdout)["ok"] is True
