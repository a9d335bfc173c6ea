"""The wallet HTTP API of seed 000 (FastAPI), and the one place where domain errors become HTTP.

Routes
------
- ``POST /api/v1/wallets/`` ``{"user_id": "<uuid>"}`` → 201 ``{"id": "<uuid>"}``; the same user
  again → 200 with the same id (one wallet per user).
- ``PUT /api/v1/wallets/{wallet_id}/deposit/`` ``{"amount", "nonce"}`` → 204.
- ``PUT /api/v1/wallets/{wallet_id}/transfer/{target_wallet_id}/`` ``{"amount", "nonce"}`` → 204.
- ``GET /api/v1/wallets/{wallet_id}/transactions/{nonce}`` → 200, your request with that nonce
  committed (its receipt); 404 ``transaction_not_found`` (one wording): it did not and never will
  (with no record the lookup voids your nonce first, if you may move money at all); 409
  ``outcome_pending``: still committing, ask again.
- ``GET /api/v1/wallets/{wallet_id}/balance`` → 200 ``{"balance": "<int micro-USD>"}`` (consistent).
- ``GET /api/v1/wallets/me/`` → 200 ``{"wallet": "<uuid>" | null, "wallets": ["<uuid>", ...]}``:
  the caller's wallets, oldest first (``wallet``, seed 000's field, is the oldest); the caller is
  the verified person (``local`` without a trusted front).
- ``GET /healthz`` → 200; ``GET /metrics`` → the process's counters (:mod:`wallet.telemetry`).

Every wallet route is a row of ``contracts.caller_permissions.ROUTES`` (registered by
:func:`wallet.table_routes.serve`); a path with a control character is 400 ``invalid_path`` before any route.

The client's contract
---------------------
Every deposit and transfer carries a client-chosen ``nonce`` (use a fresh UUID, v4 or v7), unique
per caller and addressed wallet: another caller's nonce of the same spelling is another request.
The first record put under the caller's nonce decides it, and every answer follows from it:

- 204: done (``Idempotent-Replayed: true``: applied earlier; ``Transaction-Id`` names it);
- 404 ``wallet_not_found``, 409 ``insufficient_funds`` / ``balance_limit_exceeded``: refused,
  nothing moved; kept under the nonce, so a repeat gets the same refusal (replayed). New nonce;
- 409 ``idempotency_key_reused`` (another body), ``nonce_expired`` (past the
  window, its record still exists: never executed again), ``nonce_voided`` (a lookup decided it
  did not commit): nothing moved. New nonce;
- 429 ``throttled``, 503 ``unavailable``, 500 ``dynamodb_refused``: nothing was written; same
  nonce after ``Retry-After``. 503 ``outcome_unknown``: it may have committed; decide it first (same
  nonce, or the lookup: 200 / 404 / 409 ``outcome_pending``), never a new nonce before that.

The idempotency window is ``WALLETLAKE_IDEMPOTENCY_WINDOW_SECONDS`` (2 days by default); a record
lives a day longer (TTL), and while it exists the nonce is never executed again. Errors are JSON
``{"error", "detail"}``, precedence 422 > 404 > 409 ``idempotency_key_reused`` > 409
``insufficient_funds``; 429 and 503 carry ``Retry-After``; a body above 16 KiB is 413.

Attribution: every movement records who asked (``initiated_by``, in its receipt and the ledger):
the IAM principal the trusted front verified (VPC Lattice's identity header, or API Gateway's IAM
authorization); a client-sent identity header is otherwise ignored.

Speed: bodies are parsed with orjson and checked by :mod:`wallet.validation` instead of per-request
pydantic models (the schemas below only describe the API in ``/openapi.json``), routes skip
FastAPI's per-request dependency solving (:class:`wallet.table_routes.LeanRoute`), valid deposits
and transfers are answered ahead of the router (:mod:`wallet.movement_routes`), and DynamoDB is
called from the event loop itself (:mod:`wallet.dynamodb`), with no thread-pool hop.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Annotated, Any, Final

import orjson
from fastapi import FastAPI, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from contracts.caller_permissions import ROUTE_NAMED
from contracts.settings import Settings
from wallet import validation
from wallet.api_documents import (
    BALANCE_SCHEMA,
    HEALTH_SCHEMA,
    METRICS_SCHEMA,
    MOVEMENT_BODY,
    MY_WALLETS_SCHEMA,
    RECEIPT_HEADERS,
    RECEIPT_SCHEMA,
    WALLET_ID_SCHEMA,
    WALLET_LINKS,
    body_schema,
    errors,
    json_response,
)
from wallet.authorization import may_move_money
from wallet.errors import (
    BalanceLimitExceededError,
    IdempotencyKeyReusedError,
    InsufficientFundsError,
    InvalidRequestError,
    NonceExpiredError,
    NonceVoidedError,
    OutcomePendingError,
    OutcomeUnknownError,
    OwnerNotPermittedError,
    SameWalletTransferError,
    StoreUnavailableError,
    ThrottledError,
    TransactionNotFoundError,
    WalletError,
    WalletNotFoundError,
)
from wallet.history import LakeEntries, WalletHistory
from wallet.history_api import add_history_routes
from wallet.http_errors import (
    JSON_MEDIA_TYPE,
    error_response,
    status_of,
    wallet_error_response,
)
from wallet.ownership import owner_of_new_wallet, person_of
from wallet.principals import principal_of
from wallet.receipts import TRANSACTION_ID_HEADER, Receipt
from wallet.store import WalletStore
from wallet.table_routes import LeanRoute, serve
from wallet.telemetry import Telemetry

_logger = logging.getLogger(__name__)

_JSON: Final = JSON_MEDIA_TYPE

# Path parameters as documented; LeanRoute passes them through as strings and wallet.validation
# checks them (422 with the API's own error body rather than FastAPI's).
_WalletId = Annotated[
    str, Path(description="the addressed wallet (payer of a transfer)", pattern=validation.UUID_PATTERN)
]
_TargetId = Annotated[
    str, Path(description="the wallet receiving a transfer", pattern=validation.UUID_PATTERN)
]
_Nonce = Annotated[
    str,
    Path(
        description="the nonce the request carried",
        pattern=validation.NONCE_PATTERN,
        min_length=1,
        max_length=validation.MAX_NONCE_LENGTH,
    ),
]


def create_app(
    settings: Settings | None = None, *, store: WalletStore | None = None, lake: LakeEntries | None = None
) -> FastAPI:
    """Build the API around one :class:`~wallet.store.WalletStore` (one DynamoDB connection pool).

    ``settings`` default to :meth:`Settings.from_env`; the DynamoDB endpoint and credentials come
    from the AWS SDK's own variables and configuration. Every route is a FastAPI route here; the
    served app puts :func:`wallet.service.create_service`'s movement routes in front of it.
    """
    settings = settings or Settings.from_env()
    store = store or WalletStore(settings)
    telemetry = store.telemetry
    app = FastAPI(
        title="walletlake wallet API",
        version="1.0.0",
        description=_DESCRIPTION,
        **_document_urls(settings.admin_routes),
        openapi_tags=[{"name": "wallets", "description": "wallets, deposits, transfers, balances"}],
    )
    app.state.store = store
    app.router.route_class = LeanRoute
    # Both spellings of every wallet route are routes of their own (table_routes.serve): a 307 to the
    # other spelling would break clients that do not follow redirects for a PUT (httpx's default).
    app.router.redirect_slashes = False

    _add_error_handlers(app, telemetry)

    @serve(
        app,
        ROUTE_NAMED["create_wallet"],
        tags=["wallets"],
        summary="Create the user's wallet (one per user)",
        status_code=201,
        response_class=Response,
        openapi_extra={"requestBody": body_schema("CreateWallet", {"user_id": validation.UUID_SCHEMA})},
        responses={
            201: {**json_response("The wallet was created.", WALLET_ID_SCHEMA), "links": WALLET_LINKS},
            200: {
                **json_response("The user already had a wallet: its id, nothing created.", WALLET_ID_SCHEMA),
                "links": WALLET_LINKS,
            },
            **errors(InvalidRequestError, OwnerNotPermittedError, ThrottledError, StoreUnavailableError),
        },
    )
    async def create_wallet(request: Request) -> Response:
        command = validation.parse_create_wallet(await _json_body(request))
        owner = owner_of_new_wallet(settings, request.scope, command.owner)
        wallet_id, created = await store.create_wallet(dataclasses.replace(command, owner=owner))
        status = 201 if created else 200
        telemetry.response(status)
        return Response(orjson.dumps({"id": wallet_id}), status_code=status, media_type=_JSON)

    @serve(
        app,
        ROUTE_NAMED["my_wallet"],
        tags=["wallets"],
        summary="The caller's wallets (the verified caller's person owns them)",
        response_class=Response,
        responses={
            200: json_response("The caller's wallets, oldest first.", MY_WALLETS_SCHEMA),
            **errors(ThrottledError, StoreUnavailableError),
        },
    )
    async def my_wallet(request: Request) -> Response:
        person = person_of(settings, request.scope)
        wallets = await store.wallets_of(person) if person is not None else []
        telemetry.response(200)
        body = {"wallet": wallets[0] if wallets else None, "wallets": wallets}
        return Response(orjson.dumps(body), media_type=_JSON)

    @serve(
        app,
        ROUTE_NAMED["deposit"],
        tags=["wallets"],
        summary="Deposit micro-USD into a wallet, once per nonce",
        status_code=204,
        response_class=Response,
        openapi_extra={"requestBody": MOVEMENT_BODY},
        responses={
            204: {
                "description": "Deposited, or a replay of the same request (nothing changed).",
                "headers": RECEIPT_HEADERS,
            },
            **errors(
                InvalidRequestError,
                WalletNotFoundError,
                IdempotencyKeyReusedError,
                NonceExpiredError,
                NonceVoidedError,
                BalanceLimitExceededError,
                ThrottledError,
                StoreUnavailableError,
                OutcomeUnknownError,
            ),
        },
    )
    async def deposit(request: Request, wallet_id: _WalletId) -> Response:
        command = validation.parse_deposit(
            wallet_id, await _json_body(request), _principal(settings, request)
        )
        return _no_content(telemetry, await store.execute(command))

    @serve(
        app,
        ROUTE_NAMED["transfer"],
        tags=["wallets"],
        summary="Transfer micro-USD to another wallet, once per nonce",
        status_code=204,
        response_class=Response,
        openapi_extra={"requestBody": MOVEMENT_BODY},
        responses={
            204: {
                "description": "Transferred, or a replay of the same request (nothing changed).",
                "headers": RECEIPT_HEADERS,
            },
            **errors(
                InvalidRequestError,
                SameWalletTransferError,
                WalletNotFoundError,
                IdempotencyKeyReusedError,
                NonceExpiredError,
                NonceVoidedError,
                InsufficientFundsError,
                BalanceLimitExceededError,
                ThrottledError,
                StoreUnavailableError,
                OutcomeUnknownError,
            ),
        },
    )
    async def transfer(request: Request, wallet_id: _WalletId, target_wallet_id: _TargetId) -> Response:
        command = validation.parse_transfer(
            wallet_id, target_wallet_id, await _json_body(request), _principal(settings, request)
        )
        return _no_content(telemetry, await store.execute(command))

    @serve(
        app,
        ROUTE_NAMED["transaction"],
        tags=["wallets"],
        summary="The outcome of the wallet's request with this nonce, within the idempotency window",
        response_class=Response,
        responses={
            200: json_response(
                "The request executed: its transaction, as its first execution decided it.",
                RECEIPT_SCHEMA,
            ),
            **errors(
                InvalidRequestError,
                TransactionNotFoundError,
                OutcomePendingError,
                ThrottledError,
                StoreUnavailableError,
            ),
        },
    )
    async def transaction(request: Request, wallet_id: _WalletId, nonce: _Nonce) -> Response:
        wallet = validation.parse_uuid(wallet_id, "wallet_id")
        checked = validation.parse_nonce(nonce)
        principal = _principal(settings, request)
        receipt = await store.outcome(
            wallet, checked, principal, may_move=may_move_money(settings, principal)
        )
        telemetry.response(200)
        return Response(
            orjson.dumps(receipt.document()),
            media_type=_JSON,
            headers={TRANSACTION_ID_HEADER: receipt.txn_id},
        )

    @serve(
        app,
        ROUTE_NAMED["balance"],
        tags=["wallets"],
        summary="The wallet's balance (strongly consistent read)",
        response_class=Response,
        responses={
            200: json_response("The balance in micro-USD.", BALANCE_SCHEMA),
            **errors(InvalidRequestError, WalletNotFoundError, ThrottledError, StoreUnavailableError),
        },
    )
    async def balance(request: Request, wallet_id: _WalletId) -> Response:
        wallet = validation.parse_uuid(wallet_id, "wallet_id")
        amount = await store.balance(wallet)
        telemetry.response(200)
        return Response(orjson.dumps({"balance": str(amount)}), media_type=_JSON)

    @app.get(
        "/healthz",
        tags=["operations"],
        summary="Liveness: the process answers (DynamoDB is not called)",
        response_class=Response,
        responses={200: json_response("Alive.", HEALTH_SCHEMA)},
    )
    async def healthz(request: Request) -> Response:
        return Response(b'{"status":"ok"}', media_type=_JSON)

    add_history_routes(app, WalletHistory(store, lake), telemetry)
    _add_metrics(app, telemetry, served=settings.admin_routes)

    return app


def _add_error_handlers(app: FastAPI, telemetry: Telemetry) -> None:
    """Every failure as the API's JSON error body, counted by status and code (wallet.http_errors)."""

    async def on_wallet_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, WalletError)
        telemetry.response(status_of(error), error.code)
        return wallet_error_response(error)

    async def on_http_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "http_error")
        telemetry.response(error.status_code, code)
        response = error_response(error.status_code, code, str(error.detail))
        # RFC 9110 §15.5.6: a 405 names the methods the resource has (Starlette sets ``Allow``).
        response.headers.update(error.headers or {})
        return response

    async def on_validation_error(request: Request, error: Exception) -> Response:
        telemetry.response(422, InvalidRequestError.code)
        return error_response(422, InvalidRequestError.code, str(error))

    async def on_unexpected(request: Request, error: Exception) -> Response:
        _logger.exception("event=internal_error path=%s", request.url.path)
        telemetry.response(500, "internal_error")
        return error_response(500, "internal_error", "unexpected server error")

    app.add_exception_handler(WalletError, on_wallet_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(Exception, on_unexpected)


def _document_urls(admin_routes: bool) -> dict[str, Any]:
    """Where FastAPI serves its documents: off on the deployed tasks (``WALLETLAKE_ADMIN_ROUTES=off``).

    The front forwards every path; the documents and ``/metrics`` are for operators, who have the
    repository's OpenAPI document and CloudWatch's metrics (each process prints its counters as
    EMF lines), so nothing of them needs to cross the front.
    """
    return {
        "docs_url": "/docs" if admin_routes else None,
        "redoc_url": "/redoc" if admin_routes else None,
        "openapi_url": "/openapi.json" if admin_routes else None,
    }


def _add_metrics(app: FastAPI, telemetry: Telemetry, *, served: bool) -> None:
    """``GET /metrics``: the process's counters (an operator route: not ``served`` on the deployed tasks)."""
    if not served:
        return

    @app.get(
        "/metrics",
        tags=["operations"],
        summary="This process's counters: requests, replays, DynamoDB conflicts, throttles, errors",
        response_class=Response,
        responses={200: json_response("Counters since the process started.", METRICS_SCHEMA)},
    )
    async def metrics(request: Request) -> Response:
        return Response(orjson.dumps(telemetry.snapshot()), media_type=_JSON)


def _principal(settings: Settings, request: Request) -> str | None:
    return principal_of(request.scope, settings.trust_front, settings.default_principal)


async def _json_body(request: Request) -> Any:
    return validation.parse_json_body(await request.body())


def _no_content(telemetry: Telemetry, receipt: Receipt) -> Response:
    telemetry.response(204)
    return Response(status_code=204, headers=dict(receipt.headers()))


_DESCRIPTION: Final = (__doc__ or "").split("Speed:")[0]
