"""Only the named, only for what each may do: the API's own check of who is calling, before any route.

VPC Lattice admits a request only when its auth policies allow the SigV4-signed caller, and then
tells the task who it was (``x-amzn-lattice-identity``) and which service it came through
(``x-amzn-lattice-target``). The security group admits only Lattice's addresses. Both can drift:
a second service or target group pointing at the tasks with auth type ``NONE``, a policy widened
by hand. So with a trusted front configured (``WALLETLAKE_TRUST_FRONT``), the server checks the
same things again and refuses, before it reads the body, with nothing written:

- 401 ``unauthenticated``: no principal the front vouched for (no identity header, or
  ``Type=Anonymous``: Lattice forwards unsigned requests when a service's auth type is ``NONE``);
- 403 ``wrong_target``: the request came through a Lattice service other than this one
  (``WALLETLAKE_LATTICE_SERVICE_ARN``; not checked when unset);
- 403 ``session_not_a_person``: the role session's name does not match the deployment's rule
  (``WALLETLAKE_CALLER_SESSION_PATTERN``), so the movement would not name who acted;
- 403 ``caller_not_permitted``: the principal's role is not named in ``WALLETLAKE_CALLER_PERMISSIONS``;
- 403 ``not_an_operation``: the method and path are no route of the table
  (:data:`contracts.caller_permissions.ROUTES`): deny by default, whatever a router would make of it;
- 403 ``operation_not_permitted``: the route is one, but not of the principal's role
  (:mod:`contracts.caller_permissions`: the same map Lattice's service policy is written from).

The operation judged is the one the request's route declares, as :func:`wallet.routing.matched`
found it: the same match the endpoint that runs is chosen by.

``/healthz`` answers anyone (Lattice's and the load balancer's health checks carry no identity)
and reads nothing. Every refusal is counted (``RequestsUnauthenticated``, ``RequestsForbidden``:
both alarmed, since Lattice should have refused first) and logged with what was presented.

:func:`judge` is pure; :class:`Gatekeeper` is the ASGI middleware around it.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, MutableMapping
from typing import Any, Final

from starlette.types import ASGIApp, Receive, Scope, Send

from contracts import api_metrics
from contracts.caller_permissions import Operation
from contracts.movement_types import money_moving_operations
from contracts.settings import Settings
from wallet.http_errors import error_response
from wallet.principals import LATTICE_IDENTITY_HEADER, header_fields, principal_of
from wallet.routing import matched
from wallet.telemetry import Telemetry

_logger = logging.getLogger(__name__)

#: The header naming the Lattice service, service network and target group a request came through.
LATTICE_TARGET_HEADER: Final = b"x-amzn-lattice-target"
#: The operations that move a wallet's money.
MONEY_MOVING_OPERATIONS: Final[tuple[Operation, ...]] = money_moving_operations()
#: What no check applies to.
OPEN_PATHS: Final = frozenset({"/healthz"})
#: Every refusal by status and code, with its meaning: the OpenAPI document lists them on every
#: route (only a deployment with a trusted front gives them).
REFUSALS: Final[dict[int, dict[str, str]]] = {
    401: {"unauthenticated": "no caller identity the API's trusted front vouched for; nothing was done."},
    403: {
        "wrong_target": "the request came through another VPC Lattice service; nothing was done.",
        "session_not_a_person": "the caller's role session name names no person; nothing was done.",
        "caller_not_permitted": "the caller's role is not a caller of this API; nothing was done.",
        "not_an_operation": "the method and path are no operation of this API; nothing was done.",
        "operation_not_permitted": "the caller's role may not do this operation; nothing was done.",
        "not_wallet_owner": "the wallet is not the caller's, and its role may not do this on any wallet; "
        "nothing was done.",
    },
}


@dataclasses.dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is not served: its status, error code and one-line detail."""

    status: int
    code: str
    detail: str


def judge(settings: Settings, scope: MutableMapping[str, Any]) -> Refusal | None:
    """The refusal the request of an ASGI ``scope`` earns, or None to serve it.

    Pure but for keeping the request's route match in ``scope`` (:func:`wallet.routing.matched`).

    The scope's ``headers`` carry Lattice's identity; behind API Gateway its ``aws.event`` (as
    Mangum passes the Lambda event) carries the IAM identity the gateway verified.

    Examples
    --------
    >>> from contracts.caller_permissions import CallerPermissions
    >>> settings = Settings(trust_front="lattice", caller_permissions=CallerPermissions.parse(
    ...     "arn:aws:iam::111122223333:role/payments=transfer+read"))
    >>> judge(settings, {"method": "GET", "path": "/api/v1/wallets/x/balance", "headers": []}).code
    'unauthenticated'
    >>> caller = [(b"x-amzn-lattice-identity",
    ...            b"Principal=arn:aws:sts::111122223333:assumed-role/payments/alice; Type=AWSIAM")]
    >>> judge(settings, {"method": "PUT", "path": "/api/v1/wallets/x/deposit", "headers": caller}).code
    'operation_not_permitted'
    >>> judge(settings, {"method": "PUT", "path": "/api/v1/wallets/x/transfer/y", "headers": caller}) is None
    True
    >>> judge(settings, {"method": "PUT", "path": "/api/v1/wallets/x/balance", "headers": caller}).code
    'not_an_operation'
    """
    method, path = scope["method"], scope["path"]
    if settings.trust_front == "none" or path in OPEN_PATHS:
        return None
    headers = list(scope.get("headers", ()))
    principal = principal_of(scope, settings.trust_front, settings.default_principal)
    if principal is None:
        return Refusal(
            401,
            "unauthenticated",
            "no caller identity the API's front vouched for: sign the request (SigV4, service "
            "vpc-lattice-svcs) and send it through the service network",
        )
    if settings.trust_front == "lattice" and settings.lattice_service_arn is not None:
        target = header_fields(_header(headers, LATTICE_TARGET_HEADER)).get("ServiceArn")
        if target != settings.lattice_service_arn:
            return Refusal(
                403,
                "wrong_target",
                f"this API serves requests through {settings.lattice_service_arn} only, "
                f"not {target or 'a request with no Lattice target'}",
            )
    if settings.caller_session_pattern is not None:
        session = session_name(settings, headers, principal)
        if session is None or not re.fullmatch(settings.caller_session_pattern, session):
            return Refusal(
                403,
                "session_not_a_person",
                f"the role session name {session!r} does not name a person as this deployment "
                f"requires ({settings.caller_session_pattern})",
            )
    permissions = settings.caller_permissions
    if permissions is None:
        return None
    if not permissions.names(principal):
        return Refusal(403, "caller_not_permitted", f"{principal} is not a caller of this API")
    route = matched(scope)
    if route is None:
        return Refusal(403, "not_an_operation", f"{method} {path!r} is no operation of this API")
    operation = route.route.operation
    if not permissions.permits(principal, operation):
        return Refusal(
            403, "operation_not_permitted", f"{principal} may not {operation.replace('_', ' ')} here"
        )
    return None


def may_move_money(settings: Settings, principal: str | None) -> bool:
    """Whether ``principal`` may move a wallet's money (deposit or transfer), so may have a movement.

    An outcome lookup fences (writes a void record) only for such a caller: one that may not move
    money can have no movement in flight, so "did not commit" is already true for it, and a
    ``read`` role's lookup writes nothing. Without a trusted front or a caller map, anyone served
    may move money.

    Examples
    --------
    >>> from contracts.caller_permissions import CallerPermissions
    >>> settings = Settings(trust_front="lattice", caller_permissions=CallerPermissions.parse(
    ...     "arn:aws:iam::111122223333:role/support=read,arn:aws:iam::111122223333:role/cashier=deposit"))
    >>> may_move_money(settings, "arn:aws:sts::111122223333:assumed-role/support/alice")
    False
    >>> may_move_money(settings, "arn:aws:sts::111122223333:assumed-role/cashier/bob")
    True
    """
    permissions = settings.caller_permissions
    if settings.trust_front == "none" or permissions is None:
        return True
    return principal is not None and any(
        permissions.permits(principal, operation) for operation in MONEY_MOVING_OPERATIONS
    )


def session_name(settings: Settings, headers: Iterable[tuple[bytes, bytes]], principal: str) -> str | None:
    """Who the caller is as a person: Lattice's ``SessionName`` field, else the assumed-role ARN's
    tail; behind API Gateway with a JWT (``<issuer>#<sub>``), the token's subject."""
    if settings.trust_front == "lattice":
        named = header_fields(_header(list(headers), LATTICE_IDENTITY_HEADER)).get("SessionName")
        if named:
            return named
    if ":assumed-role/" in principal:
        return principal.rsplit("/", 1)[1]
    if settings.trust_front == "apigateway" and "#" in principal:
        return principal.rsplit("#", 1)[1]
    return None


class Gatekeeper:
    """ASGI middleware answering :func:`judge`'s refusals; everything else goes on to ``app``."""

    def __init__(self, app: ASGIApp, settings: Settings, telemetry: Telemetry) -> None:
        self.app = app
        self.settings = settings
        self.telemetry = telemetry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse before the body is read; pass the rest through untouched."""
        if scope["type"] != "http" or self.settings.trust_front == "none":
            await self.app(scope, receive, send)
            return
        refusal = judge(self.settings, scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        counter = api_metrics.UNAUTHENTICATED if refusal.status == 401 else api_metrics.FORBIDDEN
        self.telemetry.count(counter)
        self.telemetry.response(refusal.status, refusal.code)
        _logger.warning(
            "event=request_refused code=%s method=%s path=%s identity=%r target=%r",
            refusal.code,
            scope["method"],
            scope["path"],
            _header(scope["headers"], LATTICE_IDENTITY_HEADER),
            _header(scope["headers"], LATTICE_TARGET_HEADER),
        )
        scope.setdefault("state", {})["refusal"] = refusal.code
        response = error_response(refusal.status, refusal.code, refusal.detail)
        response.headers["Connection"] = "close"  # the unread body is not waited for
        await response(scope, receive, send)


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str:
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return ""
