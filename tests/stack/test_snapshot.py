"""Balance snapshots: wallet items only, in parallel segments, paced, complete or not counted."""

from __future__ import annotations

import datetime as dt
import json

import boto3
import pytest
from support.ledger_builder import USD, Book, put_wallet_items, read_partition, s3_client

from contracts.settings import Settings
from lake import objects
from lake.read_budget import ReadBudget
from lake.snapshots import latest_snapshot, snapshot_key, take_snapshot
from walletlake import cli

AT = dt.datetime(2026, 11, 21, 0, 30, 0, 123456, tzinfo=dt.UTC)
T0 = dt.datetime(2026, 11, 20, 9, tzinfo=dt.UTC)


def some_wallets(count: int = 25) -> Book:
    book = Book()
    for index in range(count):
        name = f"w{index:03d}"
        book.open(name, T0)
        book.deposit(name, (index + 1) * USD, T0 + dt.timedelta(seconds=index))
    return book


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_read_budget_paces_to_its_rate() -> None:
    # GIVEN a bucket of 10 units per second, full
    clock = FakeClock()
    budget = ReadBudget(10.0, clock=clock, sleep=clock.sleep)
    # WHEN 40 units are charged at once, in pages of 5
    for _ in range(8):
        budget.charge(5.0)
    # THEN the first 10 pass, the next 30 wait 3 seconds in all: never more than rate * (T + 1)
    assert clock.slept == [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    assert clock.now == pytest.approx(3.0)
    assert budget.waited == pytest.approx(3.0)
    # AND credit earned while idle is capped at one second's worth
    clock.now += 100
    assert budget.charge(10.0) == 0
    assert budget.charge(5.0) == pytest.approx(0.5)


def test_snapshot_keys_name_the_time_and_segment() -> None:
    key = snapshot_key("lake", AT, 2, 4)
    assert key == "lake/balance_snapshots/dt=2026-11-21/snapshot-20261121T003000123Z-002-of-004.parquet"


@pytest.mark.stack
def test_snapshot_reads_every_wallet_and_only_wallets(settings: Settings) -> None:
    # GIVEN 25 wallets in the table, each with a user claim and a transaction item beside it
    book = some_wallets()
    put_wallet_items(settings, book.wallets.values())
    # WHEN a snapshot is taken in 4 segments
    report = take_snapshot(settings, segments=4, now=AT)
    # THEN one object per segment holds every wallet once, with its balance, version and updated_at
    assert report.wallets == 25
    assert len(report.keys) == 4
    assert report.snapshot_at == dt.datetime(2026, 11, 21, 0, 30, 0, 123000, tzinfo=dt.UTC)
    assert report.day == dt.date(2026, 11, 21)
    rows = read_partition(settings, "balance_snapshots", report.day).to_pylist()
    assert sorted((r["wallet_id"], r["balance"], r["version"], r["updated_at"]) for r in rows) == sorted(
        (w.wallet_id, w.balance, w.version, w.updated_at) for w in book.wallets.values()
    )
    assert {r["snapshot_at"] for r in rows} == {report.snapshot_at}
    assert report.read_units > 0  # DynamoDB Local reports consumed capacity, as AWS does


@pytest.mark.stack
def test_snapshot_is_paced_by_consumed_read_units(settings: Settings) -> None:
    # GIVEN a table whose scan costs a few read units, and a budget of one unit per second
    put_wallet_items(settings, some_wallets(60).wallets.values())
    # WHEN a snapshot is taken under that budget
    report = take_snapshot(settings, segments=2, max_read_units_per_second=1.0, now=AT)
    # THEN it waited for what it read beyond the first second's credit
    assert report.wallets == 60
    assert report.throttled_seconds == pytest.approx(max(0.0, report.read_units - 1.0), abs=0.2)


@pytest.mark.stack
def test_latest_snapshot_counts_only_complete_ones(settings: Settings) -> None:
    # GIVEN two snapshots, the later one missing a segment (a run killed half way)
    put_wallet_items(settings, some_wallets(5).wallets.values())
    first = take_snapshot(settings, segments=3, now=AT)
    later = take_snapshot(settings, segments=3, now=AT + dt.timedelta(hours=1))
    client = s3_client(settings)
    objects.delete_keys(client, settings.bucket, [later.keys[1]])
    # WHEN the latest snapshot on or after a day is asked
    found = latest_snapshot(client, settings, not_before=dt.date(2026, 11, 20))
    # THEN it is the complete one
    assert found is not None
    assert found.snapshot_at == first.snapshot_at
    assert found.keys == first.keys
    # AND none is found after its day
    assert latest_snapshot(client, settings, not_before=dt.date(2026, 11, 22)) is None


@pytest.mark.stack
def test_snapshot_command(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    put_wallet_items(settings, some_wallets(3).wallets.values())
    monkeypatch.setenv("WALLETLAKE_TABLE", settings.table)
    monkeypatch.setenv("WALLETLAKE_BUCKET", settings.bucket)
    assert cli.main(["snapshot", "--segments", "2", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["wallets"] == 3
    assert summary["segments"] == 2
    today = dt.datetime.now(dt.UTC).date()
    assert summary["day"] == today.isoformat()
    client = boto3.client("s3", region_name=settings.region)
    assert latest_snapshot(client, settings, not_before=today) is not None


def test_snapshot_object_names_parse_for_every_segment_count_the_deployment_allows() -> None:
    # GIVEN segment numbers of one, three and four digits (the CDK app allows up to 10,000)
    from lake.snapshots import _OBJECT_NAME, snapshot_key

    at = dt.datetime(2026, 11, 24, 1, 30, 5, 123000, tzinfo=dt.UTC)
    for segment, segments in ((0, 4), (199, 200), (1234, 2000), (9999, 10000)):
        # WHEN a segment's object is named THEN the name reads back to the same numbers
        match = _OBJECT_NAME.search(snapshot_key("lake", at, segment, segments))
        assert match is not None, (segment, segments)
        assert (int(match.group(2)), int(match.group(3))) == (segment, segments)
