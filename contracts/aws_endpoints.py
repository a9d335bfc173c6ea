"""Where the AWS SDK sends a service's requests, and whether that place is AWS itself.

The engines, the catalog and the stack probe only need to know whether S3 or Glue is a custom
endpoint (the embedded stack, MinIO, a VPC endpoint) and which. Making a boto3 client to read its
``meta.endpoint_url`` loads the service's whole model and endpoint rules (S3's are megabytes of
JSON): three such clients took 0.7 s of a 3.3 s ``walletlake sql`` (py-spy). The endpoint the SDK
is *configured* with (``AWS_ENDPOINT_URL_<SERVICE>``, ``AWS_ENDPOINT_URL``, the shared config
file's ``services`` section; ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` honoured) is read here by
botocore's own provider for it, without a client; ``None`` is the SDK's default, which is AWS.
botocore calls that provider private, so ``tests/unit/test_aws_endpoints.py`` holds the answer
equal to a real client's over every one of those sources: a botocore release that changes it fails
there, not in a query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import boto3

#: The hosts of AWS's own endpoints (the commercial partitions' and China's).
AWS_HOST_SUFFIXES: Final = (".amazonaws.com", ".amazonaws.com.cn")


def is_aws_host(url: str) -> bool:
    """True when ``url``'s host is one of AWS's own endpoints."""
    return (urlsplit(url).hostname or "").endswith(AWS_HOST_SUFFIXES)


def configured_endpoint_url(session: boto3.Session, service: str) -> str | None:
    """The endpoint URL the SDK is configured with for ``service`` (a boto3 client name), or None:
    the SDK's default, AWS's endpoint for the region."""
    from botocore.configprovider import ConfiguredEndpointProvider

    core = session._session
    if core.get_config_variable("ignore_configured_endpoint_urls"):
        return None
    provider = ConfiguredEndpointProvider(
        full_config=core.full_config, scoped_config=core.get_scoped_config(), client_name=service
    )
    url = provider.provide()
    return str(url) if url else None
