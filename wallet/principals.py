"""Who initiated a request: the principal a trusted front verified, or the configured default.

Pure. A movement's ``initiated_by`` must be a fact, not a claim: any client can send any header, so
identity headers count only when the server is configured to trust the front that sets them
(``WALLETLAKE_TRUST_FRONT``) and that front is the only way in:

- ``lattice``: VPC Lattice, after its ``AWS_IAM`` auth policies admitted a SigV4-signed caller,
  adds ``x-amzn-lattice-identity`` (``Principal=<arn>; PrincipalOrgID=...; SessionName=...;
  Type=AWSIAM``; VPC Lattice User Guide, "HTTP targets in VPC Lattice", caller identity headers).
  The deployed tasks' security group admits only Lattice's range, so no client reaches them
  without it. A request without the header (a health check from inside the VPC, a test run of
  the image) is attributed to no one (None), never to a default.
- ``apigateway``: the Lambda front; API Gateway's IAM authorization puts the verified caller in
  the event (``requestContext.authorizer.iam.userArn``; a JWT's ``sub`` with ``api_auth=jwt``),
  which Mangum passes as ``scope["aws.event"]``. Headers are never read.
- ``none`` (default): every request is ``default_principal`` (``local``); identity headers are
  ignored, so a client cannot choose its principal.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping
from typing import Any, Final

from contracts.settings import TrustFront

#: The caller identity header VPC Lattice adds to a request it forwards (ASGI spelling).
LATTICE_IDENTITY_HEADER: Final = b"x-amzn-lattice-identity"
#: How many distinct header values the parsers remember (a deployment's callers, with room).
_REMEMBERED_HEADERS: Final = 4_096
#: Longest principal stored (an assumed-role ARN with its session name is well under it).
MAX_PRINCIPAL_LENGTH: Final = 512


def principal_of(scope: Mapping[str, Any], trust: TrustFront, default: str) -> str | None:
    """The principal to attribute the request in ``scope`` to (None: no verified principal).

    Examples
    --------
    >>> forged = {"headers": [(b"x-amzn-lattice-identity", b"Principal=arn:aws:iam::1:role/boss")]}
    >>> principal_of(forged, "none", "local")
    'local'
    >>> principal_of(forged, "lattice", "local")
    'arn:aws:iam::1:role/boss'
    """
    if trust == "lattice":
        for name, value in scope.get("headers", ()):
            if name == LATTICE_IDENTITY_HEADER:
                return lattice_principal(value.decode("latin-1"))
        return None
    if trust == "apigateway":
        return _api_gateway_principal(scope.get("aws.event"))
    return default


@functools.lru_cache(maxsize=_REMEMBERED_HEADERS)
def lattice_principal(header: str) -> str | None:
    """The ``Principal`` field of an ``x-amzn-lattice-identity`` value (``key=value`` pairs, ``;``-separated).

    An anonymous caller (``Type=Anonymous``: Lattice forwards unsigned requests to a service whose
    auth type is ``NONE``) has no principal, whatever else the header holds.

    Examples
    --------
    >>> lattice_principal("Principal=arn:aws:sts::1:assumed-role/payer/s1; SessionName=s1; Type=AWSIAM")
    'arn:aws:sts::1:assumed-role/payer/s1'
    >>> lattice_principal("Type=Anonymous") is None
    True
    >>> lattice_principal("Principal=arn:aws:iam::1:role/boss; Type=Anonymous") is None
    True
    """
    fields = header_fields(header)
    if fields.get("Type", "").lower() == "anonymous":
        return None
    principal = fields.get("Principal")
    return _bounded(principal) if principal else None


@functools.lru_cache(maxsize=_REMEMBERED_HEADERS)
def header_fields(header: str) -> Mapping[str, str]:
    """The ``key=value`` fields of a Lattice header (``;``-separated; the first of a repeated key).

    Remembered for the latest headers, read-only: a caller's headers are the same on every request,
    and one request reads its identity and target headers in several layers (the permission check,
    the owner rule, the movement, the audit line).

    Examples
    --------
    >>> header_fields("ServiceArn=arn:a;ServiceNetworkArn=arn:b; TargetGroupArn=arn:c")["TargetGroupArn"]
    'arn:c'
    """
    fields: dict[str, str] = {}
    for field in header.split(";"):
        key, _, value = field.strip().partition("=")
        if key and key not in fields:
            fields[key] = value.strip()
    return types.MappingProxyType(fields)


def _api_gateway_principal(event: object) -> str | None:
    if not isinstance(event, Mapping):
        return None
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    iam = authorizer.get("iam") or {}
    if isinstance(iam.get("userArn"), str) and iam["userArn"]:
        return _bounded(iam["userArn"])
    claims = (authorizer.get("jwt") or {}).get("claims") or {}
    if isinstance(claims.get("sub"), str) and claims["sub"]:
        issuer = claims.get("iss")
        return _bounded(f"{issuer}#{claims['sub']}" if isinstance(issuer, str) else claims["sub"])
    return None


def _bounded(principal: str) -> str:
    return principal[:MAX_PRINCIPAL_LENGTH]
