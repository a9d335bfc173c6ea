"""Who owns a wallet: the person of the verified caller that creates it, or the one a service names.

Every wallet has an owner (:attr:`contracts.wallets_table.Attr.OWNER`, also a column of the lake's
``wallets`` table): the person the deployment already requires of every caller's session (the
role session's name behind Lattice or IAM, a token's subject with ``api_auth=jwt``). A caller
granted ``create_wallet:any`` (:mod:`contracts.caller_permissions`) may name another owner in the
body, as a service opening wallets for its customers does; anyone else naming one is refused 403
``owner_not_permitted`` with nothing written. The owner never changes.

Local mode (no trusted front: ``walletlake serve`` on a laptop, the demo) keeps working as before:
every wallet is the default principal's (``local``) unless the body names an owner.
"""

from __future__ import annotations

import collections
from collections.abc import MutableMapping
from typing import Any, Final

from starlette.types import ASGIApp, Receive, Scope, Send

from contracts import api_metrics
from contracts.settings import Settings
from wallet import validation
from wallet.authorization import session_name
from wallet.errors import OwnerNotPermittedError
from wallet.http_errors import error_response
from wallet.principals import principal_of
from wallet.routing import matched
from wallet.store import WalletStore


def person_of(settings: Settings, scope: MutableMapping[str, Any]) -> str | None:
    """The person the request's verified caller is (None: no verified caller).

    The session's name when the front says one (a person's, by the deployment's session rule),
    else the principal itself (a role without a session rule; the default principal locally).
    """
    principal = principal_of(scope, settings.trust_front, settings.default_principal)
    if principal is None:
        return None
    if settings.trust_front == "none":
        return principal
    return session_name(settings, list(scope.get("headers", ())), principal) or principal


def owner_of_new_wallet(settings: Settings, scope: MutableMapping[str, Any], named: str | None) -> str | None:
    """The owner a wallet created by this request gets: ``named`` if the caller may name one.

    Raises
    ------
    OwnerNotPermittedError
        ``named`` is another person and the caller is not granted ``create_wallet:any``.
    """
    person = person_of(settings, scope)
    if named is None or named == person:
        return person
    permissions = settings.caller_permissions
    principal = principal_of(scope, settings.trust_front, settings.default_principal)
    if settings.trust_front == "none" or permissions is None:
        return named
    if principal is not None and permissions.on_any_wallet(principal, "create_wallet"):
        return named
    raise OwnerNotPermittedError(named)


#: Where the owner the request acted on (or was refused for) is kept in its scope, for the audit line.
OWNER_KEY: Final = "walletlake.owner"
#: The refusal of a wallet that is not the caller's.
NOT_OWNER_CODE: Final = "not_wallet_owner"
NOT_OWNER_MEANING: Final = (
    "the wallet is not the caller's, and its role may not do this on any wallet; nothing was done."
)
#: How many wallets' owners a process remembers (an owner never changes, so a remembered one is true).
OWNER_CACHE_SIZE: Final = 200_000


class OwnerGate:
    """ASGI middleware: object-level authorization of every route that addresses a wallet.

    Behind a trusted front with a caller map, a request whose route (the table's one match,
    :func:`wallet.routing.matched`) addresses a wallet (``wallet_id``: the balance, a deposit's
    wallet, a transfer's payer, a lookup) is served only when the caller's person owns that wallet,
    or when the map grants the caller the route's operation on any wallet (``operation:any``);
    otherwise 403 ``not_wallet_owner`` before the body is read, nothing written, counted
    (``requests_not_owner``). Deny by default: a wallet with no owner (created before owners) is
    any-wallet callers' only. A transfer's payee need not be the caller's. A wallet that does not
    exist, or an id that is no UUID, is left to the route (404 ``wallet_not_found``, 422).

    The owner is read once per wallet per process (a consistent GetItem) and remembered: it never
    changes, so no check is ever answered from a stale owner.
    """

    def __init__(self, app: ASGIApp, settings: Settings, store: WalletStore) -> None:
        self.app = app
        self.settings = settings
        self.store = store
        self._owners: collections.OrderedDict[str, str | None] = collections.OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a wallet that is not the caller's; pass everything else on untouched."""
        permissions = self.settings.caller_permissions
        if permissions is None or self.settings.trust_front == "none" or scope["type"] != "http":
            await self.app(scope, receive, send)  # no owner rule without a verified caller and a map
            return
        match = matched(scope)
        wallet_id = match.parameters.get("wallet_id") if match is not None else None
        if match is None or wallet_id is None or not validation.is_uuid(wallet_id):
            await self.app(scope, receive, send)
            return
        principal = principal_of(scope, self.settings.trust_front, self.settings.default_principal)
        exists, owner = await self._owner(wallet_id.lower())
        person = person_of(self.settings, scope)
        if not exists:
            await self.app(scope, receive, send)
            return
        if owner is not None and owner == person:
            await self.app(scope, receive, send)
            return
        scope[OWNER_KEY] = owner
        if principal is not None and permissions.on_any_wallet(principal, match.route.operation):
            await self.app(scope, receive, send)
            return
        self.store.telemetry.count(api_metrics.NOT_OWNER)
        self.store.telemetry.response(403, NOT_OWNER_CODE)
        response = error_response(
            403, NOT_OWNER_CODE, f"wallet {wallet_id} is not yours, and your role may not act on any wallet"
        )
        response.headers["Connection"] = "close"  # the unread body is not waited for
        await response(scope, receive, send)

    async def _owner(self, wallet_id: str) -> tuple[bool, str | None]:
        if wallet_id in self._owners:
            self._owners.move_to_end(wallet_id)
            return True, self._owners[wallet_id]
        exists, owner = await self.store.owner(wallet_id)
        if exists:  # a missing wallet may be created later: only an existing one is remembered
            self._owners[wallet_id] = owner
            if len(self._owners) > OWNER_CACHE_SIZE:
                self._owners.popitem(last=False)
        return exists, owner
