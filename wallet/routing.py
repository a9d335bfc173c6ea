"""The one route match of a request, and 400 for a path no route can be: before anything routes.

Every layer that asks "which route is this?" (the permission check, the fast movement path, the
FastAPI endpoints, the audit line) reads the same answer, :func:`matched`: the row of
:data:`contracts.caller_permissions.ROUTES` the request's method and path are, found once and kept
in the ASGI scope. So the operation a caller is judged for is the operation of the endpoint that
runs; no router's own reading of the path (Starlette's ``$`` matches before a final newline) can
run a handler the check did not see.

A path holding a control character (raw, or percent-encoded such as ``%0A``: the server decodes
it into ``scope["path"]``) is no path of the API: :class:`PathGuard` answers it 400
``invalid_path`` before any route or permission is looked at, and writes nothing.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send

from contracts.caller_permissions import RouteMatch, holds_control_character, match_route
from wallet.http_errors import error_response
from wallet.telemetry import Telemetry

#: Where :func:`matched` keeps a request's match in its scope.
ROUTE_KEY: Final = "walletlake.route"
#: The error code of a path with a control character.
INVALID_PATH: Final = "invalid_path"
#: The C0 control bytes and DEL, in a path as sent (its percent-escapes decoded or not).
_CONTROL_BYTES: Final = bytes(range(0x20)) + b"\x7f"
#: What the OpenAPI document says of it (every route lists it, as it lists 413).
INVALID_PATH_MEANING: Final = "the path holds a control character; nothing was done."


def matched(scope: Scope) -> RouteMatch | None:
    """The table's route of the request in ``scope`` (None: no route), matched once per request."""
    if ROUTE_KEY not in scope:
        scope[ROUTE_KEY] = match_route(scope["method"], scope["path"])
    found: RouteMatch | None = scope[ROUTE_KEY]
    return found


def has_control_character(scope: Scope) -> bool:
    """Whether the request's path, as decoded or as sent (percent-decoded), holds a control character.

    Examples
    --------
    >>> has_control_character({"path": "/api/v1/wallets/\\n", "raw_path": b"/api/v1/wallets/%0A"})
    True
    >>> has_control_character({"path": "/api/v1/wallets/%0A", "raw_path": b"/api/v1/wallets/%250A"})
    False
    """
    if holds_control_character(scope["path"]):
        return True
    raw = scope.get("raw_path")
    if not raw:
        return False
    raw = bytes(raw).split(b"?", 1)[0]
    return _holds_control_byte(raw) or (b"%" in raw and _holds_control_byte(unquote_to_bytes(raw)))


def _holds_control_byte(raw: bytes) -> bool:
    """Whether ``raw`` holds a C0 control byte or DEL (one pass in C: the bytes deleted, lengths compared)."""
    return len(raw.translate(None, _CONTROL_BYTES)) != len(raw)


class PathGuard:
    """ASGI middleware answering 400 ``invalid_path`` to a path with a control character."""

    def __init__(self, app: ASGIApp, telemetry: Telemetry) -> None:
        self.app = app
        self.telemetry = telemetry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse before anything routes or reads the body; pass the rest on untouched."""
        if scope["type"] != "http" or not has_control_character(scope):
            await self.app(scope, receive, send)
            return
        self.telemetry.response(400, INVALID_PATH)
        response = error_response(400, INVALID_PATH, "the path must not hold a control character")
        response.headers["Connection"] = "close"  # the unread body is not waited for
        await response(scope, receive, send)
