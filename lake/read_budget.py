"""The snapshot's pace: a token bucket in read units, shared by the scan's segments.

Its own module, without the scan (boto3, pyarrow), so that ``walletlake snapshot --help`` can say
the default rate without loading them. Why the bucket and why this rate: :mod:`lake.snapshots`,
"Not disturbing the write path".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

#: Read units per second the snapshot may consume (see :mod:`lake.snapshots`).
DEFAULT_MAX_READ_UNITS_PER_SECOND: Final = 1000.0


class ReadBudget:
    """A token bucket in read units, shared by the scanning threads.

    Charging after the fact (a page's cost is known only from its response) lets the balance go
    negative; the caller then sleeps until it is back to zero, so the long-run rate never exceeds
    ``rate`` and bursts never exceed ``burst``.
    """

    def __init__(
        self,
        rate: float,
        *,
        burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError("the read rate must be positive")
        self.rate = rate
        self.burst = rate if burst is None else burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.burst
        self._last = clock()
        self._lock = threading.Lock()
        self.waited = 0.0

    def charge(self, units: float) -> float:
        """Spend ``units``; sleeps while the bucket is overdrawn and returns the seconds slept."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            self._tokens -= units
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
            self.waited += wait
        if wait > 0:
            self._sleep(wait)
        return wait
