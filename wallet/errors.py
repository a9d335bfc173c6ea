"""Every way a wallet request can be refused or fail, in one place.

Each error carries a stable machine-readable ``code`` (the ``error`` field of the JSON body) and a
human ``detail``. Which HTTP status each one becomes is decided in exactly one place,
:data:`wallet.http_errors.ERROR_STATUS`, so the domain and the store never speak HTTP.

The order in which the write path checks them is the precedence of docs/architecture.md:
malformed input (:class:`InvalidRequestError`) before unknown wallets (:class:`WalletNotFoundError`) before a
reused nonce (:class:`IdempotencyKeyReusedError`) before money (:class:`InsufficientFundsError`,
:class:`BalanceLimitExceededError`). A movement refused for money or a missing wallet is remembered
under its nonce (:mod:`wallet.outcomes`): repeating it answers the same refusal, replayed; malformed
input and a reused nonce store nothing.
"""

from __future__ import annotations

from typing import ClassVar


class WalletError(Exception):
    """Base of every domain error; ``code`` is the public, stable name of the refusal."""

    code: ClassVar[str] = "wallet_error"
    #: Seconds a client should wait before repeating the request, for transient failures.
    retry_after: int | None = None
    #: The transaction the answer is about, when there is one (its ``Transaction-Id`` header).
    transaction_id: str | None = None
    #: True when this refusal repeats the one the nonce's record holds (``Idempotent-Replayed``).
    replayed: bool = False

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class InvalidRequestError(WalletError):
    """Malformed input: a bad UUID, a missing field, an amount or nonce outside the rules."""

    code = "validation_error"


class SameWalletTransferError(InvalidRequestError):
    """A transfer whose payer and payee are the same wallet: it would move nothing but a version."""

    code = "same_wallet_transfer"


class WalletNotFoundError(WalletError):
    """The addressed wallet, or a transfer's target, does not exist."""

    code = "wallet_not_found"

    def __init__(self, wallet_id: str) -> None:
        super().__init__(f"wallet {wallet_id} does not exist")
        self.wallet_id = wallet_id


class NonceExpiredError(WalletError):
    """The nonce's record still exists but its idempotency window is over: use a new nonce.

    A record that exists is never executed over, whatever a server's clock says; past the window
    the request is no longer replayed either, so the answer is this (409), not a second execution.
    """

    code = "nonce_expired"

    def __init__(self, wallet_id: str, nonce: str) -> None:
        super().__init__(
            f"nonce {nonce!r} of wallet {wallet_id} was used more than the idempotency window ago "
            "and is not executed again; send a new request with a new nonce"
        )


class NonceVoidedError(WalletError):
    """An outcome lookup decided the nonce's request did not commit; the nonce never executes now."""

    code = "nonce_voided"

    def __init__(self, wallet_id: str, nonce: str) -> None:
        super().__init__(
            f"the request with nonce {nonce!r} of wallet {wallet_id} did not commit and never will: "
            "an outcome lookup voided the nonce; send the request again with a new nonce"
        )


class OutcomePendingError(WalletError):
    """A transaction with this nonce is still committing: its outcome cannot be decided yet.

    Answered by the outcome lookup (and by a write) while DynamoDB holds the nonce's record in a
    transaction in flight: ask again after ``Retry-After`` seconds; nothing is decided meanwhile.
    """

    code = "outcome_pending"

    def __init__(self, wallet_id: str, nonce: str, retry_after: int = 1) -> None:
        super().__init__(
            f"a transaction with nonce {nonce!r} of wallet {wallet_id} is still committing; ask again "
            f"after {retry_after} s (GET /api/v1/wallets/{wallet_id}/transactions/{nonce})"
        )
        self.retry_after = retry_after


class IdempotencyKeyReusedError(WalletError):
    """The wallet already executed a *different* request under this nonce."""

    code = "idempotency_key_reused"

    def __init__(self, wallet_id: str, nonce: str) -> None:
        super().__init__(
            f"nonce {nonce!r} of wallet {wallet_id} was already used by a different request (or "
            "another caller); use a new nonce for a new request"
        )


class InsufficientFundsError(WalletError):
    """The payer's balance is below the amount; nothing moved."""

    code = "insufficient_funds"

    def __init__(self, wallet_id: str) -> None:
        super().__init__(f"wallet {wallet_id} has insufficient funds")


class BalanceLimitExceededError(WalletError):
    """The credit would lift a balance above the int64-safe ceiling of docs/architecture.md (9 x 10^18)."""

    code = "balance_limit_exceeded"

    def __init__(self, wallet_id: str) -> None:
        super().__init__(f"the credit would take wallet {wallet_id} above the maximum balance")


class ThrottledError(WalletError):
    """DynamoDB, a busy wallet or a full server refused; retry after Retry-After seconds, same nonce."""

    code = "throttled"

    def __init__(self, detail: str, retry_after: int = 1) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class ContentionError(ThrottledError):
    """A busy wallet: every bounded, jittered attempt lost the race to other writers; nothing written.

    Seed 000 answers traffic above one wallet's ceiling (about 333 operations/s on one DynamoDB
    partition) with 429, not a failure: the request was sound and will succeed when repeated with the
    same nonce after ``Retry-After`` seconds. So a busy wallet is a kind of throttling, with the same
    public code and status (429 ``throttled``); the subclass stays so the store's telemetry can tell a
    lost race (``contention_exhausted``) from DynamoDB's own capacity refusals (``throttles``).
    """


class OverloadedError(ThrottledError):
    """This server process already serves its bound of requests; nothing was read or written.

    Admission control (:mod:`wallet.admission`) answers it before the request reaches the store, in
    place of API Gateway's throttle: 429 ``throttled`` with ``Retry-After``, the answer a client
    already handles for a busy wallet, and the repeat (same nonce) may reach a less busy server.
    """

    def __init__(self, limit: int, retry_after: int = 1) -> None:
        super().__init__(
            f"this server has {limit} requests in flight, its bound; nothing was done, "
            "repeat the request with the same nonce",
            retry_after,
        )


class StoreUnavailableError(WalletError):
    """DynamoDB failed or was unreachable; retry with the same nonce (a replay answers 204).

    A transaction either fully happened or not at all; repeating the request with the same nonce
    tells which (a replay answers 204 without moving money twice).
    """

    code = "unavailable"

    def __init__(self, detail: str, retry_after: int = 1) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class StoreRejectedError(WalletError):
    """DynamoDB refused the request for a reason a repeat cannot fix (nothing was written).

    A refusal botocore does not retry either: bad or expired credentials (``ExpiredTokenException``,
    ``InvalidSignatureException``, ``UnrecognizedClientException``, ``AccessDeniedException``), a
    missing table, a request DynamoDB finds invalid (``ValidationException``). The deployment must
    be fixed, so the answer says so instead of "retry later" (500, no ``Retry-After``); it names
    DynamoDB's error and request id, and the store logs it for the operator.
    """

    code = "dynamodb_refused"


class OutcomeUnknownError(StoreUnavailableError):
    """DynamoDB may have committed the request but its answer was lost: decide it, never guess.

    Some attempt of the write was sent and not answered (a 5xx, a lost connection, a transaction
    still in progress when the call's time ran out), so nothing yet tells whether it committed;
    ``transaction_id`` names the transaction a repeat replays if it did. Deciding is the client's
    next step, and each way decides for good:

    - repeat the request with the same nonce and body: 204 (applied now, or replayed with
      ``Idempotent-Replayed: true`` and this ``Transaction-Id``), or 409 ``nonce_voided`` if a
      lookup already decided that it did not commit;
    - or ``GET /api/v1/wallets/{wallet_id}/transactions/{nonce}``: 200 it committed; 404 it did not
      and never will (the lookup voids the nonce first, so no attempt still in flight can commit
      after it); 409 ``outcome_pending``: still committing, ask again after ``Retry-After``.
    """

    code = "outcome_unknown"

    def __init__(self, wallet_id: str, nonce: str, txn_id: str | None, retry_after: int = 1) -> None:
        super().__init__(
            f"the outcome of nonce {nonce!r} of wallet {wallet_id} is unknown: DynamoDB may have "
            "committed it, but its answer was lost. Decide it before anything else: repeat the "
            "request with the same nonce and body (204: done, applied now or replayed; 409 "
            f"nonce_voided: it did not commit), or GET /api/v1/wallets/{wallet_id}/transactions/{nonce} "
            "(200: it committed; 404: it did not and never will, use a new nonce; 409 "
            "outcome_pending: ask again after Retry-After). Never send it with a new nonce before that",
            retry_after,
        )
        self.transaction_id = txn_id


class TransactionNotFoundError(WalletError):
    """No movement of this caller committed with this nonce, and none will (its record says so).

    The lookup answers it only once that is decided: no record (a void one is put first under the
    caller's own key, so no attempt still in flight can commit afterwards; nothing is put for a
    caller that may not move the wallet's money), a declined or voided record. One wording for
    every case, so the answer tells nobody whether a nonce was ever used.
    """

    code = "transaction_not_found"

    def __init__(self, wallet_id: str, nonce: str) -> None:
        super().__init__(
            f"wallet {wallet_id} has no committed request of yours with nonce {nonce!r}, and none "
            "will commit; use a new nonce"
        )


class OwnerNotPermittedError(WalletError):
    """The caller named a wallet's owner, which only a caller granted ``create_wallet:any`` may."""

    code = "owner_not_permitted"

    def __init__(self, owner: str) -> None:
        super().__init__(
            f"only a caller granted create_wallet:any may create a wallet for another owner ({owner!r}); "
            "nothing was created"
        )


class HistoryUnavailableError(WalletError):
    """A page of history cannot be answered whole yet: DynamoDB does not account for every entry
    newer than the lake (an index a moment behind its table, or the lake days behind); ask again."""

    code = "history_catching_up"

    def __init__(self, detail: str, retry_after: int = 1) -> None:
        super().__init__(f"{detail}; nothing is answered rather than a page with a hole, ask again")
        self.retry_after = retry_after


class LakeNeededError(WalletError):
    """The wallet's history reaches past DynamoDB and this server reads no lake (a plain Parquet lake)."""

    code = "history_needs_lake"

    def __init__(self, wallet_id: str) -> None:
        super().__init__(
            f"wallet {wallet_id}'s older entries are only in the lake, which this server does not read "
            "(the history reads the Iceberg lake: WALLETLAKE_LAKE_FORMAT=iceberg)"
        )


class EntryNotFoundError(WalletError):
    """The wallet has no entry of this transaction."""

    code = "entry_not_found"

    def __init__(self, wallet_id: str, txn_id: str) -> None:
        super().__init__(f"wallet {wallet_id} has no entry of transaction {txn_id}")
