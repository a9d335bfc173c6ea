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
    Attr,
    EntryKey,
)
from stream_processor import record_problems
from stream_processor.columns import (
    CHUNK_RECORDS,
    ENTRY_FIELDS,
    BatchColumns,
    build_tables,
    require_values,
)
from stream_processor.lambda_records import (
    EVENT_INSERT,
    EVENT_MODIFY,
    EVENT_REMOVE,
    NEW_IMAGE,
    OLD_IMAGE,
    SEQUENCE_NUMBER,
    is_ttl_identity,
)

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


@dataclasses.dataclass(frozen=True, slots=True)
class DecodedBatch:
    """One batch, decoded: the lake tables it becomes and what was counted on the way.

    ``event_source_arn`` and ``first_sequence_number`` name the batch's landing objects, so a
    retried batch overwrites its own files (docs/architecture.md, "The lake").
    """

    ledger: pa.Table
    wallets: pa.Table
    quarantine: pa.Table
    records: int
    ttl_expired: int
    ignored: int
    event_source_arn: str
    first_sequence_number: str
    last_sequence_number: str
    ingested_at_ms: int
    first_record_time: float | None
    """``ApproximateCreationDateTime`` of the batch's first (oldest) record, epoch seconds."""

    @property
    def ledger_rows(self) -> int:
        """Ledger rows (entries) this batch produced."""
        return int(self.ledger.num_rows)

    @property
    def wallet_rows(self) -> int:
        """Wallets created in this batch."""
        return int(self.wallets.num_rows)

    @property
    def quarantined(self) -> int:
        """Records sent to quarantine."""
        return int(self.quarantine.num_rows)

    def tables(self) -> dict[str, pa.Table]:
        """The non-empty tables by lake table name: what the writer lands."""
        named = {"ledger": self.ledger, "wallets": self.wallets, "quarantine": self.quarantine}
        return {name: table for name, table in named.items() if table.num_rows}

    def max_record_age_seconds(self) -> float | None:
        """How far behind the stream this batch was when decoded (the first record is the oldest)."""
        if self.first_record_time is None:
            return None
        return max(0.0, self.ingested_at_ms / 1000 - self.first_record_time)


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
        columns = _collect(records, careful=False)
        rows = build_tables(columns, records, ingested_at_ms)
        require_values(rows)
    except _WRONG_VALUE_TYPE:
        # A value of the wrong type (or a null) slipped through the fast path; check every record.
        columns = _collect(records, careful=True)
        rows = build_tables(columns, records, ingested_at_ms)
    first_sequence, last_sequence = record_problems.sequence_bounds(records)
    return DecodedBatch(
        ledger=rows.ledger,
        wallets=rows.wallets,
        quarantine=rows.quarantine,
        records=len(records),
        ttl_expired=columns.ttl_expired,
        ignored=columns.ignored,
        event_source_arn=record_problems.event_source_arn(records),
        first_sequence_number=first_sequence,
        last_sequence_number=last_sequence,
        ingested_at_ms=ingested_at_ms,
        first_record_time=record_problems.first_record_time(records),
    )


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
_ENTRY_REQUIRED: Final = (
    (Attr.ENTRY_TXN_ID, "S"),
    (Attr.ENTRY_TYPE, "S"),
    (Attr.ENTRY_DIRECTION, "S"),
    (Attr.ENTRY_AMOUNT, "N"),
    (Attr.ENTRY_NONCE, "S"),
)
_ENTRY_OPTIONAL: Final = (
    (Attr.ENTRY_COUNTERPARTY, "S"),
    (Attr.ENTRIES_BEFORE, "L"),
    (Attr.ENTRY_INITIATED_BY, "S"),
)

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
_entry_attributes: Final = operator.itemgetter(
    *(name for name, _ in (*_WALLET_MODIFIED_REQUIRED, *_ENTRY_REQUIRED))
)
_previous_attributes: Final = operator.itemgetter(Attr.VERSION, Attr.BALANCE)
_wallet_attributes: Final = operator.itemgetter(*(name for name, _ in _WALLET_REQUIRED))

_ENTRY_TXN_ID: Final = Attr.ENTRY_TXN_ID
_ENTRY_COUNTERPARTY: Final = Attr.ENTRY_COUNTERPARTY
_ENTRY_INITIATED_BY: Final = Attr.ENTRY_INITIATED_BY
_ENTRIES_BEFORE: Final = Attr.ENTRIES_BEFORE
_ENTRY_STRIDE: Final = len(ENTRY_FIELDS)
#: Where a row's previous version (then previous balance) sits in ENTRY_FIELDS.
_PREVIOUS: Final = ENTRY_FIELDS.index("previous_version")
if ENTRY_FIELDS[_PREVIOUS + 1] != "previous_balance":  # pragma: no cover - a layout change
    raise RuntimeError("ENTRY_FIELDS must keep previous_balance right after previous_version")
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
    wallet_id, balance, version, updated_at, txn_id, txn_type, direction, amount, nonce = _entry_attributes(
        image
    )
    counterparty = image.get(_ENTRY_COUNTERPARTY)
    initiated_by = image.get(_ENTRY_INITIATED_BY)
    old = change.get(OLD_IMAGE)
    previous_version, previous_balance = (None, None) if old is None else _previous_attributes(old)
    previous_version = None if previous_version is None else previous_version["N"]
    previous_balance = None if previous_balance is None else previous_balance["N"]
    sequence = change[SEQUENCE_NUMBER]
    extra = None if image.keys() <= _WALLET_KNOWN else _extra(image, _WALLET_KNOWN)
    # The record's rows (in ENTRY_FIELDS order) are built whole before any is added, so a KeyError
    # on a malformed image never leaves a partial row behind.
    latest = (
        txn_id["S"],
        txn_type["S"],
        wallet_id["S"],
        None if counterparty is None else counterparty["S"],
        direction["S"],
        amount["N"],
        version["N"],
        balance["N"],
        previous_version,
        previous_balance,
        nonce["S"],
        updated_at["N"],
        sequence,
        extra,
        None if initiated_by is None else initiated_by["S"],
    )
    entries = columns.entries
    if _ENTRIES_BEFORE not in image:
        entries.values.extend(latest)
        entries.positions.append(position)
        return
    # a group commit: the entries before the latest, then the latest, which follows them
    rows, chained_version, chained_balance = _earlier_entries(
        image[_ENTRIES_BEFORE]["L"], wallet_id["S"], previous_version, previous_balance, sequence, extra
    )
    rows.extend(latest[:_PREVIOUS])
    rows.extend((chained_version, chained_balance, *latest[_PREVIOUS + 2 :]))
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
    own delta: rows in ENTRY_FIELDS order with their previous version and balance, so the
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
        entry = wrapped["M"]
        amount_text = entry[EntryKey.AMOUNT]["N"]
        if not INTEGER_TEXT.match(amount_text):
            raise _RejectedError(f"{_ENTRIES_BEFORE}: amount is not an integer")
        amount = int(amount_text)
        direction = entry[EntryKey.DIRECTION]["S"]
        counterparty = entry.get(EntryKey.COUNTERPARTY)
        initiated_by = entry.get(EntryKey.INITIATED_BY)
        after = balance - amount if direction == DIRECTION_DEBIT else balance + amount
        rows.extend(
            (
                entry[EntryKey.TXN_ID]["S"],
                entry[EntryKey.TYPE]["S"],
                wallet_id,
                None if counterparty is None else counterparty["S"],
                direction,
                str(amount),
                str(version + 1),
                str(after),
                str(version),
                str(balance),
                entry[EntryKey.NONCE]["S"],
                entry[EntryKey.CREATED_AT]["N"],
                sequence,
                extra,
                None if initiated_by is None else initiated_by["S"],
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
    if not is_ttl_identity(record.get("userIdentity")):
        raise _RejectedError("REMOVE of a transaction item not made by TTL")
    columns.ttl_expired += 1


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
    """Why ``record`` cannot be decoded, or None (:func:`stream_processor.record_problems.describe_problem`
    over this decoder's :data:`RECORD_KINDS`)."""
    return record_problems.describe_problem(record, RECORD_KINDS)
