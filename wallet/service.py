"""The served API: the FastAPI app with the layers that answer before it, in the order they run.

Outermost first: :class:`~wallet.audit.AuditTrail` records every answer (when an audit log is
configured); :class:`~wallet.routing.PathGuard` answers 400 to a path with a control character,
before anything routes; :class:`~wallet.authorization.Gatekeeper` refuses a caller the trusted front did not
vouch for, or not for this operation, before the body is read;
:class:`~wallet.body_limit.BodyLimit` answers 413 to an oversized body;
:class:`~wallet.movement_routes.MovementRoutes` serves valid deposits and transfers outside
FastAPI entirely; everything else reaches :func:`wallet.api.create_app`. Each layer takes the
request's route from the one match :func:`wallet.routing.matched` keeps (``contracts``' route table).
"""

from __future__ import annotations

from starlette.types import ASGIApp

from contracts.settings import Settings
from wallet.api import create_app
from wallet.audit import AuditTrail, open_sink
from wallet.authorization import Gatekeeper
from wallet.body_limit import BodyLimit
from wallet.movement_routes import MovementRoutes
from wallet.routing import PathGuard
from wallet.store import WalletStore


def create_service(settings: Settings | None = None, *, store: WalletStore | None = None) -> ASGIApp:
    """What ``walletlake serve`` and the Lambda run: one store, the app and its layers (module doc)."""
    settings = settings or Settings.from_env()
    store = store or WalletStore(settings)
    served: ASGIApp = BodyLimit(
        MovementRoutes(create_app(settings, store=store), store, settings), store.telemetry
    )
    served = PathGuard(Gatekeeper(served, settings, store.telemetry), store.telemetry)
    if settings.audit_log is not None:
        served = AuditTrail(served, settings, open_sink(settings.audit_log, store.telemetry))
    return served
