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

from collections.abc import MutableMapping
from typing import Any

from contracts.settings import Settings
from wallet.authorization import session_name
from wallet.errors import OwnerNotPermittedError
from wallet.principals import principal_of


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
