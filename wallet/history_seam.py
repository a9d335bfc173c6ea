"""Where a wallet's history changes hands from DynamoDB to the lake, decided by version: pure, no I/O.

A wallet's entries are exactly versions 1..``version`` of its item, time strictly increasing with
version (docs/architecture.md). The lake holds a prefix of them, up to its newest version for the
wallet (the *boundary*, read from the same lake snapshot that serves the page). Every entry after
the boundary comes from the hot store: the idempotency records of the wallet's movements (kept
three days, far past the lake's lag), read through the records' indexes between the boundary's
time and the item's ``updated_at``. The hot movements carry no version and no balance: they are
numbered down from the item's version and balance, and the walk must land exactly on the lake's
balance at the boundary. So no entry is missing or repeated at the seam, whatever TTL deletes and
however far the consumer lags; when the hot store cannot account for every version after the
boundary (an index lagging its table, the lake more than three days behind), the page is refused
as not yet answerable (:class:`HistoryGap`), never answered with a hole.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Final

from contracts.history_entry import Boundary, HistoryEntry

#: The largest page a caller may ask for, and the page when none is asked for.
MAX_PAGE: Final = 200
DEFAULT_PAGE: Final = 50


@dataclasses.dataclass(frozen=True, slots=True)
class WalletState:
    """The wallet item as one consistent read found it: its count of entries, balance and times."""

    wallet_id: str
    version: int
    balance: int
    updated_at_ms: int
    created_at_ms: int


@dataclasses.dataclass(frozen=True, slots=True)
class Movement:
    """One entry of a wallet as the hot store knows it: everything but its version and balance after."""

    txn_id: str
    created_at_ms: int
    nonce: str
    txn_type: str
    direction: str
    amount: int
    delta: int
    counterparty: str | None
    initiated_by: str | None


class HistoryGap(Exception):  # noqa: N818 - a condition of the data, answered 503, not a bug
    """The hot store does not (yet) account for every version after the lake's boundary."""

    def __init__(self, wallet_id: str, expected: int, found: int) -> None:
        self.expected, self.found = expected, found
        super().__init__(
            f"wallet {wallet_id}: {expected} entries are newer than the lake, {found} found in DynamoDB"
        )


class HistoryInconsistentError(Exception):
    """The hot entries do not walk from the item's balance to the lake's: a defect, never answered."""


def number_hot(state: WalletState, boundary: Boundary, movements: Iterable[Movement]) -> list[HistoryEntry]:
    """The entries after the boundary, newest first, numbered down from the wallet item.

    Raises
    ------
    HistoryGap
        Fewer (or more) movements than versions after the boundary.
    HistoryInconsistentError
        Their deltas do not lead from the item's balance to the lake's at the boundary.

    Examples
    --------
    >>> state = WalletState("w", 3, 7, 30, 1)
    >>> hot = [Movement("t3", 30, "n3", "deposit", "credit", 2, 2, None, None),
    ...        Movement("t2", 20, "n2", "deposit", "credit", 4, 4, None, None)]
    >>> [(e.version, e.balance_after) for e in number_hot(state, Boundary(1, 10, 1), hot)]
    [(3, 7), (2, 5)]
    """
    newer = sorted(
        (m for m in movements if boundary.created_at_ms < m.created_at_ms <= state.updated_at_ms),
        key=lambda m: m.created_at_ms,
        reverse=True,
    )
    expected = state.version - boundary.version
    if len(newer) != expected:
        raise HistoryGap(state.wallet_id, expected, len(newer))
    entries, balance = [], state.balance
    for offset, movement in enumerate(newer):
        entries.append(
            HistoryEntry(
                version=state.version - offset,
                created_at_ms=movement.created_at_ms,
                txn_id=movement.txn_id,
                nonce=movement.nonce,
                txn_type=movement.txn_type,
                direction=movement.direction,
                amount=movement.amount,
                delta=movement.delta,
                counterparty=movement.counterparty,
                balance_after=balance,
                initiated_by=movement.initiated_by,
            )
        )
        balance -= movement.delta
    if balance != boundary.balance_after:
        raise HistoryInconsistentError(
            f"wallet {state.wallet_id}: DynamoDB's entries after version {boundary.version} lead to "
            f"balance {balance}, the lake has {boundary.balance_after}"
        )
    return entries


@dataclasses.dataclass(frozen=True, slots=True)
class PageRequest:
    """What one call asks: entries at or after ``since_ms`` and before ``until_ms``, below ``before``."""

    wallet_id: str
    limit: int = DEFAULT_PAGE
    since_ms: int | None = None
    until_ms: int | None = None
    #: only versions below this one (the cursor's); None: from the newest
    before: int | None = None
    #: the time of the entry at ``before`` (its older neighbours are at or before its day)
    before_ms: int | None = None

    def admits(self, entry: HistoryEntry) -> bool:
        """Whether the entry belongs on this page's side of the cursor and in its time range."""
        return (
            (self.before is None or entry.version < self.before)
            and (self.since_ms is None or entry.created_at_ms >= self.since_ms)
            and (self.until_ms is None or entry.created_at_ms < self.until_ms)
        )


def page_of(
    request: PageRequest, hot: Sequence[HistoryEntry], lake: Sequence[HistoryEntry]
) -> list[HistoryEntry]:
    """The page: admitted entries of both sides, newest first, at most ``limit``; each version once.

    The sides never overlap (hot is above the boundary, lake at or below it); a version on both
    would be a defect, so it is refused rather than shown twice.
    """
    chosen = [entry for entry in (*hot, *lake) if request.admits(entry)]
    chosen.sort(key=lambda entry: entry.version, reverse=True)
    versions = [entry.version for entry in chosen]
    if len(set(versions)) != len(versions):
        raise HistoryInconsistentError(
            f"wallet {request.wallet_id}: a version is both in DynamoDB and the lake"
        )
    return chosen[: request.limit]


def next_cursor(request: PageRequest, page: Sequence[HistoryEntry]) -> str | None:
    """The cursor after a full page whose oldest entry is not the wallet's first; None at the end."""
    if len(page) < request.limit or not page or page[-1].version <= 1:
        return None
    oldest = page[-1]
    if request.since_ms is not None and oldest.created_at_ms <= request.since_ms:
        return None
    fields = [request.wallet_id, oldest.version, oldest.created_at_ms, request.since_ms, request.until_ms]
    return base64.urlsafe_b64encode(json.dumps(fields, separators=(",", ":")).encode()).decode().rstrip("=")


class CursorError(ValueError):
    """A cursor this API did not make for this wallet and range."""


def from_cursor(cursor: str, request: PageRequest) -> PageRequest:
    """``request`` continued after ``cursor``: the same wallet and range, below its version.

    A cursor names the version its page ended at, immutable forever, so a later page is the same
    whatever was written since (new entries are above it) and whatever moved from DynamoDB to
    the lake meanwhile.
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        wallet, before, before_ms, since, until = json.loads(raw)
    except (ValueError, TypeError) as error:
        raise CursorError("cursor is not one this API made") from error
    if wallet != request.wallet_id or not isinstance(before, int) or not isinstance(before_ms, int):
        raise CursorError("cursor belongs to another wallet")
    if (request.since_ms, request.until_ms) not in ((None, None), (since, until)):
        raise CursorError("cursor was made for another time range: repeat the range or leave it out")
    return dataclasses.replace(request, since_ms=since, until_ms=until, before=before, before_ms=before_ms)
