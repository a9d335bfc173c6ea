"""The DynamoDB table ``walletlake-owners``: which wallets each person owns, for ``GET …/wallets/me/``.

One item per wallet that has an owner, key (``owner``, ``wallet_id``), put in the wallet's own
creation transaction (:func:`wallet.write_requests.create_wallet_request`), so a wallet and its
index entry exist together or not at all. A table of its own rather than a global secondary
index of ``wallets``:

- a Query of a table is strongly consistent: a wallet created a moment ago is listed at once,
  where an index would lag behind it;
- DynamoDB Local's TTL sweep never deletes the expired items of a table that has a global
  secondary index (checked: a plain table emptied in 10 s, the same with an index kept its items
  for 4 minutes), and the hot window of ``wallets`` is TTL;
- it has no stream and no TTL: an owner never changes and a wallet is never deleted.

The local stack and the CDK app create it from :data:`OWNERS_TABLE`.
"""

from __future__ import annotations

from typing import Final

from contracts.wallets_table import Attr, KeyAttribute, TableSpec

#: The person owning the wallet (:attr:`contracts.wallets_table.Attr.OWNER`'s value).
OWNER: Final = Attr.OWNER
#: The wallet's id, the sort key: one owner's wallets are one item collection.
WALLET_ID: Final = Attr.WALLET_ID
#: When the wallet was created (epoch ms): ``me/`` lists the oldest first, as seed 000's ``wallet``.
CREATED_AT: Final = Attr.CREATED_AT

OWNERS_TABLE: Final = TableSpec(partition_key=OWNER, sort_key=KeyAttribute(WALLET_ID))


def owner_item(owner: str, wallet_id: str, created_at_ms: int) -> dict[str, dict[str, str]]:
    """The index entry of ``owner``'s wallet, as DynamoDB JSON."""
    return {
        OWNER: {"S": owner},
        WALLET_ID: {"S": wallet_id},
        CREATED_AT: {"N": str(created_at_ms)},
    }
