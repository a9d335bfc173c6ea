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

from contracts.wallets_table import (
    PARTITION_KEY,
    TTL_ATTRIBUTE,
    Attr,
    IndexSpec,
    KeyAttribute,
    TableSpec,
    caller_tag,
)

#: A record's TTL attribute, epoch seconds: the end of its window plus :data:`TTL_MARGIN_SECONDS`.
#: A record is put only where none exists (``attribute_not_exists(pk)``), whatever any clock says,
#: so a nonce is executed at most once while its record exists; TTL's deletion frees it.
EXPIRES_AT: Final = TTL_ATTRIBUTE

#: Epoch seconds the request can be replayed until (the idempotency window after its time, rounded
#: up). A repeat after it, while the record still exists, is answered 409 ``nonce_expired``: only
#: the answer depends on a server's clock, never whether the request executes.
WINDOW_ENDS_AT: Final = "window_ends_at"

#: How long a record outlives its window before TTL may delete it: servers' clocks and TTL's own
#: delay (DynamoDB deletes expired items within a few days, not at the second) decide nothing,
#: since a record that still exists is never executed over.
TTL_MARGIN_SECONDS: Final = 86_400

#: What a record says of its request (absent on records written before declines were kept:
#: ``applied``). ``applied``: the movement committed with the record. ``declined``: it was refused
#: (insufficient funds, a missing wallet, the balance limit), nothing moved, and every repeat gets
#: the same refusal. ``void``: an outcome lookup found no record and put this one, so an attempt
#: still in flight can never commit (its condition fails on it): the request did not commit.
OUTCOME: Final = "outcome"
OUTCOME_APPLIED: Final = "applied"
OUTCOME_DECLINED: Final = "declined"
OUTCOME_VOID: Final = "void"
#: A declined record's refusal: the error code answered, and the wallet it names.
REFUSAL: Final = "refusal"
REFUSED_WALLET: Final = "refused_wallet_id"

#: What a wallet's history needs of a record beside the index's keys (:mod:`wallet.history_hot`).
_HISTORY_PROJECTION: Final = (
    Attr.TXN_ID,
    Attr.TYPE,
    Attr.AMOUNT,
    Attr.NONCE,
    Attr.WALLET_ID,
    Attr.TO_WALLET_ID,
    Attr.INITIATED_BY,
    OUTCOME,
)
#: A wallet's requests by time: its deposits and the transfers it paid (the addressed wallet).
BY_WALLET: Final = IndexSpec(
    "by_wallet", KeyAttribute(Attr.WALLET_ID), KeyAttribute(Attr.CREATED_AT, "N"), _HISTORY_PROJECTION
)
#: A wallet's received transfers by time (sparse: only transfers have ``to_wallet_id``).
BY_PAYEE: Final = IndexSpec(
    "by_payee", KeyAttribute(Attr.TO_WALLET_ID), KeyAttribute(Attr.CREATED_AT, "N"), _HISTORY_PROJECTION
)

#: No stream (nothing reads the records' changes), TTL on ``expires_at``. The two indexes are a
#: wallet's recent movements by time, the hot side of ``GET …/transactions`` (the lake has the
#: rest): a record lives the idempotency window and a day (3 days by default), far longer than the
#: lake lags behind, and indexing it costs no action in the movement's transaction (an index is
#: written by DynamoDB, 1 write unit per projected record under 1 KB, not 2 as a transaction's
#: item). Each index partition takes at most 1,000 write units a second: a wallet's item already
#: caps it at 500 transactions a second (2 units each), so no index key is hotter than its wallet.
IDEMPOTENCY_TABLE: Final = TableSpec(
    partition_key=PARTITION_KEY, ttl_attribute=EXPIRES_AT, indexes=(BY_WALLET, BY_PAYEE)
)

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
    WINDOW_ENDS_AT,
    OUTCOME,
    REFUSAL,
    REFUSED_WALLET,
)


def idempotency_key(wallet_id: str, nonce: str, principal: str | None) -> str:
    """``{wallet_id}_{nonce}_{caller}``: the record of ``principal``'s request to the wallet with ``nonce``.

    Nonces are per caller and addressed wallet (deposits and transfers share them): two callers'
    requests with one nonce are two requests, and one caller's lookup can never void another's
    nonce. The caller is :func:`contracts.wallets_table.caller_tag` (fixed length: the key stays
    unambiguous, ``_`` in a nonce included); the table holds nothing else, so no entity suffix.

    Examples
    --------
    >>> idempotency_key("w", "n-1", "local") == "w_n-1_" + caller_tag("local")
    True
    """
    return f"{wallet_id}_{nonce}_{caller_tag(principal)}"
