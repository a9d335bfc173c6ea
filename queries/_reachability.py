"""Is the embedded stack the SDK points at still there? One quick look before an engine is made.

A shell (or a notebook's kernel) that took ``walletlake local up``'s exports keeps them after the
stack stops; the first SDK call then retries its connection for tens of seconds and ends in a
traceback of hundreds of lines. The command line looks first (:mod:`walletlake.stack_probe`); the
Python API and the notebooks look here, when the DuckDB engine is made, and raise
:class:`StackNotAnsweringError`, whose message is the one line the command line prints (and which
IPython shows as that line alone). Only loopback endpoints are probed: one elsewhere is the SDK's
business.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from contracts.aws_endpoints import configured_endpoint_url
from contracts.settings import Settings

if TYPE_CHECKING:
    import boto3

_LOOPBACK: Final = ("localhost", "::1")


class StackNotAnsweringError(ConnectionError):
    """The embedded stack an endpoint names does not answer; the message says what to do."""

    def _render_traceback_(self) -> list[str]:
        # IPython prints these lines instead of the traceback: one line, as the command line does.
        return [f"{type(self).__name__}: {self}"]


def silent_url(urls: Iterable[str], timeout: float = 0.5) -> str | None:
    """The first loopback URL that refuses a connection, or None if all answer (others are not probed)."""
    for url in urls:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if not (host.startswith("127.") or host in _LOOPBACK):
            continue
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with socket.create_connection((host, port), timeout=timeout):
                pass
        except OSError:
            return url
    return None


def not_answering_message(url: str) -> str:
    """The one line a stale shell or kernel gets."""
    return f"the embedded stack at {url} is not answering: start `walletlake local up` and source its exports"


def check_answering(settings: Settings, session: boto3.Session | None = None) -> None:
    """Raise :class:`StackNotAnsweringError` if S3, Glue or the Iceberg catalog the engine would use is
    a loopback endpoint that does not answer."""
    import boto3  # here: the command line's probe (silent_url) runs before every command, without it

    session = session or boto3.Session(region_name=settings.region)
    urls = [url for service in ("s3", "glue") if (url := configured_endpoint_url(session, service))]
    if settings.lake_format == "iceberg":
        urls.append(settings.iceberg_catalog_uri or "")
    silent = silent_url(urls)
    if silent is not None:
        raise StackNotAnsweringError(not_answering_message(silent))
