"""Deposits and transfers answered ahead of FastAPI's router: the write path's hot loop, in plain ASGI.

Every other route, every refusal of malformed input and every document (``/openapi.json``)
stays with the FastAPI app, which still declares these two routes. Routing, the request object and
the exception middleware cost about a third of the API's CPU per transfer (py-spy, ``bench/
write_path.py --profile``); on a busy wallet that CPU is the throughput. This layer does only what a
valid movement needs: take the request's route (:func:`wallet.routing.matched`: the one match the
permission check judged), read the body, validate, execute, answer 204 or the domain
error through :mod:`wallet.http_errors`. Anything else it hands to the app unchanged, with the body
it already read, so every other answer is byte for byte the app's own:

- a request whose route is not the deposit's or the transfer's (:data:`MOVEMENTS`);
- a body or path that :mod:`wallet.validation` refuses (the app then answers its 422).

It runs outside the FastAPI app (:func:`wallet.service.create_service`), so it answers an unexpected
exception itself, the way the app's handler does: logged with its trace, 500 ``internal_error``.
"""

from __future__ import annotations

import logging
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from contracts.caller_permissions import ROUTE_NAMED, Route, RouteMatch
from contracts.settings import Settings, TrustFront
from wallet import validation
from wallet.body_limit import replaying
from wallet.commands import Movement
from wallet.errors import InvalidRequestError, WalletError
from wallet.http_errors import error_response, status_of, wallet_error_response
from wallet.principals import principal_of
from wallet.routing import matched
from wallet.store import WalletStore

_logger = logging.getLogger(__name__)

#: The routes served here: a deposit and a transfer, either spelling.
MOVEMENTS: Final[frozenset[Route]] = frozenset((ROUTE_NAMED["deposit"], ROUTE_NAMED["transfer"]))
_NO_CONTENT_BODY: Final[Message] = {"type": "http.response.body", "body": b""}


class MovementRoutes:
    """ASGI middleware serving ``PUT`` deposit and transfer with ``store``; the rest to ``app``."""

    def __init__(self, app: ASGIApp, store: WalletStore, settings: Settings | None = None) -> None:
        self.app = app
        self.store = store
        settings = settings or store.settings
        self.trust: TrustFront = settings.trust_front
        self.default_principal = settings.default_principal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a valid movement; hand anything else to the app."""
        match = matched(scope) if scope["type"] == "http" else None
        if match is None or match.route not in MOVEMENTS:
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:  # the client went away
            return
        try:
            command = _command(match, body, principal_of(scope, self.trust, self.default_principal))
        except InvalidRequestError:
            await self.app(scope, replaying(body, receive), send)
            return
        telemetry = self.store.telemetry
        try:
            receipt = await self.store.execute(command)  # applied or replayed: both answer 204
        except WalletError as error:
            telemetry.response(status_of(error), error.code)
            await wallet_error_response(error)(scope, receive, send)
            return
        except Exception:  # as the app's own handler answers an unexpected error
            _logger.exception("event=internal_error path=%s", scope["path"])
            telemetry.response(500, "internal_error")
            await error_response(500, "internal_error", "unexpected server error")(scope, receive, send)
            return
        telemetry.response(204)
        headers = [(name.lower().encode(), value.encode()) for name, value in receipt.headers()]
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send(_NO_CONTENT_BODY)


def _command(match: RouteMatch, body: bytes, initiated_by: str | None) -> Movement:
    fields = validation.parse_json_body(body)
    wallet = match.parameters["wallet_id"]
    if match.route.name == "deposit":
        return validation.parse_deposit(wallet, fields, initiated_by)
    return validation.parse_transfer(wallet, match.parameters["target_wallet_id"], fields, initiated_by)


async def _read_body(receive: Receive) -> bytes | None:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
