"""What a nonce's idempotency record answers: the decision rules of a request's final answer, pure.

A movement's nonce is decided by the first record put under its key (every put is conditional on
none existing, :mod:`wallet.write_requests`):

- ``applied``: the movement committed with it. The same request, from the same caller, within
  the window, is replayed (its receipt, ``Idempotent-Replayed: true``);
- ``declined``: it was refused (insufficient funds, a missing wallet, the balance limit). The same
  request gets the same refusal, replayed; it never executes later, after a top-up say (Stripe
  keeps a key's first result, failure included);
- ``void``: an outcome lookup found no record and put this one, so no attempt can commit after
  it: the request did not commit, and the nonce never executes.

Anything else with the nonce is refused: another body or another caller is 409
``idempotency_key_reused`` (a caller never gets someone else's movement), and a record past its
window that still exists is 409 ``nonce_expired`` — only the answer depends on a clock, never
whether money moves. The outcome lookup (:func:`lookup_answer`) answers only the caller that made
the request, and never shows another caller's identity.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from contracts.idempotency_table import (
    OUTCOME,
    OUTCOME_APPLIED,
    OUTCOME_DECLINED,
    OUTCOME_VOID,
    REFUSAL,
    REFUSED_WALLET,
    WINDOW_ENDS_AT,
)
from contracts.wallets_table import Attr
from wallet.commands import Movement, legacy_request_hash, request_hash
from wallet.errors import (
    BalanceLimitExceededError,
    IdempotencyKeyReusedError,
    InsufficientFundsError,
    NonceExpiredError,
    NonceVoidedError,
    TransactionNotFoundError,
    WalletError,
    WalletNotFoundError,
)
from wallet.receipts import Receipt, receipt_of

#: The refusals a record keeps (decided by DynamoDB's conditions on the movement itself): by code.
_DECLINES: Final[
    dict[str, type[WalletNotFoundError | InsufficientFundsError | BalanceLimitExceededError]]
] = {
    WalletNotFoundError.code: WalletNotFoundError,
    InsufficientFundsError.code: InsufficientFundsError,
    BalanceLimitExceededError.code: BalanceLimitExceededError,
}


@dataclasses.dataclass(frozen=True, slots=True)
class Decline:
    """A refusal as a record keeps it: the error's code and the wallet it names."""

    code: str
    wallet_id: str

    def error(self, *, replayed: bool) -> WalletError:
        """The refusal answered (again, when ``replayed``)."""
        error = _DECLINES[self.code](self.wallet_id)
        error.replayed = replayed
        return error


def decline_of(error: WalletError) -> Decline | None:
    """The record-worthy refusal ``error`` is, or None (a reused nonce, a failure: nothing to keep).

    Examples
    --------
    >>> decline_of(InsufficientFundsError("w"))
    Decline(code='insufficient_funds', wallet_id='w')
    """
    if type(error) in _DECLINES.values():
        wallet_id = getattr(error, "wallet_id", None)
        return Decline(error.code, wallet_id if isinstance(wallet_id, str) else "")
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Fingerprint:
    """What a record must match to be "the same request" of this caller."""

    command: Movement
    current: str

    @classmethod
    def of(cls, command: Movement) -> Fingerprint:
        return cls(command, request_hash(command))

    def matches(self, record: Mapping[str, Any]) -> bool:
        """The record is this request's: its hash, or the caller-less hash of a record written
        before nonces had owners when the record's caller is this one (computed only then)."""
        stored = _text(record, Attr.REQUEST_HASH)
        if stored == self.current:
            return True
        principal = self.command.initiated_by
        return (
            principal is not None
            and _text(record, Attr.INITIATED_BY) == principal
            and stored == legacy_request_hash(self.command)
        )


def outcome_of(record: Mapping[str, Any]) -> str:
    """``applied``, ``declined`` or ``void`` (records written before declines were kept: applied)."""
    return _text(record, OUTCOME) or OUTCOME_APPLIED


def window_ends_at(record: Mapping[str, Any]) -> int:
    """Epoch seconds the record replays until (a record of before the margin: its ``expires_at``)."""
    value = record.get(WINDOW_ENDS_AT) or record.get(Attr.EXPIRES_AT)
    return int(value["N"]) if value else 0


def answer_repeat(
    record: Mapping[str, Any], command: Movement, fingerprint: Fingerprint, now_s: int
) -> Receipt | WalletError:
    """The answer to ``command`` when its nonce's record exists: a replay, or the refusal to raise.

    In docs/architecture.md's precedence after a missing wallet: a voided nonce, another request
    or caller (409 ``idempotency_key_reused``), the window over (409 ``nonce_expired``), then the
    record's own outcome again.

    Examples
    --------
    >>> from wallet.commands import Deposit
    >>> d = Deposit("w", 5, "n")
    >>> answer_repeat({"outcome": {"S": "void"}}, d, Fingerprint.of(d), 0).code
    'nonce_voided'
    """
    outcome = outcome_of(record)
    if outcome == OUTCOME_VOID:
        return NonceVoidedError(command.wallet_id, command.nonce)
    if not fingerprint.matches(record):
        return IdempotencyKeyReusedError(command.wallet_id, command.nonce)
    if now_s >= window_ends_at(record):
        return NonceExpiredError(command.wallet_id, command.nonce)
    if outcome == OUTCOME_DECLINED:
        return Decline(_text(record, REFUSAL) or "", _text(record, REFUSED_WALLET) or "").error(replayed=True)
    return receipt_of(record, replayed=True)


def lookup_answer(record: Mapping[str, Any], wallet_id: str, nonce: str, principal: str | None) -> Receipt:
    """What ``GET .../transactions/{nonce}`` answers from the nonce's record, for ``principal``.

    200 (the receipt) only for a committed movement of this caller; otherwise raises
    :class:`~wallet.errors.TransactionNotFoundError` (404), one wording whatever the record says
    (void, declined, or not this caller's), so the answer tells no one whether a nonce was used.
    """
    outcome = outcome_of(record)
    if outcome in (OUTCOME_VOID, OUTCOME_DECLINED) or _text(record, Attr.INITIATED_BY) != principal:
        raise TransactionNotFoundError(wallet_id, nonce)
    return receipt_of(record, replayed=True)


def _text(record: Mapping[str, Any], name: str) -> str | None:
    value = record.get(name)
    return value.get("S") if isinstance(value, Mapping) else None
