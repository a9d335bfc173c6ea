"""One HTTP/1.1 request with its target sent byte for byte: what an HTTP client library would refuse.

httpx (and every client worth using) normalizes or refuses a target with raw control characters
and resolves ``..``; a reviewer's request is sent as typed, so these tests write the request line
themselves.
"""

from __future__ import annotations

import dataclasses
import json
import socket
from typing import Any
from urllib.parse import urlsplit


@dataclasses.dataclass(frozen=True)
class RawAnswer:
    """The status and body of the answer."""

    status: int
    body: bytes

    @property
    def error(self) -> str | None:
        """The API's error code, when the body is its JSON error."""
        try:
            parsed: Any = json.loads(self.body)
        except ValueError:
            return None
        return parsed.get("error") if isinstance(parsed, dict) else None


def send(
    base_url: str, method: str, target: bytes, headers: dict[str, str] | None = None, body: bytes = b""
) -> RawAnswer:
    """Send ``method target`` to the server at ``base_url`` and read its whole answer."""
    address = urlsplit(base_url)
    assert address.hostname is not None
    assert address.port is not None
    lines = [method.encode() + b" " + target + b" HTTP/1.1", f"host: {address.netloc}".encode()]
    for name, value in {**(headers or {}), "content-length": str(len(body)), "connection": "close"}.items():
        lines.append(f"{name}: {value}".encode())
    with socket.create_connection((address.hostname, address.port), timeout=30) as connection:
        connection.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    head, _, rest = received.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        rest = _unchunked(rest)
    return RawAnswer(status, rest)


def _unchunked(data: bytes) -> bytes:
    body = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        body, data = body + data[:size], data[size + 2 :]
    return body
