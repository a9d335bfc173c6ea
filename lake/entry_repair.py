"""Repair a day's ledger holding copies of an entry: one copy kept, the right one, in one commit.

Reconciliation's ``duplicate`` (an ``entry_id`` more than once in a day) means rows reached the
table twice: before the commit's identity check existed (:mod:`lake.entry_identity`), or by a hand.
Copies of one entry agree on everything but where and when they were ingested
(:class:`contracts.lake_tables.CompactionLayout`'s ``volatile`` columns); a copy that disagrees
(an edited file, a decoder bug of the past) is wrong, and the right one is the copy whose balance
follows from the wallet's previous entry and leads to its next (the chain reconciliation checks).

:func:`choose_copies` decides (pure); :func:`repair_day` reads the day, and replaces every copied
entry's rows by the chosen copy in one overwrite, asserting that ``main`` did not move since it
read (a commit meanwhile: read and decide again). An entry whose copies disagree and where the
chain cannot tell (no neighbour, or both fit) is refused, with the entry named: replay it from the
stream or an export (``walletlake replay --stream-range`` / ``--export``) after removing both.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa

from contracts.lake_tables import PARTITION_COLUMN, STREAM_TABLES

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

_logger = logging.getLogger(__name__)

_ATTEMPTS: Final = 5


class RepairRefusedError(ValueError):
    """Copies of an entry that disagree, where the wallet's chain cannot tell which is right."""


@dataclasses.dataclass(frozen=True, slots=True)
class RepairReport:
    """What a repair found and did."""

    day: dt.date
    copied_entries: int
    rows_removed: int
    snapshot_id: int | None
    corrected: int = 0
    added: int = 0
    removed: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for logs and JSON."""
        values = dataclasses.asdict(self)
        values["day"] = self.day.isoformat()
        return values


def _content(row: dict[str, Any]) -> tuple[Any, ...]:
    volatile = set(STREAM_TABLES["ledger"].layout.volatile)
    return tuple(value for name, value in sorted(row.items()) if name not in volatile)


def choose_copies(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """For every ``entry_id`` held more than once, the copy to keep (pure).

    Copies that agree: the stream's (not an export's), then the first ingested. Copies that
    disagree: the one whose ``balance_after`` is its wallet's previous version's plus its ``delta``
    and its next version's minus that one's ``delta`` (where those exist).

    Raises
    ------
    RepairRefusedError
        Copies disagree and the chain does not single one out.
    """
    by_entry: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_entry[row["entry_id"]].append(row)
    by_version: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_version[(row["wallet_id"], row["wallet_version"])].append(row)
    chosen: dict[str, dict[str, Any]] = {}
    for entry_id, copies in sorted(by_entry.items()):
        if len(copies) < 2:
            continue
        if len({_content(copy) for copy in copies}) == 1:
            chosen[entry_id] = min(
                copies, key=lambda r: (str(r["stream_sequence"]).startswith("export:"), r["ingested_at"])
            )
            continue
        fitting = [copy for copy in copies if _fits_chain(copy, by_version)]
        contents = {_content(copy) for copy in fitting}
        if len(contents) != 1:
            raise RepairRefusedError(
                f"entry {entry_id}: its {len(copies)} copies disagree and the wallet's chain does not say "
                "which is right; remove them and replay the range (walletlake replay --stream-range, or "
                "--export)"
            )
        chosen[entry_id] = fitting[0]
    return chosen


def from_truth(
    rows: list[dict[str, Any]], truth: list[dict[str, Any]]
) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """What the source of truth (the stream's records read again, or an export) says the day's
    entries are (pure): every entry whose rows differ from it (altered, copied or missing) with the
    source's row, and the entries to remove (another entry at a version the source gives to one of
    its own: two entries at one version, ``mismatch``).

    Examples
    --------
    >>> row = {"entry_id": "a", "wallet_id": "w", "wallet_version": 1, "amount": 5, "stream_sequence": "1",
    ...        "ingested_at": 0}
    >>> fixes, removed = from_truth([{**row, "amount": 6}], [row])
    >>> fixes["a"]["amount"], removed
    (5, set())
    """
    by_entry: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_entry[row["entry_id"]].append(row)
    claimed = {(t["wallet_id"], t["wallet_version"]): t["entry_id"] for t in truth}
    fixes: dict[str, dict[str, Any]] = {}
    for entry in truth:
        held = by_entry.get(entry["entry_id"], [])
        if len(held) == 1 and _content(held[0]) == _content(entry):
            continue
        fixes[entry["entry_id"]] = entry
    removed = {
        row["entry_id"]
        for row in rows
        if claimed.get((row["wallet_id"], row["wallet_version"]), row["entry_id"]) != row["entry_id"]
    }
    return fixes, removed


def _fits_chain(row: dict[str, Any], by_version: dict[tuple[str, int], list[dict[str, Any]]]) -> bool:
    wallet, version = row["wallet_id"], row["wallet_version"]
    before = by_version.get((wallet, version - 1), [])
    after = by_version.get((wallet, version + 1), [])
    if not before and not after:
        return False
    fits_before = not before or any(b["balance_after"] + row["delta"] == row["balance_after"] for b in before)
    fits_after = not after or any(row["balance_after"] + a["delta"] == a["balance_after"] for a in after)
    return fits_before and fits_after


def repair_day(
    catalog: Catalog, table_id: tuple[str, str], day: dt.date, truth: pa.Table | None = None
) -> RepairReport:
    """Repair the day's ledger in one commit: with ``truth`` (ledger rows of the lake's schema, from
    the stream or an export), every entry of the day it holds is made its row (altered rows
    replaced, copies made one, missing ones added, another entry at one of its versions removed);
    then, and without it, every entry held more than once keeps one copy (:func:`choose_copies`)."""
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.expressions import And, EqualTo, In, Reference
    from pyiceberg.expressions.literals import literal

    from lake.iceberg_catalog import strict_commits

    truth_rows = _of_day(truth, day)
    for attempt in range(1, _ATTEMPTS + 1):
        table = catalog.load_table(table_id)
        on_day = EqualTo(term=Reference(PARTITION_COLUMN), value=literal(day.isoformat()))
        rows = table.scan(row_filter=on_day).to_arrow()
        listed = rows.to_pylist()
        fixes, removed = from_truth(listed, truth_rows)
        untouched = [row for row in listed if row["entry_id"] not in fixes and row["entry_id"] not in removed]
        chosen = {**choose_copies(untouched), **fixes}
        touched = set(chosen) | removed
        if not touched:
            return RepairReport(day, copied_entries=0, rows_removed=0, snapshot_id=None)
        before = sum(1 for entry in rows.column("entry_id").to_pylist() if entry in touched)
        kept = pa.Table.from_pylist(list(chosen.values()), schema=rows.schema)
        condition = And(on_day, In(term=Reference("entry_id"), values={literal(e) for e in touched}))
        try:
            strict_commits(table).overwrite(kept, overwrite_filter=condition)
        except CommitFailedException:
            _logger.warning("repair of %s refused (a concurrent commit); reading again (%d)", day, attempt)
            continue
        snapshot = catalog.load_table(table_id).current_snapshot()
        present = set(rows.column("entry_id").to_pylist())
        added = sum(1 for entry in fixes if entry not in present)
        report = RepairReport(
            day,
            copied_entries=len(chosen) - len(fixes),
            rows_removed=before - (len(chosen) - added),
            snapshot_id=snapshot.snapshot_id if snapshot else None,
            corrected=len(fixes) - added,
            added=added,
            removed=len(removed),
        )
        _logger.info("repair %s", report.as_dict())
        return report
    raise CommitFailedException(f"the repair of {day} was refused {_ATTEMPTS} times by concurrent commits")


def _of_day(truth: pa.Table | None, day: dt.date) -> list[dict[str, Any]]:
    """The source's ledger rows of ``day`` (its ``dt`` added, as the table's rows carry it)."""
    if truth is None:
        return []
    rows = []
    for row in truth.to_pylist():
        if row["created_at"].astimezone(dt.UTC).date() == day:
            rows.append({**row, PARTITION_COLUMN: day.isoformat()})
    return rows
