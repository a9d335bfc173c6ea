"""Is the embedded stack the shell's exports point at still there? One quick look before a command.

``walletlake local up`` prints ``export AWS_ENDPOINT_URL_…`` lines; a shell that sourced them keeps
them after the stack stops. Without this look, the first SDK call retries its connection for tens of
seconds and ends in a urllib3 trace; with it, the command says in one line what to do. Only loopback
endpoints are probed (the embedded stack's); an endpoint elsewhere is the SDK's business.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit

from contracts.settings import ICEBERG_CATALOG_URI_VARIABLE

#: The variables ``local up`` exports that name a listener.
ENDPOINT_VARIABLES: Final = (
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL_GLUE",
    ICEBERG_CATALOG_URI_VARIABLE,
)
_LOOPBACK: Final = ("localhost", "::1")


def silent_endpoint(environ: Mapping[str, str] | None = None, timeout: float = 0.5) -> str | None:
    """The first loopback endpoint of the exports that refuses a connection, or None if all answer."""
    environ = os.environ if environ is None else environ
    for variable in ENDPOINT_VARIABLES:
        url = environ.get(variable, "")
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
    """The one line a stale shell gets."""
    return f"the embedded stack at {url} is not answering: start `walletlake local up` and source its exports"
