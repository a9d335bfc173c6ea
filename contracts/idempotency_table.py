"""The DynamoDB table of idempotency records: its key, its TTL, and the shape of a record.

One record per request (deposit or transfer), put in the same TransactWriteItems as the movement
(a transaction spans tables at the same cost per item), kept for the idempotency window
(``WALLETLAKE_IDEMPOTENCY_WINDOW_SECONDS``). A table of its own, not items of ``wallets``:

- it has **no stream**, so the two stream records a record would make on ``wallets`` (its INSERT
  and its TTL REMOVE two days later) never reach the consumer Lambda, which is billed per
  invocation and per record it is handed;
- the nightly snapshot's Scan of ``wallets`` does not read two days of records (about 1.3 TB at the
  seed's load by ``bench/capacity.py``), only 8 hours of transaction items and the wallets.

The write path builds records from this module, the local stack and the CDK app create the table
from :data:`IDEMPOTENCY_TABLE`.
"""

from __future__ import annotations

from typing import Final

from contracts.wallets_table import PARTITION_KEY, TTL_ATTRIBUTE, Attr, TableSpec

#: A record's TTL attribute: the end of its window in epoch seconds (rounded up). A record past it
#: that TTL has not deleted yet counts as gone (``attribute_not_exists(pk) OR expires_at <= :now``).
EXPIRES_AT: Final = TTL_ATTRIBUTE

#: No stream (nothing reads the records' changes), TTL on ``expires_at``.
IDEMPOTENCY_TABLE: Final = TableSpec(partition_key=PARTITION_KEY, ttl_attribute=EXPIRES_AT)

#: What a record holds: the request's fingerprint and its outcome, all a replay and
#: ``GET .../transactions/{nonce}`` answer with (``to_wallet_id`` only for transfers). The names are
#: the wallets table's (:class:`contracts.wallets_table.Attr`): a record and a hot transaction item
#: are read by the same code (:func:`wallet.receipts.receipt_of`).
IDEMPOTENCY_ATTRIBUTES: Final = (
    Attr.PK,
    Attr.WALLET_ID,
    Attr.NONCE,
    Attr.REQUEST_HASH,
    Attr.TXN_ID,
    Attr.TYPE,
    Attr.AMOUNT,
    Attr.TO_WALLET_ID,
    Attr.CREATED_AT,
    EXPIRES_AT,
    Attr.INITIATED_BY,
)


def idempotency_key(wallet_id: str, nonce: str) -> str:
    """``{wallet_id}_{nonce}``: the record of the wallet's request with ``nonce``.

    Nonces are per addressed wallet (deposits and transfers share them), so the pair is the key;
    the table holds nothing else, so the key needs no entity suffix.

    Examples
    --------
    >>> idempotency_key("w", "n-1")
    'w_n-1'
    """
    return f"{wallet_id}_{nonce}"
