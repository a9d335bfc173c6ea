"""The one place where domain errors become HTTP: their statuses, and the JSON body of every failure.

Shared by the FastAPI app (:mod:`wallet.api`) and the movement routes served ahead of its router
(:mod:`wallet.movement_routes`), so an error reads the same whichever of them answers.
"""

from __future__ import annotations

from typing import Final

import orjson
from starlette.responses import Response

from wallet.errors import (
    BalanceLimitExceededError,
    EntryNotFoundError,
    HistoryUnavailableError,
    IdempotencyKeyReusedError,
    InsufficientFundsError,
    InvalidRequestError,
    LakeNeededError,
    NonceExpiredError,
    NonceVoidedError,
    OutcomePendingError,
    OwnerNotPermittedError,
    StoreRejectedError,
    StoreUnavailableError,
    ThrottledError,
    TransactionNotFoundError,
    WalletError,
    WalletNotFoundError,
)
from wallet.receipts import REPLAYED_HEADER, TRANSACTION_ID_HEADER

JSON_MEDIA_TYPE: Final = "application/json"

#: The one mapping from domain errors to HTTP statuses (subclasses inherit their base's status).
ERROR_STATUS: Final[dict[type[WalletError], int]] = {
    InvalidRequestError: 422,
    WalletNotFoundError: 404,
    TransactionNotFoundError: 404,
    IdempotencyKeyReusedError: 409,
    InsufficientFundsError: 409,
    BalanceLimitExceededError: 409,
    NonceExpiredError: 409,
    NonceVoidedError: 409,
    OutcomePendingError: 409,
    ThrottledError: 429,
    StoreUnavailableError: 503,
    StoreRejectedError: 500,
    OwnerNotPermittedError: 403,
    EntryNotFoundError: 404,
    HistoryUnavailableError: 503,
    LakeNeededError: 501,
}


def wallet_error_response(error: WalletError) -> Response:
    """The answer to a domain error: its status, body and headers."""
    response = error_response(
        status_of(error), error.code, error.detail, error.retry_after, error.transaction_id
    )
    if error.replayed:
        response.headers[REPLAYED_HEADER] = "true"
    return response


def status_of(error: WalletError) -> int:
    """The HTTP status of a domain error (500 for a :class:`WalletError` nobody mapped)."""
    for cls in type(error).__mro__:
        status = ERROR_STATUS.get(cls)
        if status is not None:
            return status
    return 500


def error_response(
    status: int, code: str, detail: str, retry_after: int | None = None, transaction_id: str | None = None
) -> Response:
    """The JSON error body every failure uses."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    if transaction_id is not None:
        headers[TRANSACTION_ID_HEADER] = transaction_id
    return Response(
        orjson.dumps({"error": code, "detail": detail}),
        status_code=status,
        media_type=JSON_MEDIA_TYPE,
        headers=headers,
    )
