"""A wallet's history, every entry ever, newest first: DynamoDB after the lake's boundary, the lake up to it.

One page is answered from one consistent read of the wallet item, one snapshot of the lake's
ledger and the hot records between the two (:mod:`wallet.history_seam` says why no entry is
missing or repeated). The lake is read in a worker thread (pyiceberg is synchronous), DynamoDB on
the event loop. The lake reader comes from the application (``walletlake``), which may import the
lake; the wallet package may not (the layers in pyproject.toml).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import math
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from contracts.history_entry import Boundary, HistoryEntry
from contracts.wallets_table import Attr, wallet_key
from wallet.errors import HistoryUnavailableError, LakeNeededError, WalletNotFoundError
from wallet.history_hot import recent_movements
from wallet.history_seam import HistoryGap, PageRequest, WalletState, next_cursor, number_hot, page_of
from wallet.store import WalletStore

#: How long a page waits for the records' indexes to catch up with a movement just committed
#: (an index is eventually consistent; typically well under a second), polling every
#: :data:`INDEX_POLL_SECONDS`, before it is refused as not yet answerable.
INDEX_WAIT_SECONDS: Final = 2.0
INDEX_POLL_SECONDS: Final = 0.05


class LakeEntries(Protocol):
    """What the history needs of the lake's ledger (:class:`lake.ledger_history.LakeLedger`)."""

    def table(self, *, fresh: bool = False) -> Any:
        """The ledger at a recent snapshot (every read of one page goes through the same one);
        None while the lake has no ledger yet (a new deployment before its first commit)."""
        ...

    def newest(
        self,
        wallet_id: str,
        *,
        limit: int,
        below: int | None,
        newest_day: datetime.date,
        oldest_day: datetime.date,
        admits: Callable[[HistoryEntry], bool] = ...,
        table: Any = None,
        first_width: int = 1,
    ) -> list[HistoryEntry]:
        """The wallet's newest admitted entries below a version, newest first."""
        ...

    def entry(self, wallet_id: str, txn_id: str) -> HistoryEntry | None:
        """The wallet's entry of one transaction."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class Page:
    """One answer: the entries, the cursor of the next page (None: the last), and what it cannot show."""

    entries: list[HistoryEntry]
    next_cursor: str | None
    #: what the page cannot show, when the walk ended before the wallet's version 1: its first
    #: entries are older than the lake's first day (kept nowhere any more)
    note: str | None = None

    def document(self, wallet_id: str) -> dict[str, Any]:
        """The page's JSON."""
        body: dict[str, Any] = {
            "wallet_id": wallet_id,
            "entries": [entry.document() for entry in self.entries],
            "next_cursor": self.next_cursor,
        }
        if self.note is not None:
            body["note"] = self.note
        return body


class WalletHistory:
    """Pages of a wallet's history and its entries by transaction id."""

    def __init__(
        self, store: WalletStore, lake: LakeEntries | None, *, clock_ms: Callable[[], int] | None = None
    ) -> None:
        self.store = store
        self.lake = lake
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)

    async def page(self, request: PageRequest) -> Page:
        """The page ``request`` asks for (module doc)."""
        state = await self._state(request.wallet_id)
        if state.version == 0:
            return Page([], None)
        table = await asyncio.to_thread(self.lake.table) if self.lake is not None else None
        newest_lake: list[HistoryEntry] = []
        if request == PageRequest(request.wallet_id, limit=request.limit) and table is not None:
            # a first page of no range: the lake's newest entries are its boundary and its page, one walk
            newest_lake = await self._newest_in_lake(state, table, request.limit)
            boundary = _boundary_of(newest_lake)
        else:
            boundary = await self._boundary(state, table)
        below_boundary = request.before is not None and request.before <= boundary.version + 1
        # a page wholly at or below the boundary shows no hot entry: DynamoDB is not asked
        hot = [] if below_boundary else await self._hot(state, boundary)
        wanted = request.limit - sum(1 for entry in hot if request.admits(entry))
        below = min(request.before or state.version + 1, boundary.version + 1)
        lake: list[HistoryEntry] = newest_lake
        if wanted > 0 and below > 1 and self.lake is not None and table is not None and not newest_lake:
            newest_ms = min(
                ms for ms in (request.before_ms, request.until_ms, boundary.created_at_ms) if ms is not None
            )
            lake = await asyncio.to_thread(
                self.lake.newest,
                request.wallet_id,
                limit=wanted,
                below=below,
                newest_day=_day(newest_ms),
                oldest_day=_day(max(state.created_at_ms, request.since_ms or 0)),
                admits=request.admits,
                table=table,
                first_width=_width(state, wanted),
            )
        entries = page_of(request, hot, lake)
        if len(entries) == request.limit:
            return Page(entries, next_cursor(request, entries))
        # the walk reached the wallet's creation (or the range's start): a last page
        if request.since_ms is not None or _before_creation(request, state):
            return Page(entries, None)
        if entries and entries[-1].version > 1:
            note = f"entries before version {entries[-1].version} are older than the lake's first day"
            return Page(entries, None, note=f"{note} and are kept nowhere")
        if not entries and below > 1:
            note = "none of the wallet's entries in this range is in the lake: the lake began after them"
            return Page(entries, None, note=f"{note}, and they are kept nowhere")
        return Page(entries, None)

    async def entry(self, wallet_id: str, txn_id: str) -> HistoryEntry | None:
        """The wallet's entry of ``txn_id`` (None: the wallet has none); DynamoDB first, then the lake."""
        state = await self._state(wallet_id)
        table = await asyncio.to_thread(self.lake.table) if self.lake is not None else None
        boundary = await self._boundary(state, table)
        for entry in await self._hot(state, boundary):
            if entry.txn_id == txn_id:
                return entry
        if self.lake is None or boundary.version == 0:
            return None
        return await asyncio.to_thread(self.lake.entry, wallet_id, txn_id)

    async def _state(self, wallet_id: str) -> WalletState:
        item = await self.store.calls.get(self.store.table, {Attr.PK: {"S": wallet_key(wallet_id)}})
        if item is None:
            raise WalletNotFoundError(wallet_id)
        return WalletState(
            wallet_id=wallet_id,
            version=int(item[Attr.VERSION]["N"]),
            balance=int(item[Attr.BALANCE]["N"]),
            updated_at_ms=int(item[Attr.UPDATED_AT]["N"]),
            created_at_ms=int(item[Attr.CREATED_AT]["N"]),
        )

    async def _boundary(self, state: WalletState, table: Any) -> Boundary:
        if self.lake is None or table is None:
            return Boundary()
        return _boundary_of(await self._newest_in_lake(state, table, 1))

    async def _newest_in_lake(self, state: WalletState, table: Any, limit: int) -> list[HistoryEntry]:
        """The lake's newest ``limit`` entries of the wallet: none is newer than the item's
        ``updated_at`` (its newest entry's time), so the walk starts on that day."""
        assert self.lake is not None
        return await asyncio.to_thread(
            self.lake.newest,
            state.wallet_id,
            limit=limit,
            below=None,
            newest_day=_day(state.updated_at_ms),
            oldest_day=_day(state.created_at_ms),
            table=table,
            first_width=_width(state, limit),
        )

    async def _hot(self, state: WalletState, boundary: Boundary) -> list[HistoryEntry]:
        """The entries after the boundary, waiting a moment for an index that lags its table."""
        if boundary.version == state.version:
            return []
        deadline = time.monotonic() + INDEX_WAIT_SECONDS
        while True:
            movements = await recent_movements(
                self.store.calls,
                self.store.idempotency_table,
                state.wallet_id,
                boundary.created_at_ms,
                state.updated_at_ms,
            )
            try:
                return number_hot(state, boundary, movements)
            except HistoryGap as gap:
                if time.monotonic() > deadline:
                    if self.lake is None:
                        raise LakeNeededError(state.wallet_id) from gap
                    raise HistoryUnavailableError(str(gap)) from gap
            await asyncio.sleep(INDEX_POLL_SECONDS)


def _boundary_of(newest: list[HistoryEntry]) -> Boundary:
    if not newest:
        return Boundary()
    return Boundary(newest[0].version, newest[0].created_at_ms, newest[0].balance_after)


def _width(state: WalletState, entries: int) -> int:
    """Days the first window spans to hold ``entries`` of the wallet at its average pace (1 to 64):
    one wide scan reads its files in parallel, where narrow ones that double read them in turn."""
    days = max(1.0, (state.updated_at_ms - state.created_at_ms) / 86_400_000)
    per_day = max(state.version / days, 1e-9)
    return max(1, min(64, math.ceil(1.5 * entries / per_day)))


def _before_creation(request: PageRequest, state: WalletState) -> bool:
    return request.until_ms is not None and request.until_ms <= state.created_at_ms


def _day(ms: int) -> datetime.date:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).date()
