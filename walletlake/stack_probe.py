"""Is the embedded stack the shell's exports point at still there? One quick look before a command.

``walletlake local up`` prints ``export AWS_ENDPOINT_URL_…`` lines; a shell that sourced them keeps
them after the stack stops. Without this look, the first SDK call retries its connection for tens of
seconds and ends in a urllib3 trace; with it, the command says in one line what to do. Only loopback
endpoints are probed (the embedded stack's); an endpoint elsewhere is the SDK's business.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

from contracts.settings import ICEBERG_CATALOG_URI_VARIABLE
from queries._reachability import not_answering_message, silent_url

__all__ = ["ENDPOINT_VARIABLES", "not_answering_message", "silent_endpoint"]

#: The variables ``local up`` exports that name a listener.
ENDPOINT_VARIABLES: Final = (
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL_GLUE",
    ICEBERG_CATALOG_URI_VARIABLE,
)


def silent_endpoint(environ: Mapping[str, str] | None = None, timeout: float = 0.5) -> str | None:
    """The first loopback endpoint of the exports that refuses a connection, or None if all answer."""
    environ = os.environ if environ is None else environ
    return silent_url((environ.get(variable, "") for variable in ENDPOINT_VARIABLES), timeout)
