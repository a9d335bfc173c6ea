"""Decode a batch of DynamoDB Streams records (as Lambda delivers them) into lake rows.

Pure: records in, Arrow tables and counts out; no I/O. Every record is exactly one kind, chosen by
:data:`RECORD_KINDS` from its ``eventName`` and the item's ``entity``; what each kind becomes (a
ledger row, a wallets row, a count, a quarantine entry) is docs/architecture.md, "Stream records →
ledger", and each kind's step says it again where it is done.

An item attribute the decoder does not know (a newer writer's) is never dropped: it goes with the
item's rows into ``extra_attributes`` (:func:`_extra`; one subset check per record, ~0.2 µs).

A deposit is one wallet MODIFY (a credit), a transfer two (the payer's debit, the payee's credit),
which may arrive in different shards and batches: each row stands alone, so any interleaving
gives the same ledger. Records of the earlier compare-and-swap write path (a transaction INSERT
carrying ``wallet_version``, wallet MODIFYs without an entry) still decode to the same rows, so a
deploy in the middle of the stream's 24 hours neither loses nor doubles an entry.

Why it is shaped this way: a Lambda batch holds up to 10,000 records and one consumer process must
carry far more than the write path's 20,000 writes/s. So the hot path reads each typed attribute
(``image["amount"]["N"]``) straight into a per-column list, with no generic deserializer, no
``Decimal`` and no per-record objects; numbers are parsed and range-checked a column at a time in
Arrow (:mod:`stream_processor.columns`). A malformed record costs nothing until it raises; then
:func:`describe_problem` says exactly what is wrong with it, for the quarantine entry.

A batch walks one way: this module collects records into its own row buffers and hands them to
:mod:`stream_processor.columns` (checks, shapes), which hands on to :mod:`stream_processor.decoded`
(quarantine, the batch's name); nothing calls back (``scripts/record_walk.py``).
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

import pyarrow as pa

from contracts.money import INTEGER_TEXT
from contracts.wallets_table import (
    DIRECTION_DEBIT,
    ENTITY_IDEMPOTENCY,
    ENTITY_TRANSACTION,
    ENTITY_USER,
    ENTITY_WALLET,
    ENTRY_FIELDS,
    Attr,
    EntryKey,
)
from stream_processor import record_problems
from stream_processor.columns import decoded_batch
from stream_processor.decoded import DecodedBatch
from stream_processor.lambda_records import (
    EVENT_INSERT,
    EVENT_MODIFY,
    EVENT_REMOVE,
    NEW_IMAGE,
    OLD_IMAGE,
    SEQUENCE_NUMBER,
    TTL_IDENTITY_PRINCIPAL,
    TTL_IDENTITY_TYPE,
)
from stream_processor.record_problems import RecordKind

#: Records the decoder reads between two conversions of its lists to Arrow: done a chunk at a time,
#: the strings just taken are still in the CPU cache, and converting costs about half of one
#: conversion of a 10,000-record batch (``bench/stream_to_parquet.py``).
CHUNK_RECORDS: Final = 1024

#: The values kept per entry: its fields' columns (:data:`~contracts.wallets_table.ENTRY_FIELDS`),
#: the wallet's id, version and balance after, the OLD image's it must follow, and the record's.
ENTRY_ROW: Final = (
    *(field.column for field in ENTRY_FIELDS),
    "wallet_id",
    "wallet_version",
    "balance_after",
    "previous_version",
    "previous_balance",
    "sequence",
    "extra_attributes",
)
#: Order of the values kept per legacy transaction INSERT: items written by the compare-and-swap
#: write path carried every touched wallet's version and balance after, and give the ledger rows.
TRANSACTION_ROW: Final = (
    "txn_id",
    "txn_type",
    "wallet_id",
    "to_wallet_id",
    "amount",
    "nonce",
    "wallet_version",
    "wallet_balance_after",
    "to_wallet_version",
    "to_wallet_balance_after",
    "created_at",
    "sequence",
    "extra_attributes",
)
#: Order of the values kept per wallet INSERT.
WALLET_ROW: Final = ("wallet_id", "user_id", "created_at", "extra_attributes", "owner")


@dataclasses.dataclass(slots=True)
class RowBuffer:
    """Rows of one record kind, as one flat list of text (``fields`` values per row).

    One ``extend`` per record is the cheapest way Python has to move a dozen values, and
    ``flat[i::stride]`` turns them into columns in C. :meth:`seal` moves the pending rows into
    Arrow string arrays (``chunks``) while they are hot in the cache. ``positions``: each row's
    index in the batch, so a row a column-wide check rejects is quarantined with its record.
    """

    fields: tuple[str, ...]
    values: list[str | None] = dataclasses.field(default_factory=list)
    positions: list[int] = dataclasses.field(default_factory=list)
    chunks: list[list[pa.Array]] = dataclasses.field(default_factory=list)

    def seal(self) -> None:
        """Convert the pending rows to one Arrow string array per field; raises
        ``pyarrow.ArrowTypeError`` (or ``UnicodeEncodeError``) for a value that is not a valid
        string, and the decoder then decodes the batch again, checking every record."""
        pending = self.values
        if pending:
            stride = len(self.fields)
            self.chunks.append([pa.array(pending[index::stride], pa.string()) for index in range(stride)])
            pending.clear()


@dataclasses.dataclass(slots=True)
class BatchColumns:
    """A batch's rows, a :class:`RowBuffer` per kind, sealed every :data:`CHUNK_RECORDS` records."""

    entries: RowBuffer = dataclasses.field(default_factory=lambda: RowBuffer(ENTRY_ROW))
    transactions: RowBuffer = dataclasses.field(default_factory=lambda: RowBuffer(TRANSACTION_ROW))
    wallets: RowBuffer = dataclasses.field(default_factory=lambda: RowBuffer(WALLET_ROW))
    rejected_position: list[int] = dataclasses.field(default_factory=list)
    rejected_reason: list[str] = dataclasses.field(default_factory=list)
    ignored: int = 0
    ttl_expired: int = 0

    def reject(self, position: int, reason: str) -> None:
        """Send the record at ``position`` to quarantine."""
        self.rejected_position.append(position)
        self.rejected_reason.append(reason)

    def seal(self) -> None:
        """Convert every kind's pending rows to Arrow (see :meth:`RowBuffer.seal`)."""
        self.entries.seal()
        self.transactions.seal()
        self.wallets.seal()


#: A record's step: ``(columns, position, record, change: its dynamodb member, image: its item)``.
DecodeStep = Callable[[BatchColumns, int, Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], None]

_UNDECODABLE: Final = (KeyError, TypeError, AttributeError, IndexError, ValueError)
#: What Arrow raises for a value of the wrong type (an ``S`` holding a number, text that is not
#: UTF-8); only the careful pass over the batch can say which record holds it.
_WRONG_VALUE_TYPE: Final = (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeEncodeError)


class _RejectedError(Exception):
    """A record the pipeline must not turn into rows; carries the quarantine reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def decode_records(records: Sequence[Mapping[str, Any]], *, ingested_at_ms: int) -> DecodedBatch:
    """Decode one batch of Lambda-shaped DynamoDB Streams records.

    Parameters
    ----------
    records:
        The event's ``Records``, in stream order (one shard: the first record is the oldest).
    ingested_at_ms:
        Batch time, epoch milliseconds: every row's ``ingested_at``/``quarantined_at``.

    Examples
    --------
    >>> batch = decode_records([], ingested_at_ms=0)
    >>> batch.records, batch.ledger_rows
    (0, 0)
    """
    try:
        return decoded_batch(_collect(records, careful=False), records, ingested_at_ms, strict=True)
    except _WRONG_VALUE_TYPE:
        # A value of the wrong type (or a null) slipped through the fast path; check every record.
        return decoded_batch(_collect(records, careful=True), records, ingested_at_ms, strict=False)


def _collect(records: Sequence[Mapping[str, Any]], *, careful: bool) -> BatchColumns:
    """The hot loop: one dispatch per record, values appended to column lists, a chunk at a time."""
    columns = BatchColumns()
    steps = _STEPS  # locals: the loop runs up to 10,000 times per batch
    remove, old_image, new_image, entity_attribute = EVENT_REMOVE, OLD_IMAGE, NEW_IMAGE, Attr.ENTITY
    for start in range(0, len(records), CHUNK_RECORDS):
        for position, record in enumerate(records[start : start + CHUNK_RECORDS], start):
            try:
                if careful and (problem := describe_problem(record)) is not None:
                    raise _RejectedError(problem)
                event = record["eventName"]
                change = record["dynamodb"]
                image = change[old_image] if event == remove else change[new_image]
                entity = image[entity_attribute]["S"]
                # an unexpected (event, entity) raises KeyError: describe_problem names the pair
                steps[event][entity](columns, position, record, change, image)
            except _RejectedError as rejected:
                columns.reject(position, rejected.reason)
            except _UNDECODABLE as error:
                columns.reject(position, describe_problem(record) or f"undecodable record: {error!r}")
        columns.seal()
    return columns


# --- the record kinds -------------------------------------------------------------------------

_TRANSACTION_REQUIRED: Final = (
    (Attr.TXN_ID, "S"),
    (Attr.TYPE, "S"),
    (Attr.WALLET_ID, "S"),
    (Attr.AMOUNT, "N"),
    (Attr.NONCE, "S"),
    (Attr.CREATED_AT, "N"),
)
_TRANSACTION_OPTIONAL: Final = (
    (Attr.TO_WALLET_ID, "S"),
    (Attr.WALLET_VERSION, "N"),
    (Attr.WALLET_BALANCE_AFTER, "N"),
    (Attr.TO_WALLET_VERSION, "N"),
    (Attr.TO_WALLET_BALANCE_AFTER, "N"),
)
_WALLET_REQUIRED: Final = ((Attr.WALLET_ID, "S"), (Attr.USER_ID, "S"), (Attr.CREATED_AT, "N"))
_WALLET_MODIFIED_REQUIRED: Final = (
    (Attr.WALLET_ID, "S"),
    (Attr.BALANCE, "N"),
    (Attr.VERSION, "N"),
    (Attr.UPDATED_AT, "N"),
)
_WALLET_STATE: Final = frozenset(name for name, _ in _WALLET_MODIFIED_REQUIRED)
#: What a wallet MODIFY that applied an entry must carry (the entry's time is the item's updated_at).
_ENTRY_REQUIRED: Final = tuple(
    (field.attribute, field.type_tag)
    for field in ENTRY_FIELDS
    if field.required and field.attribute not in _WALLET_STATE
)
_ENTRY_OPTIONAL: Final = (
    *((field.attribute, field.type_tag) for field in ENTRY_FIELDS if not field.required),
    (Attr.ENTRIES_BEFORE, "L"),
)


#: ``image.get``'s default for a missing attribute: a required one's raises ``KeyError`` (the record
#: is described and quarantined), an optional one's value is None.
_value: Final[Callable[[Any, str], Any]] = operator.getitem  # a typed value's text: image[name][tag]
_MISSING: Final[Mapping[str, Any]] = MappingProxyType({})
_ABSENT: Final[Mapping[str, Any]] = MappingProxyType({"S": None, "N": None})


def _reader(names: Sequence[tuple[str, str, bool]]) -> tuple[tuple[Any, ...], ...]:
    """``(keys, tags, defaults)`` of ``(name, tag, required)``s: a row is then read as
    ``map(_value, map(image.get, keys, defaults), tags)``, all in C, no Python per field."""
    return (
        tuple(name for name, _, _ in names),
        tuple(tag for _, tag, _ in names),
        tuple(_MISSING if required else _ABSENT for _, _, required in names),
    )


#: A wallet MODIFY's entry (``entry_*``, ``updated_at``) and its wallet, version and balance after,
#: in ENTRY_ROW order; the record's own part (previous version and balance, sequence, extra) follows.
_WALLET_PART: Final = ((Attr.WALLET_ID, "S", True), (Attr.VERSION, "N", True), (Attr.BALANCE, "N", True))
_LATEST: Final = _reader([*((f.attribute, f.type_tag, f.required) for f in ENTRY_FIELDS), *_WALLET_PART])
#: One map of ``entries_before``: its entry, in ENTRY_ROW order (the wallet's part follows).
_EARLIER: Final = _reader([(f.key, f.type_tag, f.required) for f in ENTRY_FIELDS])

#: Every attribute the write path puts on a wallet item; any other one (a newer writer's) is kept
#: with the item's rows in ``extra_attributes`` (:func:`_extra`), never dropped.
_WALLET_KNOWN: Final = frozenset(
    {
        Attr.PK,
        Attr.ENTITY,
        Attr.USER_ID,
        Attr.OWNER,
        Attr.CREATED_AT,
        *(name for name, _ in (*_WALLET_MODIFIED_REQUIRED, *_ENTRY_REQUIRED, *_ENTRY_OPTIONAL)),
    }
)
#: Every attribute of a transaction item (both write paths); the others go to ``extra_attributes``.
_TRANSACTION_KNOWN: Final = frozenset(
    {
        Attr.PK,
        Attr.ENTITY,
        Attr.REQUEST_HASH,
        Attr.EXPIRES_AT,
        *(name for name, _ in (*_TRANSACTION_REQUIRED, *_TRANSACTION_OPTIONAL)),
    }
)

# itemgetters fetch every attribute of a kind in one C call, keyed by the one spelling in Attr.
_legacy_transaction_attributes: Final = operator.itemgetter(
    Attr.TXN_ID,
    Attr.TYPE,
    Attr.WALLET_ID,
    Attr.AMOUNT,
    Attr.NONCE,
    Attr.WALLET_VERSION,
    Attr.WALLET_BALANCE_AFTER,
    Attr.CREATED_AT,
)
_previous_attributes: Final = operator.itemgetter(Attr.VERSION, Attr.BALANCE)
_wallet_attributes: Final = operator.itemgetter(*(name for name, _ in _WALLET_REQUIRED))

_ENTRY_TXN_ID: Final = Attr.ENTRY_TXN_ID
_ENTRIES_BEFORE: Final = Attr.ENTRIES_BEFORE
_ENTRY_STRIDE: Final = len(ENTRY_ROW)
_LEGACY_MARK: Final = Attr.WALLET_VERSION
_TO_WALLET_ID: Final = Attr.TO_WALLET_ID
_TO_WALLET_VERSION: Final = Attr.TO_WALLET_VERSION
_TO_WALLET_BALANCE_AFTER: Final = Attr.TO_WALLET_BALANCE_AFTER


def _wallet_modified(
    columns: BatchColumns,
    position: int,
    record: Mapping[str, Any],
    change: Mapping[str, Any],
    image: Mapping[str, Any],
) -> None:
    """A wallet MODIFY :func:`_one_entry` left: a group commit's (``entries_before``), or one with no
    entry (``entry_txn_id``), written by the compare-and-swap write path, whose transaction INSERT
    carries the entry instead: counted, like a user claim.
    """
    if _ENTRY_TXN_ID not in image:
        columns.ignored += 1
        return
    old = change.get(OLD_IMAGE)
    previous_version, previous_balance = (None, None) if old is None else _previous_attributes(old)
    previous_version = None if previous_version is None else previous_version["N"]
    previous_balance = None if previous_balance is None else previous_balance["N"]
    sequence = change[SEQUENCE_NUMBER]
    extra = None if image.keys() <= _WALLET_KNOWN else _extra(image, _WALLET_KNOWN)
    # a group commit: the entries before the latest, then the latest, which follows them
    wallet_id, earlier = image[Attr.WALLET_ID]["S"], image[_ENTRIES_BEFORE]["L"]
    rows, version, balance = _earlier_entries(
        earlier, wallet_id, previous_version, previous_balance, sequence, extra
    )
    keys, tags, defaults = _LATEST
    rows.extend((*map(_value, map(image.get, keys, defaults), tags), version, balance, sequence, extra))
    columns.entries.values.extend(rows)
    columns.entries.positions.extend([position] * (len(rows) // _ENTRY_STRIDE))


def _compile_one_entry() -> DecodeStep:
    """The step of a wallet MODIFY of one entry (half of a stream's records), made from
    :data:`ENTRY_FIELDS`, the one place an entry's fields are said: the required typed values in
    one C call (an ``itemgetter``), then plain subscripts, what CPython runs fastest; the row is
    built whole before it is added (a ``KeyError`` adds nothing)."""
    names = [(f.attribute, f.type_tag, f.required) for f in ENTRY_FIELDS] + list(_WALLET_PART)
    required = [name for name, _, needed in names if needed]
    row = [
        f"t{required.index(name)}[{tag!r}]"
        if needed
        else f"(None if (v := image.get({name!r})) is None else v[{tag!r}])"
        for name, tag, needed in names
    ]
    source = f"""def step(columns, position, record, change, image):
    if {_ENTRY_TXN_ID!r} not in image or {_ENTRIES_BEFORE!r} in image:
        return other(columns, position, record, change, image)
    {", ".join(f"t{index}" for index in range(len(required)))}, = typed(image)
    old = change.get({OLD_IMAGE!r})
    version, balance = (None, None) if old is None else previous(old)
    columns.entries.values.extend(({", ".join(row)},
        None if version is None else version["N"], None if balance is None else balance["N"],
        change[{SEQUENCE_NUMBER!r}], None if image.keys() <= known else extra(image, known)))
    columns.entries.positions.append(position)
"""
    namespace: dict[str, Any] = {"__name__": __name__, "other": _wallet_modified, "extra": _extra}
    namespace |= {
        "previous": _previous_attributes,
        "known": _WALLET_KNOWN,
        "typed": operator.itemgetter(*required),
    }
    exec(compile(source, "<decoder: one entry>", "exec"), namespace)  # noqa: S102
    step: DecodeStep = namespace["step"]
    return step


def _earlier_entries(
    earlier: Sequence[Mapping[str, Any]],
    wallet_id: str,
    version_text: str | None,
    balance_text: str | None,
    sequence: str,
    extra: str | None,
) -> tuple[list[str | None], str | None, str | None]:
    """The rows of a group commit's ``entries_before``, and the version and balance they end at.

    Each row follows the one before it (the first follows the OLD image) by one version and by its
    own delta: rows in ENTRY_ROW order with their previous version and balance, so the
    column-wide checks hold each to exactly what it claims, and the latest entry (the NEW image)
    must follow the last of them. A record whose OLD image is unusable gives rows that fail those
    checks; a malformed map raises and the record is quarantined whole, before any row is added.
    """
    rows: list[str | None] = []
    if not (
        version_text
        and balance_text
        and INTEGER_TEXT.match(version_text)
        and INTEGER_TEXT.match(balance_text)
    ):
        raise _RejectedError(f"{_ENTRIES_BEFORE} without a usable OldImage version and balance")
    version, balance = int(version_text), int(balance_text)
    earlier_keys, earlier_tags, earlier_defaults = _EARLIER
    for wrapped in earlier:
        entry = wrapped["M"]
        amount_text = entry[EntryKey.AMOUNT]["N"]
        if not INTEGER_TEXT.match(amount_text):
            raise _RejectedError(f"{_ENTRIES_BEFORE}: amount is not an integer")
        amount = int(amount_text)
        after = balance - amount if entry[EntryKey.DIRECTION]["S"] == DIRECTION_DEBIT else balance + amount
        rows.extend(
            (
                *map(_value, map(entry.get, earlier_keys, earlier_defaults), earlier_tags),
                *(wallet_id, str(version + 1), str(after), str(version), str(balance), sequence, extra),
            )
        )
        version, balance = version + 1, after
    return rows, str(version), str(balance)


def _transaction_inserted(
    columns: BatchColumns,
    position: int,
    record: Mapping[str, Any],
    change: Mapping[str, Any],
    image: Mapping[str, Any],
) -> None:
    """A committed deposit or transfer: the idempotency record, whose entries are the wallets' MODIFYs.

    Counted, except an item of the compare-and-swap write path (it carries ``wallet_version``):
    that one still gives the ledger rows, later one or two (its wallets' MODIFYs carry no entry).
    """
    if _LEGACY_MARK not in image:
        columns.ignored += 1
        return
    txn_id, txn_type, wallet_id, amount, nonce, version, balance, created_at = _legacy_transaction_attributes(
        image
    )
    to_wallet = image.get(_TO_WALLET_ID)
    to_version = image.get(_TO_WALLET_VERSION)
    to_balance = image.get(_TO_WALLET_BALANCE_AFTER)
    transactions = columns.transactions
    # In TRANSACTION_FIELDS order, built whole before it is added (as in _wallet_modified).
    transactions.values.extend(
        (
            txn_id["S"],
            txn_type["S"],
            wallet_id["S"],
            None if to_wallet is None else to_wallet["S"],
            amount["N"],
            nonce["S"],
            version["N"],
            balance["N"],
            None if to_version is None else to_version["N"],
            None if to_balance is None else to_balance["N"],
            created_at["N"],
            change[SEQUENCE_NUMBER],
            None if image.keys() <= _TRANSACTION_KNOWN else _extra(image, _TRANSACTION_KNOWN),
        )
    )
    transactions.positions.append(position)


def _wallet_inserted(
    columns: BatchColumns,
    position: int,
    record: Mapping[str, Any],
    change: Mapping[str, Any],
    image: Mapping[str, Any],
) -> None:
    """A wallet was opened: one ``wallets`` row."""
    wallet_id, user_id, created_at = _wallet_attributes(image)
    extra = None if image.keys() <= _WALLET_KNOWN else _extra(image, _WALLET_KNOWN)
    named = image.get(Attr.OWNER)
    owner = named.get("S") if isinstance(named, Mapping) else None
    columns.wallets.values.extend(
        (wallet_id["S"], user_id["S"], created_at["N"], extra, owner)
    )  # WALLET_FIELDS
    columns.wallets.positions.append(position)


def _extra(image: Mapping[str, Any], known: frozenset[str]) -> str:
    """The item's attributes the decoder does not know, as the JSON text of the
    ``extra_attributes`` column: ``{name: DynamoDB-JSON value}``, keys sorted.

    An attribute a newer writer adds reaches the lake with its row even before the lake has a
    column for it (after the stream's 24 hours and the item's TTL it would exist nowhere else);
    the upgrade that gives it a column of its own is docs/operations.md, "Adding a column".

    Examples
    --------
    >>> _extra({"pk": {"S": "w#wallet"}, "tier": {"S": "gold"}}, frozenset({"pk"}))
    '{"tier":{"S":"gold"}}'
    """
    return json.dumps(
        {name: image[name] for name in image.keys() - known},
        separators=(",", ":"),
        sort_keys=True,
        default=str,
    )


def _ignored(
    columns: BatchColumns,
    position: int,
    record: Mapping[str, Any],
    change: Mapping[str, Any],
    image: Mapping[str, Any],
) -> None:
    """Expected and of no use to the lake (user claims, idempotency records): counted only."""
    columns.ignored += 1


def _transaction_removed(
    columns: BatchColumns,
    position: int,
    record: Mapping[str, Any],
    change: Mapping[str, Any],
    image: Mapping[str, Any],
) -> None:
    """A transaction item left the hot table: by TTL it is expected; by anyone else it is not."""
    if not _is_ttl_identity(record.get("userIdentity")):
        raise _RejectedError("REMOVE of a transaction item not made by TTL")
    columns.ttl_expired += 1


def _is_ttl_identity(identity: Any) -> bool:
    """True when a record's ``userIdentity`` says the DynamoDB service (TTL) deleted the item.

    A quarter of a stream's records are TTL deletions, so the common case (a JSON object, a
    ``dict``) is checked by exact type before the slower ``Mapping`` check.
    """
    if type(identity) is not dict and not isinstance(identity, Mapping):
        return False
    return identity.get("type") == TTL_IDENTITY_TYPE and identity.get("principalId") == TTL_IDENTITY_PRINCIPAL


#: The step of every wallet MODIFY (:func:`_wallet_modified` takes the ones it does not).
_one_entry: Final = _compile_one_entry()


#: Every record kind the pipeline expects, by ``(eventName, entity)``; any other pair is quarantined.
RECORD_KINDS: Final[dict[tuple[str, str], RecordKind]] = {
    (EVENT_INSERT, ENTITY_TRANSACTION): RecordKind(
        "transaction inserted",
        _transaction_inserted,
        _TRANSACTION_REQUIRED,
        _TRANSACTION_OPTIONAL,
        ((_LEGACY_MARK, ((Attr.WALLET_BALANCE_AFTER, "N"),)),),
    ),
    (EVENT_INSERT, ENTITY_WALLET): RecordKind("wallet inserted", _wallet_inserted, _WALLET_REQUIRED),
    (EVENT_INSERT, ENTITY_USER): RecordKind("user claim inserted", _ignored),
    (EVENT_MODIFY, ENTITY_WALLET): RecordKind(
        "wallet modified",
        _one_entry,
        _WALLET_MODIFIED_REQUIRED,
        (*_ENTRY_REQUIRED, *_ENTRY_OPTIONAL),
        ((_ENTRY_TXN_ID, _ENTRY_REQUIRED),),
    ),
    (EVENT_REMOVE, ENTITY_TRANSACTION): RecordKind("transaction removed", _transaction_removed),
    # the write path's idempotency records (a request's outcome, kept for retries, removed by TTL)
    (EVENT_INSERT, ENTITY_IDEMPOTENCY): RecordKind("idempotency record inserted", _ignored),
    (EVENT_MODIFY, ENTITY_IDEMPOTENCY): RecordKind("idempotency record modified", _ignored),
    (EVENT_REMOVE, ENTITY_IDEMPOTENCY): RecordKind("idempotency record removed", _ignored),
}


def _steps_by_event(kinds: Mapping[tuple[str, str], RecordKind]) -> dict[str, dict[str, DecodeStep]]:
    steps: dict[str, dict[str, DecodeStep]] = {}
    for (event, entity), kind in kinds.items():
        steps.setdefault(event, {})[entity] = kind.decode
    return steps


#: :data:`RECORD_KINDS` as ``{eventName: {entity: decode step}}``: two lookups, no tuple per record.
_STEPS: Final = _steps_by_event(RECORD_KINDS)


def describe_problem(record: Any) -> str | None:
    """Why ``record`` cannot be decoded, or None (:mod:`stream_processor.record_problems`' answer)."""
    return record_problems.describe_problem(record, RECORD_KINDS)
