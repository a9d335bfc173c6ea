"""A new deployment's history, before its committer has created the lake's ledger: DynamoDB answers.

On AWS the ledger table is created by the committer's first run (``ensure_tables``), so for the
minutes between a deploy and that run the table does not exist. Found by the deploy check, whose
task answered the history route 500 there: a missing ledger is a lake with no entries, and every
entry is then still DynamoDB's. Once the committer creates and fills it, the same history reads on
across the seam.
"""

from __future__ import annotations

from collections.abc import Callable

import boto3
import pytest
from pyiceberg.exceptions import NoSuchTableError
from support.wallet_http import serve

from contracts.settings import Settings
from lake.committer import commit_landed
from lake.iceberg_catalog import open_catalog
from lake.iceberg_tables import ensure_tables, identifier
from lake.ledger_history import LakeLedger
from stream_processor.consumer import drain

pytestmark = pytest.mark.stack


def test_a_history_before_the_ledger_exists_is_dynamodbs_then_the_lake_takes_over(
    make_settings: Callable[..., Settings],
) -> None:
    # GIVEN an Iceberg lake whose ledger table has not been created yet (a fresh deployment)
    settings = make_settings(lake_format="iceberg")
    catalog = open_catalog(settings)
    catalog.drop_table(identifier(settings.glue_database, "ledger"))  # the table only, no file
    with pytest.raises(NoSuchTableError):
        catalog.load_table(identifier(settings.glue_database, "ledger"))
    with serve(settings, lake=LakeLedger(settings, metadata_seconds=0)) as api:
        wallet = api.create()
        for n in range(3):
            api.deposit(wallet, str(10 + n), f"early-{n}")
        # WHEN its owner reads the history, and one entry by its transaction id
        page = api.http.get(f"/api/v1/wallets/{wallet}/transactions")
        # THEN DynamoDB answers every entry, newest first, and no note of a lake that began late
        assert page.status_code == 200, page.text
        entries = page.json()["entries"]
        assert [(e["version"], e["amount"], e["balance_after"]) for e in entries] == [
            (3, "12", "33"),
            (2, "11", "21"),
            (1, "10", "10"),
        ]
        assert "note" not in page.json()
        by_id = api.http.get(f"/api/v1/wallets/{wallet}/transactions/by-id/{entries[1]['transaction_id']}")
        assert by_id.status_code == 200
        assert by_id.json() == entries[1]
        # AND once the committer has created the ledger and committed the three, the walk is the same
        ensure_tables(catalog, settings.glue_database)
        drain(settings, batch_size=500)
        commit_landed(settings, boto3.client("s3", region_name=settings.region), catalog)
        assert LakeLedger(settings).table() is not None
        api.deposit(wallet, "13", "late-0")
        after = api.http.get(f"/api/v1/wallets/{wallet}/transactions").json()["entries"]
        assert [(e["version"], e["balance_after"]) for e in after] == [
            (4, "46"),
            (3, "33"),
            (2, "21"),
            (1, "10"),
        ]
        assert after[1:] == entries
