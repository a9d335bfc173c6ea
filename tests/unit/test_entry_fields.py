"""A ledger entry is said once (``contracts.wallets_table.ENTRY_FIELDS``); a record walks each module once.

The write path's update expression and ``entries_before`` maps, the decoder's rows, the slow
path's checks and the export backfill's images are all made from the one list, so each states
exactly its fields; and a batch goes batch → decoder → columns → decoded without coming back.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pyarrow as pa

from contracts.lake_tables import LEDGER, row_of, table_of
from contracts.wallets_table import ENTRY_FIELDS, Attr
from stream_processor import decoder, record_problems
from stream_processor.export_entries import number_entries
from wallet import write_requests
from wallet.commands import Transfer
from wallet.posting import post

PRINCIPAL = "arn:aws:sts::111122223333:assumed-role/payments/a"


def test_every_entry_field_is_a_ledger_column_nullable_exactly_when_optional() -> None:
    for field in ENTRY_FIELDS:
        assert LEDGER.field(field.column).nullable is not field.required, field.column
    # AND every placeholder and map key is the field's own
    assert len({f.name for f in ENTRY_FIELDS}) == len({f.key for f in ENTRY_FIELDS}) == len(ENTRY_FIELDS)


def _group_update() -> dict[str, Any]:
    """Two transfers from one payer committed together: its update carries both entries."""
    postings = [
        post(Transfer("a", "b", amount, f"n{amount}", initiated_by=PRINCIPAL), **stamp)
        for amount, stamp in (
            (5, {"now_ms": 1_000, "hot_ttl_seconds": 60, "txn_id": "t1", "request_hash": "h"}),
            (3, {"now_ms": 1_001, "hot_ttl_seconds": 60, "txn_id": "t2", "request_hash": "h"}),
        )
    ]
    request = write_requests.transaction_request("wallets", *postings, now_s=1)
    update: dict[str, Any] = request["TransactItems"][0]["Update"]
    return update


def test_the_write_path_states_every_field_on_the_item_and_in_entries_before() -> None:
    update = _group_update()
    # THEN the update sets every field's attribute, named by its placeholder
    for field in ENTRY_FIELDS:
        assert update["ExpressionAttributeNames"][field.name] == field.attribute
        assert f"{field.name} = {field.value}" in update["UpdateExpression"]
    assert update["ExpressionAttributeValues"][":by"] == {"S": PRINCIPAL}
    # AND the earlier entry's map holds every field's key, with its value
    [earlier] = update["ExpressionAttributeValues"][":eb"]["L"]
    assert earlier["M"] == {
        "txn_id": {"S": "t1"},
        "type": {"S": "transfer"},
        "direction": {"S": "debit"},
        "amount": {"N": "5"},
        "nonce": {"S": "n5"},
        "created_at": {"N": "1000"},
        "counterparty_wallet_id": {"S": "b"},
        "initiated_by": {"S": PRINCIPAL},
    }
    assert set(earlier["M"]) == {field.key for field in ENTRY_FIELDS}


def test_the_decoders_rows_and_checks_are_made_from_the_list() -> None:
    assert decoder.ENTRY_ROW[: len(ENTRY_FIELDS)] == tuple(field.column for field in ENTRY_FIELDS)
    assert {name for name, _ in (*decoder._ENTRY_REQUIRED, *decoder._ENTRY_OPTIONAL)} == {
        *(field.attribute for field in ENTRY_FIELDS if field.attribute != Attr.UPDATED_AT),
        Attr.ENTRIES_BEFORE,
    }
    assert {name for name, _ in (*record_problems._EARLIER_REQUIRED, *record_problems._EARLIER_OPTIONAL)} == {
        field.key for field in ENTRY_FIELDS
    }


def test_an_export_rebuilds_every_field_of_an_entry() -> None:
    wallet = {
        Attr.WALLET_ID: {"S": "w"},
        Attr.BALANCE: {"N": "7"},
        Attr.VERSION: {"N": "1"},
        Attr.UPDATED_AT: {"N": "5000"},
        Attr.ENTRY_TXN_ID: {"S": "t"},
    }
    item = {
        Attr.TXN_ID: {"S": "t"},
        Attr.TYPE: {"S": "deposit"},
        Attr.WALLET_ID: {"S": "w"},
        Attr.AMOUNT: {"N": "7"},
        Attr.NONCE: {"S": "n"},
        Attr.CREATED_AT: {"N": "5000"},
        Attr.EXPIRES_AT: {"N": "99"},
        Attr.INITIATED_BY: {"S": PRINCIPAL},
    }
    [(_, new)] = number_entries([wallet], [item], export_time_s=9).images
    # THEN every field the entry has is stated (a deposit has no counterparty)
    assert {field.attribute for field in ENTRY_FIELDS} - set(new) == {Attr.ENTRY_COUNTERPARTY}
    assert new[Attr.ENTRY_INITIATED_BY] == {"S": PRINCIPAL}


def test_builders_fill_every_column_they_do_not_name_with_nulls() -> None:
    table = table_of(LEDGER, {"entry_id": pa.array(["t:credit"])}, 1)
    assert table.schema == LEDGER
    assert table.column("initiated_by").to_pylist() == [None]
    assert row_of(LEDGER, {"entry_id": "t:credit"}) == {field.name: None for field in LEDGER} | {
        "entry_id": "t:credit"
    }


def test_a_record_walks_each_module_once(project_root: Path) -> None:
    # GIVEN the walk script: one record of each kind, and one the checks quarantine
    spec = importlib.util.spec_from_file_location("record_walk", project_root / "scripts" / "record_walk.py")
    assert spec is not None
    assert spec.loader is not None
    walk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(walk)
    # WHEN the batch is decoded under the profiler
    figures = walk.figures(walk.walk(walk.sample_batch()))
    # THEN it goes one way through three modules, entering each once
    assert figures["walk"] == [
        "stream_processor.batch",
        "stream_processor.decoder",
        "stream_processor.columns",
        "stream_processor.decoded",
        "stream_processor.batch",
    ]
    assert figures["re-entered"] == []
