"""Four API processes on one hot pair: 204 or 429 only, money conserved, versions exact in the lake.

The ECS service runs several `walletlake serve` tasks on one table; their group commits race on
the same wallet items. Sixteen clients spread over four processes transfer back and forth between
one pair of wallets, each request sent once; then `walletlake consume` lands the stream and the
lake is read back: per wallet, versions 1..N with N the table's version, and every balance the
running sum of the deltas.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from support.consume_cli import consume, settings_env
from support.stream_records import read_lake_table
from support.wallet_table import contents

from contracts.settings import Settings
from contracts.wallets_table import Attr
from walletlake.api_server import ApiFleet

pytestmark = [pytest.mark.stack, pytest.mark.slow]

_PROCESSES = 4
_CLIENTS = 16
_TRANSFERS_PER_CLIENT = 15
_FUNDING = 1_000_000


def test_a_fleet_on_one_hot_pair_answers_204_or_429_and_the_lake_has_every_version_once(
    settings: Settings,
) -> None:
    # GIVEN four `walletlake serve` processes on one table and two funded wallets
    environment = settings_env(settings)
    with ApiFleet(_PROCESSES, env=environment) as fleet, httpx.Client(base_url=fleet.urls[0]) as first:
        pair = [
            first.post("/api/v1/wallets/", json={"user_id": str(uuid.uuid4())}).json()["id"] for _ in range(2)
        ]
        for wallet_id in pair:
            funded = first.put(
                f"/api/v1/wallets/{wallet_id}/deposit/", json={"amount": _FUNDING, "nonce": "fund"}
            )
            assert funded.status_code == 204

        def client(index: int) -> list[tuple[int, str]]:
            payer, payee = pair if index % 2 == 0 else pair[::-1]
            answers = []
            with httpx.Client(base_url=fleet.urls[index % _PROCESSES], timeout=60) as http:
                for count in range(_TRANSFERS_PER_CLIENT):
                    answer = http.put(
                        f"/api/v1/wallets/{payer}/transfer/{payee}/",
                        json={"amount": 1 + index, "nonce": f"c{index}-{count}"},
                    )
                    if answer.status_code == 429:
                        assert answer.headers.get("Retry-After")
                    answers.append((answer.status_code, payer))
            return answers

        # WHEN sixteen clients, four per process, transfer back and forth at once
        with ThreadPoolExecutor(_CLIENTS) as pool:
            results = [answer for answers in pool.map(client, range(_CLIENTS)) for answer in answers]
    # THEN every request was answered 204 or 429, never 5xx
    statuses = Counter(status for status, _ in results)
    assert set(statuses) <= {204, 429}, statuses
    assert statuses[204] > 0
    # AND the table holds exactly the 204s: versions count them, money is conserved
    by_id = contents(settings).wallets
    moved = sum(1 for status, _ in results if status == 204)
    assert sum(int(by_id[w][Attr.VERSION]) for w in pair) == 2 + 2 * moved
    assert sum(int(by_id[w][Attr.BALANCE]) for w in pair) == 2 * _FUNDING
    # WHEN the stream is consumed into the lake
    summary = consume(settings)
    assert summary["quarantined"] == 0
    # THEN per wallet the lake has versions 1..N once each, N the table's version, and each
    # balance_after is the running sum of the deltas
    rows: dict[str, list[dict[str, int]]] = defaultdict(list)
    for row in read_lake_table(settings, "ledger").to_pylist():
        rows[row["wallet_id"]].append(row)
    for wallet_id in pair:
        chain = sorted(rows[wallet_id], key=lambda row: row["wallet_version"])
        assert [row["wallet_version"] for row in chain] == list(
            range(1, int(by_id[wallet_id][Attr.VERSION]) + 1)
        )
        running = 0
        for row in chain:
            running += row["delta"]
            assert row["balance_after"] == running
        assert running == int(by_id[wallet_id][Attr.BALANCE])
