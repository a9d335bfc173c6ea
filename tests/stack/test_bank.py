"""A bank test in the spirit of Jepsen's ``bank`` workload, through the real HTTP API.

Ten wallets are funded with known deposits; eight concurrent clients then make random transfers
between them (heavy contention: every transfer touches two of only ten wallets), some replayed
with the same nonce, some overdrafts. Whatever interleaving happened, the table must show:
no negative balance, the total unchanged, every wallet's version equal to the number of
transaction items touching it, and each wallet's balances-after forming one unbroken chain.
"""

from __future__ import annotations

import pytest
from support.fresh_resources import write_path_env
from support.wallet_table import assert_chains, contents

from contracts.settings import Settings
from contracts.wallets_table import Attr
from walletlake.api_server import ApiServer
from walletlake.workload import run_workload

pytestmark = [pytest.mark.stack, pytest.mark.slow]


def test_bank_invariants_hold_under_concurrent_transfers(settings: Settings) -> None:
    # GIVEN `walletlake serve` on a fresh table
    with ApiServer(env=write_path_env(settings)) as api:
        # WHEN 10 funded wallets see 250 random transfers from 8 concurrent clients,
        # 10% of them replayed and 10% overdrafts
        report = run_workload(
            api.url,
            wallets=10,
            deposits_per_wallet=2,
            transfers=250,
            concurrency=8,
            seed=7,
            replay_fraction=0.1,
            overdraft_fraction=0.1,
        )
    table = contents(settings)
    balances = {wallet_id: wallet[Attr.BALANCE] for wallet_id, wallet in table.wallets.items()}

    # THEN every request got a definite answer, and replays answered like their originals
    assert report.unresolved == 0
    assert report.unexpected == 0
    assert report.replay_mismatches == 0
    assert report.replays > 0
    assert report.transfers_refused > 0
    assert report.transfers_ok > 0
    # no balance is negative and money is conserved
    assert min(balances.values()) >= 0
    assert sum(balances.values()) == report.total_deposited
    # every wallet's version counts exactly the transaction items that touch it, and the stream
    # gives each of them as one entry numbered 1..N with exact balances
    assert_chains(settings)
    # one item per committed request: deposits + transfers (replays and refusals wrote nothing)
    assert len(table.transactions) == report.deposits_ok + report.transfers_ok
    # and the clients' own account of what committed agrees with the table
    assert report.expected_versions == {w: table.wallets[w][Attr.VERSION] for w in report.wallet_ids}
    assert report.expected_balances == {w: balances[w] for w in report.wallet_ids}
