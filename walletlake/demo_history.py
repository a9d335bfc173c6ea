"""The demo's history stage: one owner's wallet, its entries ever, from the lake and DynamoDB at once.

After the lake has the run's entries, two more deposits go into the day's busiest wallet (they are
only in DynamoDB: no consumer has read them yet); then the wallet's history is paged through the
served API, as its owner would: every entry once, newest first, the two newest from DynamoDB and
the rest from the Iceberg lake, balances chained. Afterwards the two deposits are brought into the
lake, so the stack stays what the run's checks say it is.
"""

from __future__ import annotations

import itertools
import os
import uuid
from typing import Any, Final
from urllib.parse import urlencode

from contracts.settings import Settings
from walletlake.workload import WalletApiClient

#: Deposits the demo adds to the wallet after the lake has its entries (hot only).
HOT_DEPOSITS: Final = 2
#: Entries per page the demo asks for.
PAGE: Final = 25


def show_history(settings: Settings, wallet: str, hot_ttl_seconds: int) -> tuple[dict[str, Any], bool]:
    """The stage's counts and whether the history was whole across DynamoDB and the lake."""
    from lake.committer import commit_now
    from stream_processor.consumer import drain
    from walletlake.api_server import ApiServer

    env = {**os.environ, "WALLETLAKE_HOT_TTL_SECONDS": str(hot_ttl_seconds)}
    with ApiServer(env=env) as api:
        http = WalletApiClient(api.url, max_connections=1)
        in_lake = _walk(http, wallet)
        nonces = [f"demo-history-{uuid.uuid4().hex[:12]}" for _ in range(HOT_DEPOSITS)]
        for nonce in nonces:
            _ok(http.deposit(wallet, 1, nonce))
        entries = _walk(http, wallet)
        mine = _ok(http.send("GET", "/api/v1/wallets/me/", None))["wallets"]
    drain(settings)
    if settings.lake_format == "iceberg":
        commit_now(settings)
    newest = in_lake[0]["version"] if in_lake else 0
    whole = (
        [entry["version"] for entry in entries] == list(range(newest + HOT_DEPOSITS, 0, -1))
        and [entry["nonce"] for entry in entries[:HOT_DEPOSITS]] == nonces[::-1]
        and all(
            int(older["balance_after"]) == int(newer["balance_after"]) - _signed(newer)
            for newer, older in itertools.pairwise(entries)
        )
    )
    counts = {
        "wallet (the day's busiest)": wallet,
        "entries, every one once, newest first": len(entries),
        "from DynamoDB (newer than the lake)": HOT_DEPOSITS,
        "from the lake (Iceberg)": newest,
        f"pages of {PAGE}": -(-len(entries) // PAGE),
        "wallets of its owner (me/)": len(mine),
    }
    return counts, whole


def _walk(http: WalletApiClient, wallet: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    params = {"limit": str(PAGE)}
    while True:
        page = _ok(http.send("GET", f"/api/v1/wallets/{wallet}/transactions?{urlencode(params)}", None))
        entries += page["entries"]
        if page["next_cursor"] is None:
            return entries
        params = {"limit": str(PAGE), "cursor": page["next_cursor"]}


def _ok(answer: Any) -> Any:
    if answer.status not in (200, 204):
        raise RuntimeError(f"the API answered {answer.status}: {answer.body}")
    return answer.body


def _signed(entry: dict[str, Any]) -> int:
    return int(entry["amount"]) * (1 if entry["direction"] == "credit" else -1)
