"""Nightly reconciliation: each way the lake can disagree with the table, classified exactly.

Every scenario starts from the same clean day (five wallets, deposits and transfers landed in
small batches, the wallet items in DynamoDB, a snapshot taken after midnight), then breaks one
thing and checks the findings name the wallets and versions, and the exit code: the queries, the
rules and the records of a run together, on the embedded stack. The rules alone, on hand-built
query results and with no server, are tests/test_reconciliation_rules.py.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pyarrow as pa
import pytest
from support.ledger_builder import (
    USD,
    Book,
    ledger_table,
    put_wallet_items,
    read_partition,
    s3_client,
    write_landing,
)

from contracts.lake_tables import DAILY_BALANCES
from contracts.settings import Settings
from lake import objects
from lake.compaction_units import compact_day
from lake.snapshots import take_snapshot
from queries import run_query
from queries.reconciliation import ReconciliationError, reconcile
from queries.reconciliation_rules import (
    CHAIN_BREAK,
    DUPLICATE,
    LAGGING,
    MISMATCH,
    MISSING,
    NOT_CONSERVED,
    OK,
    PROBLEM_COUNTS,
    TRANSFER_UNBALANCED,
)
from queries.reconciliation_runs import ReconciliationReport, summary_key
from walletlake import cli

pytestmark = pytest.mark.stack

DAY = dt.date(2026, 11, 20)
T0 = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.UTC)
SNAPSHOT_AT = dt.datetime(2026, 11, 21, 0, 30, tzinfo=dt.UTC)
NOW = dt.datetime(2026, 11, 21, 1, 0, tzinfo=dt.UTC)


def minutes(n: float) -> dt.timedelta:
    return dt.timedelta(minutes=n)


def clean_day() -> Book:
    """a..e: four deposits, five transfers, one more deposit; e only ever receives."""
    book = Book()
    for wallet in "abcde":
        book.open(wallet, T0)
    book.deposit("a", 100 * USD, T0)  # a1 100
    book.deposit("b", 50 * USD, T0 + minutes(1))  # b1 50
    book.deposit("c", 10 * USD, T0 + minutes(2))  # c1 10
    book.deposit("d", 20 * USD, T0 + minutes(3))  # d1 20
    book.transfer("a", "b", 30 * USD, T0 + minutes(4))  # a2 70, b2 80
    book.transfer("b", "c", 5 * USD, T0 + minutes(5))  # b3 75, c2 15
    book.transfer("c", "d", 1 * USD, T0 + minutes(6))  # c3 14, d2 21
    book.transfer("a", "e", 10 * USD, T0 + minutes(7))  # a3 60, e1 10
    book.transfer("d", "a", 2 * USD, T0 + minutes(8))  # d3 19, a4 62
    book.deposit("a", 1 * USD, T0 + minutes(9))  # a5 63
    return book


def land(settings: Settings, book: Book, *, snapshot_at: dt.datetime = SNAPSHOT_AT) -> list[str]:
    """Land the book (one transfer or two deposits per file), write the wallets, take a snapshot."""
    keys = write_landing(settings, book.rows, batch_rows=2)
    put_wallet_items(settings, book.wallets.values())
    take_snapshot(settings, now=snapshot_at, max_read_units_per_second=None)
    return keys


def findings(report: ReconciliationReport) -> list[tuple[str | None, str]]:
    return [(f.wallet_id, f.status) for f in report.findings]


def rows_in(settings: Settings, key: str) -> list[dict[str, Any]]:
    return list(objects.get_table(s3_client(settings), settings.bucket, key).to_pylist())


def rewrite(settings: Settings, key: str, change: Any) -> None:
    rows = rows_in(settings, key)
    change(rows)
    objects.put_table(s3_client(settings), settings.bucket, key, ledger_table(rows))


def test_a_clean_day_is_all_ok(settings: Settings) -> None:
    # GIVEN a day landed exactly and a snapshot after midnight
    book = clean_day()
    land(settings, book)
    # WHEN it is reconciled
    report = reconcile(settings, DAY, now=NOW)
    # THEN every wallet is ok and every check passes
    assert report.ok
    assert report.exit_code == 0
    assert report.findings == []
    assert report.counts[OK] == 5
    assert sum(report.counts.values()) == 5
    assert report.ledger_rows == len(book.rows) == 15
    assert all(outcome.startswith("ok") for outcome in report.checks.values())
    assert (
        report.totals["closing_balance"]
        == report.totals["opening_balance"] + report.totals["external_net"]
        == 181 * USD
    )
    # AND the day's closes are the table's balances and versions
    closes = read_partition(settings, "daily_balances", DAY).to_pylist()
    assert {row["wallet_id"]: (row["closing_balance"], row["closing_version"]) for row in closes} == {
        w.wallet_id: (w.balance, w.version) for w in book.wallets.values()
    }
    assert {row["wallet_id"]: row["entries"] for row in closes} == {"a": 5, "b": 3, "c": 3, "d": 3, "e": 1}
    # AND the reconciliation rows hold the passing checks, and the summary is in S3
    statuses = read_partition(settings, "reconciliation", DAY).column("status").to_pylist()
    assert statuses == [OK, OK, OK]
    body = s3_client(settings).get_object(Bucket=settings.bucket, Key=summary_key(settings.lake_prefix, DAY))[
        "Body"
    ]
    summary = json.loads(body.read())
    assert summary["ok"] is True
    assert summary["counts"][OK] == 5


def test_a_deleted_landing_file_is_missing_entries(settings: Settings) -> None:
    # GIVEN the file holding the b → c transfer (b version 3, c version 2) is lost
    book = clean_day()
    keys = land(settings, book)
    lost = next(
        key
        for key in keys
        if {r["wallet_id"] for r in rows_in(settings, key)} == {"b", "c"}
        and rows_in(settings, key)[0]["txn_type"] == "transfer"
    )
    objects.delete_keys(s3_client(settings), settings.bucket, [lost])
    # WHEN the day is reconciled an hour and a half after those entries were due
    report = reconcile(settings, DAY, now=NOW)
    # THEN b misses version 3 and c version 2 (gaps inside the day, long past the delivery bound)
    assert findings(report) == [("b", MISSING), ("c", MISSING)]
    b, c = report.findings
    assert "1 version absent from the lake: 3;" in b.detail
    assert (b.expected, b.actual) == (3, 2)
    assert "1 version absent from the lake: 2;" in c.detail
    assert (c.expected, c.actual) == (3, 1)
    assert "past the 3600 s delivery bound" in b.detail
    assert report.counts[MISSING] == 2
    assert report.counts[OK] == 3
    assert report.checks["conservation"].startswith("skipped")
    assert report.exit_code == 1


def test_a_copied_landing_file_is_duplicate_entries(settings: Settings) -> None:
    # GIVEN the a → e transfer's file lands a second time under another name (before compaction)
    book = clean_day()
    keys = land(settings, book)
    twice = next(key for key in keys if {r["wallet_id"] for r in rows_in(settings, key)} == {"a", "e"})
    client = s3_client(settings)
    client.copy_object(
        Bucket=settings.bucket,
        Key=twice.replace(".parquet", "-retry.parquet"),
        CopySource={"Bucket": settings.bucket, "Key": twice},
    )
    # WHEN the day is reconciled
    report = reconcile(settings, DAY, now=NOW)
    # THEN a's version 3 and e's version 1 are duplicates; balances and transfers still agree
    assert findings(report) == [("a", DUPLICATE), ("e", DUPLICATE)]
    a, e = report.findings
    assert a.detail == "1 extra copy of the entries at versions 3"
    assert (a.expected, a.actual) == (5, 6)
    assert e.detail == "1 extra copy of the entries at versions 1"
    assert report.checks["transfers"].startswith("ok")
    assert report.exit_code == 1
    # AND once compaction has merged the copies, the day is clean again
    assert compact_day(settings, DAY).tables["ledger"].duplicates_dropped == 2
    assert reconcile(settings, DAY, now=NOW).ok


def test_the_first_pass_counts_and_the_second_names_the_versions(settings: Settings) -> None:
    # GIVEN a clean day, then the a → e transfer's file landed a second time
    book = clean_day()
    keys = land(settings, book)
    params = {
        "date": DAY.isoformat(),
        "previous_date": (DAY - dt.timedelta(days=1)).isoformat(),
        "snapshot_date": SNAPSHOT_AT.date().isoformat(),
        "snapshot_at": "2026-11-21T00:30:00Z",
    }
    clean = run_query("reconcile_wallets", params, settings)
    assert sorted(clean["wallet_id"]) == ["a", "b", "c", "d", "e"]
    assert not clean[list(PROBLEM_COUNTS)].to_numpy().any()
    assert run_query("reconcile_wallet_problems", params, settings).empty
    twice = next(key for key in keys if {r["wallet_id"] for r in rows_in(settings, key)} == {"a", "e"})
    s3_client(settings).copy_object(
        Bucket=settings.bucket,
        Key=twice.replace(".parquet", "-retry.parquet"),
        CopySource={"Bucket": settings.bucket, "Key": twice},
    )

    # WHEN both reconciliation queries are asked
    counts = run_query("reconcile_wallets", params, settings).set_index("wallet_id")
    problems = run_query("reconcile_wallet_problems", params, settings)

    # THEN the first pass counts one copy for a and for e (and nothing else anywhere) ...
    assert counts["copies"].to_dict() == {"a": 1, "b": 0, "c": 0, "d": 0, "e": 1}
    assert not counts[["conflicts", "bad_amounts", "breaks", "gaps"]].to_numpy().any()
    # ... and the second names the copied versions of exactly those wallets
    named = problems[["wallet_id", "copy_versions", "break_versions", "gap_starts"]].astype(object)
    assert named.where(named.notna(), None).to_dict("records") == [
        {"wallet_id": "a", "copy_versions": "3", "break_versions": None, "gap_starts": None},
        {"wallet_id": "e", "copy_versions": "1", "break_versions": None, "gap_starts": None},
    ]


def test_a_changed_amount_breaks_the_chain_and_the_transfer(settings: Settings) -> None:
    # GIVEN the credit leg of the c → d transfer says one micro-dollar more than was moved
    book = clean_day()
    keys = land(settings, book)
    target = next(
        key
        for key in keys
        if {r["wallet_id"] for r in rows_in(settings, key)} == {"c", "d"}
        and rows_in(settings, key)[0]["txn_type"] == "transfer"
    )

    def inflate(rows: list[dict[str, Any]]) -> None:
        credit = next(row for row in rows if row["direction"] == "credit")
        credit["amount"] += 1
        credit["delta"] += 1

    rewrite(settings, target, inflate)
    # WHEN the day is reconciled
    report = reconcile(settings, DAY, now=NOW)
    # THEN d's running balance breaks at version 2, and the transfer does not sum to zero
    assert findings(report) == [("d", CHAIN_BREAK), (None, TRANSFER_UNBALANCED)]
    chain, transfer = report.findings
    assert "at versions 2" in chain.detail
    assert (chain.expected, chain.actual) == (21 * USD + 1, 21 * USD)
    assert "debit -1000000 (c version 3) + credit 1000001 (d version 2) = 1" in transfer.detail
    assert (transfer.expected, transfer.actual) == (0, 1)
    assert report.exit_code == 1


def test_a_changed_balance_is_a_mismatch_with_the_table(settings: Settings) -> None:
    # GIVEN e's only entry claims a balance after it that the table never had
    book = clean_day()
    keys = land(settings, book)
    target = next(key for key in keys if {r["wallet_id"] for r in rows_in(settings, key)} == {"a", "e"})

    def corrupt(rows: list[dict[str, Any]]) -> None:
        next(row for row in rows if row["wallet_id"] == "e")["balance_after"] = 11 * USD

    rewrite(settings, target, corrupt)
    # WHEN the day is reconciled
    report = reconcile(settings, DAY, now=NOW)
    # THEN e's chain breaks at version 1, its balance disagrees with the table, and money is not conserved
    assert findings(report) == [("e", MISMATCH), ("e", CHAIN_BREAK), (None, NOT_CONSERVED)]
    mismatch, chain, conservation = report.findings
    assert mismatch.detail == f"balance at version 1: table {10 * USD}, lake balance_after {11 * USD}"
    assert (mismatch.expected, mismatch.actual) == (10 * USD, 11 * USD)
    assert (chain.expected, chain.actual) == (10 * USD, 11 * USD)
    assert chain.detail == (
        "balance_after is not the previous balance plus delta at versions 1 "
        f"(first: expected {10 * USD}, lake {11 * USD})"
    )
    assert (conservation.expected, conservation.actual) == (181 * USD, 182 * USD)
    assert report.counts[MISMATCH] == 1
    assert report.counts[OK] == 4


def test_entries_not_yet_consumed_are_lagging_within_the_bound_and_missing_past_it(
    settings: Settings,
) -> None:
    # GIVEN the clean day landed, then three more transactions committed but not yet consumed
    book = clean_day()
    write_landing(settings, book.rows, batch_rows=2)
    book.deposit("a", 3 * USD, dt.datetime(2026, 11, 20, 23, 55, tzinfo=dt.UTC))  # a6, day D
    book.transfer("b", "c", 1 * USD, dt.datetime(2026, 11, 21, 0, 10, tzinfo=dt.UTC))  # b4, c4, day D+1
    put_wallet_items(settings, book.wallets.values())
    take_snapshot(settings, now=SNAPSHOT_AT, max_read_units_per_second=None)
    # WHEN reconciled ten minutes after the snapshot, within the hour the stream may take
    soon = reconcile(settings, DAY, now=SNAPSHOT_AT + minutes(10))
    # THEN a, b and c are lagging, naming the versions still in flight, and the run passes
    assert findings(soon) == [("a", LAGGING), ("b", LAGGING), ("c", LAGGING)]
    a, b, c = soon.findings
    assert "1 version absent from the lake: 6; the table is at version 6" in a.detail
    assert (a.expected, a.actual) == (6, 5)
    assert "absent from the lake: 4; the table is at version 4" in b.detail
    assert "absent from the lake: 4; the table is at version 4" in c.detail
    assert soon.ok
    assert soon.exit_code == 0
    # AND reconciled three hours later, the same absences are missing and the run fails
    late = reconcile(settings, DAY, now=SNAPSHOT_AT + minutes(180))
    assert findings(late) == [("a", MISSING), ("b", MISSING), ("c", MISSING)]
    assert late.exit_code == 1
    # AND a tighter bound turns them missing sooner
    tight = reconcile(settings, DAY, now=SNAPSHOT_AT + minutes(10), max_lag_seconds=60)
    assert {status for _, status in findings(tight)} == {MISSING}


def test_a_wallet_the_table_lacks_is_a_mismatch(settings: Settings) -> None:
    # GIVEN the lake has d's entries but the snapshot has no wallet d
    book = clean_day()
    write_landing(settings, book.rows)
    put_wallet_items(settings, [w for w in book.wallets.values() if w.wallet_id != "d"])
    take_snapshot(settings, now=SNAPSHOT_AT, max_read_units_per_second=None)
    # WHEN reconciled
    report = reconcile(settings, DAY, now=NOW)
    # THEN d is a mismatch, named as absent from the snapshot
    assert findings(report) == [("d", MISMATCH)]
    assert "not in the snapshot of 2026-11-21T00:30:00.000Z" in report.findings[0].detail


def test_days_chain_through_daily_balances(settings: Settings) -> None:
    # GIVEN two days of activity, b idle on the second, and a snapshot after the second
    book = clean_day()
    second = DAY + dt.timedelta(days=1)
    book.deposit("c", 5 * USD, T0 + dt.timedelta(days=1))  # c4 19
    book.transfer("e", "a", 4 * USD, T0 + dt.timedelta(days=1, minutes=1))  # e2 6, a6 67
    land(settings, book, snapshot_at=SNAPSHOT_AT + dt.timedelta(days=1))
    now = NOW + dt.timedelta(days=1)
    # WHEN the second day is reconciled first, with no run for the first yet
    report = reconcile(settings, second, now=now)
    # THEN the first day is reconciled before it, and both are clean
    assert [r.day for r in report.earlier] == [DAY]
    assert report.earlier[0].ok
    assert report.ok
    assert report.ledger_rows == 3
    # AND the second day's closes carry idle wallets and move the active ones
    closes = {r["wallet_id"]: r for r in read_partition(settings, "daily_balances", second).to_pylist()}
    assert (closes["b"]["closing_balance"], closes["b"]["closing_version"], closes["b"]["entries"]) == (
        75 * USD,
        3,
        0,
    )
    assert (closes["a"]["closing_balance"], closes["a"]["closing_version"], closes["a"]["net_delta"]) == (
        67 * USD,
        6,
        4 * USD,
    )
    assert report.totals["opening_balance"] == 181 * USD
    assert report.totals["external_net"] == 5 * USD
    # AND running it again needs no catch-up (the first day's run is on record)
    assert reconcile(settings, second, now=now).earlier == ()


def test_a_lagging_day_is_reconciled_again_when_its_entries_land(settings: Settings) -> None:
    # GIVEN the first day reconciled while its last deposit was still in flight
    book = clean_day()
    held_back = book.deposit("e", 1 * USD, dt.datetime(2026, 11, 20, 23, 50, tzinfo=dt.UTC))  # e2
    write_landing(settings, [row for row in book.rows if row not in held_back])
    put_wallet_items(settings, book.wallets.values())
    take_snapshot(settings, now=SNAPSHOT_AT, max_read_units_per_second=None)
    first = reconcile(settings, DAY, now=SNAPSHOT_AT + minutes(5))
    assert findings(first) == [("e", LAGGING)]
    # WHEN the entry lands and the next day is reconciled
    write_landing(settings, held_back)
    second = DAY + dt.timedelta(days=1)
    take_snapshot(settings, now=SNAPSHOT_AT + dt.timedelta(days=1), max_read_units_per_second=None)
    report = reconcile(settings, second, now=NOW + dt.timedelta(days=1))
    # THEN the lagging day is reconciled again first, now clean, and the next day opens from it
    assert [r.day for r in report.earlier] == [DAY]
    assert report.earlier[0].findings == []
    assert report.ok
    closes = {r["wallet_id"]: r for r in read_partition(settings, "daily_balances", second).to_pylist()}
    assert closes["e"]["closing_version"] == 2


def test_no_snapshot_is_an_error(settings: Settings) -> None:
    write_landing(settings, clean_day().rows)
    with pytest.raises(ReconciliationError, match="run `walletlake snapshot` first"):
        reconcile(settings, DAY, now=NOW)


def test_the_command_exits_0_when_clean_and_1_otherwise(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN the CLI pointed at this test's resources and a clean day
    for name, value in (
        ("WALLETLAKE_TABLE", settings.table),
        ("WALLETLAKE_BUCKET", settings.bucket),
        ("WALLETLAKE_LAKE_PREFIX", settings.lake_prefix),
        ("WALLETLAKE_QUERY_ENGINE", "duckdb"),
    ):
        monkeypatch.setenv(name, value)
    book = clean_day()
    keys = land(settings, book)
    # WHEN it reconciles the clean day
    assert cli.main(["reconcile", "--date", DAY.isoformat()]) == 0
    out = capsys.readouterr().out
    assert "reconciliation of 2026-11-20: CLEAN" in out
    assert "ok 5" in out
    # AND after a landing file is lost, it fails naming the wallets, also as JSON
    objects.delete_keys(s3_client(settings), settings.bucket, [keys[-1]])
    assert cli.main(["reconcile", "--date", DAY.isoformat(), "--max-lag-seconds", "60", "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["ok"] is False
    assert summary["counts"][MISSING] == 1
    assert summary["findings"][0]["wallet_id"] == "a"
    assert summary["findings"][0]["expected"] == "5"
    # AND a day with no snapshot after it is a one-line error
    assert cli.main(["reconcile", "--date", "2026-11-25"]) == 1
    assert "no complete balance snapshot" in capsys.readouterr().err
    # AND a day before any data, and today (still open), are refused with exit 3 and one line,
    # nothing written; --provisional reconciles the open day as it stands
    assert cli.main(["reconcile", "--date", "2026-11-19"]) == 3
    assert capsys.readouterr().err == (
        "walletlake reconcile: error: 2026-11-19 is before the lake's first day (2026-11-20): "
        "there is nothing to reconcile\n"
    )
    today = dt.datetime.now(dt.UTC).date()
    assert cli.main(["reconcile", "--date", today.isoformat()]) == 3
    refused = capsys.readouterr().err
    assert refused.count("\n") == 1
    assert "is not over yet (UTC)" in refused
    assert "--provisional" in refused
    assert cli.main(["reconcile", "--date", (today + dt.timedelta(days=1)).isoformat(), "--provisional"]) == 3
    assert "has not started yet" in capsys.readouterr().err
    assert cli.main(["reconcile", "--date", today.isoformat(), "--provisional"]) in (0, 1)
    assert "not over yet" not in capsys.readouterr().err


def test_a_day_depends_on_the_previous_close_not_on_older_history(settings: Settings) -> None:
    # GIVEN a reconciled day, then an older day of the lake rewritten with contradicting entries
    book = clean_day()
    land(settings, book)
    reconcile(settings, DAY, now=NOW)
    rogue = Book()
    rogue.open("a", dt.datetime(2026, 10, 1, tzinfo=dt.UTC))
    rogue.deposit("a", 999 * USD, dt.datetime(2026, 10, 1, 12, tzinfo=dt.UTC))
    write_landing(settings, rogue.rows)
    # WHEN the next day is reconciled
    take_snapshot(settings, now=SNAPSHOT_AT + dt.timedelta(days=1), max_read_units_per_second=None)
    report = reconcile(settings, DAY + dt.timedelta(days=1), now=NOW + dt.timedelta(days=1))
    # THEN it opens from the previous day's close and reads nothing older: clean, no catch-up
    assert report.ok
    assert report.earlier == ()
    assert report.counts[OK] == 5


def test_a_day_that_does_not_start_from_the_previous_close_breaks_the_chain(settings: Settings) -> None:
    # GIVEN the first day reconciled, then its recorded close of c and d altered by a micro-dollar
    book = clean_day()
    second = DAY + dt.timedelta(days=1)
    book.deposit("c", 5 * USD, T0 + dt.timedelta(days=1))  # c4 19 (c moves on the second day, d does not)
    land(settings, book, snapshot_at=SNAPSHOT_AT + dt.timedelta(days=1))
    reconcile(settings, DAY, now=NOW + dt.timedelta(days=1))
    closes = read_partition(settings, "daily_balances", DAY).to_pylist()
    for row in closes:
        if row["wallet_id"] in ("c", "d"):
            row["closing_balance"] += 1
    key = f"{settings.lake_prefix}/daily_balances/dt={DAY.isoformat()}/daily_balances.parquet"
    objects.put_table(
        s3_client(settings), settings.bucket, key, pa.Table.from_pylist(closes, schema=DAILY_BALANCES)
    )
    # WHEN the second day is reconciled
    report = reconcile(settings, second, now=NOW + dt.timedelta(days=1))
    # THEN c's first entry of the day does not follow its opening, d's carried close is not the
    # table's, and the day's money does not add up from the altered opening
    assert findings(report) == [("d", MISMATCH), ("c", CHAIN_BREAK), (None, NOT_CONSERVED)]
    mismatch, chain, _ = report.findings
    assert "at versions 4 " in chain.detail
    assert (chain.expected, chain.actual) == (19 * USD + 1, 19 * USD)
    assert mismatch.detail == f"balance at version 3: table {19 * USD}, lake balance_after {19 * USD + 1}"


def test_two_entries_at_one_version_and_a_wrong_delta_are_mismatches(settings: Settings) -> None:
    # GIVEN b's version 2 claimed by a second, different entry, and d's version 1 with delta ≠ amount
    book = clean_day()
    keys = land(settings, book)
    b2 = next(row for row in book.rows if row["wallet_id"] == "b" and row["wallet_version"] == 2)
    impostor = {
        **b2,
        "entry_id": "forged:credit",
        "txn_id": "forged",
        "created_at": b2["created_at"] + minutes(0.5),
    }
    impostor["balance_after"] += 1
    impostor["delta"] += 1
    impostor["amount"] += 1
    objects.put_table(
        s3_client(settings),
        settings.bucket,
        keys[0].replace(".parquet", "-forged.parquet"),
        ledger_table([impostor]),
    )
    d_file = next(
        key
        for key in keys
        if any(r["wallet_id"] == "d" and r["wallet_version"] == 1 for r in rows_in(settings, key))
    )

    def skew(rows: list[dict[str, Any]]) -> None:
        next(row for row in rows if row["wallet_id"] == "d")["amount"] = 21 * USD

    rewrite(settings, d_file, skew)
    # WHEN reconciled
    report = reconcile(settings, DAY, now=NOW)
    # THEN both are mismatches naming the versions
    by_wallet = {(f.wallet_id, f.status): f for f in report.findings}
    assert "different entries share versions 2" in by_wallet[("b", MISMATCH)].detail
    assert "delta is not ±amount at versions 1" in by_wallet[("d", MISMATCH)].detail
    assert report.exit_code == 1
