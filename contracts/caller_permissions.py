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
_WALLET_PATTERN: Final = r"[^/]+"
API_PREFIX: Final = "/api/v1/wallets"


@dataclasses.dataclass(frozen=True, slots=True)
class Route:
    """One route of the API as an operation: its method, its path for the server, its Lattice paths.

    Attributes
    ----------
    operation:
        What a caller does through it.
    method:
        The HTTP method.
    pattern:
        The path as the server matches it (a regular expression, whole path).
    lattice_paths:
        The path as a VPC Lattice auth policy names it, in the service's resource ARN
        (``arn:aws:vpc-lattice:<region>:<account>:service/<id>/<path>``): ``*`` and ``?`` wildcards.
    """

    operation: Operation
    method: str
    pattern: re.Pattern[str]
    lattice_paths: tuple[str, ...]


def _route(operation: Operation, method: str, tail: str, glob_tail: str, *, slash: bool = True) -> Route:
    pattern = re.compile(f"{re.escape(API_PREFIX)}/{_WALLET_PATTERN}{tail}" + ("/?" if slash else ""))
    paths: tuple[str, ...] = (f"{API_PREFIX}/{_WALLET_GLOB}{glob_tail}",)
    if slash:
        paths += (f"{API_PREFIX}/{_WALLET_GLOB}{glob_tail}/",)
    return Route(operation, method, pattern, paths)


#: Every route a caller may be permitted, by operation. ``/healthz`` (the load balancer's and
#: Lattice's health checks) is no operation: it answers anyone and reads nothing.
ROUTES: Final[tuple[Route, ...]] = (
    Route(
        "create_wallet",
        "POST",
        re.compile(f"{re.escape(API_PREFIX)}/?"),
        (API_PREFIX, f"{API_PREFIX}/"),
    ),
    _route("deposit", "PUT", "/deposit", "/deposit"),
    _route("transfer", "PUT", f"/transfer/{_WALLET_PATTERN}", f"/transfer/{_WALLET_GLOB}"),
    _route("read", "GET", "/balance", "/balance"),
    _route("read", "GET", "/transactions/[^/]+", "/transactions/*", slash=False),
)


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
    for route in ROUTES:
        if route.method == method and route.pattern.fullmatch(path):
            return route.operation
    return None


#: An IAM role ARN, with an optional path: ``arn:<partition>:iam::<account>:role/<path/>name``.
_ROLE_ARN: Final = re.compile(
    r"arn:(?P<partition>aws[\w-]*):iam::(?P<account>\d{12}):role/(?:[\w+=,.@/-]*/)?(?P<name>[\w+=,.@-]{1,64})"
)
#: What a caller signing with a role's session is verified as: the assumed-role ARN (no path).
_ASSUMED_ROLE_ARN: Final = re.compile(
    r"arn:(?P<partition>aws[\w-]*):sts::(?P<account>\d{12}):assumed-role/(?P<name>[\w+=,.@-]{1,64})/(?P<session>[\w+=,.@-]{2,64})"
)


class CallerPermissionsError(ValueError):
    """A caller map that cannot be used; the message is one line naming the entry."""


@dataclasses.dataclass(frozen=True, slots=True)
class CallerPermissions:
    """The roles that may call the API, each with the operations it may do.

    Its text (``str()``) is the form it is read from, so it travels through an environment
    variable and a CDK context value unchanged.
    """

    roles: tuple[tuple[str, tuple[Operation, ...]], ...]

    @classmethod
    def parse(cls, text: str) -> CallerPermissions:
        """Read ``role-arn[=operation+operation],...``; one line naming a bad entry.

        Examples
        --------
        >>> str(CallerPermissions.parse("arn:aws:iam::111122223333:role/treasury=deposit+read"))
        'arn:aws:iam::111122223333:role/treasury=deposit+read'
        >>> CallerPermissions.parse("arn:aws:iam::111122223333:role/payments").operations_of_role(
        ...     "arn:aws:iam::111122223333:role/payments")
        ('create_wallet', 'transfer', 'read')
        """
        roles: dict[str, tuple[Operation, ...]] = {}
        for entry in (part.strip() for part in text.split(",")):
            if not entry:
                continue
            arn, _, listed = entry.partition("=")
            arn = arn.strip()
            if not _ROLE_ARN.fullmatch(arn):
                raise CallerPermissionsError(
                    f"a caller must be an IAM role ARN (arn:aws:iam::<account>:role/<name>), not {arn!r}"
                )
            if arn in roles:
                raise CallerPermissionsError(f"caller {arn} is named twice")
            roles[arn] = _operations(listed, arn) if listed.strip() else DEFAULT_OPERATIONS
        if not roles:
            raise CallerPermissionsError("no caller named: give role-arn[=operation+operation],...")
        return cls(tuple(roles.items()))

    @classmethod
    def of(cls, roles: Mapping[str, Iterable[Operation]]) -> CallerPermissions:
        """From a mapping (checked as :meth:`parse` checks text)."""
        return cls.parse(",".join(f"{arn}={'+'.join(ops)}" for arn, ops in roles.items()))

    def __str__(self) -> str:
        return ",".join(f"{arn}={'+'.join(ops)}" for arn, ops in self.roles)

    @property
    def role_arns(self) -> tuple[str, ...]:
        """Every role named, in the order given."""
        return tuple(arn for arn, _ in self.roles)

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
        caller = role_of(principal)
        if caller is None:
            return False
        for arn, ops in self.roles:
            named = _ROLE_ARN.fullmatch(arn)
            if named is not None and operation in ops and caller == _identity(named):
                return True
        return False


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


def _operations(listed: str, arn: str) -> tuple[Operation, ...]:
    chosen: list[Operation] = []
    for name in (part.strip() for part in listed.split("+")):
        operation = next((op for op in OPERATIONS if op == name), None)
        if operation is None:
            raise CallerPermissionsError(
                f"caller {arn}: {name!r} is not an operation (one of {', '.join(OPERATIONS)})"
            )
        if operation not in chosen:
            chosen.append(operation)
    return tuple(op for op in OPERATIONS if op in chosen)
