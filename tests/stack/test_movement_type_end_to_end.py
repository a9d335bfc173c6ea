"""A movement type registered by a test alone goes end to end, with no other module touched.

An external credit of a test-only type is posted and written by the write path's own requests
into DynamoDB Local, read from the stream by the decoder into the lake, numbered again from a
point-in-time export of the table by the export backfill, and counted as money in by the
conservation SQL: each part reads the type's legs from :mod:`contracts.movement_types`.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
from collections.abc import Callable

import boto3
import pytest
from support.stream_records import TableWriter, assert_exact_ledger, read_lake_table

from contracts.money import MICRO_USD_PER_USD as USD
from contracts.movement_types import ADDRESSED, LegSpec, MovementType, registered
from contracts.settings import Settings
from contracts.wallets_table import DIRECTION_CREDIT
from queries import run_query
from stream_processor.consumer import drain
from stream_processor.replay import replay_export

pytestmark = pytest.mark.stack

#: Money a merchant sends back to a wallet from outside the system: a test-only external credit.
REFUND = MovementType("test_refund", "deposit", (LegSpec(ADDRESSED, DIRECTION_CREDIT, None),))


def _export(settings: Settings, export_id: str) -> str:
    """A point-in-time export of the table, as DynamoDB writes one to S3."""
    items = boto3.client("dynamodb").scan(TableName=settings.table, ConsistentRead=True)["Items"]
    folder = f"exports/AWSDynamoDB/{export_id}/"
    s3 = boto3.client("s3")
    s3.put_object(
        Bucket=settings.bucket,
        Key=f"{folder}manifest-summary.json",
        Body=json.dumps({"exportTime": dt.datetime.now(dt.UTC).isoformat()}),
    )
    body = gzip.compress("".join(json.dumps({"Item": item}) + "\n" for item in items).encode())
    s3.put_object(Bucket=settings.bucket, Key=f"{folder}data/part0.json.gz", Body=body)
    return f"s3://{settings.bucket}/{folder}"


def test_a_test_only_external_credit_goes_from_posting_to_the_conservation_sql(
    make_settings: Callable[..., Settings],
) -> None:
    settings, backfilled = make_settings(), make_settings()
    with registered(REFUND):
        # GIVEN a deposit, a refund of the test-only type and a transfer, written by the write path
        writer = TableWriter(settings.table)
        payer, payee = writer.open_wallet(), writer.open_wallet()
        writer.deposit(payer, 10 * USD)
        writer.move(REFUND.name, payee, 7 * USD)
        writer.transfer(payer, payee, 3 * USD)
        today = dt.datetime.now(dt.UTC).date().isoformat()

        # WHEN the stream is read into the lake
        summary = drain(settings, batch_size=100)
        # THEN every entry is there once, the refund a credit from outside, nothing quarantined
        assert (summary.ledger_rows, summary.quarantined) == (4, 0)
        ledger = read_lake_table(settings, "ledger")
        assert_exact_ledger(ledger, writer.model.entries)
        refund = [row for row in ledger.to_pylist() if row["txn_type"] == REFUND.name]
        assert [
            (r["wallet_id"], r["direction"], r["delta"], r["counterparty_wallet_id"]) for r in refund
        ] == [(payee, "credit", 7 * USD, None)]
        # AND the conservation SQL counts it as money in
        conservation = run_query("money_conservation", {"date": today}, settings).iloc[0].to_dict()
        assert (conservation["money_in"], conservation["money_out"], conservation["conserved"]) == (
            17 * USD,
            0,
            True,
        )

        # WHEN an export of the table is numbered and landed in a lake of its own (the backfill)
        report = replay_export(backfilled, _export(settings, "01772000000000-7e570001"))
        # THEN it gives the very entries the stream gave, and the same money in
        assert (report.ledger_rows, report.still_failing, report.problems) == (4, 0, [])
        assert_exact_ledger(read_lake_table(backfilled, "ledger"), writer.model.entries)
        again = run_query("money_conservation", {"date": today}, backfilled).iloc[0].to_dict()
        assert (again["money_in"], again["entries"], again["conserved"]) == (17 * USD, 4, True)
