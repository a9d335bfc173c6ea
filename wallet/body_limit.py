"""The request-body size limit: a body above :data:`MAX_BODY_BYTES` is answered 413 before any route runs.

Every body the API takes is a small JSON object (a movement is under 200 bytes; its nonce at most
64 characters), so anything far larger is a mistake or an attack on the process's memory, and it
is refused before it is parsed or executed: nothing is written. A declared ``Content-Length``
is judged from the header alone (the body is never read); a body without one (chunked) is read up
to the limit and handed on, or refused as soon as it passes it.
"""

from __future__ import annotations

from typing import Any, Final

from starlette.types import ASGIApp, Receive, Scope, Send

from wallet.http_errors import error_response
from wallet.telemetry import Telemetry

#: Largest request body accepted, in bytes: sixty times a movement's largest valid body.
MAX_BODY_BYTES: Final = 16_384
#: The error code of a 413.
TOO_LARGE: Final = "request_too_large"


class BodyLimit:
    """ASGI middleware answering 413 ``request_too_large`` to a body above ``limit`` bytes."""

    def __init__(self, app: ASGIApp, telemetry: Telemetry, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.telemetry = telemetry
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass a request whose body fits on to ``app``; answer 413 to one that does not."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None:
            if declared > self.limit:
                await self._refuse(scope, receive, send)
                return
            await self.app(scope, receive, send)  # the server delivers exactly the declared length
            return
        if scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, replaying(b"".join(chunks), receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.telemetry.response(413, TOO_LARGE)
        response = error_response(413, TOO_LARGE, f"the request body must be at most {self.limit} bytes")
        response.headers["Connection"] = "close"  # the unread rest of the body is not waited for
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` yielding the body already read, then the connection's own events (the
    body limit and the movement routes both read a body before the app does)."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
