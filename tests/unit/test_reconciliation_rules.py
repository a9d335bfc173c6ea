"""The reconciliation's money rules on hand-built query results: no server, no S3, no engine.

Each test starts from one clean day as ``reconcile_wallets`` would return it (four wallets: ``a``
opened before the day, took a deposit and paid ``b``; ``b`` was created by that transfer; ``c``
stayed idle; ``d`` was created after midnight, before the snapshot), changes the rows the way one
fault would, and checks the findings to the micro-dollar. Amounts are odd on purpose, so an
off-by-one micro-dollar shows.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest

from queries.reconciliation_rules import (
    CHAIN_BREAK,
    DEFAULT_MAX_LAG_SECONDS,
    DUPLICATE,
    LAGGING,
    MISMATCH,
    MISSING,
    NOT_CONSERVED,
    OK,
    PASSING_STATUSES,
    PROBLEM_DETAILS,
    STATUSES,
    TRANSFER_UNBALANCED,
    DayOutcome,
    Finding,
    classify,
)

SNAPSHOT_AT = dt.datetime(2026, 11, 21, 0, 30, tzinfo=dt.UTC)
NOW = dt.datetime(2026, 11, 21, 1, 0, tzinfo=dt.UTC)  # the cutoff is midnight


def at(hour: int, minute: int = 0, *, day: int = 20) -> dt.datetime:
    """A UTC wall time as DuckDB returns it (naive)."""
    return dt.datetime(2026, 11, day, hour, minute)


WALLETS = pa.schema(
    [
        ("wallet_id", pa.string()),
        ("opening_version", pa.int64()),
        ("opening_balance", pa.int64()),
        ("observed_rows", pa.int64()),
        ("day_rows", pa.int64()),
        ("day_entries", pa.int64()),
        ("day_net_delta", pa.int64()),
        ("day_external_net", pa.int64()),
        ("day_last_version", pa.int64()),
        ("day_last_balance", pa.int64()),
        ("first_version", pa.int64()),
        ("earliest_created_at", pa.timestamp("us")),
        ("last_version", pa.int64()),
        ("balance_at_snapshot_version", pa.int64()),
        ("copies", pa.int64()),
        ("conflicts", pa.int64()),
        ("bad_amounts", pa.int64()),
        ("breaks", pa.int64()),
        ("gaps", pa.int64()),
        ("snapshot_version", pa.int64()),
        ("snapshot_balance", pa.int64()),
        ("snapshot_updated_at", pa.timestamp("us")),
    ]
)
TRANSFERS = pa.schema(
    [
        ("txn_id", pa.string()),
        ("debit_wallet_id", pa.string()),
        ("debit_version", pa.int64()),
        ("debit_delta", pa.int64()),
        ("credit_wallet_id", pa.string()),
        ("credit_version", pa.int64()),
        ("credit_delta", pa.int64()),
    ]
)
PROBLEMS = pa.schema([("wallet_id", pa.string()), *PROBLEM_DETAILS.items()])

NO_PROBLEMS = {"copies": 0, "conflicts": 0, "bad_amounts": 0, "breaks": 0, "gaps": 0}
IDLE = {
    "observed_rows": 0,
    "day_rows": 0,
    "day_entries": 0,
    "day_net_delta": 0,
    "day_external_net": 0,
    "day_last_version": None,
    "day_last_balance": None,
    "first_version": None,
    "earliest_created_at": None,
    "last_version": None,
    "balance_at_snapshot_version": None,
}

#: The clean day, per wallet, as ``reconcile_wallets`` returns it.
CLEAN: dict[str, dict[str, Any]] = {
    # closed yesterday at v2 with 50.000007; v3 deposit +30 → 80.000007; v4 pays b 5.000003 → 75.000004
    "a": {
        "opening_version": 2,
        "opening_balance": 50_000_007,
        "observed_rows": 2,
        "day_rows": 2,
        "day_entries": 2,
        "day_net_delta": 24_999_997,
        "day_external_net": 30_000_000,
        "day_last_version": 4,
        "day_last_balance": 75_000_004,
        "first_version": 3,
        "earliest_created_at": at(9, 0),
        "last_version": 4,
        "balance_at_snapshot_version": 75_000_004,
        **NO_PROBLEMS,
        "snapshot_version": 4,
        "snapshot_balance": 75_000_004,
        "snapshot_updated_at": at(9, 5),
    },
    # new today: v1 is a's transfer, +5.000003
    "b": {
        "opening_version": None,
        "opening_balance": None,
        "observed_rows": 1,
        "day_rows": 1,
        "day_entries": 1,
        "day_net_delta": 5_000_003,
        "day_external_net": 0,
        "day_last_version": 1,
        "day_last_balance": 5_000_003,
        "first_version": 1,
        "earliest_created_at": at(9, 5),
        "last_version": 1,
        "balance_at_snapshot_version": 5_000_003,
        **NO_PROBLEMS,
        "snapshot_version": 1,
        "snapshot_balance": 5_000_003,
        "snapshot_updated_at": at(9, 5),
    },
    # idle all day: carried at v1, 10.000011
    "c": {
        "opening_version": 1,
        "opening_balance": 10_000_011,
        **IDLE,
        **NO_PROBLEMS,
        "snapshot_version": 1,
        "snapshot_balance": 10_000_011,
        "snapshot_updated_at": at(8, 0, day=19),
    },
    # created after midnight (tomorrow's ledger), in the snapshot: no close today
    "d": {
        "opening_version": None,
        "opening_balance": None,
        **IDLE,
        "observed_rows": 1,
        "first_version": 1,
        "earliest_created_at": at(0, 10, day=21),
        "last_version": 1,
        "balance_at_snapshot_version": 7_000_000,
        **NO_PROBLEMS,
        "snapshot_version": 1,
        "snapshot_balance": 7_000_000,
        "snapshot_updated_at": at(0, 10, day=21),
    },
}
CLEAN_TOTALS = {
    "opening_balance": 60_000_018,
    "external_net": 30_000_000,
    "closing_balance": 90_000_018,
    "net_delta": 30_000_000,
}


def wallets(
    changes: dict[str, dict[str, Any]] | None = None, *, rows: dict[str, dict[str, Any]] | None = None
) -> pa.Table:
    """The clean day's wallet rows with some columns of some wallets changed."""
    source = CLEAN if rows is None else rows
    changes = changes or {}
    return pa.Table.from_pylist(
        [{"wallet_id": wallet, **row, **changes.get(wallet, {})} for wallet, row in source.items()],
        schema=WALLETS,
    )


def problems(*rows: dict[str, Any]) -> pa.Table:
    """``reconcile_wallet_problems`` rows (every detail not given is null)."""
    return pa.Table.from_pylist(list(rows), schema=PROBLEMS)


def transfers(*rows: dict[str, Any]) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=TRANSFERS)


def run(
    wallet_rows: pa.Table,
    *,
    details: pa.Table | None = None,
    unbalanced: pa.Table | None = None,
    now: dt.datetime = NOW,
    max_lag_seconds: int = DEFAULT_MAX_LAG_SECONDS,
) -> DayOutcome:
    return classify(
        wallet_rows,
        transfers() if unbalanced is None else unbalanced,
        problems=details,
        snapshot_at=SNAPSHOT_AT,
        cutoff=now - dt.timedelta(seconds=max_lag_seconds),
        max_lag_seconds=max_lag_seconds,
    )


def counted(outcome: DayOutcome) -> dict[str, int]:
    return {status: count for status, count in outcome.counts.items() if count}


def test_a_clean_day_is_all_ok_and_closes_every_wallet_with_a_close() -> None:
    # WHEN the clean day is classified
    outcome = run(wallets())
    # THEN nothing is found, every check passes, and every wallet counts as ok
    assert outcome.findings == []
    assert outcome.checks == {
        "transfers": "ok: every transfer's debit and credit sum to zero",
        "conservation": "ok: sum of balances = previous sum + the day's money in less out",
        "wallets": "ok",
    }
    assert outcome.counts == {**dict.fromkeys(STATUSES, 0), OK: 4}
    assert outcome.wallets == 4
    assert outcome.ledger_rows == 3
    assert outcome.totals == CLEAN_TOTALS
    # AND a and b close on their last entry, c is carried, d (no opening, nothing today) has no close
    assert outcome.daily_balances.to_pylist() == [
        {
            "wallet_id": "a",
            "closing_balance": 75_000_004,
            "closing_version": 4,
            "entries": 2,
            "net_delta": 24_999_997,
        },
        {
            "wallet_id": "b",
            "closing_balance": 5_000_003,
            "closing_version": 1,
            "entries": 1,
            "net_delta": 5_000_003,
        },
        {"wallet_id": "c", "closing_balance": 10_000_011, "closing_version": 1, "entries": 0, "net_delta": 0},
    ]


def test_entries_at_the_end_not_yet_delivered_are_lagging_and_pass() -> None:
    # GIVEN b's table row is at version 2, committed ten minutes after midnight, not in the lake yet
    rows = wallets(
        {
            "b": {
                "snapshot_version": 2,
                "snapshot_balance": 6_000_003,
                "snapshot_updated_at": at(0, 10, day=21),
            }
        }
    )
    # WHEN classified at 01:00 (within the hour the stream may take)
    outcome = run(rows)
    # THEN b is lagging from its version 1, the run passes, and conservation waits for the entry
    assert outcome.findings == [
        Finding(
            "b",
            LAGGING,
            2,
            1,
            "1 version absent from the lake: 2; the table is at version 2; "
            "committed within the last 3600 s, may still be in flight",
        )
    ]
    assert counted(outcome) == {LAGGING: 1, OK: 3}
    assert outcome.checks["wallets"] == "ok"
    assert outcome.checks["conservation"] == "skipped: 1 wallets have versions absent from the lake"
    assert all(f.status in PASSING_STATUSES for f in outcome.findings)
    # AND classified at 03:00 the same absence is overdue
    late = run(rows, now=at(3, 0, day=21).replace(tzinfo=dt.UTC))
    assert late.findings == [
        Finding(
            "b",
            MISSING,
            2,
            1,
            "1 version absent from the lake: 2; the table is at version 2; "
            "committed before 2026-11-21T02:00:00.000Z, past the 3600 s delivery bound",
        )
    ]
    assert late.checks["wallets"] == "failed"


@pytest.mark.parametrize(
    ("committed", "status"),
    [
        (at(0, 0, day=21), LAGGING),  # exactly at the cutoff: may still arrive
        (at(0, 0, day=21) - dt.timedelta(microseconds=1), MISSING),  # one microsecond before it
    ],
)
def test_the_delivery_bound_is_exact_to_the_microsecond(committed: dt.datetime, status: str) -> None:
    rows = wallets(
        {"b": {"snapshot_version": 2, "snapshot_balance": 6_000_003, "snapshot_updated_at": committed}}
    )
    assert [(f.wallet_id, f.status) for f in run(rows).findings] == [("b", status)]


def test_a_lost_entry_inside_the_day_is_missing() -> None:
    # GIVEN a's v3 deposit never reached the lake: the day has v4 only, after a gap from the opening
    rows = wallets(
        {
            "a": {
                "observed_rows": 1,
                "day_rows": 1,
                "day_entries": 1,
                "day_net_delta": -5_000_003,
                "day_external_net": 0,
                "first_version": 4,
                "earliest_created_at": at(9, 5),
                "gaps": 1,
            }
        }
    )
    details = problems({"wallet_id": "a", "gap_starts": "3", "gap_ends": "3", "oldest_gap_bound": at(9, 5)})
    # WHEN classified
    outcome = run(rows, details=details)
    # THEN a misses v3 (the lake has it up to v2, the table is at v4), long past the bound
    assert outcome.findings == [
        Finding(
            "a",
            MISSING,
            4,
            2,
            "1 version absent from the lake: 3; the table is at version 4; "
            "committed before 2026-11-21T00:00:00.000Z, past the 3600 s delivery bound",
        )
    ]
    assert counted(outcome) == {MISSING: 1, OK: 3}
    assert outcome.checks["conservation"] == "skipped: 1 wallets have versions absent from the lake"
    assert outcome.checks["wallets"] == "failed"


def test_absences_inside_and_at_the_end_are_one_finding_listing_every_range() -> None:
    # GIVEN a's lake has v4 only, and the table has moved on to v7 (v5..v7 committed before midnight)
    rows = wallets(
        {
            "a": {
                "first_version": 4,
                "day_rows": 1,
                "gaps": 1,
                "snapshot_version": 7,
                "snapshot_balance": 75_000_001,
                "snapshot_updated_at": at(23, 0),
            }
        }
    )
    details = problems({"wallet_id": "a", "gap_starts": "3", "gap_ends": "3", "oldest_gap_bound": at(9, 5)})
    # WHEN classified, THEN one missing finding names both ranges and counts four versions
    [finding] = run(rows, details=details).findings
    assert (finding.status, finding.expected, finding.actual) == (MISSING, 7, 2)
    assert finding.detail.startswith("4 versions absent from the lake: 3, 5..7; the table is at version 7;")


def test_an_entry_landed_twice_is_a_duplicate_and_counts_once() -> None:
    # GIVEN a's v4 is in the lake twice (observed 3 rows for 2 entries)
    rows = wallets({"a": {"observed_rows": 3, "day_rows": 3, "copies": 1}})
    details = problems({"wallet_id": "a", "copy_versions": "4"})
    # WHEN classified
    outcome = run(rows, details=details)
    # THEN a is a duplicate, and the copy changes neither the close nor conservation
    assert outcome.findings == [Finding("a", DUPLICATE, 2, 3, "1 extra copy of the entries at versions 4")]
    assert counted(outcome) == {DUPLICATE: 1, OK: 3}
    assert outcome.checks["conservation"].startswith("ok")
    assert outcome.totals == CLEAN_TOTALS
    assert outcome.daily_balances.to_pylist()[0]["entries"] == 2
    assert outcome.ledger_rows == 4


def test_a_balance_after_one_micro_dollar_off_breaks_the_chain_the_table_and_conservation() -> None:
    # GIVEN a's v4 claims 75.000005 after paying 5.000003 from 80.000007
    rows = wallets(
        {"a": {"day_last_balance": 75_000_005, "balance_at_snapshot_version": 75_000_005, "breaks": 1}}
    )
    details = problems(
        {
            "wallet_id": "a",
            "break_versions": "4",
            "first_break_expected": 75_000_004,
            "first_break_actual": 75_000_005,
        }
    )
    # WHEN classified
    outcome = run(rows, details=details)
    # THEN the table disagrees, the chain breaks at v4, and the day has one micro-dollar too many
    assert outcome.findings == [
        Finding(
            "a",
            MISMATCH,
            75_000_004,
            75_000_005,
            "balance at version 4: table 75000004, lake balance_after 75000005",
        ),
        Finding(
            "a",
            CHAIN_BREAK,
            75_000_004,
            75_000_005,
            "balance_after is not the previous balance plus delta at versions 4 "
            "(first: expected 75000004, lake 75000005)",
        ),
        Finding(
            None,
            NOT_CONSERVED,
            90_000_018,
            90_000_019,
            "sum of closing balances 90000019 ≠ sum of opening balances 60000018"
            " + money in less out 30000000",
        ),
    ]
    assert counted(outcome) == {MISMATCH: 1, CHAIN_BREAK: 1, NOT_CONSERVED: 1, OK: 3}
    assert outcome.checks["conservation"] == "failed"
    assert outcome.totals["closing_balance"] == 90_000_019


@pytest.mark.parametrize(
    ("wallet", "change", "detail", "expected", "actual"),
    [
        pytest.param(
            "c",
            {"snapshot_balance": 10_000_012},
            "balance at version 1: table 10000012, lake balance_after 10000011",
            10_000_012,
            10_000_011,
            id="carried close is not the table's balance",
        ),
        pytest.param(
            "a",
            {"first_version": 2},
            "versions from 2 are again in the lake, though the previous day closed at version 2",
            None,
            None,
            id="versions closed yesterday again",
        ),
        pytest.param(
            "a",
            {"snapshot_version": 1, "snapshot_balance": 10_000_000},
            "the table is at version 1, behind the previous day's close at version 2",
            None,
            None,
            id="table behind the lake",
        ),
        pytest.param(
            "a",
            {"snapshot_version": None, "snapshot_balance": None, "snapshot_updated_at": None},
            "not in the snapshot of 2026-11-21T00:30:00.000Z, though the lake has its entries",
            None,
            None,
            id="wallet the table lacks",
        ),
    ],
)
def test_the_lake_contradicting_the_table_is_a_mismatch(
    wallet: str, change: dict[str, Any], detail: str, expected: int | None, actual: int | None
) -> None:
    outcome = run(wallets({wallet: change}))
    assert outcome.findings == [Finding(wallet, MISMATCH, expected, actual, detail)]
    assert outcome.counts[MISMATCH] == 1
    assert outcome.counts[OK] == 3
    assert outcome.checks["wallets"] == "failed"


def test_different_entries_at_one_version_and_a_wrong_delta_are_one_mismatch_per_wallet() -> None:
    rows = wallets({"a": {"conflicts": 1, "bad_amounts": 2}})
    details = problems({"wallet_id": "a", "conflict_versions": "3", "bad_amount_versions": "3,4"})
    assert run(rows, details=details).findings == [
        Finding(
            "a",
            MISMATCH,
            None,
            None,
            "different entries share versions 3; delta is not ±amount at versions 3, 4",
        )
    ]


@pytest.mark.parametrize(
    ("created", "status"),
    [(at(0, 20, day=21), MISMATCH), (at(0, 40, day=21), OK)],
    ids=["created before the snapshot", "created after the snapshot"],
)
def test_a_wallet_the_snapshot_lacks_is_a_mismatch_only_if_it_existed_before_the_snapshot(
    created: dt.datetime, status: str
) -> None:
    rows = wallets(
        {"d": {"earliest_created_at": created, "snapshot_version": None, "snapshot_balance": None}}
    )
    outcome = run(rows)
    if status == MISMATCH:
        assert outcome.findings == [
            Finding(
                "d",
                MISMATCH,
                None,
                None,
                "not in the snapshot of 2026-11-21T00:30:00.000Z, though the lake has its entries",
            )
        ]
    else:
        assert outcome.findings == []
    assert outcome.counts[status] == (1 if status == MISMATCH else 4)


def test_a_transfer_whose_legs_do_not_cancel_is_unbalanced() -> None:
    # GIVEN one transfer credited a micro-dollar more than it debited, and one with no debit leg
    unbalanced = transfers(
        {
            "txn_id": "t1",
            "debit_wallet_id": "a",
            "debit_version": 4,
            "debit_delta": -5_000_003,
            "credit_wallet_id": "b",
            "credit_version": 1,
            "credit_delta": 5_000_004,
        },
        {"txn_id": "t2", "credit_wallet_id": "c", "credit_version": 2, "credit_delta": 1_000_000},
    )
    # WHEN classified
    outcome = run(wallets(), unbalanced=unbalanced)
    # THEN each is a global finding, with the sum of the legs as found
    assert outcome.findings == [
        Finding(
            None,
            TRANSFER_UNBALANCED,
            0,
            1,
            "transfer t1: debit -5000003 (a version 4) + credit 5000004 (b version 1) = 1",
        ),
        Finding(
            None, TRANSFER_UNBALANCED, 0, None, "transfer t2: no debit leg + credit 1000000 (c version 2)"
        ),
    ]
    assert outcome.checks["transfers"] == "failed: 2 transfers do not sum to zero"
    assert counted(outcome) == {TRANSFER_UNBALANCED: 2, OK: 4}
    # AND the wallets' own check still passes (transfers are judged globally)
    assert outcome.checks["wallets"] == "ok"


NINE_QUINTILLION = 9 * 10**18  # the ceiling of one balance (docs/architecture.md, "Money")


def huge_day(deposits: int) -> pa.Table:
    """x idle at the ceiling; y from 8e18 to the ceiling by one deposit of 1e18 (``deposits`` as recorded)."""
    x = {
        "opening_version": 1,
        "opening_balance": NINE_QUINTILLION,
        **IDLE,
        **NO_PROBLEMS,
        "snapshot_version": 1,
        "snapshot_balance": NINE_QUINTILLION,
        "snapshot_updated_at": at(8, 0, day=19),
    }
    y = {
        **CLEAN["b"],
        "opening_version": 1,
        "opening_balance": 8 * 10**18,
        "day_net_delta": 10**18,
        "day_external_net": deposits,
        "day_last_version": 2,
        "day_last_balance": NINE_QUINTILLION,
        "first_version": 2,
        "last_version": 2,
        "balance_at_snapshot_version": NINE_QUINTILLION,
        "snapshot_version": 2,
        "snapshot_balance": NINE_QUINTILLION,
    }
    return wallets(rows={"x": x, "y": y})


def test_totals_past_int64_are_exact() -> None:
    # GIVEN two wallets at the ceiling: the sum of balances, 1.8e19, does not fit in int64
    outcome = run(huge_day(10**18))
    # THEN the totals are exact and money is conserved
    assert outcome.totals == {
        "opening_balance": 17 * 10**18,
        "external_net": 10**18,
        "closing_balance": 18 * 10**18,
        "net_delta": 10**18,
    }
    assert outcome.findings == []
    # AND a deposit recorded one micro-dollar off is found, to the micro-dollar
    off = run(huge_day(10**18 + 1))
    assert off.findings == [
        Finding(
            None,
            NOT_CONSERVED,
            18 * 10**18 + 1,
            18 * 10**18,
            "sum of closing balances 18000000000000000000 ≠ sum of opening balances "
            "17000000000000000000 + money in less out 1000000000000000001",
        )
    ]


def test_findings_are_ordered_worst_first() -> None:
    rows = wallets(
        {
            "a": {"observed_rows": 3, "day_rows": 3, "copies": 1},
            "b": {
                "snapshot_version": 2,
                "snapshot_balance": 6_000_003,
                "snapshot_updated_at": at(0, 10, day=21),
            },
            "c": {"snapshot_balance": 10_000_012},
        }
    )
    details = problems({"wallet_id": "a", "copy_versions": "4"})
    outcome = run(rows, details=details)
    assert [(f.wallet_id, f.status) for f in outcome.findings] == [
        ("c", MISMATCH),
        ("a", DUPLICATE),
        ("b", LAGGING),
    ]
    assert counted(outcome) == {MISMATCH: 1, DUPLICATE: 1, LAGGING: 1, OK: 1}


def test_findings_serialise_money_as_digits() -> None:
    finding = Finding("w", MISMATCH, 9_000_000_000_000_000_001, 1, "x")
    assert finding.to_dict() == {
        "wallet_id": "w",
        "status": MISMATCH,
        "expected": "9000000000000000001",
        "actual": "1",
        "detail": "x",
    }
