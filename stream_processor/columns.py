"""The checked lake rows of one decoded batch, parsed and checked a column at a time.

The decoder (:mod:`stream_processor.decoder`) only copies typed attribute values into plain lists
(one flat list per record kind, a row per record), as fast as Python allows, and hands them here
already converted to Arrow. Everything that is cheaper done on a whole column at once happens
here: parsing DynamoDB numbers into int64, range checks on money and versions, each entry's check
against its movement type's legs (:mod:`contracts.movement_types`), and the check that each wallet
MODIFY's entry follows its OLD image by exactly one version and exactly its delta. Each such
MODIFY is one ledger row (a deposit's credit; a transfer's debit of the payer and, in the payee's
own record, its credit). Transaction INSERTs written by the earlier compare-and-swap write path
still become their double entry here. A row that fails a check leaves the batch as a quarantine
entry with its reason; it never fails the batch. :func:`decoded_batch` then hands the rows on to
:mod:`stream_processor.decoded`, which makes the quarantine and names the batch: nothing here
calls back into the decoder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from contracts.lake_tables import (
    EXTRA_ATTRIBUTES,
    INITIATED_BY,
    LEDGER,
    OWNER,
    TIMESTAMP_MS,
    WALLETS,
)
from contracts.money import INTEGER_TEXT, MAX_AMOUNT, MAX_BALANCE, MIN_AMOUNT
from contracts.movement_types import MOVEMENT_TYPES, MovementType
from contracts.wallets_table import DIRECTION_CREDIT, DIRECTION_DEBIT, TXN_DEPOSIT, TXN_TRANSFER, Attr
from stream_processor.decoded import DecodedBatch, named_batch

DEBIT: Final = DIRECTION_DEBIT
CREDIT: Final = DIRECTION_CREDIT
ENTRY_ID_SEPARATOR: Final = ":"

MAX_INT64: Final = 2**63 - 1
#: 9999-12-31T23:59:59.999Z: the last instant Parquet readers and Athena turn into a timestamp.
MAX_TIMESTAMP_MS: Final = 253_402_300_799_999

_NULL_STRING: Final = pa.scalar(None, pa.string())


def entry_id(txn_id: str, direction: str) -> str:
    """``{txn_id}:debit`` or ``{txn_id}:credit``: unique per ledger row, stable across retries."""
    return f"{txn_id}{ENTRY_ID_SEPARATOR}{direction}"


class Rows(Protocol):
    """One record kind's rows as the decoder collected them: Arrow string chunks, per field."""

    @property
    def fields(self) -> tuple[str, ...]: ...
    @property
    def positions(self) -> list[int]: ...
    @property
    def chunks(self) -> list[list[pa.Array]]: ...


class Collected(Protocol):
    """What the decoder collected from one batch (:class:`stream_processor.decoder.BatchColumns`),
    every row already in Arrow."""

    @property
    def entries(self) -> Rows: ...
    @property
    def transactions(self) -> Rows: ...
    @property
    def wallets(self) -> Rows: ...
    @property
    def rejected_position(self) -> list[int]: ...
    @property
    def rejected_reason(self) -> list[str]: ...
    @property
    def ignored(self) -> int: ...
    @property
    def ttl_expired(self) -> int: ...


def _column(rows: Rows, field: str) -> pa.Array:
    """One column of the collected rows (text), by its name in ``fields``."""
    index = rows.fields.index(field)
    chunks = [chunk[index] for chunk in rows.chunks]
    return chunks[0] if len(chunks) == 1 else pa.concat_arrays(chunks)


@dataclasses.dataclass(frozen=True, slots=True)
class LakeRows:
    """The checked ledger and wallets rows of one batch, and the records rejected (position, reason)."""

    ledger: pa.Table
    wallets: pa.Table
    rejected: list[tuple[int, str]]


def decoded_batch(
    columns: Collected, records: Sequence[Mapping[str, Any]], ingested_at_ms: int, *, strict: bool
) -> DecodedBatch:
    """The batch the decoder collected, checked and shaped into the lake's tables, then named.

    ``strict``: raise ``pyarrow.ArrowInvalid`` for a null in a required column
    (:func:`require_values`), so that the decoder checks every record again; its careful pass
    asks for no such check. The rejected records become the quarantine in
    :func:`stream_processor.decoded.named_batch`, the batch's last step.
    """
    rows = build_tables(columns, ingested_at_ms)
    if strict:
        require_values(rows)
    return named_batch(
        rows.ledger,
        rows.wallets,
        rows.rejected,
        records,
        ingested_at_ms,
        ttl_expired=columns.ttl_expired,
        ignored=columns.ignored,
    )


def build_tables(columns: Collected, ingested_at_ms: int) -> LakeRows:
    """Parse, check and shape the collected columns into the ledger and wallets tables, and say
    which records are rejected, and why.

    Raises ``pyarrow.ArrowInvalid``/``ArrowTypeError`` when a collected value has the wrong Python
    type (a record whose ``S`` holds a number, say); the decoder then decodes the batch again,
    checking every record, so the culprit is quarantined instead.
    """
    ingested = pa.scalar(ingested_at_ms, TIMESTAMP_MS)
    entries, entry_rejects = _entries(columns.entries, ingested)
    legacy, legacy_rejects = _legacy_ledger(columns.transactions, ingested)
    wallets, wallet_rejects = _wallets(columns.wallets)
    rejected = sorted(
        [
            *zip(columns.rejected_position, columns.rejected_reason, strict=True),
            *entry_rejects,
            *legacy_rejects,
            *wallet_rejects,
        ]
    )
    # legacy rows only while the stream still holds records of the compare-and-swap write path
    ledger = pa.concat_tables([entries, legacy]) if legacy.num_rows else entries
    return LakeRows(ledger=ledger, wallets=wallets, rejected=rejected)


def require_values(rows: LakeRows) -> None:
    """Raise ``pyarrow.ArrowInvalid`` when a ledger or wallets column the contract declares not
    nullable holds a null.

    Arrow does not enforce a field's nullability, so a null taken from a record (a ``SequenceNumber``
    of null, which the fast path copies as it is) would reach the lake's not-null columns. Raised
    like a value of the wrong type, it sends the batch through the careful pass, where
    :func:`stream_processor.decoder.describe_problem` quarantines that record alone. One null count
    per column: nothing per row.
    """
    for table in (rows.ledger, rows.wallets):
        for field in table.schema:
            if not field.nullable and table.column(field.name).null_count:
                raise pa.ArrowInvalid(f"a null in the required column {field.name}")


def _entries(rows: Rows, ingested: pa.Scalar) -> tuple[pa.Table, list[tuple[int, str]]]:
    """Ledger rows from wallet MODIFYs: one per record, checked against the OLD image it follows.

    The NEW image states the entry whole (DynamoDB's own ``version`` and ``balance`` after the
    ``ADD``); the OLD image must be the version before it and the balance before the entry's delta,
    so an image that does not describe exactly one applied entry is quarantined, never guessed at.
    """
    if not rows.positions:
        return LEDGER.empty_table(), []

    def column(field: str) -> pa.Array:
        return _column(rows, field)

    txn_type = column("txn_type")
    wallet_id = column("wallet_id")
    counterparty = column("counterparty_wallet_id")
    direction = column("direction")
    amount = _integers(column("amount"))
    version = _integers(column("wallet_version"))
    balance = _integers(column("balance_after"))
    previous_version = _integers(column("previous_version"))
    previous_balance = _integers(column("previous_balance"))
    created_at = _integers(column("created_at"))
    debit, credit = pc.equal(direction, DEBIT), pc.equal(direction, CREDIT)
    delta = pc.if_else(debit, pc.negate(amount), amount)
    # what a row's direction is not (a row that is neither fails the direction check first)
    other_direction = {DEBIT: credit, CREDIT: debit}
    of_kind = [(kind, pc.equal(txn_type, kind.name)) for kind in MOVEMENT_TYPES.values()]
    registered = of_kind[0][1]
    for _, rows_of_kind in of_kind[1:]:
        registered = pc.or_(registered, rows_of_kind)
    checks = [
        (pc.invert(registered), "unknown transaction type"),
        (
            pc.invert(pc.or_(debit, credit)),
            f"{Attr.ENTRY_DIRECTION} is not debit or credit",
        ),
        (_outside(amount, MIN_AMOUNT, MAX_AMOUNT), _range_reason(Attr.ENTRY_AMOUNT, MIN_AMOUNT, MAX_AMOUNT)),
        (_outside(version, 1, MAX_INT64), _range_reason(Attr.VERSION, 1, MAX_INT64)),
        (_outside(balance, 0, MAX_BALANCE), _range_reason(Attr.BALANCE, 0, MAX_BALANCE)),
        (_outside(created_at, 0, MAX_TIMESTAMP_MS), _range_reason(Attr.UPDATED_AT, 0, MAX_TIMESTAMP_MS)),
        *(
            check
            for kind, rows_of_kind in of_kind
            for check in _leg_checks(kind, rows_of_kind, wallet_id, counterparty, other_direction)
        ),
        (
            pc.not_equal(previous_version, pc.subtract(version, 1)),
            "version does not follow the OldImage's version by one (or no OldImage)",
        ),
        (
            pc.not_equal(pc.add(previous_balance, delta), balance),
            "balance is not the OldImage's balance plus the entry",
        ),
    ]
    keep, rejects = _apply_checks(checks, rows.positions)
    if rejects:  # a group commit's MODIFY is several rows: one failing rejects the record whole
        keep, rejects = _whole_records(rows.positions, rejects)
    txn_id = column("txn_id")
    arrays = {
        "txn_id": txn_id,
        "txn_type": txn_type,
        "wallet_id": wallet_id,
        "counterparty": counterparty,
        "direction": direction,
        "amount": amount,
        "delta": delta,
        "version": version,
        "balance": balance,
        "nonce": column("nonce"),
        "created_at": created_at.cast(TIMESTAMP_MS),
        "sequence": column("sequence"),
        "extra": column("extra_attributes"),
        "initiated_by": column("initiated_by"),
    }
    if keep is not None:
        arrays = {name: values.filter(keep) for name, values in arrays.items()}
    return _ledger_table(**arrays, ingested=ingested), rejects


def _leg_checks(
    kind: MovementType,
    of_kind: pa.Array,
    wallet_id: pa.Array,
    counterparty: pa.Array,
    other_direction: Mapping[str, pa.Array],
) -> list[tuple[pa.Array, str]]:
    """What an entry of ``kind`` must be: one of its legs (direction, and a counterparty exactly
    when the leg's other side is a wallet), never naming its own wallet as the other side.

    Made from the registry (:mod:`contracts.movement_types`), so a type registered later is
    checked as exactly what it says; the reasons name the type (``transfer to the same wallet``).
    """
    if kind.internal:  # one debit and one credit (the registry refuses any other), each with its other side
        return [
            (
                pc.and_(of_kind, pc.is_null(counterparty)),
                f"{kind.name} entry without {Attr.ENTRY_COUNTERPARTY}",
            ),
            (
                pc.and_(of_kind, pc.fill_null(pc.equal(wallet_id, counterparty), False)),
                f"{kind.name} to the same wallet",
            ),
        ]
    # one leg from or to outside the system (the registry refuses any other kind)
    wrong = pc.or_(other_direction[kind.directions[0]], pc.is_valid(counterparty))
    return [
        (
            pc.and_(of_kind, wrong),
            f"{kind.name} entry that is not a {' or '.join(kind.directions)} without counterparty",
        )
    ]


def _ledger_table(
    *,
    txn_id: pa.Array,
    txn_type: pa.Array,
    wallet_id: pa.Array,
    counterparty: pa.Array,
    direction: pa.Array,
    amount: pa.Array,
    delta: pa.Array,
    version: pa.Array,
    balance: pa.Array,
    nonce: pa.Array,
    created_at: pa.Array,
    sequence: pa.Array,
    extra: pa.Array,
    ingested: pa.Scalar,
    initiated_by: pa.Array | None = None,
) -> pa.Table:
    """Ledger rows of :data:`~contracts.lake_tables.LEDGER`, whichever records they came from; a
    column the decoder does not fill (a nullable one added to the contract) is null."""
    columns = {
        "entry_id": _entry_ids(txn_id, direction),
        "txn_id": txn_id,
        "txn_type": txn_type,
        "wallet_id": wallet_id,
        "counterparty_wallet_id": counterparty,
        "direction": direction,
        "amount": amount,
        "delta": delta,
        "wallet_version": version,
        "balance_after": balance,
        "nonce": nonce,
        "created_at": created_at,
        "stream_sequence": sequence,
        "ingested_at": pa.repeat(ingested, len(amount)),
        EXTRA_ATTRIBUTES: extra,
    }
    if initiated_by is not None:
        columns[INITIATED_BY] = initiated_by
    return _of_schema(LEDGER, columns, len(amount))


def _legacy_ledger(rows: Rows, ingested: pa.Scalar) -> tuple[pa.Table, list[tuple[int, str]]]:
    """Ledger rows from transaction INSERTs of the compare-and-swap write path (double entry).

    Those items carried each touched wallet's version and balance after; their wallet MODIFYs carry
    no entry, so a stream holding both paths' records gives every entry exactly once.
    """
    if not rows.positions:
        return LEDGER.empty_table(), []

    def column(field: str) -> pa.Array:
        return _column(rows, field)

    txn_type = column("txn_type")
    wallet_id = column("wallet_id")
    to_wallet_id = column("to_wallet_id")
    amount = _integers(column("amount"))
    version = _integers(column("wallet_version"))
    balance = _integers(column("wallet_balance_after"))
    to_version = _integers(column("to_wallet_version"))
    to_balance = _integers(column("to_wallet_balance_after"))
    created_at = _integers(column("created_at"))
    # A missing (null) type fails the first check (_apply_checks fails what it cannot evaluate);
    # is_transfer is filled so that the rows kept never carry a null into the double entry.
    # The compare-and-swap write path is history and only ever wrote these two types, so its
    # items are judged against them, not against the registry (a later type never had such items).
    is_transfer = pc.fill_null(pc.equal(txn_type, TXN_TRANSFER), False)
    checks = [
        (pc.invert(pc.or_(is_transfer, pc.equal(txn_type, TXN_DEPOSIT))), "unknown transaction type"),
        (_outside(amount, MIN_AMOUNT, MAX_AMOUNT), _range_reason(Attr.AMOUNT, MIN_AMOUNT, MAX_AMOUNT)),
        (_outside(version, 1, MAX_INT64), _range_reason(Attr.WALLET_VERSION, 1, MAX_INT64)),
        (_outside(balance, 0, MAX_BALANCE), _range_reason(Attr.WALLET_BALANCE_AFTER, 0, MAX_BALANCE)),
        (_outside(created_at, 0, MAX_TIMESTAMP_MS), _range_reason(Attr.CREATED_AT, 0, MAX_TIMESTAMP_MS)),
        (pc.and_(is_transfer, pc.is_null(to_wallet_id)), f"transfer without {Attr.TO_WALLET_ID}"),
        (
            pc.and_(is_transfer, _outside(to_version, 1, MAX_INT64)),
            _range_reason(Attr.TO_WALLET_VERSION, 1, MAX_INT64),
        ),
        (
            pc.and_(is_transfer, _outside(to_balance, 0, MAX_BALANCE)),
            _range_reason(Attr.TO_WALLET_BALANCE_AFTER, 0, MAX_BALANCE),
        ),
        (
            pc.and_(is_transfer, pc.fill_null(pc.equal(wallet_id, to_wallet_id), False)),
            "transfer to the same wallet",
        ),
    ]
    keep, rejects = _apply_checks(checks, rows.positions)
    txns = {
        "txn_id": column("txn_id"),
        "txn_type": txn_type,
        "wallet_id": wallet_id,
        "to_wallet_id": to_wallet_id,
        "amount": amount,
        "version": version,
        "balance": balance,
        "to_version": to_version,
        "to_balance": to_balance,
        "created_at": created_at.cast(TIMESTAMP_MS),
        "nonce": column("nonce"),
        "sequence": column("sequence"),
        "extra": column("extra_attributes"),
        "is_transfer": is_transfer,
    }
    if keep is not None:
        txns = {name: values.filter(keep) for name, values in txns.items()}
    return _double_entry(txns, ingested), rejects


def _double_entry(txns: dict[str, pa.Array], ingested: pa.Scalar) -> pa.Table:
    """Ledger rows in stream order: each transaction's first row, then a transfer's credit row.

    The first row belongs to the addressed wallet (a deposit's credit, a transfer's debit); a
    transfer adds the payee's credit right after it. Built with ``take`` on whole columns, so the
    result is one contiguous chunk per column (what the Parquet writer is fastest on).
    """
    is_transfer = txns["is_transfer"].to_numpy(zero_copy_only=False)
    rows_per_txn = 1 + is_transfer.astype(np.int64)
    if not is_transfer.any():
        taken, second = txns, None
    else:
        order = pa.array(np.repeat(np.arange(len(is_transfer)), rows_per_txn))
        second_leg = np.zeros(len(order), dtype=bool)
        second_leg[(np.cumsum(rows_per_txn) - 1)[is_transfer]] = True
        taken = {name: values.take(order) for name, values in txns.items()}
        second = pa.array(second_leg)
    debit = taken["is_transfer"] if second is None else pc.and_(taken["is_transfer"], pc.invert(second))
    direction = pc.if_else(debit, DEBIT, CREDIT)
    amount = taken["amount"]
    own, other = taken["wallet_id"], taken["to_wallet_id"]
    if second is None:
        wallet_id, counterparty = own, pc.if_else(debit, other, _NULL_STRING)
        version, balance = taken["version"], taken["balance"]
    else:
        wallet_id = pc.if_else(second, other, own)
        counterparty = pc.if_else(second, own, pc.if_else(debit, other, _NULL_STRING))
        version = pc.if_else(second, taken["to_version"], taken["version"])
        balance = pc.if_else(second, taken["to_balance"], taken["balance"])
    return _ledger_table(
        txn_id=taken["txn_id"],
        txn_type=taken["txn_type"],
        wallet_id=wallet_id,
        counterparty=counterparty,
        direction=direction,
        amount=amount,
        delta=pc.if_else(debit, pc.negate(amount), amount),
        version=version,
        balance=balance,
        nonce=taken["nonce"],
        created_at=taken["created_at"],
        sequence=taken["sequence"],
        extra=taken["extra"],
        ingested=ingested,
    )  # the compare-and-swap write path predates attribution: initiated_by is null


def _wallets(rows: Rows) -> tuple[pa.Table, list[tuple[int, str]]]:
    if not rows.positions:
        return WALLETS.empty_table(), []
    created_at = _integers(_column(rows, "created_at"))
    checks = [
        (_outside(created_at, 0, MAX_TIMESTAMP_MS), _range_reason(Attr.CREATED_AT, 0, MAX_TIMESTAMP_MS))
    ]
    keep, rejects = _apply_checks(checks, rows.positions)
    table = _of_schema(
        WALLETS,
        {
            "wallet_id": _column(rows, "wallet_id"),
            "user_id": _column(rows, "user_id"),
            "created_at": created_at.cast(TIMESTAMP_MS),
            EXTRA_ATTRIBUTES: _column(rows, "extra_attributes"),
            OWNER: _column(rows, "owner"),
        },
        len(created_at),
    )
    return (table if keep is None else table.filter(keep)), rejects


def _of_schema(schema: pa.Schema, columns: dict[str, pa.Array], rows: int) -> pa.Table:
    """``columns`` as a table of ``schema``, a column not given null (as
    :func:`contracts.lake_tables.table_of` makes it, here so that the batch never leaves this module
    for it: a record's walk enters each module once)."""
    return pa.Table.from_arrays(
        [columns[field.name] if field.name in columns else pa.nulls(rows, field.type) for field in schema],
        schema=schema,
    )


def _apply_checks(
    checks: list[tuple[pa.Array, str]], positions: list[int]
) -> tuple[pa.Array | None, list[tuple[int, str]]]:
    """Rows failing any check, each with the reason of the first check it fails.

    Returns the keep-mask (None when every row passes: the common case costs one ``any``).
    """
    # A check that cannot be evaluated for a row (null) fails it: quarantined, never kept unchecked.
    checks = [(pc.fill_null(mask, True), reason) for mask, reason in checks]
    failed = checks[0][0]
    for mask, _ in checks[1:]:
        failed = pc.or_(failed, mask)
    if not pc.any(failed).as_py():
        return None, []
    reasons = np.full(len(failed), None, dtype=object)
    for mask, reason in reversed(checks):  # the first failing check wins
        reasons[mask.to_numpy(zero_copy_only=False)] = reason
    rejects = [(positions[index], str(reasons[index])) for index in np.flatnonzero(failed.to_numpy(False))]
    return pc.invert(failed), rejects


def _whole_records(
    positions: list[int], rejects: list[tuple[int, str]]
) -> tuple[pa.Array, list[tuple[int, str]]]:
    """Keep-mask and rejects widened to whole records: every row of a rejected record, reported once."""
    reasons: dict[int, str] = {}
    for position, reason in rejects:
        reasons.setdefault(position, reason)
    keep = pa.array([position not in reasons for position in positions], pa.bool_())
    return keep, sorted(reasons.items())


def _integers(text: pa.Array) -> pa.Array:
    """DynamoDB ``N`` text as int64; null where absent or not an integer that fits in int64."""
    try:
        return pc.cast(text, pa.int64())
    except pa.ArrowInvalid:  # rare: parse one by one to find the bad values
        return pa.array([_int64_or_none(value) for value in text.to_pylist()], pa.int64())


def _int64_or_none(text: str | None) -> int | None:
    if text is None or not INTEGER_TEXT.match(text):
        return None
    number = int(text)
    return number if -MAX_INT64 - 1 <= number <= MAX_INT64 else None


def _outside(values: pa.Array, low: int, high: int) -> pa.Array:
    """True where a value is missing or outside ``low..high``."""
    return pc.fill_null(pc.or_(pc.less(values, low), pc.greater(values, high)), True)


def _range_reason(attribute: str, low: int, high: int) -> str:
    return f"{attribute} is not an integer in {low}..{high}"


def _entry_ids(txn_ids: pa.Array | pa.ChunkedArray, directions: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(txn_ids, directions, ENTRY_ID_SEPARATOR)
