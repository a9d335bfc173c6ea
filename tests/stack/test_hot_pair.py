"""A busy wallet pair through the real HTTP API: answers are 204 or 429, never 503, never half-applied.

Eight concurrent clients transfer back and forth between the same two wallets, each request sent
once (no client retry), so every DynamoDB race shows in the answers. Seed 000 asks that traffic above
one wallet's ceiling be told 429 ``throttled`` (with ``Retry-After``) rather than fail; whatever the
interleaving, money is conserved and each wallet's version counts exactly the transfers that
committed, with an unbroken chain of balances.
"""

from __future__ import annotations

import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from support.fresh_resources import write_path_env
from support.wallet_table import assert_chains, contents

from contracts.settings import Settings
from contracts.wallets_table import Attr
from walletlake.api_server import ApiServer

pytestmark = [pytest.mark.stack, pytest.mark.slow]

_CLIENTS = 8
_TRANSFERS_PER_CLIENT = 25
_FUNDING = 1_000_000


def test_a_hot_pair_answers_only_204_or_429_and_conserves_money(settings: Settings) -> None:
    # GIVEN `walletlake serve` and two funded wallets
    with ApiServer(env=write_path_env(settings)) as api, httpx.Client(base_url=api.url) as http:
        pair = [
            http.post("/api/v1/wallets/", json={"user_id": str(uuid.uuid4())}).json()["id"] for _ in range(2)
        ]
        for wallet_id in pair:
            answer = http.put(
                f"/api/v1/wallets/{wallet_id}/deposit/", json={"amount": _FUNDING, "nonce": "fund"}
            )
            assert answer.status_code == 204

        # WHEN 8 clients each send 25 transfers between them, half in each direction, once each
        def client(index: int) -> list[tuple[int, str, str | None]]:
            payer, payee = pair if index % 2 == 0 else pair[::-1]
            answers = []
            with httpx.Client(base_url=api.url, timeout=30) as own:
                for _ in range(_TRANSFERS_PER_CLIENT):
                    response = own.put(
                        f"/api/v1/wallets/{payer}/transfer/{payee}/",
                        json={"amount": 1 + index, "nonce": uuid.uuid4().hex},
                    )
                    answers.append((response.status_code, payer, response.headers.get("Retry-After")))
            return answers

        with ThreadPoolExecutor(_CLIENTS) as pool:
            results = [answer for answers in pool.map(client, range(_CLIENTS)) for answer in answers]

    statuses = Counter(status for status, _, _ in results)
    table = contents(settings)

    # THEN only 204 or 429 (with Retry-After), never 503
    assert set(statuses) <= {204, 429}, statuses
    assert all(int(retry_after) >= 1 for status, _, retry_after in results if status == 429)
    assert statuses[204] > 0
    # money is conserved and moved exactly as the 204s say
    balances = {wallet_id: table.wallets[wallet_id][Attr.BALANCE] for wallet_id in pair}
    assert sum(balances.values()) == 2 * _FUNDING
    committed = len(table.transactions) - 2  # minus the two deposits
    assert committed == statuses[204]
    # each wallet's version counts its deposit and every committed transfer, in one unbroken chain
    for wallet_id in pair:
        assert table.wallets[wallet_id][Attr.VERSION] == 1 + statuses[204]
    # and the stream gives every one of them as an entry, versions 1..N, balances exact
    assert_chains(settings, pair)
