"""A wallet's own history (issue 44, point 7): every entry ever, newest first, DynamoDB and the lake seamless.

The API reads DynamoDB Local (the wallet item, the records' indexes) and the embedded Iceberg lake
(SeaweedFS's catalog), as deployed; the lake is filled by the real consumer and committer.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from support.lattice_callers import PERSON, SERVICE, caller, role_arn
from support.wallet_http import Api, error_of, serve

from contracts.caller_permissions import CallerPermissions
from contracts.idempotency_table import idempotency_key
from contracts.settings import Settings
from lake.committer import commit_landed
from lake.iceberg_catalog import open_catalog
from lake.ledger_history import LakeLedger
from stream_processor.consumer import drain
from wallet.commands import Deposit, Transfer
from wallet.store import WalletStore

pytestmark = pytest.mark.stack


def _commit(settings: Settings) -> None:
    drain(settings, batch_size=500)
    commit_landed(settings, boto3.client("s3", region_name=settings.region), open_catalog(settings))


def _walk(api: Api, wallet: str, limit: int, **query: str) -> list[dict[str, Any]]:
    """Every page of the wallet's history, following the cursors; the entries in the order given."""
    entries: list[dict[str, Any]] = []
    params: dict[str, str] = {"limit": str(limit), **query}
    while True:
        answer = api.http.get(f"/api/v1/wallets/{wallet}/transactions", params=params)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        entries += page["entries"]
        if page["next_cursor"] is None:
            return entries
        params = {"limit": str(limit), "cursor": page["next_cursor"], **query}


def _assert_whole(entries: list[dict[str, Any]], version: int, balance: int) -> None:
    """Versions version..1 once each, newest first, each balance the next one's plus its amount."""
    assert [entry["version"] for entry in entries] == list(range(version, 0, -1))
    assert int(entries[0]["balance_after"]) == balance
    for newer, older in itertools.pairwise(entries):
        signed = int(newer["amount"]) * (1 if newer["direction"] == "credit" else -1)
        assert int(older["balance_after"]) == int(newer["balance_after"]) - signed
    assert len({entry["transaction_id"] for entry in entries}) == len(entries)


@pytest.fixture
def lake_api(make_settings: Callable[..., Settings]) -> Iterator[tuple[Api, Settings]]:
    settings = make_settings(lake_format="iceberg")
    with serve(settings, lake=LakeLedger(settings, metadata_seconds=0)) as api:
        yield api, settings


def test_a_wallets_history_is_every_entry_newest_first_with_who_asked_and_the_balance_after(
    lake_api: tuple[Api, Settings],
) -> None:
    api, _ = lake_api
    # GIVEN two deposits into Ann's wallet and a transfer from it to Bob's
    ann, bob = api.create(), api.create()
    assert api.deposit(ann, "700", "d-1").status_code == 204
    assert api.deposit(ann, "300", "d-2").status_code == 204
    assert api.transfer(ann, bob, "250", "t-1").status_code == 204
    # THEN Ann's history is the three, newest first, each with its balance after
    page = api.http.get(f"/api/v1/wallets/{ann}/transactions/").json()
    assert page["next_cursor"] is None
    shown = [
        (e["version"], e["type"], e["direction"], e["amount"], e["balance_after"], e["nonce"])
        for e in page["entries"]
    ]
    assert shown == [
        (3, "transfer", "debit", "250", "750", "t-1"),
        (2, "deposit", "credit", "300", "1000", "d-2"),
        (1, "deposit", "credit", "700", "700", "d-1"),
    ]
    assert page["entries"][0]["counterparty_wallet_id"] == bob
    assert page["entries"][0]["initiated_by"] == "local"
    # AND Bob's is the credit, named by the same transaction id, found by it too
    (credit,) = api.http.get(f"/api/v1/wallets/{bob}/transactions").json()["entries"]
    assert (credit["direction"], credit["counterparty_wallet_id"], credit["balance_after"]) == (
        "credit",
        ann,
        "250",
    )
    assert credit["transaction_id"] == page["entries"][0]["transaction_id"]
    by_id = api.http.get(f"/api/v1/wallets/{bob}/transactions/by-id/{credit['transaction_id']}")
    assert by_id.json() == credit
    assert error_of(api.http.get(f"/api/v1/wallets/{bob}/transactions/by-id/{uuid.uuid4()}")) == (
        404,
        "entry_not_found",
    )


def test_the_history_asks_are_checked_before_anything_is_read(lake_api: tuple[Api, Settings]) -> None:
    api, _ = lake_api
    wallet = api.create()
    path = f"/api/v1/wallets/{wallet}/transactions"
    for query in (
        {"limit": "0"},
        {"limit": "201"},
        {"limit": "ten"},
        {"from": "yesterday"},
        {"from": "2026-11-28T00:00:00"},
        {"from": "2026-11-28T00:00:00Z", "to": "2026-11-27T00:00:00Z"},
        {"cursor": "not-a-cursor"},
        {"sort": "asc"},
    ):
        assert error_of(api.http.get(path, params=query)) == (422, "validation_error"), query
    assert error_of(api.http.get(f"/api/v1/wallets/{uuid.uuid4()}/transactions")) == (404, "wallet_not_found")
    assert api.http.get(path).json() == {"wallet_id": wallet, "entries": [], "next_cursor": None}


def test_a_cursor_is_the_wallets_and_its_ranges_only(lake_api: tuple[Api, Settings]) -> None:
    api, _ = lake_api
    ann, bob = api.create(), api.create()
    for n in range(3):
        api.deposit(ann, "5", f"a-{n}")
        api.deposit(bob, "5", f"b-{n}")
    cursor = api.http.get(f"/api/v1/wallets/{ann}/transactions", params={"limit": "1"}).json()["next_cursor"]
    assert cursor is not None
    # THEN it pages Ann's history, never Bob's, and not under another range
    assert error_of(api.http.get(f"/api/v1/wallets/{bob}/transactions", params={"cursor": cursor})) == (
        422,
        "validation_error",
    )
    other_range = {"cursor": cursor, "from": "2020-01-01T00:00:00Z"}
    assert error_of(api.http.get(f"/api/v1/wallets/{ann}/transactions", params=other_range)) == (
        422,
        "validation_error",
    )
    following = api.http.get(f"/api/v1/wallets/{ann}/transactions", params={"limit": "1", "cursor": cursor})
    assert [entry["version"] for entry in following.json()["entries"]] == [2]


def test_an_owner_reads_only_their_own_wallets_history(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(lake_format="iceberg").replace(
        trust_front="lattice",
        lattice_service_arn=SERVICE,
        caller_permissions=CallerPermissions.parse(f"{role_arn('customers')}=create_wallet+read"),
        caller_session_pattern=PERSON,
        admin_routes=False,
    )
    with serve(settings, lake=LakeLedger(settings, metadata_seconds=0)) as api:
        anns = api.create(headers=caller("customers", "ann.lee@example.com"))
        history = f"/api/v1/wallets/{anns}/transactions"
        for path, status in ((history, 200), (f"{history}/by-id/{uuid.uuid4()}", 404)):
            mine = api.http.get(path, headers=caller("customers", "ann.lee@example.com"))
            theirs = api.http.get(path, headers=caller("customers", "bob.jones@example.com"))
            assert mine.status_code == status
            assert error_of(theirs) == (403, "not_wallet_owner")


def test_ten_thousand_entries_page_whole_across_the_seam_while_the_lake_lags_and_ttl_deletes(
    make_settings: Callable[..., Settings],
) -> None:
    # GIVEN a wallet with 10,000 entries (deposits, and transfers both ways with a second wallet),
    # written through the write path in bursts of concurrent requests (group commits)
    settings = make_settings(lake_format="iceberg")
    store = WalletStore(settings)
    rng = random.Random(44)

    async def write(count: int, mine: str, other: str, start: int) -> None:
        commands: list[Deposit | Transfer] = []
        for n in range(start, start + count):
            kind = rng.random()
            if kind < 0.5:
                commands.append(Deposit(mine, rng.randint(1, 10_000), f"d-{n}", "local"))
            elif kind < 0.75:
                commands.append(Transfer(other, mine, rng.randint(1, 100), f"in-{n}", "local"))
            else:
                commands.append(Transfer(mine, other, 1, f"out-{n}", "local"))
        for chunk in range(0, len(commands), 64):
            await asyncio.gather(*(store.execute(command) for command in commands[chunk : chunk + 64]))

    async def setup() -> tuple[str, str]:
        from wallet.commands import CreateWallet

        mine, _ = await store.create_wallet(CreateWallet(str(uuid.uuid4()), "local"))
        other, _ = await store.create_wallet(CreateWallet(str(uuid.uuid4()), "local"))
        await store.execute(Deposit(other, 10**12, "seed", "local"))
        await store.execute(Deposit(mine, 10**9, "seed", "local"))
        return mine, other

    loop = asyncio.new_event_loop()
    try:
        mine, other = loop.run_until_complete(setup())
        loop.run_until_complete(write(5_999, mine, other, 0))
        # WHEN the lake takes the first 6,000 and the consumer then lags behind 4,000 more
        _commit(settings)
        loop.run_until_complete(write(4_000, mine, other, 6_000))
    finally:
        loop.run_until_complete(store.drain())
        loop.close()
        store.client.close()
    wallet = _wallet(settings, mine)
    assert wallet["version"] == 10_000
    # AND TTL deletes the records of entries the lake already holds (a sample of them)
    _delete_records(settings, mine, [f"d-{n}" for n in range(0, 5_999, 7)])
    with serve(settings, lake=LakeLedger(settings, metadata_seconds=0)) as api:
        # THEN paging from the newest gives versions 10,000..1 once each, balances chained
        _assert_whole(_walk(api, mine, 200), 10_000, wallet["balance"])
        # AND while it paged the consumer resumed: the same walk again is the same history
        _commit(settings)
        again = _walk(api, mine, 200)
        _assert_whole(again, 10_000, wallet["balance"])


def test_a_record_lost_before_the_lake_has_its_entry_makes_the_page_wait_never_show_a_hole(
    lake_api: tuple[Api, Settings],
) -> None:
    api, settings = lake_api
    wallet = api.create()
    for n in range(3):
        api.deposit(wallet, "10", f"n-{n}")
    # WHEN the hot record of an entry not yet in the lake is gone
    _delete_records(settings, wallet, ["n-1"])
    answer = api.http.get(f"/api/v1/wallets/{wallet}/transactions")
    # THEN the page is refused as catching up (ask again), never answered with a hole
    assert error_of(answer) == (503, "history_catching_up")
    assert int(answer.headers["Retry-After"]) >= 1
    # AND once the lake has the entries the history is whole again
    _commit(settings)
    _assert_whole(_walk(api, wallet, 2), 3, 30)


def _wallet(settings: Settings, wallet: str) -> dict[str, int]:
    item = boto3.client("dynamodb", region_name=settings.region).get_item(
        TableName=settings.table, Key={"pk": {"S": f"{wallet}#wallet"}}, ConsistentRead=True
    )["Item"]
    return {"version": int(item["version"]["N"]), "balance": int(item["balance"]["N"])}


def _delete_records(settings: Settings, wallet: str, nonces: list[str]) -> None:
    """What TTL does to the records of ``nonces`` (the caller ``local``'s)."""
    client = boto3.client("dynamodb", region_name=settings.region)
    for nonce in nonces:
        client.delete_item(
            TableName=settings.idempotency_table, Key={"pk": {"S": idempotency_key(wallet, nonce, "local")}}
        )


def test_entries_older_than_the_lakes_first_day_are_said_to_be_kept_nowhere(
    lake_api: tuple[Api, Settings],
) -> None:
    api, settings = lake_api
    # GIVEN a wallet of 5 entries whose first 2 are older than the lake's first day (gone from
    # the lake, as a wallet's entries from before the lake began would be) and out of DynamoDB
    wallet = api.create()
    for n in range(5):
        api.deposit(wallet, "10", f"e-{n}")
    _commit(settings)
    from pyiceberg.expressions import LessThanOrEqual

    ledger = LakeLedger(settings).table(fresh=True)
    ledger.delete(LessThanOrEqual("wallet_version", 2))
    _delete_records(settings, wallet, ["e-0", "e-1"])
    # THEN its history is what the lake has, and the last page says what it cannot show
    page = api.http.get(f"/api/v1/wallets/{wallet}/transactions").json()
    assert [entry["version"] for entry in page["entries"]] == [5, 4, 3]
    assert page["next_cursor"] is None
    assert page["note"] == "entries before version 3 are older than the lake's first day and are kept nowhere"
    # AND for a wallet opened before the lake began (its item says 2019), a range wholly before
    # the lake's first day is empty, the same fact said
    boto3.client("dynamodb", region_name=settings.region).update_item(
        TableName=settings.table,
        Key={"pk": {"S": f"{wallet}#wallet"}},
        UpdateExpression="SET created_at = :c",
        ExpressionAttributeValues={":c": {"N": "1546300800000"}},
    )
    old = api.http.get(f"/api/v1/wallets/{wallet}/transactions", params={"to": "2020-01-01T00:00:00Z"}).json()
    assert old["entries"] == []
    assert old["note"] == (
        "none of the wallet's entries in this range is in the lake: the lake began after them, "
        "and they are kept nowhere"
    )
