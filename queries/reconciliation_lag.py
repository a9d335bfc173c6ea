"""How late a ledger entry may be before the reconciliation calls it missing rather than lagging.

Apart from the rules that apply it (:mod:`queries.reconciliation_rules`, pandas and pyarrow), so
that ``walletlake reconcile --help`` can say the default without loading them.
"""

from __future__ import annotations

from typing import Final

#: One hour: far above the stream's normal delivery delay (Lambda reads DynamoDB Streams within a
#: second; batching windows are at most 5 minutes; retries of a failing batch add minutes), and far
#: below the stream's 24-hour retention, after which an undelivered record is gone: an hour leaves a
#: day to replay it from the table.
DEFAULT_MAX_LAG_SECONDS: Final = 3600
