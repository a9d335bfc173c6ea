"""The money rules of the nightly reconciliation: what the queries' rows mean, per wallet and globally.

Pure (no I/O, no clock, no engine), so the same code classifies the local run's DuckDB results and
the AWS nightly job's Athena results, and every rule can be tested on a hand-built table.

Nothing is sampled or hashed: the queries pair every entry with the version before it (a window
over the wallet's entries, with the opening and the snapshot as marker rows), and every sum here
is an exact integer (:func:`_exact_sum`), so every check is exact.

Per wallet (one finding per wallet and problem; a wallet with none is ``ok``):

``duplicate``
    the same entry is in the lake more than once (identical rows at one version).
``chain_break``
    the running balance does not follow: a version's balance before it (``balance_after -
    delta``) is not the previous version's ``balance_after``, or the day's first entry does not
    start from the previous day's reconciled close.
``mismatch``
    the lake contradicts itself or the table: different entries at one version, a delta that is
    not ±amount, versions already closed on an earlier day, a wallet the lake has but the
    snapshot lacks, or, with every version up to the snapshot's present, a ``balance_after`` at
    the snapshot's version that is not the table's balance.
``lagging`` / ``missing``
    versions absent from the lake, up to the table's version (every wallet's entries are
    versions 1..N). Each absent version has a latest possible commit time: the ``created_at`` of
    the next version the lake has, or the wallet's ``updated_at`` in the snapshot for absences at
    the end. When all of them are within ``max_lag_seconds`` of ``now`` the entries may still be
    on their way (``lagging``); otherwise the stream should have delivered them (``missing``).

Global checks: every transfer of the day has one debit and one credit that sum to zero
(``transfer_unbalanced``), and money is conserved: the sum of closing balances equals the sum of
opening balances plus the day's money in minus its money out (``not_conserved``; which legs bring
money in or take it out is :mod:`contracts.movement_types`' to say, through the queries'
``movement_legs``) — by induction from an empty first day, the sum of all balances equals all the
money that ever entered less all that left. An entry of no registered type is neither, so it
fails conservation rather than pass unnoticed. Conservation is judged only when no
version is absent (an entry in flight would make it fail for no fault).

A day passes when every finding is ``lagging`` (:data:`PASSING_STATUSES`).

``max_lag_seconds`` defaults to :data:`DEFAULT_MAX_LAG_SECONDS`, one hour (why:
:mod:`queries.reconciliation_lag`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from typing import Any, Final

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from contracts.lake_tables import DAILY_BALANCES
from contracts.timestamps import utc_text
from queries.reconciliation_lag import DEFAULT_MAX_LAG_SECONDS

OK: Final = "ok"
LAGGING: Final = "lagging"
MISSING: Final = "missing"
DUPLICATE: Final = "duplicate"
MISMATCH: Final = "mismatch"
CHAIN_BREAK: Final = "chain_break"
TRANSFER_UNBALANCED: Final = "transfer_unbalanced"
NOT_CONSERVED: Final = "not_conserved"
#: Every status, worst first.
STATUSES: Final = (MISMATCH, CHAIN_BREAK, DUPLICATE, MISSING, TRANSFER_UNBALANCED, NOT_CONSERVED, LAGGING, OK)
#: Statuses that do not fail the run (docs/architecture.md, invariant 4).
PASSING_STATUSES: Final = frozenset({OK, LAGGING})

#: ``reconcile_wallets``' counts of entries failing each check.
PROBLEM_COUNTS: Final = ("copies", "conflicts", "bad_amounts", "breaks", "gaps")
#: What ``reconcile_wallet_problems`` adds per wallet (null for a wallet with nothing to explain).
PROBLEM_DETAILS: Final[dict[str, pa.DataType]] = {
    "copy_versions": pa.string(),
    "conflict_versions": pa.string(),
    "bad_amount_versions": pa.string(),
    "break_versions": pa.string(),
    "first_break_expected": pa.int64(),
    "first_break_actual": pa.int64(),
    "gap_starts": pa.string(),
    "gap_ends": pa.string(),
    "oldest_gap_bound": pa.timestamp("us"),
}

_MAX_LISTED: Final = 20


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """One problem: a wallet's (or, with ``wallet_id`` None, a global check's)."""

    wallet_id: str | None
    status: str
    expected: int | None
    actual: int | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; integers as strings of digits, as money travels in JSON here."""
        return {
            "wallet_id": self.wallet_id,
            "status": self.status,
            "expected": None if self.expected is None else str(self.expected),
            "actual": None if self.actual is None else str(self.actual),
            "detail": self.detail,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class DayOutcome:
    """The classified day: findings, checks and the day's closing balances (no I/O done)."""

    findings: list[Finding]
    checks: dict[str, str]
    counts: dict[str, int]
    wallets: int
    daily_balances: pa.Table
    totals: dict[str, int]
    ledger_rows: int


@dataclasses.dataclass(frozen=True, slots=True)
class JudgedWallets:
    """The per-wallet half of a day's outcome, before the global checks see the transfers.

    Its own step so a caller can judge the wallets while the transfers query is still running.
    """

    findings: list[Finding]
    wallets: int
    wallets_absent: int
    daily_balances: pa.Table
    totals: dict[str, int]
    ledger_rows: int


def classify(
    wallets: pa.Table | pd.DataFrame,
    transfers: pa.Table | pd.DataFrame,
    *,
    problems: pa.Table | pd.DataFrame | None = None,
    snapshot_at: dt.datetime,
    cutoff: dt.datetime,
    max_lag_seconds: int = DEFAULT_MAX_LAG_SECONDS,
) -> DayOutcome:
    """Classify the rows of ``reconcile_wallets``, ``reconcile_wallet_problems`` (None when no
    count asked for it) and ``reconcile_transfers``.

    Pure: no I/O, no clock. ``cutoff`` is ``now - max_lag_seconds``: an absent version that must
    have been committed before it is ``missing``.
    """
    judged = judge_wallets(
        wallets, problems, snapshot_at=snapshot_at, cutoff=cutoff, max_lag_seconds=max_lag_seconds
    )
    return add_global_checks(judged, transfers)


def judge_wallets(
    wallets: pa.Table | pd.DataFrame,
    problems: pa.Table | pd.DataFrame | None,
    *,
    snapshot_at: dt.datetime,
    cutoff: dt.datetime,
    max_lag_seconds: int,
) -> JudgedWallets:
    """The first half of :func:`classify`: every wallet's findings, the day's closes and totals."""
    frame = _Columns(join_problem_details(_arrow(wallets), None if problems is None else _arrow(problems)))
    findings, wallets_absent = _wallet_findings_of(frame, snapshot_at, _naive_utc(cutoff), max_lag_seconds)
    daily, totals = _close_day(frame)
    return JudgedWallets(
        findings, len(frame), wallets_absent, daily, totals, int(frame.ints("day_rows").sum())
    )


def add_global_checks(judged: JudgedWallets, transfers: pa.Table | pd.DataFrame) -> DayOutcome:
    """The second half of :func:`classify`: add the global checks to the wallets' findings and count."""
    findings = list(judged.findings)
    checks: dict[str, str] = {}
    transfer_findings = [_transfer_finding(row) for row in _arrow(transfers).to_pylist()]
    findings.extend(transfer_findings)
    checks["transfers"] = (
        "ok: every transfer's debit and credit sum to zero"
        if not transfer_findings
        else f"failed: {len(transfer_findings)} transfers do not sum to zero"
    )
    totals = judged.totals
    expected_total = totals["opening_balance"] + totals["external_net"]
    if judged.wallets_absent:
        checks["conservation"] = (
            f"skipped: {judged.wallets_absent} wallets have versions absent from the lake"
        )
    elif expected_total != totals["closing_balance"]:
        checks["conservation"] = "failed"
        findings.append(
            Finding(
                None,
                NOT_CONSERVED,
                expected_total,
                totals["closing_balance"],
                f"sum of closing balances {totals['closing_balance']} ≠ sum of opening balances "
                f"{totals['opening_balance']} + money in less out {totals['external_net']}",
            )
        )
    else:
        checks["conservation"] = "ok: sum of balances = previous sum + the day's money in less out"
    wallet_findings = [f for f in findings if f.wallet_id is not None]
    checks["wallets"] = "ok" if all(f.status in PASSING_STATUSES for f in wallet_findings) else "failed"
    counts = dict.fromkeys(STATUSES, 0)
    counts.update(Counter(finding.status for finding in findings))
    counts[OK] = judged.wallets - len({f.wallet_id for f in wallet_findings})
    return DayOutcome(
        findings=sorted(findings, key=_finding_order),
        checks=checks,
        counts=counts,
        wallets=judged.wallets,
        daily_balances=judged.daily_balances,
        totals=totals,
        ledger_rows=judged.ledger_rows,
    )


def has_problems(wallets: pa.Table | pd.DataFrame) -> bool:
    """True when any wallet has an entry failing a check (the details query is then needed)."""
    table = _arrow(wallets)
    return any(pc.max(table.column(name)).as_py() or 0 for name in PROBLEM_COUNTS)


def join_problem_details(wallets: pa.Table, problems: pa.Table | None) -> pa.Table:
    """The per-wallet rows with the problems' details beside them (nulls where there are none).

    The details of a wallet the first pass did not flag are kept too: the lake may have changed
    between the passes (late rows landing), and a problem seen is never dropped.
    """
    if problems is None or problems.num_rows == 0:
        for name, kind in PROBLEM_DETAILS.items():
            wallets = wallets.append_column(name, pa.nulls(wallets.num_rows, kind))
        return wallets
    # Cast to the declared types first: the same query comes back from DuckDB as Arrow but from
    # Athena through pandas, where pandas 3's strings become ``large_string`` (Arrow refuses to
    # join string with large_string) and timestamps nanoseconds. Found by the deploy check.
    details = problems.select(["wallet_id", *PROBLEM_DETAILS]).cast(
        pa.schema(
            [
                pa.field("wallet_id", wallets.schema.field("wallet_id").type),
                *(pa.field(name, kind) for name, kind in PROBLEM_DETAILS.items()),
            ]
        )
    )
    return wallets.join(details, keys="wallet_id", join_type="left outer")


def _wallet_findings_of(
    frame: _Columns, snapshot_at: dt.datetime, cutoff: dt.datetime, max_lag_seconds: int
) -> tuple[list[Finding], int]:
    """Per-wallet findings (vectorised masks pick the wallets; details only for those), and how
    many wallets have absent versions."""
    has_opening = frame.present("opening_version")
    opening_version = frame.ints("opening_version")
    opening_balance = frame.ints("opening_balance")
    has_rows = frame.present("first_version")
    first_version = frame.ints("first_version")
    has_snapshot = frame.present("snapshot_version")
    snapshot_version = frame.ints("snapshot_version")
    top = np.where(has_rows, np.maximum(frame.ints("last_version"), opening_version), opening_version)

    # Gaps include versions missing before the day's first entry (the query pairs it with the
    # opening); absences at the end run up to the table's version.
    absent = frame.present("gap_starts") | (has_snapshot & (snapshot_version > top))
    duplicate = frame.ints("copies") > 0
    chain = frame.present("break_versions")
    early = has_rows & has_opening & (first_version <= opening_version)
    created_before = frame.times("earliest_created_at") < np.datetime64(_naive_utc(snapshot_at))
    not_in_snapshot = ~has_snapshot & (has_opening | (has_rows & created_before))
    behind = has_snapshot & (snapshot_version < opening_version)
    at_opening = snapshot_version == opening_version
    lake_balance = np.where(at_opening, opening_balance, frame.ints("balance_at_snapshot_version"))
    balance_differs = (
        has_snapshot
        & ~absent
        & ~behind
        & (at_opening | frame.present("balance_at_snapshot_version"))
        & (lake_balance != frame.ints("snapshot_balance"))
    )
    mismatch = (
        frame.present("conflict_versions")
        | frame.present("bad_amount_versions")
        | early
        | not_in_snapshot
        | behind
        | balance_differs
    )
    findings: list[Finding] = []
    for index in np.flatnonzero(absent | duplicate | chain | mismatch):
        findings.extend(
            _wallet_findings(
                frame.row(int(index)),
                absent=bool(absent[index]),
                duplicate=bool(duplicate[index]),
                chain=bool(chain[index]),
                early=bool(early[index]),
                not_in_snapshot=bool(not_in_snapshot[index]),
                behind=bool(behind[index]),
                balance_differs=bool(balance_differs[index]),
                lake_balance=int(lake_balance[index]),
                cutoff=cutoff,
                snapshot_at=snapshot_at,
                max_lag_seconds=max_lag_seconds,
            )
        )
    return findings, int(absent.sum())


def _close_day(frame: _Columns) -> tuple[pa.Table, dict[str, int]]:
    """The day's ``daily_balances`` (every wallet with a close: carried or moved) and its totals."""
    has_opening = frame.present("opening_version")
    day_rows = frame.ints("day_rows")
    closes = has_opening | (day_rows > 0)
    closing_version = np.where(day_rows > 0, frame.ints("day_last_version"), frame.ints("opening_version"))
    closing_balance = np.where(day_rows > 0, frame.ints("day_last_balance"), frame.ints("opening_balance"))
    totals = {
        "opening_balance": _exact_sum(frame.ints("opening_balance")[closes]),
        "external_net": _exact_sum(frame.ints("day_external_net")[closes]),
        "closing_balance": _exact_sum(closing_balance[closes]),
        "net_delta": _exact_sum(frame.ints("day_net_delta")[closes]),
    }
    return _daily_balances(frame, closes, closing_balance, closing_version), totals


def _wallet_findings(
    row: dict[str, Any],
    *,
    absent: bool,
    duplicate: bool,
    chain: bool,
    early: bool,
    not_in_snapshot: bool,
    behind: bool,
    balance_differs: bool,
    lake_balance: int,
    cutoff: dt.datetime,
    snapshot_at: dt.datetime,
    max_lag_seconds: int,
) -> list[Finding]:
    wallet = str(row["wallet_id"])
    opening_version = _int(row["opening_version"]) or 0
    snapshot_version = _int(row["snapshot_version"])
    found = []
    if absent:
        found.append(_absence(row, wallet, opening_version, snapshot_version, cutoff, max_lag_seconds))
    if duplicate:
        rows = _int(row["observed_rows"]) or 0
        copies = _int(row["copies"]) or 0
        found.append(
            Finding(
                wallet,
                DUPLICATE,
                rows - copies,
                rows,
                f"{copies} extra {'copy' if copies == 1 else 'copies'} of the entries at versions "
                f"{_listing(row['copy_versions'])}",
            )
        )
    if chain:
        found.append(_chain_break(row, wallet))
    reasons = []
    expected: int | None = None
    actual: int | None = None
    if row["conflict_versions"] is not None:
        reasons.append(f"different entries share versions {_listing(row['conflict_versions'])}")
    if row["bad_amount_versions"] is not None:
        reasons.append(f"delta is not ±amount at versions {_listing(row['bad_amount_versions'])}")
    if early:
        reasons.append(
            f"versions from {_int(row['first_version'])} are again in the lake, though the previous "
            f"day closed at version {opening_version}"
        )
    if not_in_snapshot:
        reasons.append(f"not in the snapshot of {utc_text(snapshot_at)}, though the lake has its entries")
    if behind:
        reasons.append(
            f"the table is at version {snapshot_version}, behind the previous day's close at "
            f"version {opening_version}"
        )
    if balance_differs:
        expected, actual = _int(row["snapshot_balance"]), lake_balance
        reasons.append(
            f"balance at version {snapshot_version}: table {expected}, lake balance_after {actual}"
        )
    if reasons:
        found.append(Finding(wallet, MISMATCH, expected, actual, "; ".join(reasons)))
    return found


def _absence(
    row: dict[str, Any],
    wallet: str,
    opening_version: int,
    snapshot_version: int | None,
    cutoff: dt.datetime,
    max_lag_seconds: int,
) -> Finding:
    ranges: list[tuple[int, int]] = []
    bounds: list[dt.datetime] = []
    first_version = _int(row["first_version"])
    last_version = _int(row["last_version"])
    if row["gap_starts"] is not None:
        starts = [int(v) for v in str(row["gap_starts"]).split(",")]
        ends = [int(v) for v in str(row["gap_ends"]).split(",")]
        ranges.extend(zip(starts, ends, strict=True))
        bounds.append(_timestamp(row["oldest_gap_bound"]))
    top = max(last_version or 0, opening_version) if first_version is not None else opening_version
    if snapshot_version is not None and snapshot_version > top:
        ranges.append((top + 1, snapshot_version))
        bounds.append(_timestamp(row["snapshot_updated_at"]))
    ranges.sort()
    overdue = any(bound < cutoff for bound in bounds)
    status = MISSING if overdue else LAGGING
    count = sum(high - low + 1 for low, high in ranges)
    listed = ", ".join(f"{low}..{high}" if high > low else str(low) for low, high in ranges[:_MAX_LISTED])
    if len(ranges) > _MAX_LISTED:
        listed += f" and {len(ranges) - _MAX_LISTED} more ranges"
    table_part = f"; the table is at version {snapshot_version}" if snapshot_version is not None else ""
    if overdue:
        why = f"committed before {utc_text(cutoff)}, past the {max_lag_seconds} s delivery bound"
    else:
        why = f"committed within the last {max_lag_seconds} s, may still be in flight"
    return Finding(
        wallet,
        status,
        snapshot_version if snapshot_version is not None else last_version,
        ranges[0][0] - 1,
        f"{count} {'version' if count == 1 else 'versions'} absent from the lake: {listed}"
        f"{table_part}; {why}",
    )


def _chain_break(row: dict[str, Any], wallet: str) -> Finding:
    expected, actual = _int(row["first_break_expected"]), _int(row["first_break_actual"])
    return Finding(
        wallet,
        CHAIN_BREAK,
        expected,
        actual,
        f"balance_after is not the previous balance plus delta at versions {_listing(row['break_versions'])} "
        f"(first: expected {expected}, lake {actual})",
    )


def _transfer_finding(row: dict[str, Any]) -> Finding:
    debit, credit = _int(row["debit_delta"]), _int(row["credit_delta"])
    debit_part = (
        f"debit {debit} ({row['debit_wallet_id']} version {_int(row['debit_version'])})"
        if debit is not None
        else "no debit leg"
    )
    credit_part = (
        f"credit {credit} ({row['credit_wallet_id']} version {_int(row['credit_version'])})"
        if credit is not None
        else "no credit leg"
    )
    total = None if debit is None or credit is None else debit + credit
    summed = f" = {total}" if total is not None else ""
    return Finding(
        None, TRANSFER_UNBALANCED, 0, total, f"transfer {row['txn_id']}: {debit_part} + {credit_part}{summed}"
    )


def _daily_balances(
    frame: _Columns, closes: np.ndarray, closing_balance: np.ndarray, closing_version: np.ndarray
) -> pa.Table:
    return pa.table(  # in the query's order: readers find a wallet by its value
        {
            "wallet_id": frame.arrow("wallet_id").filter(pa.array(closes)),
            "closing_balance": pa.array(closing_balance[closes], pa.int64()),
            "closing_version": pa.array(closing_version[closes], pa.int64()),
            "entries": pa.array(frame.ints("day_entries")[closes], pa.int64()),
            "net_delta": pa.array(frame.ints("day_net_delta")[closes], pa.int64()),
        },
        schema=DAILY_BALANCES,
    )


class _Columns:
    """Numpy views of the query result's columns: integers with nulls as 0 plus presence masks.

    Works on Arrow (a million-wallet result never becomes a pandas frame on the nightly path).
    """

    def __init__(self, result: pa.Table | pd.DataFrame) -> None:
        self._table = _arrow(result)

    def __len__(self) -> int:
        return int(self._table.num_rows)

    def present(self, name: str) -> np.ndarray:
        return np.asarray(pc.is_valid(self._table.column(name)).to_numpy(zero_copy_only=False), dtype=bool)

    def ints(self, name: str) -> np.ndarray:
        values = pc.fill_null(pc.cast(self._table.column(name), pa.int64()), 0)
        return np.asarray(values.to_numpy(), dtype=np.int64)

    def arrow(self, name: str) -> pa.Array:
        return pc.cast(self._table.column(name), pa.string()).combine_chunks()

    def times(self, name: str) -> np.ndarray:
        """UTC wall times as naive ``datetime64[us]`` (NaT where null)."""
        column = self._table.column(name)
        if pa.types.is_null(column.type):
            return np.full(len(self), np.datetime64("NaT"), dtype="datetime64[us]")
        # Epoch microseconds either way: naive times from DuckDB are UTC wall times (TimeZone=UTC).
        micros = pc.cast(pc.cast(column, pa.timestamp("us", tz=column.type.tz)), pa.int64())
        return np.asarray(pc.fill_null(micros, np.iinfo(np.int64).min).to_numpy()).view("datetime64[us]")

    def row(self, index: int) -> dict[str, Any]:
        return {str(name): value for name, value in self._table.slice(index, 1).to_pylist()[0].items()}


def _arrow(result: pa.Table | pd.DataFrame) -> pa.Table:
    """A query result as Arrow (frames, from the pure :func:`classify` entry point, are converted)."""
    if isinstance(result, pa.Table):
        return result
    return pa.Table.from_pandas(result, preserve_index=False)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _timestamp(value: Any) -> dt.datetime:
    moment = pd.Timestamp(value).to_pydatetime()
    return (
        moment.replace(tzinfo=None)
        if moment.tzinfo is None
        else moment.astimezone(dt.UTC).replace(tzinfo=None)
    )


def _naive_utc(moment: dt.datetime) -> dt.datetime:
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(dt.UTC).replace(tzinfo=None)


def _listing(text: Any) -> str:
    values = str(text).split(",")
    shown = ", ".join(values[:_MAX_LISTED])
    return shown + (f" and {len(values) - _MAX_LISTED} more" if len(values) > _MAX_LISTED else "")


def _exact_sum(values: np.ndarray) -> int:
    """Sum without int64 overflow: in int64 when no overflow is possible, else in Python integers.

    Balances reach 9 * 10^18 each (docs/architecture.md, "Money"), so the total of two of them
    already overflows int64: numpy would wrap silently, and conservation would compare garbage.
    """
    if not len(values):
        return 0
    if int(np.abs(values).max()) < (2**63 - 1) // len(values):
        return int(values.sum())
    return int(values.astype(object).sum())


def _finding_order(finding: Finding) -> tuple[int, str, str]:
    return (STATUSES.index(finding.status), finding.wallet_id or "", finding.detail)
