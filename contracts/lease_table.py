"""The compaction lease's DynamoDB table (:mod:`lake.compaction_lease`): its key and its items.

The local stack and the CDK app create the table from :data:`LEASE_TABLE`; the lease reads and
writes its items with these attribute names.
"""

from __future__ import annotations

from typing import Final

from contracts.wallets_table import TableSpec

LEASE_KEY: Final = "lease"
EXPIRES_AT: Final = "expires_at"
OWNER: Final = "owner"
ACQUIRED_AT: Final = "acquired_at"

#: The lease table: one item per lease, removed by TTL after expiry if nobody deleted it.
LEASE_TABLE: Final = TableSpec(partition_key=LEASE_KEY, ttl_attribute=EXPIRES_AT)

#: The one lease both compaction runs take (one at a time for the whole lake, not per day: the
#: hourly run spans two days after midnight, and the nightly compaction step takes minutes).
COMPACTION_LEASE: Final = "compaction"
