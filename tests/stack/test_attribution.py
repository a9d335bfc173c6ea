"""Every movement attributed: who asked reaches the transaction, its receipt and the ledger row.

The principal is the one a trusted front verified (``WALLETLAKE_TRUST_FRONT=lattice``: VPC
Lattice's ``x-amzn-lattice-identity`` header), the configured default without one, and never a
header a client chose: without trust the identity headers are ignored. These tests drive the app
over HTTP on DynamoDB Local, then the Iceberg lake of the embedded stack (stream → consumer →
committer → named query). A body above the limit is refused with 413 before anything runs.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

import boto3
import pyarrow as pa
import pytest
from support.stream_records import TableWriter
from support.wallet_http import error_of, serve

import lake.iceberg_landing
import lake.iceberg_tables
from contracts.lake_tables import INITIATED_BY
from contracts.settings import Settings
from contracts.wallets_table import Attr
from lake.committer import commit_landed
from lake.iceberg_catalog import load_table, open_catalog
from lake.iceberg_landing import table_layouts
from lake.iceberg_tables import ensure_tables
from queries import run_query
from stream_processor.consumer import drain
from wallet.body_limit import MAX_BODY_BYTES
from wallet.commands import CreateWallet, Deposit
from wallet.store import WalletStore

pytestmark = pytest.mark.stack

PAYER_ROLE = "arn:aws:sts::123456789012:assumed-role/payments/session-1"
OTHER_ROLE = "arn:aws:sts::123456789012:assumed-role/refunds/session-9"
FORGED = "arn:aws:iam::123456789012:role/admin"


def lattice(principal: str) -> dict[str, str]:
    """The identity header as VPC Lattice sets it for a SigV4-authenticated caller."""
    return {"x-amzn-lattice-identity": f"Principal={principal}; SessionName=s; Type=AWSIAM"}


def test_identity_headers_are_ignored_unless_the_front_is_trusted(settings: Settings) -> None:
    # GIVEN the API with no trusted front (the default), and a client sending a forged identity
    with serve(settings) as api:
        wallet = api.create()
        forged = api.http.put(
            f"/api/v1/wallets/{wallet}/deposit/", json={"amount": "5", "nonce": "n1"}, headers=lattice(FORGED)
        )
        assert forged.status_code == 204
        receipt = api.http.get(f"/api/v1/wallets/{wallet}/transactions/n1").json()
        stored = api.table().wallets[wallet]
    # THEN the write is the configured default's, not the header's, everywhere it is recorded
    assert receipt["initiated_by"] == "local"
    assert stored[Attr.ENTRY_INITIATED_BY] == "local"

    # GIVEN the same API trusting VPC Lattice (the deployed tasks: only Lattice reaches them)
    with serve(settings.replace(trust_front="lattice")) as api:
        wallet = api.create(headers=lattice(PAYER_ROLE))
        api.http.put(
            f"/api/v1/wallets/{wallet}/deposit/",
            json={"amount": "5", "nonce": "n1"},
            headers=lattice(PAYER_ROLE),
        )
        # a request that did not come through Lattice has no verified principal: refused, not run
        unattributed = api.http.put(f"/api/v1/wallets/{wallet}/deposit/", json={"amount": "5", "nonce": "n2"})
        first = api.http.get(f"/api/v1/wallets/{wallet}/transactions/n1", headers=lattice(PAYER_ROLE)).json()
        # the outcome is its caller's alone: anyone else is told there is none, and not by whom
        other = api.http.get(f"/api/v1/wallets/{wallet}/transactions/n1", headers=lattice(FORGED))
        unsigned = api.http.get(f"/api/v1/wallets/{wallet}/transactions/n1")
        transactions = {item[Attr.NONCE]: item for item in api.table().transactions}
    # THEN the verified principal is on the receipt and the transaction item; an unsigned movement
    # is refused before it runs (wallet.authorization), so no movement is ever unattributed
    assert first["initiated_by"] == transactions["n1"][Attr.INITIATED_BY] == PAYER_ROLE
    assert error_of(unattributed) == (401, "unauthenticated")
    assert "n2" not in transactions
    assert other.status_code == 404
    assert error_of(unsigned) == (401, "unauthenticated")
    for refused in (other, unsigned):
        assert PAYER_ROLE not in refused.text


def test_a_too_large_body_gets_413_and_writes_nothing(settings: Settings) -> None:
    # GIVEN a wallet
    with serve(settings) as api:
        wallet = api.create()
        before = api.table()
        big = b'{"amount": "5", "nonce": "n1", "pad": "' + b"x" * MAX_BODY_BYTES + b'"}'
        # WHEN a deposit's body is above the limit, declared or streamed without a length
        declared = api.call("PUT", f"/api/v1/wallets/{wallet}/deposit/", raw=big)
        streamed = api.http.put(
            f"/api/v1/wallets/{wallet}/deposit/",
            content=iter([big[:1000], big[1000:]]),
            headers={"content-type": "application/json"},
        )
        after = api.table()
        # AND a small body is still served
        small = api.deposit(wallet, "5", "n1")
    # THEN both are 413 request_too_large, documented, and the table did not change
    assert error_of(declared) == (413, "request_too_large")
    assert error_of(streamed) == (413, "request_too_large")
    assert (after.item_count, after.wallets[wallet][Attr.BALANCE]) == (before.item_count, 0)
    assert small.status_code == 204


def test_the_principal_reaches_the_ledger_row_through_the_stream_the_committer_and_a_query(
    make_settings: Callable[..., Settings],
) -> None:
    # GIVEN the Iceberg lake and an API trusting VPC Lattice
    settings = make_settings(lake_format="iceberg").replace(trust_front="lattice")
    with serve(settings) as api:
        headers = lattice(PAYER_ROLE)
        payer, payee = api.create(headers=headers), api.create(headers=headers)
        api.http.put(
            f"/api/v1/wallets/{payer}/deposit/", json={"amount": "100", "nonce": "d"}, headers=headers
        )
        api.http.put(
            f"/api/v1/wallets/{payer}/transfer/{payee}/", json={"amount": "30", "nonce": "t"}, headers=headers
        )
    # AND concurrent deposits of another caller on one wallet, group-committed (entries_before)
    store = WalletStore(settings.replace(writes_in_flight=1))

    async def burst() -> None:
        wallet, _ = await store.create_wallet(CreateWallet(str(uuid.uuid4())))
        await asyncio.gather(
            *(store.execute(Deposit(wallet, 1, f"g{i}", initiated_by=OTHER_ROLE)) for i in range(12))
        )

    asyncio.run(burst())
    assert store.telemetry.snapshot()["group_commits"] >= 1

    # WHEN the consumer lands the stream and the committer commits it
    drain(settings, batch_size=10)
    commit_landed(
        settings,
        boto3.client("s3", region_name=settings.region),
        open_catalog(settings),
        empty_after_seconds=0,
    )

    # THEN every ledger row carries its movement's principal (both legs of the transfer)
    rows = load_table(settings, "ledger", open_catalog(settings)).scan().to_arrow().to_pylist()
    assert len(rows) == 3 + 12
    by_wallet = {(row["wallet_id"], row["nonce"]): row["initiated_by"] for row in rows}
    assert by_wallet[(payer, "d")] == by_wallet[(payer, "t")] == by_wallet[(payee, "t")] == PAYER_ROLE
    assert sum(1 for row in rows if row["initiated_by"] == OTHER_ROLE) == 12
    # AND the named query answers who moved how much
    today = dt.datetime.now(dt.UTC).date().isoformat()
    frame = run_query("movements_by_principal", {"start_date": today, "end_date": today}, settings)
    found = {row["initiated_by"]: row for row in frame.to_dict("records")}
    assert (int(found[PAYER_ROLE]["money_in_movements"]), int(found[PAYER_ROLE]["transfers"])) == (1, 1)
    assert int(found[PAYER_ROLE]["amount"]) == 130
    assert (int(found[OTHER_ROLE]["money_in_movements"]), int(found[OTHER_ROLE]["amount"])) == (12, 12)


def test_an_old_lake_takes_initiated_by_by_name_and_its_rows_read_null(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a lake provisioned and written by a walletlake whose ledger had no initiated_by
    contract = lake.iceberg_tables.iceberg_arrow_schema
    landing = lake.iceberg_landing.to_iceberg_rows

    def without_column(table: str) -> pa.Schema:
        schema = contract(table)
        return schema.remove(schema.get_field_index(INITIATED_BY)) if INITIATED_BY in schema.names else schema

    def old_rows(table: str, rows: pa.Table, day: str, current: Any = None) -> pa.Table:
        return landing(
            table,
            rows.drop_columns([INITIATED_BY]) if INITIATED_BY in rows.column_names else rows,
            day,
            current,
        )

    with monkeypatch.context() as old_code:
        old_code.setattr(lake.iceberg_tables, "iceberg_arrow_schema", without_column)
        old_code.setattr(lake.iceberg_landing, "to_iceberg_rows", old_rows)
        settings = make_settings(lake_format="iceberg")
        writer = TableWriter(settings.table)
        writer.workload(wallets=2, deposits=3, transfers=2)
        drain(settings, batch_size=10)
        commit_landed(
            settings,
            boto3.client("s3", region_name=settings.region),
            open_catalog(settings),
            empty_after_seconds=0,
        )
        table_layouts.cache_clear()
    old_entries = {
        row["entry_id"]
        for row in load_table(settings, "ledger", open_catalog(settings)).scan().to_arrow().to_pylist()
    }
    assert INITIATED_BY not in load_table(settings, "ledger", open_catalog(settings)).schema().column_names

    # WHEN the new version deploys (provisioning adds the column by name) and an attributed write lands
    done = ensure_tables(open_catalog(settings), settings.glue_database)
    with serve(settings.replace(trust_front="lattice")) as api:
        wallet = api.create(headers=lattice(PAYER_ROLE))
        api.http.put(
            f"/api/v1/wallets/{wallet}/deposit/",
            json={"amount": "7", "nonce": "new"},
            headers=lattice(PAYER_ROLE),
        )
    drain(settings, batch_size=10)
    commit_landed(
        settings,
        boto3.client("s3", region_name=settings.region),
        open_catalog(settings),
        empty_after_seconds=0,
    )

    # THEN the column was added once; old rows read it as null, the new row carries its principal
    assert any(f"columns added: {INITIATED_BY}" in line for line in done if ".ledger:" in line)
    rows = load_table(settings, "ledger", open_catalog(settings)).scan().to_arrow().to_pylist()
    assert old_entries
    assert all(row[INITIATED_BY] is None for row in rows if row["entry_id"] in old_entries)
    assert [row[INITIATED_BY] for row in rows if row["entry_id"] not in old_entries] == [PAYER_ROLE]
