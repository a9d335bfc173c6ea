"""The served API: the FastAPI app with the layers that answer before it, in the order they run.

Outermost first: :class:`~wallet.audit.AuditTrail` records every answer (when an audit log is
configured); :class:`~wallet.routing.PathGuard` answers 400 to a path with a control character,
before anything routes; :class:`~wallet.authorization.Gatekeeper` refuses a caller the trusted front did not
vouch for, or not for this operation, before the body is read;
:class:`~wallet.ownership.OwnerGate` refuses a wallet that is not the caller's (object-level
authorization);
:class:`~wallet.body_limit.BodyLimit` answers 413 to an oversized body;
:class:`~wallet.movement_routes.MovementRoutes` serves valid deposits and transfers outside
FastAPI entirely; everything else reaches :func:`wallet.api.create_app`. Each layer takes the
request's route from the one match :func:`wallet.routing.matched` keeps (``contracts``' route table).
"""

from __future__ import annotations

import logging
from typing import Final

from starlette.types import ASGIApp

from contracts.settings import Settings
from wallet.api import create_app
from wallet.audit import AuditTrail, open_sink
from wallet.authorization import Gatekeeper
from wallet.body_limit import BodyLimit
from wallet.history import LakeEntries
from wallet.movement_routes import MovementRoutes
from wallet.ownership import OwnerGate
from wallet.routing import PathGuard
from wallet.store import WalletStore

_logger = logging.getLogger(__name__)

#: What a server without a trusted front says when it starts: it is the demo's and the tests'.
LOCAL_MODE_BANNER: Final = (
    "event=local_mode no trusted front (WALLETLAKE_TRUST_FRONT=none): every request is %r, no caller "
    "map, session rule or owner check applies, and wallets are owned by %r unless a body names an "
    "owner: every caller is trusted alike (the demo, tests, api_front=alb's network-only access)"
)


def create_service(
    settings: Settings | None = None, *, store: WalletStore | None = None, lake: LakeEntries | None = None
) -> ASGIApp:
    """What ``walletlake serve`` and the Lambda run: one store, the app and its layers (module doc)."""
    settings = settings or Settings.from_env()
    if settings.trust_front == "none":
        _logger.warning(LOCAL_MODE_BANNER, settings.default_principal, settings.default_principal)
    store = store or WalletStore(settings)
    served: ASGIApp = BodyLimit(
        OwnerGate(
            MovementRoutes(create_app(settings, store=store, lake=lake), store, settings), settings, store
        ),
        store.telemetry,
    )
    served = PathGuard(Gatekeeper(served, settings, store.telemetry), store.telemetry)
    if settings.audit_log is not None:
        served = AuditTrail(served, settings, open_sink(settings.audit_log, store.telemetry))
    return served
