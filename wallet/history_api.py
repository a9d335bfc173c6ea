"""The history routes: ``GET …/{wallet_id}/transactions/`` (pages) and ``…/transactions/by-id/{txn_id}``.

- ``GET /api/v1/wallets/{wallet_id}/transactions?from=&to=&limit=&cursor=`` → 200
  ``{"wallet_id", "entries": [...], "next_cursor": "<opaque>" | null}``: every entry of the wallet
  ever, newest first (its version, time, transaction id, nonce, type, direction, amount,
  counterparty, balance after, who asked). ``from`` (inclusive) and ``to`` (exclusive) are RFC 3339
  instants; ``limit`` 1..200 (50); ``cursor`` is the last page's ``next_cursor``, with the same
  range or none. When the wallet's first entries are older than the lake's first day, the last
  page says so (``note``). 404 ``wallet_not_found``; 503 ``history_catching_up`` (ask again).
- ``GET /api/v1/wallets/{wallet_id}/transactions/by-id/{txn_id}`` → 200 the entry; 404
  ``entry_not_found``.

Both are ``read`` routes of the one table (``contracts.caller_permissions.ROUTES``), and the
owner rule applies as to a balance: an owner reads their own wallets' history only.
"""

from __future__ import annotations

import datetime
from typing import Annotated, Any, Final

import orjson
from fastapi import FastAPI, Path, Request
from fastapi.responses import Response

from contracts.caller_permissions import ROUTE_NAMED
from wallet import validation
from wallet.api_documents import errors, json_response
from wallet.errors import (
    EntryNotFoundError,
    HistoryUnavailableError,
    InvalidRequestError,
    LakeNeededError,
    StoreUnavailableError,
    ThrottledError,
    WalletNotFoundError,
)
from wallet.history import WalletHistory
from wallet.history_seam import DEFAULT_PAGE, MAX_PAGE, CursorError, PageRequest, from_cursor
from wallet.http_errors import JSON_MEDIA_TYPE
from wallet.table_routes import serve
from wallet.telemetry import Telemetry

# Path parameters as documented (the handler checks them itself, with the API's own 422)
_WalletId = Annotated[str, Path(description="the wallet", pattern=validation.UUID_PATTERN)]
_TxnId = Annotated[str, Path(description="the transaction's id", pattern=validation.UUID_PATTERN)]
_QUERY_FIELDS: Final = frozenset({"from", "to", "limit", "cursor"})
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

ENTRY_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "required": [
        "version",
        "time",
        "transaction_id",
        "nonce",
        "type",
        "direction",
        "amount",
        "balance_after",
    ],
    "properties": {
        "version": {"type": "integer", "minimum": 1, "description": "the wallet's count of entries after it"},
        "time": {"type": "string", "format": "date-time"},
        "transaction_id": validation.UUID_SCHEMA,
        "nonce": {"type": "string"},
        "type": {"type": "string"},
        "direction": {"type": "string", "enum": ["credit", "debit"]},
        "amount": {"type": "string", "pattern": "^[0-9]+$", "description": "micro-USD"},
        "counterparty_wallet_id": {"anyOf": [validation.UUID_SCHEMA, {"type": "null"}]},
        "balance_after": {"type": "string", "pattern": "^[0-9]+$", "description": "micro-USD"},
        "initiated_by": {"type": ["string", "null"]},
    },
}
#: The page's query parameters, as the OpenAPI document describes them.
QUERY_PARAMETERS: Final[list[dict[str, Any]]] = [
    {
        "name": "from",
        "in": "query",
        "required": False,
        "description": "entries at or after this instant (RFC 3339 with its offset)",
        "schema": {"type": "string", "format": "date-time"},
    },
    {
        "name": "to",
        "in": "query",
        "required": False,
        "description": "entries before this instant (RFC 3339 with its offset), after `from`",
        "schema": {"type": "string", "format": "date-time"},
    },
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": DEFAULT_PAGE},
    },
    {
        "name": "cursor",
        "in": "query",
        "required": False,
        "description": "the previous page's `next_cursor` (only a cursor this API made is accepted)",
        "schema": {"type": "string"},
    },
]
PAGE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["wallet_id", "entries", "next_cursor"],
    "properties": {
        "wallet_id": validation.UUID_SCHEMA,
        "entries": {"type": "array", "items": ENTRY_SCHEMA, "description": "newest first"},
        "next_cursor": {"type": ["string", "null"], "description": "the next page's; null on the last"},
        "note": {"type": "string", "description": "what the history cannot show, when it cannot"},
    },
}


def add_history_routes(app: FastAPI, pages: WalletHistory, telemetry: Telemetry) -> None:
    """Serve both history routes from ``pages``."""

    @serve(
        app,
        ROUTE_NAMED["history"],
        tags=["wallets"],
        summary="Every entry of the wallet ever, newest first, a page at a time",
        response_class=Response,
        openapi_extra={"parameters": QUERY_PARAMETERS},
        responses={
            200: json_response("A page of the wallet's entries.", PAGE_SCHEMA),
            **errors(
                InvalidRequestError,
                WalletNotFoundError,
                HistoryUnavailableError,
                LakeNeededError,
                ThrottledError,
                StoreUnavailableError,
            ),
        },
    )
    async def history(request: Request, wallet_id: _WalletId) -> Response:
        wallet = validation.parse_uuid(wallet_id, "wallet_id").lower()
        page = await pages.page(page_request(wallet, dict(request.query_params)))
        telemetry.response(200)
        return Response(orjson.dumps(page.document(wallet)), media_type=JSON_MEDIA_TYPE)

    @serve(
        app,
        ROUTE_NAMED["history_entry"],
        tags=["wallets"],
        summary="The wallet's entry of one transaction",
        response_class=Response,
        responses={
            200: json_response("The entry.", ENTRY_SCHEMA),
            **errors(
                InvalidRequestError,
                WalletNotFoundError,
                EntryNotFoundError,
                HistoryUnavailableError,
                ThrottledError,
                StoreUnavailableError,
            ),
        },
    )
    async def history_entry(request: Request, wallet_id: _WalletId, txn_id: _TxnId) -> Response:
        wallet = validation.parse_uuid(wallet_id, "wallet_id").lower()
        transaction = validation.parse_uuid(txn_id, "txn_id").lower()
        entry = await pages.entry(wallet, transaction)
        if entry is None:
            raise EntryNotFoundError(wallet, transaction)
        telemetry.response(200)
        return Response(orjson.dumps(entry.document()), media_type=JSON_MEDIA_TYPE)


def page_request(wallet_id: str, query: dict[str, str]) -> PageRequest:
    """The page a query string asks for; 422 for anything malformed, before anything is read."""
    unknown = set(query) - _QUERY_FIELDS
    if unknown:
        raise InvalidRequestError(f"unknown query parameters: {', '.join(sorted(unknown))}")
    limit = DEFAULT_PAGE
    if "limit" in query:
        if not query["limit"].isdigit() or not 1 <= int(query["limit"]) <= MAX_PAGE:
            raise InvalidRequestError(f"limit must be an integer from 1 to {MAX_PAGE}")
        limit = int(query["limit"])
    since, until = _instant(query, "from"), _instant(query, "to")
    if since is not None and until is not None and since >= until:
        raise InvalidRequestError("from must be before to")
    request = PageRequest(wallet_id, limit=limit, since_ms=since, until_ms=until)
    if "cursor" not in query:
        return request
    try:
        return from_cursor(query["cursor"], request)
    except CursorError as error:
        raise InvalidRequestError(str(error)) from error


def _instant(query: dict[str, str], name: str) -> int | None:
    if name not in query:
        return None
    try:
        moment = datetime.datetime.fromisoformat(query[name])
    except ValueError as error:
        raise InvalidRequestError(f"{name} must be an RFC 3339 instant, e.g. 2026-11-28T00:00:00Z") from error
    if moment.tzinfo is None:
        raise InvalidRequestError(f"{name} must name its offset (Z for UTC)")
    return (moment - _EPOCH) // datetime.timedelta(milliseconds=1)
