"""This process's memory of the nonces it is writing and has just written.

A client that repeats a request (same nonce, same body) is most often repeating one this very
process is still writing, or wrote a moment ago: it timed out, or its answer was slow. Sent to
DynamoDB, such a repeat can only be refused by the nonce's condition, and in a group commit
(:mod:`wallet.commit_queue`) that refusal cancels everyone else's transaction once. Remembered
here, it costs DynamoDB nothing:

- a repeat of a nonce *in flight* waits for the first request's outcome, then is answered as a
  replay of it; if the first was refused (no money moved, the nonce unused) or its outcome is
  unknown, the repeat goes to DynamoDB like any request, where the nonce's condition decides;
- a repeat of a nonce *written recently* is answered from the outcome kept here, a replay of the
  movement or of its refusal (or 409 ``idempotency_key_reused`` for another body or caller),
  exactly as the idempotency record would answer.

Why it cannot answer differently from DynamoDB: an outcome is kept only once DynamoDB committed
the request's idempotency record (applied, or declined) or returned it (replayed), and the record
then exists at least until the end of its window. The memory forgets the nonce at that end, so
within the window the answer is the record's and after it DynamoDB's record answers (409
``nonce_expired`` while it exists). Other processes do not see this memory
and need not: they ask DynamoDB, which holds the same record.

The memory is bounded (:data:`RECENT_KEPT` outcomes, oldest forgotten first); a forgotten nonce
costs only the DynamoDB round trip it would have cost without the memory.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from typing import Final

from wallet.outcomes import Decline
from wallet.receipts import Receipt

#: Outcomes kept per process. A transfer's receipt with its key and hash is about 680 bytes in
#: CPython (measured with tracemalloc over 10,000 of them), so this is about 34 MB of a task's
#: 4 GiB; at 500 writes/s per process it covers the last 100 s, when clients retry a slow answer.
RECENT_KEPT: Final = 50_000


@dataclasses.dataclass(frozen=True, slots=True)
class Remembered:
    """A nonce's outcome as its record holds it (a receipt, or a refusal), until its window ends."""

    receipt: Receipt | Decline
    request_hash: str
    until: int


class NonceMemory:
    """Nonces in flight in this process, and the outcomes of the ones it wrote recently.

    Keys are idempotency keys (``{wallet_id}_{nonce}_{caller}``). Not thread-safe: one event loop uses it.
    """

    def __init__(self, kept: int = RECENT_KEPT) -> None:
        if kept < 1:
            raise ValueError("kept must be at least 1")
        self._kept = kept
        self._recent: collections.OrderedDict[str, Remembered] = collections.OrderedDict()
        self._in_flight: dict[str, asyncio.Future[None]] = {}

    def __len__(self) -> int:
        return len(self._recent)

    def recall(self, key: str, now_s: int) -> Remembered | None:
        """The nonce's outcome, while its record lives (``until`` after ``now_s``); else None."""
        remembered = self._recent.get(key)
        if remembered is None:
            return None
        if remembered.until <= now_s:  # the record's window is over: the nonce is forgotten
            del self._recent[key]
            return None
        return remembered

    def remember(self, key: str, remembered: Remembered) -> None:
        """Keep an outcome DynamoDB holds (applied, or its record read back) until ``until``."""
        self._recent.pop(key, None)
        self._recent[key] = remembered
        while len(self._recent) > self._kept:
            self._recent.popitem(last=False)

    def in_flight(self, key: str) -> asyncio.Future[None] | None:
        """Done when the request writing this nonce in this process has its outcome; None if none."""
        return self._in_flight.get(key)

    def begin(self, key: str) -> None:
        """This process starts writing the nonce (callers first wait out :meth:`in_flight`)."""
        if key in self._in_flight:
            raise RuntimeError(f"nonce {key} is already being written by this process")
        self._in_flight[key] = asyncio.get_running_loop().create_future()

    def end(self, key: str) -> None:
        """The write of the nonce has its outcome (kept by :meth:`remember` if it moved money)."""
        future = self._in_flight.pop(key, None)
        if future is not None and not future.done():
            future.set_result(None)
