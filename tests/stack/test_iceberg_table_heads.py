"""The catalog's answer read without pyiceberg (:mod:`lake.iceberg_table_heads`) is pyiceberg's
answer: the same metadata file, current snapshot and snapshots, before and after commits, from the
embedded stack's REST catalog, which checks SigV4 signatures as Glue's endpoint does."""

from __future__ import annotations

from collections.abc import Callable

import boto3
import pyarrow as pa
import pytest
from support.sql_lake import DAY, ledger_rows

from contracts.lake_tables import PARTITION_COLUMN, STREAM_TABLES
from contracts.settings import Settings
from lake.iceberg_catalog import open_catalog
from lake.iceberg_table_heads import TableHead, TableNotFoundError, table_head
from lake.iceberg_tables import identifier
from queries._iceberg_views import resolve
from walletlake.local import LOCAL_CREDENTIALS

pytestmark = pytest.mark.stack


def _pyiceberg_head(settings: Settings, table: str) -> TableHead:
    loaded = open_catalog(settings).load_table(identifier(settings.glue_database, table))
    current = loaded.current_snapshot()
    return TableHead(
        loaded.metadata_location,
        current.snapshot_id if current is not None else None,
        frozenset(snapshot.snapshot_id for snapshot in loaded.metadata.snapshots),
    )


def _day_rows(entry_ids: list[str]) -> pa.Table:
    rows = ledger_rows(entry_ids)
    return rows.append_column(PARTITION_COLUMN, pa.array([DAY.isoformat()] * rows.num_rows, pa.string()))


def test_every_tables_head_is_pyicebergs_before_and_after_commits(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(lake_format="iceberg")
    # GIVEN fresh tables: no snapshot yet
    for table in STREAM_TABLES:
        head = table_head(settings, table)
        assert head == _pyiceberg_head(settings, table)
        assert (head.current_snapshot_id, head.snapshot_ids) == (None, frozenset())

    # WHEN the ledger takes two commits
    ledger = open_catalog(settings).load_table(identifier(settings.glue_database, "ledger"))
    ledger.append(_day_rows(["t1:0", "t1:1"]))
    first = table_head(settings, "ledger")
    ledger.append(_day_rows(["t2:0"]))
    second = table_head(settings, "ledger")

    # THEN each answer is the catalog's at that moment, as pyiceberg reads it
    assert second == _pyiceberg_head(settings, "ledger")
    assert first.current_snapshot_id is not None
    assert second.snapshot_ids == first.snapshot_ids | {second.current_snapshot_id}
    assert second.metadata_location != first.metadata_location
    # AND a view pinned to the first snapshot reads its file at that snapshot; an unknown pin is refused
    pinned = resolve(settings, "ledger", {"ledger": first.current_snapshot_id})
    assert (pinned.metadata_location, pinned.snapshot_id) == (
        second.metadata_location,
        first.current_snapshot_id,
    )
    with pytest.raises(ValueError, match="has no snapshot 12345"):
        resolve(settings, "ledger", {"ledger": 12345})


def test_a_missing_table_and_a_bad_signature_are_refused_by_name(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(lake_format="iceberg")
    open_catalog(settings).drop_table(identifier(settings.glue_database, "quarantine"))
    with pytest.raises(
        TableNotFoundError, match=f"{settings.glue_database}.quarantine is not in the catalog"
    ):
        table_head(settings, "quarantine")

    forged = boto3.Session(
        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key="not-the-secret",
        region_name=settings.region,
    )
    with pytest.raises(RuntimeError, match=r"answered 40[13] to loadTable"):
        table_head(settings, "ledger", forged)
