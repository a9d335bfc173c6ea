"""Decode a batch of DynamoDB Streams records (as Lambda delivers them) into lake rows.

Pure: records in, Arrow tables and counts out; no I/O. Every record is exactly one of these kinds,
chosen by :data:`RECORD_KINDS` from its ``eventName`` and the item's ``entity`` (docs/architecture.md,
"Stream records → ledger"):

============================  ======================================================
MODIFY of a wallet            one ledger row: the entry the movement recorded on the
                              item (``entry_*``), with the item's own ``version``,
                              ``balance`` and ``updated_at``, checked against the OLD
                              image (version + 1, balance + delta)
INSERT of a wallet            a ``wallets`` row
INSERT of a transaction       ignored (counted): the idempotency record
INSERT of a user claim        ignored (counted)
REMOVE of a transaction       a TTL expiry when ``userIdentity`` is the DynamoDB service
                              (counted, never a reversal); otherwise quarantined
any record of an idempotency  ignored (counted): the write path's request record
item
anything else                 quarantined whole, with its reason
============================  ======================================================

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

A batch walks one way: this module collects every record into its own row buffers, then hands
them to :func:`stream_processor.columns.decoded_batch` (checks, shapes), which hands on to
:mod:`stream_processor.decoded` (quarantine, the batch's name); nothing calls back. An entry's row
is made from :data:`contracts.wallets_table.ENTRY_FIELDS`, the one list of its fields.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Callable, Mapping, Sequence
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

#: Records the decoder reads between two conversions of its lists to Arrow. The conversion has to
#: touch every string the decoder just took from the records; done a chunk at a time those strings
#: are still in the CPU cache, and converting costs about half of what one conversion of a
#: 10,000-record batch costs (``bench/stream_to_parquet.py``); per-call overhead is negligible.
CHUNK_RECORDS: Final = 1024

#: The values kept per ledger entry a wallet MODIFY applied: the entry's fields (their ledger
#: columns, in :data:`~contracts.wallets_table.ENTRY_FIELDS` order), then what the item says about
#: the wallet (its id, version and balance after), the OLD image's version and balance it must
#: follow, and where the record came from.
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
    """What the decoder collected from one batch, in stream order, a :class:`RowBuffer` per kind.

    Every :data:`CHUNK_RECORDS` records, and at the end, the decoder calls :meth:`seal`: what it
    hands on is all Arrow.
    """

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


#: A record's decoding step: ``(columns, position, record, change, image)``; ``change`` is the
#: record's ``dynamodb`` member and ``image`` the item image the kind is about.
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


@dataclasses.dataclass(frozen=True, slots=True)
class RecordKind:
    """One kind of stream record: how to decode it and which typed attributes it must carry."""

    name: str
    decode: DecodeStep
    required: tuple[tuple[str, str], ...] = ()
    optional: tuple[tuple[str, str], ...] = ()
    #: ``(mark, attributes)``: an image holding ``mark`` must hold every one of ``attributes``.
    required_with: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()


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


def _row_builder(names: Sequence[tuple[str, str, bool]]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """A function giving the text of each ``(name, type tag, required)`` of an image, in order.

    Made once from :data:`~contracts.wallets_table.ENTRY_FIELDS` (for the item's attributes and for
    an ``entries_before`` map's keys) and compiled, so the hot path pays one call and no loop per
    record: the list is the only place an entry's fields are said. A required one missing raises
    ``KeyError`` (the record is then described and quarantined); an optional one missing is None.
    """
    parts = [
        f"image[{name!r}][{tag!r}]"
        if required
        else f"(None if (value := image.get({name!r})) is None else value[{tag!r}])"
        for name, tag, required in names
    ]
    source = f"def build(image):\n    return ({', '.join(parts)},)\n"
    namespace: dict[str, Any] = {"__name__": __name__}  # the function is this module's
    exec(compile(source, f"<entry row of {len(names)} fields>", "exec"), namespace)  # noqa: S102
    build: Callable[[Mapping[str, Any]], tuple[Any, ...]] = namespace["build"]
    return build


#: The entry a wallet item states (``entry_*`` and ``updated_at``), in ENTRY_ROW order.
_latest_entry: Final = _row_builder([(f.attribute, f.type_tag, f.required) for f in ENTRY_FIELDS])
#: One map of ``entries_before``, in ENTRY_ROW order.
_earlier_entry: Final = _row_builder([(f.key, f.type_tag, f.required) for f in ENTRY_FIELDS])

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
_wallet_state: Final = operator.itemgetter(Attr.WALLET_ID, Attr.VERSION, Attr.BALANCE)
_previous_attributes: Final = operator.itemgetter(Attr.VERSION, Attr.BALANCE)
_wallet_attributes: Final = operator.itemgetter(*(name for name, _ in _WALLET_REQUIRED))

_ENTRY_TXN_ID: Final = Attr.ENTRY_TXN_ID
_ENTRIES_BEFORE: Final = Attr.ENTRIES_BEFORE
_ENTRY_STRIDE: Final = len(ENTRY_ROW)
_AMOUNT: Final = ENTRY_ROW.index("amount")
_DIRECTION: Final = ENTRY_ROW.index("direction")
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
    """A movement applied to a wallet: its NEW image is one ledger entry, its OLD image the one before.

    A MODIFY without an entry (``entry_txn_id``) was written by the compare-and-swap write path,
    whose transaction INSERT carries the entry instead: counted, like a user claim.
    """
    if _ENTRY_TXN_ID not in image:
        columns.ignored += 1
        return
    wallet_id, version, balance = _wallet_state(image)
    wallet_id = wallet_id["S"]
    old = change.get(OLD_IMAGE)
    previous_version, previous_balance = (None, None) if old is None else _previous_attributes(old)
    previous_version = None if previous_version is None else previous_version["N"]
    previous_balance = None if previous_balance is None else previous_balance["N"]
    sequence = change[SEQUENCE_NUMBER]
    extra = None if image.keys() <= _WALLET_KNOWN else _extra(image, _WALLET_KNOWN)
    # The record's rows (in ENTRY_ROW order) are built whole before any is added, so a KeyError
    # on a malformed image never leaves a partial row behind.
    latest = _latest_entry(image)
    entries = columns.entries
    if _ENTRIES_BEFORE not in image:
        entries.values.extend(latest)
        entries.values.extend(
            (wallet_id, version["N"], balance["N"], previous_version, previous_balance, sequence, extra)
        )
        entries.positions.append(position)
        return
    # a group commit: the entries before the latest, then the latest, which follows them
    rows, chained_version, chained_balance = _earlier_entries(
        image[_ENTRIES_BEFORE]["L"], wallet_id, previous_version, previous_balance, sequence, extra
    )
    rows.extend(latest)
    rows.extend((wallet_id, version["N"], balance["N"], chained_version, chained_balance, sequence, extra))
    entries.values.extend(rows)
    entries.positions.extend([position] * (len(rows) // _ENTRY_STRIDE))


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
    for wrapped in earlier:
        entry = _earlier_entry(wrapped["M"])
        amount_text = entry[_AMOUNT]
        if not INTEGER_TEXT.match(amount_text):
            raise _RejectedError(f"{_ENTRIES_BEFORE}: amount is not an integer")
        amount = int(amount_text)
        after = balance - amount if entry[_DIRECTION] == DIRECTION_DEBIT else balance + amount
        rows.extend(entry)
        rows.extend((wallet_id, str(version + 1), str(after), str(version), str(balance), sequence, extra))
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
        _wallet_modified,
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
