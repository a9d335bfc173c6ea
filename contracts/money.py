"""Money as the whole system counts it: integer micro-USD, and the limits every layer enforces.

docs/architecture.md, "Money": an amount is 1 ≤ amount ≤ 10^15 micro-USD and a balance stays in
0 ≤ balance ≤ 9 x 10^18 (int64 with headroom). The write path refuses what breaks them before
DynamoDB sees it; the stream decoder refuses (quarantines) stream values that break them, because
a row outside them cannot have come from the write path. Both read the limits here, so the two can
never disagree about what a valid movement is.
"""

from __future__ import annotations

import re
from typing import Final

MICRO_USD_PER_USD: Final = 1_000_000
MIN_AMOUNT: Final = 1
MAX_AMOUNT: Final = 10**15
MAX_BALANCE: Final = 9 * 10**18

#: A DynamoDB number as the write path writes integers: optional minus, digits, nothing else (no
#: exponent, no fraction, no surrounding space), so a text that matches converts to ``int`` exactly.
INTEGER_TEXT: Final = re.compile(r"-?[0-9]+\Z")
