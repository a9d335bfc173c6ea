"""The requests the write path executes, as validated values, and what makes two of them "the same".

Instances are only built by :mod:`wallet.validation`, so every field here already obeys the rules
(canonical lower-case UUIDs, 1 <= amount <= 10^15, a well-formed nonce).
"""

from __future__ import annotations

import dataclasses
import hashlib

from contracts.wallets_table import TXN_DEPOSIT, TXN_TRANSFER


@dataclasses.dataclass(frozen=True, slots=True)
class CreateWallet:
    """Open the one wallet of ``user_id``, owned by ``owner`` (None: the caller's own person)."""

    user_id: str
    owner: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Deposit:
    """Credit ``amount`` micro-USD to ``wallet_id``, once per ``nonce``.

    ``txn_type`` is a deposit unless another registered movement type of one wallet is asked for
    (:mod:`contracts.movement_types` says what its leg is).
    """

    wallet_id: str
    amount: int
    nonce: str
    #: Who asked (:mod:`wallet.principals`): part of "the same request" (:func:`request_hash`), so a
    #: nonce belongs to the caller that first used it.
    initiated_by: str | None = None
    txn_type: str = TXN_DEPOSIT

    @property
    def to_wallet_id(self) -> None:
        """Deposits have no counterparty (keeps :func:`request_hash` uniform)."""
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class Transfer:
    """Move ``amount`` micro-USD from ``wallet_id`` (the addressed payer) to ``to_wallet_id``.

    ``txn_type``: a transfer, or another registered movement type between two wallets.
    """

    wallet_id: str
    to_wallet_id: str
    amount: int
    nonce: str
    initiated_by: str | None = None
    txn_type: str = TXN_TRANSFER


Movement = Deposit | Transfer


def request_hash(command: Movement) -> str:
    """Fingerprint of what makes a request "the same" for idempotency (docs/architecture.md).

    The operation, the addressed wallet, the target wallet, the amount as an integer, the nonce
    and the verified principal that asked: ``"100"`` and ``100`` give one hash, a different target,
    amount or caller another. The caller also keys the request's record (nonces are per caller), so
    the hash's principal guards records written before that, never answering one caller with
    another's movement. Without a
    principal (no trusted front) the hash is :func:`legacy_request_hash`, as records written
    before callers owned their nonces hold it. The hash is stored on the record, so a replay is
    recognised by comparing one attribute.

    Examples
    --------
    >>> a = Deposit("0b7e5bd6-5c5b-4bd6-9b09-5d0a5f3c1a11", 100, "n1")
    >>> request_hash(a) == request_hash(Deposit(a.wallet_id, 100, "n1"))
    True
    >>> request_hash(a) == request_hash(Deposit(a.wallet_id, 101, "n1"))
    False
    >>> request_hash(a) == request_hash(Deposit(a.wallet_id, 100, "n1", initiated_by="arn:b"))
    False
    """
    if command.initiated_by is None:
        return legacy_request_hash(command)
    return _digest((*_fields(command), command.initiated_by))


def legacy_request_hash(command: Movement) -> str:
    """The fingerprint without the caller, as records written before nonces had owners hold it.

    Such a record answers a repeat only when its own ``initiated_by`` is the repeat's caller
    (:func:`wallet.outcomes.same_request`).
    """
    return _digest(_fields(command))


def _fields(command: Movement) -> tuple[str, ...]:
    return (
        command.txn_type,
        command.wallet_id,
        command.to_wallet_id or "",
        str(command.amount),
        command.nonce,
    )


def _digest(fields: tuple[str, ...]) -> str:
    return hashlib.sha256("\x1f".join(fields).encode()).hexdigest()
