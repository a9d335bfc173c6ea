"""The seam between DynamoDB and the lake in a wallet's history, over drawn histories (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.history_entry import Boundary, HistoryEntry
from wallet.history_seam import (
    CursorError,
    HistoryGap,
    HistoryInconsistentError,
    Movement,
    PageRequest,
    WalletState,
    from_cursor,
    next_cursor,
    number_hot,
    page_of,
)


def _ledger(deltas: list[int]) -> list[HistoryEntry]:
    """The wallet's entries, version 1 first; entry n at time 1000 + 10 n."""
    entries, balance = [], 0
    for version, delta in enumerate(deltas, start=1):
        balance += delta
        entries.append(
            HistoryEntry(
                version=version,
                created_at_ms=1_000 + 10 * version,
                txn_id=f"t{version}",
                nonce=f"n{version}",
                txn_type="deposit" if delta > 0 else "transfer",
                direction="credit" if delta > 0 else "debit",
                amount=abs(delta),
                delta=delta,
                counterparty=None,
                balance_after=balance,
                initiated_by="local",
            )
        )
    return entries


def _movement(entry: HistoryEntry) -> Movement:
    return Movement(
        entry.txn_id,
        entry.created_at_ms,
        entry.nonce,
        entry.txn_type,
        entry.direction,
        entry.amount,
        entry.delta,
        entry.counterparty,
        entry.initiated_by,
    )


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[HistoryEntry], int]:
    """A wallet's entries (balance never below 0) and how many of them the lake holds."""
    deltas: list[int] = []
    balance = 0
    for _ in range(draw(st.integers(1, 60))):
        delta = (
            draw(st.integers(-balance, 50).filter(lambda d: d != 0)) if balance else draw(st.integers(1, 50))
        )
        deltas.append(delta)
        balance += delta
    return _ledger(deltas), draw(st.integers(0, len(deltas)))


def _state(entries: list[HistoryEntry]) -> WalletState:
    return WalletState("w", entries[-1].version, entries[-1].balance_after, entries[-1].created_at_ms, 0)


def _boundary(entries: list[HistoryEntry], in_lake: int) -> Boundary:
    if in_lake == 0:
        return Boundary()
    last = entries[in_lake - 1]
    return Boundary(last.version, last.created_at_ms, last.balance_after)


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(1, 25))
def test_paging_across_the_seam_gives_every_entry_once_newest_first(
    history: tuple[list[HistoryEntry], int], limit: int
) -> None:
    # GIVEN the lake's prefix and DynamoDB's records of everything after it, and the records of
    # entries the lake already holds too (TTL has not deleted them yet), in any order
    entries, in_lake = history
    hot_records = [_movement(entry) for entry in entries[max(0, in_lake - 3) :]]
    hot = number_hot(_state(entries), _boundary(entries, in_lake), reversed(hot_records))
    lake = entries[:in_lake]
    # WHEN a client pages from the newest, following the cursors
    request = PageRequest("w", limit=limit)
    shown: list[HistoryEntry] = []
    while True:
        below = request.before or len(entries) + 1
        page = page_of(request, hot, [e for e in reversed(lake) if e.version < below][:limit])
        shown += page
        cursor = next_cursor(request, page)
        if cursor is None:
            break
        request = from_cursor(cursor, PageRequest("w", limit=limit))
    # THEN every entry once, newest first, exactly as the ledger has it
    assert shown == list(reversed(entries))


@given(histories(), st.data())
def test_a_missing_hot_record_is_a_gap_never_a_renumbered_history(
    history: tuple[list[HistoryEntry], int], data: st.DataObject
) -> None:
    entries, in_lake = history
    after = entries[in_lake:]
    if not after:
        return
    lost = data.draw(st.sampled_from(after))
    movements = [_movement(entry) for entry in after if entry is not lost]
    with pytest.raises(HistoryGap):
        number_hot(_state(entries), _boundary(entries, in_lake), movements)


def test_hot_entries_that_do_not_lead_to_the_lakes_balance_are_refused() -> None:
    entries = _ledger([5, 7, 9])
    wrong = Boundary(1, entries[0].created_at_ms, entries[0].balance_after + 1)
    with pytest.raises(HistoryInconsistentError):
        number_hot(_state(entries), wrong, [_movement(entry) for entry in entries[1:]])


def test_a_cursor_refuses_another_wallet_or_range_and_garbage() -> None:
    entries = _ledger([1, 1, 1])
    request = PageRequest("w", limit=1, since_ms=0, until_ms=10**9)
    cursor = next_cursor(request, list(reversed(entries))[:1])
    assert cursor is not None
    assert from_cursor(cursor, PageRequest("w", limit=1)).before == 3
    for other in (PageRequest("v", limit=1), PageRequest("w", limit=1, since_ms=5)):
        with pytest.raises(CursorError):
            from_cursor(cursor, other)
    with pytest.raises(CursorError):
        from_cursor("bm90IGpzb24", PageRequest("w"))
