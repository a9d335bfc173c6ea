"""The DynamoDB requests of the write path, built from postings: pure, no I/O.

A movement is one TransactWriteItems (:func:`transaction_request`): one ``Update`` per touched
wallet carrying its legs, the hot transaction item, and the idempotency record (in its own table,
:mod:`contracts.idempotency_table`). A refusal's record (:func:`declined_record_put`) and an
outcome lookup's void record (:func:`void_record_put`) are plain conditional ``PutItem`` calls of
the same key: every record is put only where none exists (``attribute_not_exists``), so whichever
of a request's attempts, refusal or lookup puts it first decides the nonce for as long as the
record exists, whatever the servers' clocks say.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, Final

from contracts.idempotency_table import (
    OUTCOME,
    OUTCOME_DECLINED,
    OUTCOME_VOID,
    REFUSAL,
    REFUSED_WALLET,
    TTL_MARGIN_SECONDS,
    WINDOW_ENDS_AT,
    idempotency_key,
)
from contracts.owners_table import owner_item
from contracts.wallets_table import (
    ENTITY_TRANSACTION,
    ENTITY_USER,
    ENTITY_WALLET,
    ENTRY_FIELDS,
    Attr,
    transaction_key,
    user_key,
    wallet_key,
)
from wallet.commands import Movement
from wallet.posting import Leg, Posting, WalletWrite, wallet_writes
from wallet.random_ids import random_uuid

_NOT_EXISTS: Final = "attribute_not_exists(#pk)"
#: A hot transaction item is new, or past its hot TTL (the record, not this item, guards the nonce).
_GONE: Final = "attribute_not_exists(#pk) OR #e <= :now"

#: Attribute names go through ``#`` placeholders so none can collide with DynamoDB's reserved words;
#: an entry's are its fields' own (:data:`contracts.wallets_table.ENTRY_FIELDS`).
_ENTRY_NAMES: Final = {
    "#pk": Attr.PK,
    "#b": Attr.BALANCE,
    "#v": Attr.VERSION,
    "#eb": Attr.ENTRIES_BEFORE,
    **{field.name: field.attribute for field in ENTRY_FIELDS},
}
#: The entry's fields every movement sets (the optional ones are set or removed per leg).
_SET_ENTRY: Final = ", ".join(f"{field.name} = {field.value}" for field in ENTRY_FIELDS if field.required)
_OPTIONAL_FIELDS: Final = tuple(field for field in ENTRY_FIELDS if not field.required)
_ADD_MOVEMENT: Final = " ADD #b :delta, #v :count"
_EXISTS: Final = "attribute_exists(#pk)"


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def transaction_request(
    table: str, *postings: Posting, now_s: int | None = None, idempotency_table: str | None = None
) -> dict[str, Any]:
    """TransactWriteItems of postings: one update per touched wallet, the transaction items, the records.

    One posting gives its legs' updates in :attr:`Posting.legs` order, its transaction item and
    its idempotency record (in ``idempotency_table``) last (the order
    :func:`wallet.cancellation.read_cancellation` reads). Several (a group commit) give one update
    per wallet, carrying its legs in posting order, then every transaction item, then every
    record. ``now_s`` (epoch seconds, now when None) judges whether a nonce's earlier items are
    past their time. Without ``idempotency_table`` no record is written: only the items of
    ``table``, whose stream is the ledger (tests that build stream records write so); the store
    always names it. A fresh ``ClientRequestToken`` makes a repeat of this very request (after a
    lost answer) succeed as the first did instead of cancelling.
    """
    now = time.time_ns() // 1_000_000_000 if now_s is None else now_s
    updates = [{"Update": _wallet_update(table, write)} for write in wallet_writes(postings)]
    records = (
        [{"Put": _idempotency_put(idempotency_table, p, now)} for p in postings] if idempotency_table else []
    )
    return {
        "TransactItems": [
            *updates,
            *({"Put": _transaction_put(table, p, now)} for p in postings),
            *records,
        ],
        "ClientRequestToken": random_uuid(),
    }


def _idempotency_put(table: str, posting: Posting, now_s: int) -> dict[str, Any]:
    """The idempotency record: the request's receipt, put only where no record exists.

    It holds the receipt for the window (``window_ends_at``) and lives a margin longer (its TTL,
    ``expires_at``): an existing record is never executed over, whatever ``now_s`` a server's
    clock gives. Its attributes are :data:`contracts.idempotency_table.IDEMPOTENCY_ATTRIBUTES`.
    """
    command = posting.command
    item = _request_item(
        posting,
        idempotency_key(command.wallet_id, command.nonce, command.initiated_by),
        posting.record_expires_at,
    )
    item[WINDOW_ENDS_AT] = _n(posting.remembered_until)
    return record_put(table, item)


def _transaction_put(table: str, posting: Posting, now_s: int) -> dict[str, Any]:
    """The hot transaction item, put only if its key is new or past its hot TTL.

    The record in the same transaction guards the nonce; this item's own condition only keeps a
    hot item of an earlier use from being overwritten while TTL has not deleted it yet.
    """
    command = posting.command
    item = _request_item(
        posting, transaction_key(command.wallet_id, command.nonce, command.initiated_by), posting.expires_at
    )
    item[Attr.ENTITY] = _s(ENTITY_TRANSACTION)
    return {
        "TableName": table,
        "Item": item,
        "ConditionExpression": _GONE,
        "ExpressionAttributeNames": {"#pk": Attr.PK, "#e": Attr.EXPIRES_AT},
        "ExpressionAttributeValues": {":now": _n(now_s)},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def _request_item(posting: Posting, key: str, expires_at: int) -> dict[str, Any]:
    """One request's attributes under ``key`` (the hot transaction item and the record share them)."""
    command = posting.command
    item: dict[str, Any] = {
        Attr.PK: _s(key),
        Attr.TXN_ID: _s(posting.txn_id),
        Attr.TYPE: _s(command.txn_type),
        Attr.WALLET_ID: _s(command.wallet_id),
        Attr.AMOUNT: _n(command.amount),
        Attr.NONCE: _s(command.nonce),
        Attr.REQUEST_HASH: _s(posting.request_hash),
        Attr.CREATED_AT: _n(posting.created_at),
        Attr.EXPIRES_AT: _n(expires_at),
    }
    if (to_wallet_id := command.to_wallet_id) is not None:
        item[Attr.TO_WALLET_ID] = _s(to_wallet_id)
    if command.initiated_by is not None:
        item[Attr.INITIATED_BY] = _s(command.initiated_by)
    return item


def record_put(table: str, item: dict[str, Any]) -> dict[str, Any]:
    """A record (or any item) put only where none exists; a refusal returns the existing one (ALL_OLD)."""
    return {
        "TableName": table,
        "Item": item,
        "ConditionExpression": _NOT_EXISTS,
        "ExpressionAttributeNames": {"#pk": Attr.PK},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def declined_record_put(
    table: str,
    command: Movement,
    *,
    request_hash: str,
    code: str,
    refused_wallet_id: str,
    now_ms: int,
    window_seconds: int,
) -> dict[str, Any]:
    """The record of a refused movement: the same request repeated gets the same refusal.

    A plain conditional ``PutItem`` (1 write unit, not a transaction's 2): the refusal was decided
    from a cancellation, so nothing of the movement was written; if a record exists meanwhile (an
    attempt of the same nonce committed in another process) the put fails and that record answers.
    """
    window_ends_at = -(-now_ms // 1000) + window_seconds
    item: dict[str, Any] = {
        Attr.PK: _s(idempotency_key(command.wallet_id, command.nonce, command.initiated_by)),
        Attr.TYPE: _s(command.txn_type),
        Attr.WALLET_ID: _s(command.wallet_id),
        Attr.AMOUNT: _n(command.amount),
        Attr.NONCE: _s(command.nonce),
        Attr.REQUEST_HASH: _s(request_hash),
        Attr.CREATED_AT: _n(now_ms),
        WINDOW_ENDS_AT: _n(window_ends_at),
        Attr.EXPIRES_AT: _n(window_ends_at + TTL_MARGIN_SECONDS),
        OUTCOME: _s(OUTCOME_DECLINED),
        REFUSAL: _s(code),
        REFUSED_WALLET: _s(refused_wallet_id),
    }
    if (to_wallet_id := command.to_wallet_id) is not None:
        item[Attr.TO_WALLET_ID] = _s(to_wallet_id)
    if command.initiated_by is not None:
        item[Attr.INITIATED_BY] = _s(command.initiated_by)
    return record_put(table, item)


def void_record_put(
    table: str, wallet_id: str, nonce: str, *, principal: str | None, now_ms: int, window_seconds: int
) -> dict[str, Any]:
    """The fence of an outcome lookup that found no record: after it, no attempt can commit.

    Every attempt of a movement puts its record under ``attribute_not_exists``, so once this
    record exists any attempt still in flight (or repeated with its ``ClientRequestToken``) is
    cancelled by it: "did not commit" is then true for good. While a transaction holding the key
    is in flight DynamoDB refuses this put (``TransactionConflictException``): not decidable yet.
    """
    window_ends_at = -(-now_ms // 1000) + window_seconds
    item: dict[str, Any] = {
        Attr.PK: _s(idempotency_key(wallet_id, nonce, principal)),
        Attr.WALLET_ID: _s(wallet_id),
        Attr.NONCE: _s(nonce),
        Attr.CREATED_AT: _n(now_ms),
        WINDOW_ENDS_AT: _n(window_ends_at),
        Attr.EXPIRES_AT: _n(window_ends_at + TTL_MARGIN_SECONDS),
        OUTCOME: _s(OUTCOME_VOID),
    }
    if principal is not None:
        item[Attr.INITIATED_BY] = _s(principal)
    return record_put(table, item)


def create_wallet_request(
    table: str,
    wallet_id: str,
    user_id: str,
    now_ms: int,
    owner: str | None = None,
    owners_table: str | None = None,
) -> dict[str, Any]:
    """The wallet (version 0, balance 0, its ``owner``) and its user's claim, each only if new, in
    one transaction, with the owner's index entry (in ``owners_table``) when it has an owner.

    The claim first: a cancellation's first reason then says whether the user has a wallet. The
    owner never changes afterwards, so a check of it is never stale, and its index entry
    (:mod:`contracts.owners_table`) commits with the wallet or not at all.
    """
    wallet_item = {
        Attr.PK: _s(wallet_key(wallet_id)),
        Attr.ENTITY: _s(ENTITY_WALLET),
        Attr.WALLET_ID: _s(wallet_id),
        Attr.USER_ID: _s(user_id),
        Attr.BALANCE: _n(0),
        Attr.VERSION: _n(0),
        Attr.CREATED_AT: _n(now_ms),
        Attr.UPDATED_AT: _n(now_ms),
    }
    if owner is not None:
        wallet_item[Attr.OWNER] = _s(owner)
    claim_item = {
        Attr.PK: _s(user_key(user_id)),
        Attr.ENTITY: _s(ENTITY_USER),
        Attr.WALLET_ID: _s(wallet_id),
    }
    items = [{"Put": record_put(table, claim_item)}, {"Put": record_put(table, wallet_item)}]
    if owner is not None and owners_table is not None:
        items.append({"Put": {"TableName": owners_table, "Item": owner_item(owner, wallet_id, now_ms)}})
    return {"TransactItems": items}


def _wallet_update(table: str, write: WalletWrite) -> dict[str, Any]:
    """One wallet's legs: ``ADD`` their sum and their count, and record the entries on the item.

    The item states its latest entry in the ``entry_*`` attributes and, when this transaction
    applies several, the ones before it in ``entries_before`` (removed otherwise), so its stream
    MODIFY is exactly the entries it applied. The conditions are the money rules and the clock
    rule, checked by DynamoDB at commit: the item exists; the balance before the first leg is
    within :attr:`WalletWrite.floor` and :attr:`WalletWrite.ceiling`, so no leg takes it below
    zero or above the limit; and ``updated_at`` is before the first leg's time, so per wallet,
    time strictly increases with version: ordering a wallet's transaction items by
    ``created_at`` is ordering them by version, which makes a point-in-time export enough to
    number them (:mod:`stream_processor.export_entries`). It caps one wallet at 1,000 commits a
    second, above DynamoDB's own per-item limit (1,000 WCU/s, 2 per transactional write).
    """
    *earlier, (posting, leg) = write.legs
    values: dict[str, Any] = {
        ":since": _n(write.legs[0][0].created_at),
        ":delta": _n(write.delta),
        ":count": _n(len(write.legs)),
    }
    present = _set_entry_values(values, posting, posting.command, leg)
    if earlier:
        values[":eb"] = {"L": [{"M": _entry_map(p, earlier_leg)} for p, earlier_leg in earlier]}
    if (floor := write.floor) is not None:
        values[":floor"] = _n(floor)
    if (ceiling := write.ceiling) is not None:
        values[":ceiling"] = _n(ceiling)
    return {
        "TableName": table,
        "Key": {Attr.PK: _s(wallet_key(write.wallet_id))},
        "UpdateExpression": _update_expression(present, bool(earlier)),
        "ConditionExpression": _condition_expression(floor is not None, ceiling is not None),
        "ExpressionAttributeNames": _ENTRY_NAMES,
        "ExpressionAttributeValues": values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


@functools.cache
def _update_expression(present: tuple[bool, ...], earlier: bool) -> str:
    """The update of an entry whose optional fields ``present`` says (in :data:`_OPTIONAL_FIELDS`
    order), with ``entries_before`` when the write applies ``earlier`` legs: a few shapes, each
    made once."""
    sets = [_SET_ENTRY]
    removes = []
    for field, is_present in zip(_OPTIONAL_FIELDS, present, strict=True):
        if is_present:
            sets.append(f"{field.name} = {field.value}")
        else:
            removes.append(field.name)
    if earlier:
        sets.append("#eb = :eb")
    else:
        removes.append("#eb")
    remove = f" REMOVE {', '.join(removes)}" if removes else ""
    return f"SET {', '.join(sets)}{remove}{_ADD_MOVEMENT}"


@functools.cache
def _condition_expression(floor: bool, ceiling: bool) -> str:
    """The wallet's conditions: it exists, the balance bounds the write has, the clock rule."""
    conditions = [_EXISTS]
    if floor:
        conditions.append("#b >= :floor")
    if ceiling:
        conditions.append("#b <= :ceiling")
    conditions.append("#u < :since")
    return " AND ".join(conditions)


#: Where each :data:`~contracts.wallets_table.ENTRY_FIELDS` column's value comes from, in a
#: posting (``posting``, its ``command``) and one of its legs (``leg``); None is an absent field.
#: A new entry field is a line here too, or the module refuses to load.
_ENTRY_SOURCES: Final[dict[str, str]] = {
    "created_at": "posting.created_at",
    "txn_id": "posting.txn_id",
    "txn_type": "command.txn_type",
    "direction": "leg.direction",
    "amount": "command.amount",
    "nonce": "command.nonce",
    "counterparty_wallet_id": "leg.counterparty",
    "initiated_by": "command.initiated_by",
}


def _compile_entry_writers() -> tuple[Callable[..., tuple[bool, ...]], Callable[..., dict[str, Any]]]:
    """The two ways a leg's entry is written, made from :data:`ENTRY_FIELDS` and :data:`_ENTRY_SOURCES`.

    ``set_values(values, posting, command, leg)`` puts the latest entry's placeholders into an
    update's ``values`` and says which optional fields it has (the update's shape);
    ``entry_map(posting, command, leg)`` is an earlier entry as ``entries_before`` holds it (each
    field's ``key``). Plain statements, one per field, what CPython runs fastest: a request writes
    every field of two entries.
    """
    missing = [field.column for field in ENTRY_FIELDS if field.column not in _ENTRY_SOURCES]
    if missing:
        raise RuntimeError(
            f"the write path has no value for the ledger entry's {missing}: add to _ENTRY_SOURCES"
        )
    setting, mapping, present = [], [], []
    for index, field in enumerate(ENTRY_FIELDS):
        source, tag = _ENTRY_SOURCES[field.column], field.type_tag
        if field.required:
            setting += [
                f"    v = {source}",
                f"    if v is None: raise ValueError('a ledger entry needs its {field.column}')",
                f"    values[{field.value!r}] = {{{tag!r}: str(v)}}",
            ]
            mapping += [
                f"    v = {source}",
                f"    if v is None: raise ValueError('a ledger entry needs its {field.column}')",
                f"    entry[{field.key!r}] = {{{tag!r}: str(v)}}",
            ]
        else:
            setting += [
                f"    v = {source}",
                f"    p{index} = v is not None",
                f"    if p{index}: values[{field.value!r}] = {{{tag!r}: str(v)}}",
            ]
            mapping += [
                f"    v = {source}",
                f"    if v is not None: entry[{field.key!r}] = {{{tag!r}: str(v)}}",
            ]
            present.append(f"p{index}")
    source = "\n".join(
        [
            "def set_values(values, posting, command, leg):",
            *setting,
            f"    return ({', '.join(present)}{',' if present else ''})",
            "def entry_map(posting, command, leg):",
            "    entry = {}",
            *mapping,
            "    return entry",
        ]
    )
    namespace: dict[str, Any] = {"__name__": __name__}
    exec(compile(source, "<write_requests: entry writers>", "exec"), namespace)  # noqa: S102
    return namespace["set_values"], namespace["entry_map"]


_set_entry_values, _entry_map_of = _compile_entry_writers()


def _entry_map(posting: Posting, leg: Leg) -> dict[str, Any]:
    """One earlier entry of a group commit, as ``entries_before`` holds it (each field's ``key``)."""
    return _entry_map_of(posting, posting.command, leg)
