"""Every way a wallet request can be refused or fail, in one place.

Each error carries a stable machine-readable ``code`` (the ``error`` field of the JSON body) and a
human ``detail``. Which HTTP status each one becomes is decided in exactly one place,
:data:`wallet.http_errors.ERROR_STATUS`, so the domain and the store never speak HTTP.

The order in which the write path checks them is the precedence of docs/architecture.md:
malformed input (:class:`InvalidRequestError`) before unknown wallets (:class:`WalletNotFoundError`) before a
reused nonce (:class:`IdempotencyKeyReusedError`) before money (:class:`InsufficientFundsError`,
:class:`BalanceLimitExceededError`). A refused request stores nothing, so repeating it is judged afresh.
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


class IdempotencyKeyReusedError(WalletError):
    """The wallet already executed a *different* request under this nonce."""

    code = "idempotency_key_reused"

    def __init__(self, wallet_id: str, nonce: str) -> None:
        super().__init__(
            f"nonce {nonce!r} of wallet {wallet_id} was already used by a different request; "
            "use a new nonce for a new request"
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
    """DynamoDB may have committed the request but its answer was lost: repeat it with the same nonce.

    Every attempt of the write was sent and none was answered (a 5xx or a lost connection), so
    nothing tells whether it committed. The request is safe to repeat with the same nonce and body:
    a repeat of a committed one replays it (``Idempotent-Replayed: true``, the same
    ``Transaction-Id`` as this answer's header), one that never committed executes now. Or ask
    ``GET /api/v1/wallets/{wallet_id}/transactions/{nonce}``: 200 with the outcome if it committed,
    404 if not.
    """

    code = "outcome_unknown"

    def __init__(self, wallet_id: str, nonce: str, txn_id: str | None, retry_after: int = 1) -> None:
        super().__init__(
            f"the outcome of nonce {nonce!r} of wallet {wallet_id} is unknown: DynamoDB may have "
            "committed it, but its answer was lost. Repeat the request with the same nonce and body "
            "(a committed one replays, with Idempotent-Replayed: true), or "
            f"GET /api/v1/wallets/{wallet_id}/transactions/{nonce} (200: it committed; 404: it did not)",
            retry_after,
        )
        self.transaction_id = txn_id


class TransactionNotFoundError(WalletError):
    """No request of this wallet used this nonce within the idempotency window."""

    code = "transaction_not_found"

    def __init__(self, wallet_id: str, nonce: str) -> None:
        super().__init__(
            f"wallet {wallet_id} has no request with nonce {nonce!r} within the idempotency window"
        )


class NotImplementedRouteError(WalletError):
    """A route of seed 000 that needs authentication, which this system does not have."""

    code = "not_implemented"
