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
    IdempotencyKeyReusedError,
    InsufficientFundsError,
    InvalidRequestError,
    NotImplementedRouteError,
    StoreUnavailableError,
    ThrottledError,
    WalletError,
    WalletNotFoundError,
)

JSON_MEDIA_TYPE: Final = "application/json"

#: The one mapping from domain errors to HTTP statuses (subclasses inherit their base's status).
ERROR_STATUS: Final[dict[type[WalletError], int]] = {
    InvalidRequestError: 422,
    WalletNotFoundError: 404,
    IdempotencyKeyReusedError: 409,
    InsufficientFundsError: 409,
    BalanceLimitExceededError: 409,
    ThrottledError: 429,
    StoreUnavailableError: 503,
    NotImplementedRouteError: 501,
}


def status_of(error: WalletError) -> int:
    """The HTTP status of a domain error (500 for a :class:`WalletError` nobody mapped)."""
    for cls in type(error).__mro__:
        status = ERROR_STATUS.get(cls)
        if status is not None:
            return status
    return 500


def error_response(status: int, code: str, detail: str, retry_after: int | None = None) -> Response:
    """The JSON error body every failure uses."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return Response(
        orjson.dumps({"error": code, "detail": detail}),
        status_code=status,
        media_type=JSON_MEDIA_TYPE,
        headers=headers,
    )
