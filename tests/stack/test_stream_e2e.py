"""End to end on the embedded stack: HTTP API → DynamoDB Local → stream → `walletlake consume` → S3.

The workload goes through the real write path (``walletlake serve`` in its own process), the
consumer runs as the real command line, and the lake is read back from S3: exactly one row per
committed entry, each wallet's versions 1..N without gap or repeat, running sums equal to
``balance_after``. Then DynamoDB Local's TTL process really deletes the hot transaction items
(a two-second hot window), and consuming their REMOVEs changes nothing in the lake.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.consume_cli import consume, settings_env
from support.fresh_resources import fresh_settings
from support.stream_records import TableWriter, assert_lake_matches, lake_keys, poll_until, read_lake_table

from contracts.settings import LAKE_FORMAT_VARIABLE, Settings
from walletlake.api_server import ApiServer
from walletlake.local import EmbeddedStack, patched_environ, provision
from walletlake.workload import run_workload

pytestmark = [pytest.mark.stack, pytest.mark.slow]

HOT_TTL_SECONDS = 2


@pytest.fixture
def own_stack_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Fresh resources on an embedded stack of this test's own, not the session's shared one.

    DynamoDB Local sweeps expired items on a fixed pool of 10 threads (7 left for sweeps): one
    job per TTL-enabled table, which scans 20 items, sleeps 10 s, and goes on page after page; the
    table is queued again once its job ends. A job that throws is never removed from the
    server's register of running jobs, so its table is never queued again, and nothing is
    logged. On the session's shared stack, late in the full two-worker suite, this test's table
    went unswept for 10 minutes while the sweeper kept running; crowding a shared stack alike
    (nine TTL tables, a 650-item idempotency table) did not delay it, so what the shared server's
    history does to the sweep is not pinned down. A server of its own has no such history.
    """
    with (
        EmbeddedStack(tmp_path_factory.mktemp("ttl-stack")) as embedded,
        patched_environ({**embedded.environment(), LAKE_FORMAT_VARIABLE: "parquet"}),
    ):
        settings = fresh_settings()
        provision(settings)
        yield settings


@pytest.mark.timeout(900)
def test_workload_through_the_api_reaches_the_lake_exactly_once_and_survives_ttl(
    own_stack_settings: Settings,
) -> None:
    settings = own_stack_settings
    # GIVEN wallets, deposits and transfers (with replays and refused overdrafts) through the HTTP API,
    # with a hot window of two seconds
    env = {**settings_env(settings), "WALLETLAKE_HOT_TTL_SECONDS": str(HOT_TTL_SECONDS)}
    with ApiServer(env=env) as api:
        report = run_workload(api.url, wallets=8, deposits_per_wallet=2, transfers=40, concurrency=4, seed=11)
    assert report.unresolved == report.replay_mismatches == 0
    committed = report.deposits_ok + report.transfers_ok

    # WHEN `walletlake consume` drains the stream
    first = consume(settings, "--batch-size", "25")

    # THEN the lake read back from S3 holds every committed entry exactly once, in version order
    assert (first["ledger_rows"], first["wallets"], first["quarantined"]) == (
        report.ledger_entries_expected,
        report.wallets_created,
        0,
    )
    assert_lake_matches(read_lake_table(settings, "ledger"), report)
    assert sorted(read_lake_table(settings, "wallets").column("wallet_id").to_pylist()) == sorted(
        report.wallet_ids
    )
    ledger_before = sorted(
        (
            {k: v for k, v in row.items() if k != "ingested_at"}
            for row in read_lake_table(settings, "ledger").to_pylist()
        ),
        key=lambda row: row["entry_id"],
    )
    keys_before = lake_keys(settings)

    # WHEN DynamoDB Local's TTL process deletes every transaction item, and the consumer runs again
    table = TableWriter(settings.table)
    poll_until(
        lambda: table.transaction_items() == 0, timeout=600, interval=1.0, what="TTL to empty the hot table"
    )
    runs = [first]

    def every_expiry_consumed() -> bool:
        runs.append(consume(settings))
        return sum(run["ttl_expired"] for run in runs) >= committed

    poll_until(every_expiry_consumed, timeout=90, interval=0.5, what="the TTL REMOVEs on the stream")

    # THEN each expiry was counted once, nothing was quarantined, and the lake did not change
    assert sum(run["ttl_expired"] for run in runs) == committed
    assert sum(run["quarantined"] for run in runs) == 0
    assert sum(run["ledger_rows"] for run in runs[1:]) == 0
    assert lake_keys(settings) == keys_before
    ledger_after = sorted(
        (
            {k: v for k, v in row.items() if k != "ingested_at"}
            for row in read_lake_table(settings, "ledger").to_pylist()
        ),
        key=lambda row: row["entry_id"],
    )
    assert ledger_after == ledger_before
