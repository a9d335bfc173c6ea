"""Who may do what through the API: the operations, the routes that are each, and the role map.

One definition serves both places a caller's permission is enforced, so they cannot drift:

- the server (:mod:`wallet.authorization`) refuses a request whose verified principal's role may
  not do the route's operation (403, nothing written);
- the CDK app (``cdk/walletlake_cdk/api_service.py``) writes the VPC Lattice service's auth
  policy from the same map: one statement per role, its routes as the service's resource paths
  and its methods as ``vpc-lattice-svcs:RequestMethod`` conditions.

A deployment names its callers as ``role-arn=operation+operation,...``
(``-c api_callers=...`` for the CDK app, ``WALLETLAKE_CALLER_PERMISSIONS`` for the server). A
role named without operations may do :data:`DEFAULT_OPERATIONS`: everything but ``deposit``.
A deposit creates money, so no role may deposit unless the deployment says so by name.

Pure: no I/O, no AWS.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Mapping
from typing import Final, Literal

Operation = Literal["create_wallet", "deposit", "transfer", "read"]
#: Every operation, in the order documents list them.
OPERATIONS: Final[tuple[Operation, ...]] = ("create_wallet", "deposit", "transfer", "read")
#: What a role named without operations may do: everything but create money.
DEFAULT_OPERATIONS: Final[tuple[Operation, ...]] = ("create_wallet", "transfer", "read")

#: A wallet id as the server accepts it (a UUID, 36 characters), spelled for Lattice's resource
#: paths: ``?`` matches one character, so a wallet's path cannot also match a longer route's.
_WALLET_GLOB: Final = "????????-????-????-????-????????????"
#: A transaction id (a UUID too), spelled the same way.
_TXN_GLOB: Final = _WALLET_GLOB
API_PREFIX: Final = "/api/v1/wallets"
#: A segment is matched possessively (``++``): it cannot hold the ``/`` that follows it, so giving
#: characters back could never make a match, and a path that is not the route fails without
#: stepping back through a UUID once per character.
_SEGMENT: Final = r"[^/]++"
#: Each path parameter a route template may hold: (its pattern for the server, its Lattice glob).
#: A parameter is one path segment; a nonce's glob is ``*`` (its characters are the server's to check).
_PARAMETERS: Final[dict[str, tuple[str, str]]] = {
    "wallet_id": (_SEGMENT, _WALLET_GLOB),
    "target_wallet_id": (_SEGMENT, _WALLET_GLOB),
    "nonce": (_SEGMENT, "*"),
    "txn_id": (_SEGMENT, _TXN_GLOB),
}
_PARAMETER: Final = re.compile(r"\{(\w+)\}")
#: A control character (Unicode category Cc: C0, DEL, C1). A path holding one is no route: ``$`` in
#: a router's pattern matches before a final newline, so ``…/deposit%0A`` would run the deposit
#: while a stricter match finds no operation; the server answers such a path 400 before routing.
CONTROL_CHARACTER: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def holds_control_character(text: str) -> bool:
    """Whether ``text`` holds a :data:`CONTROL_CHARACTER`.

    A printable text holds none (every control character is unprintable), and ``isprintable``
    is one pass in C where the pattern is a character-set test per character: the regular
    expression decides only a text that is not printable (a space other than U+0020, a control).

    Examples
    --------
    >>> holds_control_character("/api/v1/wallets/a/deposit"), holds_control_character("/deposit\\n")
    (False, True)
    >>> holds_control_character("/wallets/\\u00a0")  # unprintable, but no control character
    False
    """
    return not text.isprintable() and CONTROL_CHARACTER.search(text) is not None


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Route:
    """One route of the API: the endpoint that serves it, the operation it is, and how it is matched.

    A route is its row of :data:`ROUTES`, so it is equal only to itself (``eq=False``: identity,
    and a set's or dict's hash costs nothing per request).

    Everything about a route derives from its row in :data:`ROUTES`: the FastAPI routes
    (:mod:`wallet.api` registers :attr:`spellings`), the fast movement path
    (:mod:`wallet.movement_routes`), the server's permission check and audit line (both read the
    one :class:`RouteMatch` of a request) and Lattice's service policy (:attr:`lattice_paths`).

    Attributes
    ----------
    name:
        The endpoint's name (its OpenAPI ``operationId``; the other spelling's ends in ``_alt``).
    operation:
        What a caller does through it: the only thing the caller map permits or refuses.
    method:
        The HTTP method.
    template:
        The path as seed 000 designs it, ``{parameter}`` for a segment (:data:`_PARAMETERS`).
    both_spellings:
        Whether the path with its trailing slash toggled is the same route (seed 000's code and
        design differ on it; both are served, neither redirects).
    pattern:
        The paths it is, as the server matches them (derived; whole path, named groups).
    lattice_paths:
        The paths it is in a VPC Lattice auth policy (derived), in the service's resource ARN
        (``arn:aws:vpc-lattice:<region>:<account>:service/<id>/<path>``): ``*`` and ``?`` wildcards.
    """

    name: str
    operation: Operation
    method: str
    template: str
    both_spellings: bool
    pattern: re.Pattern[str]
    lattice_paths: tuple[str, ...]

    @property
    def spellings(self) -> tuple[str, ...]:
        """The templates it is served under: the designed one first, then its other spelling."""
        if not self.both_spellings:
            return (self.template,)
        other = self.template.removesuffix("/") if self.template.endswith("/") else f"{self.template}/"
        return (self.template, other)


@dataclasses.dataclass(frozen=True, slots=True)
class RouteMatch:
    """A request's route and the values of its path parameters, as :func:`match_route` found them."""

    route: Route
    parameters: Mapping[str, str]


def _route(
    name: str, operation: Operation, method: str, template: str, *, both_spellings: bool = True
) -> Route:
    """A row of :data:`ROUTES`, its server pattern and Lattice paths derived from ``template``."""
    base = template.removesuffix("/") if both_spellings else template
    regex, glob, position = "", "", 0
    for parameter in _PARAMETER.finditer(base):
        literal = base[position : parameter.start()]
        pattern, parameter_glob = _PARAMETERS[parameter[1]]
        regex += f"{re.escape(literal)}(?P<{parameter[1]}>{pattern})"
        glob += f"{literal}{parameter_glob}"
        position = parameter.end()
    regex += re.escape(base[position:]) + ("/?" if both_spellings else "")
    glob += base[position:]
    paths = (glob, f"{glob}/") if both_spellings else (glob,)
    return Route(name, operation, method, template, both_spellings, re.compile(regex), paths)


#: Every route of the API, the one table the server and Lattice are made from (:class:`Route`).
#: ``/healthz`` (the load balancer's and Lattice's health checks) is no route of it: it answers
#: anyone and reads nothing. Any other request a named caller makes is refused: deny by default.
ROUTES: Final[tuple[Route, ...]] = (
    _route("create_wallet", "create_wallet", "POST", f"{API_PREFIX}/"),
    _route("my_wallet", "read", "GET", f"{API_PREFIX}/me/"),
    _route("deposit", "deposit", "PUT", f"{API_PREFIX}/{{wallet_id}}/deposit/"),
    _route("transfer", "transfer", "PUT", f"{API_PREFIX}/{{wallet_id}}/transfer/{{target_wallet_id}}/"),
    _route("history", "read", "GET", f"{API_PREFIX}/{{wallet_id}}/transactions/"),
    _route(
        "history_entry",
        "read",
        "GET",
        f"{API_PREFIX}/{{wallet_id}}/transactions/by-id/{{txn_id}}",
        both_spellings=False,
    ),
    _route(
        "transaction",
        "read",
        "GET",
        f"{API_PREFIX}/{{wallet_id}}/transactions/{{nonce}}",
        both_spellings=False,
    ),
    _route("balance", "read", "GET", f"{API_PREFIX}/{{wallet_id}}/balance"),
)
#: Each route by its name, for the code that serves it.
ROUTE_NAMED: Final[Mapping[str, Route]] = {route.name: route for route in ROUTES}
#: The rows of each method, in table order (a request is matched only against its own method's).
_ROUTES_OF_METHOD: Final[Mapping[str, tuple[Route, ...]]] = {
    method: tuple(route for route in ROUTES if route.method == method)
    for method in dict.fromkeys(route.method for route in ROUTES)
}


def match_route(method: str, path: str) -> RouteMatch | None:
    """The route a request is, with its parameters; None for a request that is no route of the table.

    The whole path must match (never a prefix, never "up to a final newline"), and a path with a
    control character matches nothing. The first matching row wins; no two rows overlap.

    Examples
    --------
    >>> match_route("PUT", "/api/v1/wallets/8a6e0804-2bd0-4672-b79d-d97027f9071a/deposit/").route.name
    'deposit'
    >>> match_route("PUT", "/api/v1/wallets/8a6e0804-2bd0-4672-b79d-d97027f9071a/deposit\\n") is None
    True
    """
    if holds_control_character(path):
        return None
    for route in _ROUTES_OF_METHOD.get(method, ()):
        matched = route.pattern.fullmatch(path)
        if matched is not None:
            return RouteMatch(route, matched.groupdict())
    return None


def operation_of(method: str, path: str) -> Operation | None:
    """The operation a request is, or None for a path that is none (health, documents, a 404).

    Examples
    --------
    >>> operation_of("PUT", "/api/v1/wallets/8a6e0804-2bd0-4672-b79d-d97027f9071a/deposit/")
    'deposit'
    >>> operation_of("GET", "/api/v1/wallets/8a6e0804-2bd0-4672-b79d-d97027f9071a/balance")
    'read'
    >>> operation_of("GET", "/healthz") is None
    True
    """
    matched = match_route(method, path)
    return None if matched is None else matched.route.operation


#: An IAM role ARN, with an optional path: ``arn:<partition>:iam::<account>:role/<path/>name``.
_ROLE_ARN: Final = re.compile(
    r"arn:(?P<partition>aws[\w-]*):iam::(?P<account>\d{12}):role/(?:[\w+=,.@/-]*/)?(?P<name>[\w+=,.@-]{1,64})"
)
#: What a caller signing with a role's session is verified as: the assumed-role ARN (no path).
_ASSUMED_ROLE_ARN: Final = re.compile(
    r"arn:(?P<partition>aws[\w-]*):sts::(?P<account>\d{12}):assumed-role/(?P<name>[\w+=,.@-]{1,64})/(?P<session>[\w+=,.@-]{2,64})"
)


#: An OpenID Connect subject as API Gateway's JWT authorizer verifies it (``api_auth=jwt``):
#: ``<issuer>#<sub>``, the principal :mod:`wallet.principals` makes of the token's claims.
_OIDC_SUBJECT: Final = re.compile(r"https://[^\s#,=]+#[^\s#,=]+")


class CallerPermissionsError(ValueError):
    """A caller map that cannot be used; the message is one line naming the entry."""


@dataclasses.dataclass(frozen=True, slots=True)
class CallerPermissions:
    """The roles that may call the API, each with the operations it may do, and on whose wallets.

    Its text (``str()``) is the form it is read from, so it travels through an environment
    variable and a CDK context value unchanged. An operation is granted on the caller's own
    wallets (the person its session names owns them); ``operation:any`` grants it on any wallet
    (a service acting for others, ``payments=transfer:any+read:any``), and ``create_wallet:any``
    lets the caller name the owner of a wallet it creates. Deny by default: nothing else.
    """

    roles: tuple[tuple[str, tuple[Operation, ...]], ...]
    #: Per caller, the operations it may do on any wallet (a subset of its ``roles`` entry).
    anyone: tuple[tuple[str, tuple[Operation, ...]], ...] = ()

    @classmethod
    def parse(cls, text: str) -> CallerPermissions:
        """Read ``role-arn[=operation[:any]+operation[:any]],...``; one line naming a bad entry.

        Examples
        --------
        >>> str(CallerPermissions.parse("arn:aws:iam::111122223333:role/treasury=deposit:any+read"))
        'arn:aws:iam::111122223333:role/treasury=deposit:any+read'
        >>> CallerPermissions.parse("arn:aws:iam::111122223333:role/payments").operations_of_role(
        ...     "arn:aws:iam::111122223333:role/payments")
        ('create_wallet', 'transfer', 'read')
        """
        roles: dict[str, tuple[Operation, ...]] = {}
        anyone: dict[str, tuple[Operation, ...]] = {}
        for entry in (part.strip() for part in text.split(",")):
            if not entry:
                continue
            arn, _, listed = entry.partition("=")
            arn = arn.strip()
            if not (_ROLE_ARN.fullmatch(arn) or _OIDC_SUBJECT.fullmatch(arn)):
                raise CallerPermissionsError(
                    f"a caller must be an IAM role ARN (arn:aws:iam::<account>:role/<name>) or an "
                    f"OIDC subject (https://<issuer>#<sub>, api_auth=jwt), not {arn!r}"
                )
            if arn in roles:
                raise CallerPermissionsError(f"caller {arn} is named twice")
            roles[arn], anyone[arn] = _operations(listed, arn) if listed.strip() else (DEFAULT_OPERATIONS, ())
        if not roles:
            raise CallerPermissionsError("no caller named: give role-arn[=operation+operation],...")
        return cls(tuple(roles.items()), tuple((arn, ops) for arn, ops in anyone.items() if ops))

    @classmethod
    def of(cls, roles: Mapping[str, Iterable[Operation]]) -> CallerPermissions:
        """From a mapping (checked as :meth:`parse` checks text)."""
        return cls.parse(",".join(f"{arn}={'+'.join(ops)}" for arn, ops in roles.items()))

    def __str__(self) -> str:
        anyone = dict(self.anyone)
        return ",".join(
            f"{arn}={'+'.join(op + (':any' if op in anyone.get(arn, ()) else '') for op in ops)}"
            for arn, ops in self.roles
        )

    @property
    def role_arns(self) -> tuple[str, ...]:
        """Every IAM role named, in the order given (what a Lattice auth policy can name)."""
        return tuple(arn for arn, _ in self.roles if _ROLE_ARN.fullmatch(arn))

    @property
    def subjects(self) -> tuple[str, ...]:
        """Every OIDC subject named (``https://<issuer>#<sub>``: callers with a JWT, ``api_auth=jwt``)."""
        return tuple(name for name, _ in self.roles if _OIDC_SUBJECT.fullmatch(name))

    def names(self, principal: str) -> bool:
        """Whether a verified ``principal`` is a caller of the map (for any operation).

        Examples
        --------
        >>> permissions = CallerPermissions.parse("https://id.example.com/#alice=read")
        >>> permissions.names("https://id.example.com/#alice"), permissions.names("https://id.example.com/#bob")
        (True, False)
        """
        return any(self._is(name, principal) for name, _ in self.roles)

    def operations_of_role(self, role_arn: str) -> tuple[Operation, ...]:
        """What ``role_arn`` may do (nothing for a role not named)."""
        return dict(self.roles).get(role_arn, ())

    def roles_for(self, operation: Operation) -> tuple[str, ...]:
        """The roles that may do ``operation``, in the order given."""
        return tuple(arn for arn, ops in self.roles if operation in ops)

    def permits(self, principal: str, operation: Operation) -> bool:
        """Whether a verified ``principal`` (an assumed-role or role ARN) may do ``operation``.

        A role's session is verified as ``arn:aws:sts::<account>:assumed-role/<name>/<session>``,
        without the role's path; it matches the named role of that partition, account and name.

        Examples
        --------
        >>> permissions = CallerPermissions.parse("arn:aws:iam::111122223333:role/ops/payments=transfer")
        >>> permissions.permits("arn:aws:sts::111122223333:assumed-role/payments/alice", "transfer")
        True
        >>> permissions.permits("arn:aws:sts::111122223333:assumed-role/payments/alice", "deposit")
        False
        >>> permissions.permits("arn:aws:sts::444455556666:assumed-role/payments/alice", "transfer")
        False
        """
        return any(operation in ops and self._is(name, principal) for name, ops in self.roles)

    def on_any_wallet(self, principal: str, operation: Operation) -> bool:
        """Whether ``principal`` may do ``operation`` on any wallet, not only its person's own.

        Examples
        --------
        >>> permissions = CallerPermissions.parse("arn:aws:iam::111122223333:role/payments=transfer:any+read")
        >>> caller = "arn:aws:sts::111122223333:assumed-role/payments/alice"
        >>> permissions.on_any_wallet(caller, "transfer"), permissions.on_any_wallet(caller, "read")
        (True, False)
        """
        return any(operation in ops and self._is(name, principal) for name, ops in self.anyone)

    @staticmethod
    @functools.lru_cache(maxsize=4_096)
    def _is(name: str, principal: str) -> bool:
        """Whether ``principal`` is the map's caller ``name``: a session of that role, or that subject.

        Remembered for the latest pairs: a request asks it of every role of the map in the permission
        check, the owner rule and the lookup's fence, and the answer never changes.
        """
        named = _ROLE_ARN.fullmatch(name)
        if named is None:
            return name == principal
        return role_of(principal) == _identity(named)


def role_of(principal: str) -> tuple[str, str, str] | None:
    """(partition, account, role name) of an assumed-role or role ARN; None for anything else."""
    matched = _ASSUMED_ROLE_ARN.fullmatch(principal) or _ROLE_ARN.fullmatch(principal)
    return None if matched is None else _identity(matched)


def session_of(principal: str) -> str | None:
    """The session name of an assumed-role ARN (who the caller said it is), else None.

    Examples
    --------
    >>> session_of("arn:aws:sts::111122223333:assumed-role/payments/alice@example.com")
    'alice@example.com'
    """
    matched = _ASSUMED_ROLE_ARN.fullmatch(principal)
    return None if matched is None else matched["session"]


def _identity(matched: re.Match[str]) -> tuple[str, str, str]:
    return matched["partition"], matched["account"], matched["name"]


def _operations(listed: str, arn: str) -> tuple[tuple[Operation, ...], tuple[Operation, ...]]:
    """The operations granted, and those of them granted on any wallet (``operation:any``)."""
    chosen: list[Operation] = []
    any_wallet: list[Operation] = []
    for grant in (part.strip() for part in listed.split("+")):
        name, _, scope = grant.partition(":")
        operation = next((op for op in OPERATIONS if op == name), None)
        if operation is None:
            raise CallerPermissionsError(
                f"caller {arn}: {name!r} is not an operation (one of {', '.join(OPERATIONS)})"
            )
        if scope not in ("", "any"):
            raise CallerPermissionsError(f"caller {arn}: {grant!r}: an operation's scope can only be ':any'")
        if operation not in chosen:
            chosen.append(operation)
        if scope and operation not in any_wallet:
            any_wallet.append(operation)
    return tuple(op for op in OPERATIONS if op in chosen), tuple(op for op in OPERATIONS if op in any_wallet)
