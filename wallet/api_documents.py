"""The HTTP API's OpenAPI description: its schemas, links, headers and error responses.

What ``/docs`` and the generated client read (``wallet.api`` attaches them to its routes); no
behaviour lives here.
"""

from __future__ import annotations

from typing import Any, Final

from contracts.movement_types import MOVEMENT_TYPES
from wallet import validation
from wallet.authorization import REFUSALS
from wallet.body_limit import MAX_BODY_BYTES, TOO_LARGE
from wallet.errors import (
    OutcomePendingError,
    StoreRejectedError,
    WalletError,
)
from wallet.http_errors import ERROR_STATUS, JSON_MEDIA_TYPE
from wallet.receipts import REPLAYED_HEADER, TRANSACTION_ID_HEADER
from wallet.routing import INVALID_PATH, INVALID_PATH_MEANING

WALLET_ID_SCHEMA: Final = {
    "type": "object",
    "required": ["id"],
    "properties": {"id": {**validation.UUID_SCHEMA, "description": "the wallet id"}},
}
MY_WALLETS_SCHEMA: Final = {
    "type": "object",
    "required": ["wallet", "wallets"],
    "properties": {
        "wallet": {
            "anyOf": [validation.UUID_SCHEMA, {"type": "null"}],
            "description": "the caller's oldest wallet (seed 000's answer); null when it has none",
        },
        "wallets": {"type": "array", "items": validation.UUID_SCHEMA, "description": "oldest first"},
    },
}
BALANCE_SCHEMA: Final = {
    "type": "object",
    "required": ["balance"],
    "properties": {
        "balance": {
            "type": "string",
            "pattern": r"^(0|[1-9][0-9]*)$",
            "description": "micro-USD (1 USD = 1,000,000) as a string of digits",
            "example": "123000000",
        }
    },
}
#: OpenAPI links from a created wallet to what can be done with it: clients (and the API fuzzer's
#: stateful phase) learn that the returned id is the ``wallet_id`` of the other routes.
WALLET_LINKS: Final = {
    name: {"operationId": operation, "parameters": {"wallet_id": "$response.body#/id"}}
    for name, operation in (
        ("DepositIntoWallet", "deposit"),
        ("TransferFromWallet", "transfer"),
        ("BalanceOfWallet", "balance"),
    )
}
RECEIPT_HEADERS: Final = {
    TRANSACTION_ID_HEADER: {
        "description": "the transaction id made when the request first executed",
        "schema": {"type": "string", "format": "uuid"},
    },
    REPLAYED_HEADER: {
        "description": "present (true) when the answer replays an earlier execution; nothing moved",
        "schema": {"type": "string", "enum": ["true"]},
    },
}
RECEIPT_SCHEMA: Final = {
    "type": "object",
    "required": [
        "transaction_id",
        "type",
        "wallet_id",
        "nonce",
        "amount",
        "counterparty_wallet_id",
        "created_at",
    ],
    "properties": {
        "transaction_id": {"type": "string", "format": "uuid"},
        "type": {"type": "string", "enum": list(MOVEMENT_TYPES)},  # contracts.movement_types
        "wallet_id": validation.UUID_SCHEMA,
        "nonce": {"type": "string"},
        "amount": {
            "type": "string",
            "pattern": r"^[1-9][0-9]*$",
            "description": "micro-USD moved, as a string of digits",
        },
        "counterparty_wallet_id": {
            "anyOf": [validation.UUID_SCHEMA, {"type": "null"}],
            "description": "a transfer's payee; null for a deposit",
        },
        "created_at": {"type": "string", "format": "date-time", "description": "UTC, to the millisecond"},
        "initiated_by": {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "description": "the principal that asked for it, as the front verified it (an IAM role "
            "ARN behind VPC Lattice or API Gateway; WALLETLAKE_DEFAULT_PRINCIPAL, `local`, without a "
            "trusted front); null when no front vouched for the caller, or for a request recorded "
            "before attribution existed. The ledger's `initiated_by` column holds the same.",
        },
    },
}
HEALTH_SCHEMA: Final = {"type": "object", "properties": {"status": {"type": "string", "enum": ["ok"]}}}
METRICS_SCHEMA: Final = {"type": "object", "additionalProperties": True}


def body_schema(title: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "required": True,
        "content": {
            JSON_MEDIA_TYPE: {
                "schema": {
                    "title": title,
                    "type": "object",
                    "required": list(properties),
                    "properties": properties,
                    # wallet.validation refuses unknown fields (a misspelt field is an error).
                    "additionalProperties": False,
                }
            }
        },
    }


MOVEMENT_BODY: Final = body_schema(
    "Movement", {"amount": validation.AMOUNT_SCHEMA, "nonce": validation.NONCE_SCHEMA}
)


def json_response(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {JSON_MEDIA_TYPE: {"schema": schema}}}


_RETRY_AFTER: Final = {
    "Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}
}


def errors(*errors: type[WalletError]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI responses for ``errors``, grouped by status with the exact codes each may carry."""
    by_status: dict[int, list[type[WalletError]]] = {}
    for error in errors:
        status = next(ERROR_STATUS[cls] for cls in error.__mro__ if cls in ERROR_STATUS)
        by_status.setdefault(status, []).append(error)
    responses: dict[int | str, dict[str, Any]] = {}
    for status, group in sorted(by_status.items()):
        schema = error_schema([error.code for error in group])
        description = "\n".join(
            f"- `{error.code}`: {(error.__doc__ or '').splitlines()[0]}" for error in group
        )
        response: dict[str, Any] = {
            "description": description,
            "content": {JSON_MEDIA_TYPE: {"schema": schema}},
        }
        if status in (429, 503) or OutcomePendingError in group:
            response["headers"] = _RETRY_AFTER
        responses[status] = response
    # Any route refuses an oversized body before it runs (wallet.body_limit): nothing is written.
    responses[413] = {
        "description": f"- `{TOO_LARGE}`: the body is above {MAX_BODY_BYTES} bytes; nothing was done.",
        "content": {JSON_MEDIA_TYPE: {"schema": error_schema([TOO_LARGE])}},
    }
    # Any request whose path holds a control character is refused before routing (wallet.routing).
    responses[400] = {
        "description": f"- `{INVALID_PATH}`: {INVALID_PATH_MEANING}",
        "content": {JSON_MEDIA_TYPE: {"schema": error_schema([INVALID_PATH])}},
    }
    # Behind a trusted front any route refuses a caller it did not vouch for, or not for this
    # operation, before it runs (wallet.authorization): nothing is written.
    for status, codes in REFUSALS.items():
        own = list(by_status.get(status, []))  # the route's own (owner_not_permitted)
        responses[status] = {
            "description": "\n".join(
                [f"- `{code}`: {meaning}" for code, meaning in codes.items()]
                + [f"- `{error.code}`: {(error.__doc__ or '').splitlines()[0]}" for error in own]
            ),
            "content": {JSON_MEDIA_TYPE: {"schema": error_schema([*codes, *(error.code for error in own)])}},
        }
    # Any route can fail unexpectedly; the answer has the same body (and is logged with a trace).
    responses[500] = {
        "description": "- `internal_error`: an unexpected server error (logged); retry with the same nonce.\n"
        f"- `{StoreRejectedError.code}`: {(StoreRejectedError.__doc__ or '').splitlines()[0]}",
        "content": {JSON_MEDIA_TYPE: {"schema": error_schema(["internal_error", StoreRejectedError.code])}},
    }
    return responses


def error_schema(codes: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["error", "detail"],
        "properties": {"error": {"type": "string", "enum": codes}, "detail": {"type": "string"}},
    }
