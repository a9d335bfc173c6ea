"""Group commit in a fleet: a group DynamoDB cancels only for TransactionConflict is written again whole.

Several servers on one busy wallet make real DynamoDB cancel transactions with ``TransactionConflict``
(another process's transaction holds an item). Splitting such a group into single writes multiplies
the transactions on the busy wallet exactly when it is busy, so the store writes the group again whole,
after a jittered pause, a bounded number of times, and splits only after that or when a request of it
really refuses (ConditionalCheckFailed). DynamoDB Local never raises TransactionConflict, so the
store's client is wrapped (:class:`dynamodb_faults.ScriptedDynamoDB`) to cancel chosen writes with the
service's reasons; everything else reaches DynamoDB Local, and the table and the stream are checked.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import httpx
import pytest
from support.dynamodb_faults import (
    CONFLICT_REASON,
    HELD_REASON,
    ScriptedDynamoDB,
    conflict_on_first_item,
    conflict_on_wallets,
    first_attempts_of_groups,
    nonces_of,
)
from support.store_calls import create_wallets, outcome
from support.wallet_http import serve
from support.wallet_table import assert_chains

from contracts import api_metrics as metrics
from contracts.settings import Settings
from contracts.wallets_table import Attr
from wallet.cancellation import conflict_only
from wallet.commands import Deposit, Transfer
from wallet.dynamodb import DynamoDBClient
from wallet.errors import InsufficientFundsError, WalletNotFoundError
from wallet.store import RetryPolicy, WalletStore

#: Short pauses (the policy's shape, not its scale, is under test); four tries of a conflicted group.
FAST = RetryPolicy(base_delay=0.001, max_delay=0.005, group_conflict_attempts=4)


def _store(settings: Settings, **changes: Any) -> tuple[WalletStore, ScriptedDynamoDB]:
    client = ScriptedDynamoDB(DynamoDBClient(settings.region))
    store = WalletStore(settings.replace(**changes), dynamodb=cast(DynamoDBClient, client), retry=FAST)
    return store, client


def _group_scenario(store: WalletStore) -> tuple[list[str], list[Any]]:
    """One request in flight alone ("first"), then six that wait behind it and leave as one group."""

    async def scenario() -> tuple[list[str], list[Any]]:
        a, b, c = await create_wallets(store, 3)
        await store.execute(Deposit(a, 100, "fund"))
        outcomes = await asyncio.gather(
            store.execute(Deposit(c, 1, "first")),
            store.execute(Transfer(a, b, 30, "t1")),
            store.execute(Transfer(b, c, 20, "t2")),
            store.execute(Deposit(b, 7, "d1")),
            store.execute(Transfer(c, a, 15, "t3")),
            store.execute(Transfer(a, c, 5, "t4")),
            store.execute(Deposit(a, 3, "d2")),
            return_exceptions=True,
        )
        return [a, b, c], [outcome(each) for each in outcomes]

    return asyncio.run(scenario())


GROUP = ["t1", "t2", "d1", "t3", "t4", "d2"]


# ----------------------------------------------------------------------------- the rule, purely


@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        (["TransactionConflict"], True),
        (["None", "TransactionConflict", "None"], True),
        (["TransactionConflict", "TransactionConflict"], True),
        (["None", "None"], False),  # nothing says why: not a conflict
        ([], False),
        (["TransactionConflict", "ConditionalCheckFailed"], False),  # a real refusal is in it
        (["TransactionConflict", "ThrottlingError"], False),
        (["ProvisionedThroughputExceeded"], False),
    ],
)
def test_a_group_is_cancelled_only_for_conflicts_when_every_stated_reason_is_a_conflict(
    codes: list[str], expected: bool
) -> None:
    assert conflict_only([{"Code": code} for code in codes]) is expected


# ------------------------------------------------------------------------------ on DynamoDB Local


@pytest.mark.stack
@pytest.mark.parametrize("reasons", [conflict_on_wallets, conflict_on_first_item])
def test_a_group_cancelled_for_transaction_conflicts_is_written_again_whole_not_split(
    settings: Settings, reasons: Any
) -> None:
    # GIVEN a store whose group commits DynamoDB cancels twice with TransactionConflict
    store, client = _store(settings, writes_in_flight=1)
    client.cancel = first_attempts_of_groups(2, reasons)

    # WHEN six requests wait behind one in flight and leave together
    wallets, outcomes = _group_scenario(store)

    # THEN every request applied once
    assert outcomes == ["applied"] * 7
    # AND the group went out three times, whole each time: one TransactWriteItems per attempt
    # carrying all six, the first two cancelled, and never a single write of any of them
    assert client.writes[-4:] == [["first"], GROUP, GROUP, GROUP]
    assert client.cancelled == [len(client.writes) - 3, len(client.writes) - 2]
    counts = store.telemetry.snapshot()
    assert counts[metrics.GROUP_SPLITS] == 0
    assert counts[metrics.GROUP_CONFLICT_RETRIES] == 2
    assert counts[metrics.TRANSACTION_CONFLICTS] == 2
    assert (counts[metrics.GROUP_COMMITS], counts[metrics.GROUPED_REQUESTS]) == (1, 6)
    # AND the balances are serial execution's: a 100-30+15-5+3 = 83, b 30-20+7 = 17, c 1+20-15+5 = 11,
    # with every entry in the stream exactly once, versions 1..N
    table = assert_chains(settings, wallets)
    a, b, c = wallets
    assert {w: table.wallets[w][Attr.BALANCE] for w in wallets} == {a: 83, b: 17, c: 11}
    assert {w: table.wallets[w][Attr.VERSION] for w in wallets} == {a: 5, b: 3, c: 4}
    assert sorted(t[Attr.NONCE] for t in table.transactions) == sorted(["fund", "first", *GROUP])


@pytest.mark.stack
def test_a_group_still_conflicting_after_its_attempts_is_split_into_single_writes(settings: Settings) -> None:
    # GIVEN a store whose group commits always meet a conflict (single writes do not)
    store, client = _store(settings, writes_in_flight=1)
    client.cancel = first_attempts_of_groups(1_000, conflict_on_wallets)

    # WHEN six requests leave together
    wallets, outcomes = _group_scenario(store)

    # THEN the group was tried whole the policy's four times, then each request was written alone,
    # in arrival order, and each applied
    assert outcomes == ["applied"] * 7
    assert client.writes[-11:] == [["first"], GROUP, GROUP, GROUP, GROUP, *[[nonce] for nonce in GROUP]]
    counts = store.telemetry.snapshot()
    assert counts[metrics.GROUP_CONFLICT_RETRIES] == FAST.group_conflict_attempts - 1
    assert counts[metrics.TRANSACTION_CONFLICTS] == FAST.group_conflict_attempts
    assert counts[metrics.GROUP_SPLITS] == 1
    table = assert_chains(settings, wallets)
    a, b, c = wallets
    assert {w: table.wallets[w][Attr.BALANCE] for w in wallets} == {a: 83, b: 17, c: 11}


@pytest.mark.stack
def test_only_the_requests_a_cancellation_names_leave_a_group_and_the_rest_commit_in_one_more_trip(
    settings: Settings,
) -> None:
    store, client = _store(settings, writes_in_flight=1)
    other_server = WalletStore(settings)

    async def scenario() -> tuple[list[str], list[Any]]:
        # (created and funded by another server: this one neither remembers the nonce, so a
        # repeat of it reaches DynamoDB and is refused by the nonce's record there, nor has a
        # balance hint of the wallets, so every request joins the group: wallet.balance_hints)
        a, b = await create_wallets(other_server, 2)
        await other_server.execute(Deposit(a, 10, "fund"))
        # GIVEN one request in flight and a group behind it in which one transfer overdraws only
        # after an earlier one of the group ("overdraw": 7 of the 4 left by "ok"), one asks more
        # than the payer ever held ("beyond": DynamoDB Local refuses both with
        # ConditionalCheckFailed, as the service does) and one request is a client's retry of an
        # earlier one (same nonce, same body), among others
        others = [store.execute(Deposit(b, 1, f"d{index}")) for index in range(6)]
        return [a, b], [
            outcome(each)
            for each in await asyncio.gather(
                store.execute(Deposit(b, 1, "first")),
                store.execute(Transfer(a, b, 6, "ok")),
                store.execute(Transfer(a, b, 7, "overdraw")),
                store.execute(Deposit(a, 10, "fund")),
                store.execute(Transfer(a, b, 1_000, "beyond")),
                store.execute(Deposit(a, 2, "later")),
                *others,
                return_exceptions=True,
            )
        ]

    wallets, outcomes = asyncio.run(scenario())

    # THEN the replay answered from its record, both overdrafts refused, every other 204
    assert outcomes[:2] == ["applied", "applied"]
    assert isinstance(outcomes[2], InsufficientFundsError)
    assert outcomes[3] == "replayed"
    assert isinstance(outcomes[4], InsufficientFundsError)
    assert outcomes[5:] == ["applied"] * 7
    # AND the others were written again together at once: one extra round trip; the overdraft
    # that depends on the group's order was written alone after them; the replay and the request
    # beyond the payer's balance needed no write of their own (the reasons decide them); nothing
    # split, nothing retried
    group = ["ok", "overdraw", "fund", "beyond", "later", *(f"d{index}" for index in range(6))]
    assert client.writes[-4:] == [
        ["first"],
        group,
        [nonce for nonce in group if nonce not in ("overdraw", "fund", "beyond")],
        ["overdraw"],
    ]
    counts = store.telemetry.snapshot()
    assert (counts[metrics.GROUP_SPLITS], counts[metrics.GROUP_CONFLICT_RETRIES]) == (0, 0)
    assert counts[metrics.GROUP_REFUSALS] == 1
    a, b = wallets
    table = assert_chains(settings, wallets)
    assert (table.wallets[a][Attr.BALANCE], table.wallets[b][Attr.BALANCE]) == (6, 13)


@pytest.mark.stack
def test_a_conflict_beside_a_refusal_sends_the_named_requests_alone_and_the_rest_together(
    settings: Settings,
) -> None:
    # GIVEN a group whose cancellation names a conflict on one wallet (a) and a failed condition
    # on another (b, with no item returned: a wallet that does not exist, as DynamoDB says it)
    store, client = _store(settings, writes_in_flight=1)

    def mixed(payload: dict[str, Any]) -> list[dict[str, Any]]:
        failed = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
        return [CONFLICT_REASON, failed, *[HELD_REASON] * (len(payload["TransactItems"]) - 2)]

    client.cancel = lambda payload: mixed(payload) if nonces_of(payload) == GROUP else None

    # WHEN the six leave together
    wallets, outcomes = _group_scenario(store)

    # THEN the requests on b are answered as that answer has them (404: no write of their own),
    # the others go again together after a pause (the conflict), never split. Without t2
    # (b -> c 20) before it, t3 (c -> a 15) now asks more than c's 1, so DynamoDB refuses it
    # too and its reasons decide it (409); t4, d2 commit together in one more trip
    assert outcomes[0] == "applied"
    assert [type(each) for each in outcomes[1:4]] == [WalletNotFoundError] * 3
    assert isinstance(outcomes[4], InsufficientFundsError)
    assert outcomes[5:] == ["applied"] * 2
    on_b = ["t1", "t2", "d1"]
    rest = [nonce for nonce in GROUP if nonce not in on_b]
    assert client.writes[-4:] == [["first"], GROUP, rest, ["t4", "d2"]]
    counts = store.telemetry.snapshot()
    assert (counts[metrics.GROUP_SPLITS], counts[metrics.GROUP_CONFLICT_RETRIES]) == (0, 0)
    assert counts[metrics.GROUP_REFUSALS] == 4
    table = assert_chains(settings, wallets)
    a, b, c = wallets
    assert {w: table.wallets[w][Attr.BALANCE] for w in wallets} == {a: 98, b: 0, c: 6}


@pytest.mark.stack
@pytest.mark.slow
def test_a_hot_pair_under_conflicting_groups_answers_every_request_204_once_with_no_split(
    settings: Settings,
) -> None:
    # GIVEN the API whose every group commit is cancelled once with TransactionConflict, as a fleet's
    # busy wallet would have it on DynamoDB, and two funded wallets
    store, client = _store(settings, writes_in_flight=1)
    clients, transfers = 8, 12
    with serve(settings, store) as api:
        pair = [api.create(), api.create()]
        for wallet_id in pair:
            assert api.deposit(wallet_id, 1_000_000, "fund").status_code == 204
        client.cancel = first_attempts_of_groups(1, conflict_on_first_item)

        # WHEN 8 clients send 12 transfers each between them, each request once
        def send(index: int) -> list[tuple[str, int]]:
            payer, payee = pair if index % 2 == 0 else pair[::-1]
            answers = []
            with httpx.Client(base_url=api.http.base_url, timeout=30) as own:
                for _ in range(transfers):
                    nonce = uuid.uuid4().hex
                    response = own.put(
                        f"/api/v1/wallets/{payer}/transfer/{payee}/",
                        json={"amount": 1 + index, "nonce": nonce},
                    )
                    answers.append((nonce, response.status_code))
            return answers

        with ThreadPoolExecutor(clients) as pool:
            answers = [answer for batch in pool.map(send, range(clients)) for answer in batch]
        counts = api.http.get("/metrics").json()

    # THEN every request was answered 204, once (each nonce once)
    assert Counter(status for _, status in answers) == {204: clients * transfers}
    assert len({nonce for nonce, _ in answers}) == clients * transfers
    # AND groups formed, each cancelled group was written again with exactly the same requests,
    # and none was split
    assert counts[metrics.GROUP_COMMITS] >= 1
    assert counts[metrics.GROUP_SPLITS] == 0
    assert counts[metrics.GROUP_CONFLICT_RETRIES] == len(client.cancelled) >= 1
    for index in client.cancelled:
        assert client.writes[index + 1 :].count(client.writes[index]) == 1
        later = [write for write in client.writes[index + 1 :] if set(write) & set(client.writes[index])]
        assert later[0] == client.writes[index]
    # AND the table holds exactly the 204s: money conserved, versions = 1 + transfers, chains unbroken
    table = assert_chains(settings, pair)
    assert sum(table.wallets[w][Attr.BALANCE] for w in pair) == 2_000_000
    assert all(table.wallets[w][Attr.VERSION] == 1 + clients * transfers for w in pair)
    assert {t[Attr.NONCE] for t in table.transactions} == {"fund"} | {nonce for nonce, _ in answers}
