"""The nightly job end to end: snapshot → compact → reconcile, locally and as the Lambda runs it."""

from __future__ import annotations

import datetime as dt

import pytest
from ledger_builder import USD, Book, put_wallet_items, read_partition, s3_client, write_landing

from contracts.lake_layout import partition_prefix
from contracts.settings import Settings
from lake import objects
from walletlake.nightly import NightlyJobError, lambda_handler, run_nightly, yesterday

pytestmark = pytest.mark.stack


def a_day(day: dt.date) -> Book:
    start = dt.datetime.combine(day, dt.time(10), tzinfo=dt.UTC)
    book = Book()
    for wallet in ("alice", "bob", "carol"):
        book.open(wallet, start)
    book.deposit("alice", 40 * USD, start)
    book.deposit("bob", 5 * USD, start + dt.timedelta(minutes=1))
    book.transfer("alice", "carol", 15 * USD, start + dt.timedelta(minutes=2))
    book.transfer("carol", "bob", 5 * USD, start + dt.timedelta(minutes=3))
    return book


def test_run_nightly_snapshots_compacts_and_reconciles(settings: Settings) -> None:
    # GIVEN a day landed one transaction per file, and its wallets in the table
    day = dt.date(2026, 11, 20)
    book = a_day(day)
    write_landing(settings, book.rows, batch_rows=1)
    put_wallet_items(settings, book.wallets.values())
    # WHEN the nightly job runs after midnight
    result = run_nightly(settings, day, now=dt.datetime(2026, 11, 21, 0, 20, tzinfo=dt.UTC))
    # THEN the snapshot read the three wallets, compaction left one file, reconciliation is clean
    assert result["ok"] is True
    assert result["snapshot"]["wallets"] == 3
    assert result["compaction"]["tables"]["ledger"]["files_in"] == 4
    assert result["compaction"]["tables"]["ledger"]["files_out"] == 1
    assert result["reconciliation"]["counts"]["ok"] == 3
    prefix = partition_prefix(settings.lake_prefix, "ledger", day)
    assert len(objects.list_keys(s3_client(settings), settings.bucket, prefix, ".parquet")) == 1
    assert read_partition(settings, "daily_balances", day).num_rows == 3


def test_lambda_handler_defaults_to_yesterday_and_fails_on_a_dirty_lake(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the Lambda's environment naming this test's resources, and yesterday's activity landed
    for name, value in (
        ("WALLETLAKE_TABLE", settings.table),
        ("WALLETLAKE_BUCKET", settings.bucket),
        ("WALLETLAKE_LAKE_PREFIX", settings.lake_prefix),
        ("WALLETLAKE_QUERY_ENGINE", "duckdb"),
        ("POWERTOOLS_METRICS_NAMESPACE", "walletlake-test"),
    ):
        monkeypatch.setenv(name, value)
    day = yesterday()
    book = a_day(day)
    write_landing(settings, book.rows, batch_rows=2)
    put_wallet_items(settings, book.wallets.values())
    # WHEN the scheduled invocation runs with an empty event
    result = lambda_handler({}, None)
    # THEN it reconciled yesterday, clean
    assert result["day"] == day.isoformat()
    assert result["ok"] is True
    # AND when the day's first two entries are lost, an invocation for that day fails
    compacted = objects.list_keys(
        s3_client(settings), settings.bucket, partition_prefix(settings.lake_prefix, "ledger", day)
    )
    objects.delete_keys(s3_client(settings), settings.bucket, compacted)
    write_landing(settings, book.rows[2:], batch_rows=2)
    with pytest.raises(NightlyJobError, match=rf"reconciliation of {day} failed: .*'missing': 2"):
        lambda_handler({"date": day.isoformat()}, None)
