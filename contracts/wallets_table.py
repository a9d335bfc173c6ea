"""The DynamoDB table ``wallets``: its key, stream and TTL, and the shape of every item in it.

This module is the single definition of the table contract in docs/architecture.md. The write path
builds items from it, the stream decoder reads them with it, and the local stack and the CDK app
create the table from :data:`WALLETS_TABLE`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from typing import Final, Literal

PARTITION_KEY: Final = "pk"
TTL_ATTRIBUTE: Final = "expires_at"
STREAM_VIEW_TYPE: Final = "NEW_AND_OLD_IMAGES"

ENTITY_WALLET: Final = "wallet"
ENTITY_USER: Final = "user"
ENTITY_TRANSACTION: Final = "transaction"
# an idempotency record's entity (issue 27). Records live in a table of their own
# (:mod:`contracts.idempotency_table`, no stream), so none reaches this table's stream; should one
# appear, it makes no lake row (the decoder ignores and counts it)
ENTITY_IDEMPOTENCY: Final = "idempotency"

TXN_DEPOSIT: Final = "deposit"
TXN_TRANSFER: Final = "transfer"

DIRECTION_DEBIT: Final = "debit"
DIRECTION_CREDIT: Final = "credit"


class Attr:
    """Attribute names of the items; one spelling, imported everywhere."""

    PK: Final = PARTITION_KEY
    ENTITY: Final = "entity"
    # wallet item
    WALLET_ID: Final = "wallet_id"
    USER_ID: Final = "user_id"
    #: who owns the wallet: the person of the verified principal that created it, or the owner a
    #: caller granted ``create_wallet:any`` named (issue 44); absent on wallets of before owners
    OWNER: Final = "owner"
    BALANCE: Final = "balance"
    VERSION: Final = "version"
    CREATED_AT: Final = "created_at"
    UPDATED_AT: Final = "updated_at"
    # wallet item: the ledger entry of its latest movement (its stream MODIFY is that entry; the
    # entry's time is UPDATED_AT, its version and balance after are VERSION and BALANCE)
    ENTRY_TXN_ID: Final = "entry_txn_id"
    ENTRY_TYPE: Final = "entry_type"
    ENTRY_DIRECTION: Final = "entry_direction"
    ENTRY_AMOUNT: Final = "entry_amount"
    ENTRY_COUNTERPARTY: Final = "entry_counterparty_wallet_id"
    ENTRY_NONCE: Final = "entry_nonce"
    # the verified principal that asked for the entry's movement (wallet.principals); absent when
    # none was known (and on every entry written before attribution existed)
    ENTRY_INITIATED_BY: Final = "entry_initiated_by"
    # wallet item: when one transaction applied several entries to the wallet (a group commit,
    # see wallet.commit_queue), the ones before the latest, oldest first, as maps of EntryKey;
    # absent when it applied one. The MODIFY is then len + 1 entries, versions OLD+1 .. NEW.
    ENTRIES_BEFORE: Final = "entries_before"
    # transaction item
    TXN_ID: Final = "txn_id"
    TYPE: Final = "type"
    TO_WALLET_ID: Final = "to_wallet_id"
    # transaction item and idempotency record: who asked (absent when unknown)
    INITIATED_BY: Final = "initiated_by"
    AMOUNT: Final = "amount"
    NONCE: Final = "nonce"
    REQUEST_HASH: Final = "request_hash"
    # transaction items written by the compare-and-swap write path (before the single-write path)
    # also carried each touched wallet's version and balance after; the decoder still reads them
    WALLET_VERSION: Final = "wallet_version"
    WALLET_BALANCE_AFTER: Final = "wallet_balance_after"
    TO_WALLET_VERSION: Final = "to_wallet_version"
    TO_WALLET_BALANCE_AFTER: Final = "to_wallet_balance_after"
    EXPIRES_AT: Final = TTL_ATTRIBUTE


class EntryKey:
    """Keys of one map in :attr:`Attr.ENTRIES_BEFORE`: an entry as the ``entry_*`` attributes state it."""

    TXN_ID: Final = "txn_id"
    TYPE: Final = "type"
    DIRECTION: Final = "direction"
    AMOUNT: Final = "amount"
    NONCE: Final = "nonce"
    COUNTERPARTY: Final = "counterparty_wallet_id"
    CREATED_AT: Final = "created_at"
    INITIATED_BY: Final = "initiated_by"


@dataclasses.dataclass(frozen=True, slots=True)
class EntryField:
    """One field of a ledger entry, in every place it is said.

    The write path sets :attr:`attribute` on the wallet item (through the update expression's
    :attr:`name` and :attr:`value` placeholders) and :attr:`key` in an ``entries_before`` map; the
    decoder reads them back into the ledger's :attr:`column`.
    """

    column: str
    attribute: str
    key: str
    type_tag: Literal["S", "N"]
    #: An optional field is absent (removed from the item, left out of a map) when it has no value.
    required: bool
    name: str
    value: str


#: A ledger entry as a wallet item states it: the one list the write path's update expression and
#: ``entries_before`` maps, the decoder's rows and the export backfill's images are made from. The
#: entry's time is the item's ``updated_at`` (also the clock condition's); its version and balance
#: after are the item's own ``version`` and ``balance`` (its ``ADD``), so they are not entry fields.
#: A new field is one line here (optional, so entries written before it still decode) and a
#: nullable column of :data:`contracts.lake_tables.LEDGER`.
ENTRY_FIELDS: Final[tuple[EntryField, ...]] = (
    EntryField("txn_id", Attr.ENTRY_TXN_ID, EntryKey.TXN_ID, "S", True, "#tx", ":txn"),
    EntryField("txn_type", Attr.ENTRY_TYPE, EntryKey.TYPE, "S", True, "#ty", ":type"),
    EntryField("direction", Attr.ENTRY_DIRECTION, EntryKey.DIRECTION, "S", True, "#dir", ":dir"),
    EntryField("amount", Attr.ENTRY_AMOUNT, EntryKey.AMOUNT, "N", True, "#amt", ":amt"),
    EntryField("nonce", Attr.ENTRY_NONCE, EntryKey.NONCE, "S", True, "#no", ":nonce"),
    EntryField("created_at", Attr.UPDATED_AT, EntryKey.CREATED_AT, "N", True, "#u", ":now"),
    EntryField(
        "counterparty_wallet_id", Attr.ENTRY_COUNTERPARTY, EntryKey.COUNTERPARTY, "S", False, "#cp", ":cp"
    ),
    EntryField("initiated_by", Attr.ENTRY_INITIATED_BY, EntryKey.INITIATED_BY, "S", False, "#by", ":by"),
)


def wallet_key(wallet_id: str) -> str:
    """``{wallet_id}#wallet``: the wallet item, partitioned by wallet as seed 000 prescribes."""
    return f"{wallet_id}#{ENTITY_WALLET}"


def user_key(user_id: str) -> str:
    """``{user_id}#user``: the claim that makes "one wallet per client" a conditional write."""
    return f"{user_id}#{ENTITY_USER}"


@functools.lru_cache(maxsize=4_096)
def caller_tag(principal: str | None) -> str:
    """The caller in a request's keys: 32 hex digits of the principal's SHA-256 (None: no one's).

    Nonces are the caller's own (issue 44): one caller's request or lookup never decides another's,
    so every key a request is stored under names its caller. A digest, not the principal: fixed
    length (a key stays parseable whatever the principal holds, ``#`` and ``_`` included, and far
    under DynamoDB's 2,048 bytes), and nobody's identity in a key. Remembered for the latest
    callers: one request names its caller in up to five keys, and the digest never changes.

    Examples
    --------
    >>> len(caller_tag(None)), caller_tag("a") == caller_tag("b")
    (32, False)
    """
    return hashlib.sha256((principal or "").encode()).hexdigest()[:32]


def transaction_key(wallet_id: str, nonce: str, principal: str | None) -> str:
    """``{wallet_id}_{nonce}_{caller}#transaction``: the request's hot transaction item (the hot TTL)."""
    return f"{wallet_id}_{nonce}_{caller_tag(principal)}#{ENTITY_TRANSACTION}"


@dataclasses.dataclass(frozen=True, slots=True)
class KeyAttribute:
    """One key attribute of a table or an index: its name and its DynamoDB type (``S`` or ``N``)."""

    name: str
    type: str = "S"


@dataclasses.dataclass(frozen=True, slots=True)
class IndexSpec:
    """A global secondary index: its keys and the attributes it projects beside them (INCLUDE)."""

    name: str
    partition_key: KeyAttribute
    sort_key: KeyAttribute
    projected: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class TableSpec:
    """What it takes to create a DynamoDB table: its string hash key, and optionally a sort key,
    a stream, a TTL and global secondary indexes. The local stack and the CDK app read only this."""

    partition_key: str
    stream_view_type: str | None = None
    ttl_attribute: str | None = None
    sort_key: KeyAttribute | None = None
    indexes: tuple[IndexSpec, ...] = ()

    @property
    def key_attributes(self) -> tuple[KeyAttribute, ...]:
        """Every attribute a key of the table or of an index holds, each once (its definitions)."""
        keys = [KeyAttribute(self.partition_key), *([self.sort_key] if self.sort_key else [])]
        for index in self.indexes:
            keys += [index.partition_key, index.sort_key]
        return tuple(dict.fromkeys(keys))


#: The ledger's hot store. Streams carry both images so TTL expiries arrive with the expired item.
WALLETS_TABLE: Final = TableSpec(
    partition_key=PARTITION_KEY, stream_view_type=STREAM_VIEW_TYPE, ttl_attribute=TTL_ATTRIBUTE
)
