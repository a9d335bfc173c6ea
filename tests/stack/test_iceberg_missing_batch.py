"""A landed file gone from storage leaves out its whole batch, and only it (the embedded stack).

Batches of wallets and deposits land through the consumer; one landed file of a batch holding
rows for both tables is deleted before the commit (as orphan removal after a long committer
outage, or a hand, would). The committer leaves that batch out of both tables, notes it once with
why, moves past it, and commits every other batch of both tables.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import boto3
import pytest
from support.stream_records import TableWriter

from contracts.lake_layout import misfits_location
from contracts.settings import Settings
from lake import objects
from lake.committer import commit_landed, read_progress
from lake.iceberg_catalog import load_table, open_catalog
from lake.iceberg_landing import split_bucket_key
from lake.landing_log import log_prefix, read_records
from lake.objects import list_keys
from stream_processor.consumer import drain

pytestmark = pytest.mark.stack


def column(settings: Settings, table: str, name: str) -> list[str]:
    rows = load_table(settings, table, open_catalog(settings)).scan().to_arrow()
    return sorted(rows.column(name).to_pylist())


def test_a_missing_file_leaves_out_only_its_batch_in_every_table(
    make_settings: Callable[..., Settings],
) -> None:
    # GIVEN wallets and deposits landed in batches of 3 stream records
    settings = make_settings(lake_format="iceberg")
    writer = TableWriter(settings.table)
    writer.workload(wallets=4, deposits=8, transfers=0, seed=3)
    drain(settings, batch_size=3)
    s3 = boto3.client("s3", region_name=settings.region)
    keys = list_keys(s3, settings.bucket, log_prefix(settings.lake_prefix), ".json")
    records = read_records(s3, settings.bucket, keys)
    assert len(records) > 2
    # AND one batch holding rows of both tables loses its ledger file
    broken = next(r for r in records if r.files_of("ledger") and r.files_of("wallets"))
    (ledger_file,) = broken.files_of("ledger")
    (wallets_file,) = broken.files_of("wallets")
    lost_entries = objects.get_table(s3, *split_bucket_key(ledger_file.path)).column("entry_id").to_pylist()
    lost_wallets = objects.get_table(s3, *split_bucket_key(wallets_file.path)).column("wallet_id").to_pylist()
    ledger_bucket, ledger_key = split_bucket_key(ledger_file.path)
    assert objects.delete_keys(s3, ledger_bucket, [ledger_key]) == 1

    # WHEN the committer commits
    report = commit_landed(settings, s3, open_catalog(settings), empty_after_seconds=0)

    # THEN that batch is left out of both tables (its wallets file too), counted and alarmed on
    assert (report.quarantined_batches, report.missing_files, report.misfit_files) == (1, 1, 0)
    assert report.as_dict()["quarantined_batches"] == 1
    # AND every other batch of both tables is in
    entries = sorted(entry.entry_id for entry in writer.model.entries if entry.entry_id not in lost_entries)
    assert column(settings, "ledger", "entry_id") == entries
    wallets = sorted(w for w in writer.model.wallets if w not in lost_wallets)
    assert column(settings, "wallets", "wallet_id") == wallets
    assert lost_wallets
    # AND both tables' positions are past it, so later batches of its shard are never held
    for table in ("ledger", "wallets"):
        progress = read_progress(load_table(settings, table, open_catalog(settings)))
        assert int(progress[broken.source][0]) >= broken.last
    # AND one note in the lake bucket names the batch, the missing file and why
    root_bucket, root_key = split_bucket_key(misfits_location(settings.bucket, settings.lake_prefix))
    (note_key,) = objects.list_keys(s3, root_bucket, f"{root_key}/_batches/")
    note = json.loads(s3.get_object(Bucket=root_bucket, Key=note_key)["Body"].read())
    assert (note["batch"], note["first"], note["last"]) == (broken.source, broken.first, broken.last)
    assert note["reason"].startswith(f"missing: {ledger_file.path} not in storage")
    assert {(f["table"], f["missing"]) for f in note["files"]} == {("ledger", True), ("wallets", False)}
    # AND the next cycle commits nothing more and leaves nothing else out
    again = commit_landed(settings, s3, open_catalog(settings), empty_after_seconds=0)
    assert (again.rows, again.quarantined_batches) == (0, 0)
