"""Every movement type, once: its legs, whether money enters or leaves the system, its permission.

A movement type is what a transaction item's ``type``, a wallet entry's ``entry_type`` and a ledger
row's ``txn_type`` say. Everything that depends on the type reads it from here: the write path's
legs (:func:`wallet.posting.legs_of`) and request items, the decoder's checks of an entry
(:mod:`stream_processor.columns`), the export backfill's legs
(:mod:`stream_processor.export_entries`), the SQL's sums of money in and out (the ``movement_legs``
rows the query catalog makes from :func:`movement_legs`), the reconciliation's conservation rule
and the tests' builders. So a new type is one :class:`MovementType` here (and, when callers may ask
for it, its route in :data:`contracts.caller_permissions.ROUTES`), and nothing that reads this
registry silently treats it as something else.

A leg names its wallet by the part it plays in the request: :data:`ADDRESSED` (the wallet the
request is addressed to, an item's ``wallet_id``) or :data:`TARGET` (its ``to_wallet_id``). A leg
whose counterparty is None has its other side outside the system: money enters (a credit) or
leaves (a debit). Legs are listed in the order the write path lists the wallets of a transaction.

Pure: no I/O. The registry can take a type at run time (:func:`register`) so that a test can drive
a test-only type end to end; :func:`revision` tells caches built from it (the query catalog) that
it changed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import types
from collections.abc import Iterator, Mapping
from typing import Final, Literal

from contracts.caller_permissions import OPERATIONS, Operation
from contracts.wallets_table import DIRECTION_CREDIT, DIRECTION_DEBIT, TXN_DEPOSIT, TXN_TRANSFER, Attr

Party = Literal["addressed", "target"]
#: The wallet a request is addressed to (an item's ``wallet_id``).
ADDRESSED: Final[Party] = "addressed"
#: A request's other wallet (an item's ``to_wallet_id``).
TARGET: Final[Party] = "target"

#: A leg's flow: money enters the system (an external credit), leaves it (an external debit), or
#: moves between two wallets of the system.
FLOW_IN: Final = 1
FLOW_OUT: Final = -1
FLOW_WITHIN: Final = 0


@dataclasses.dataclass(frozen=True, slots=True)
class LegSpec:
    """One leg of a movement type: whose wallet, which direction, and who is on the other side."""

    wallet: Party
    direction: str
    #: The wallet on the other side; None: outside the system (money enters or leaves through it).
    counterparty: Party | None
    #: -1 on a debit, +1 on a credit: the leg's delta is ``sign * amount``.
    sign: int = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        # A plain attribute, not a property: every posting reads it per leg.
        object.__setattr__(self, "sign", -1 if self.direction == DIRECTION_DEBIT else 1)

    @property
    def external(self) -> bool:
        """True when the leg's other side is outside the system."""
        return self.counterparty is None

    @property
    def flow(self) -> int:
        """:data:`FLOW_IN`, :data:`FLOW_OUT` or :data:`FLOW_WITHIN`: what it does to the system's money."""
        return self.sign if self.external else FLOW_WITHIN


@dataclasses.dataclass(frozen=True, slots=True)
class MovementType:
    """A kind of movement: its legs, its permission and the attributes its items add.

    Attributes
    ----------
    name:
        The type as every item and row spells it (``type``, ``entry_type``, ``txn_type``).
    operation:
        What a caller must be permitted to ask for it (:data:`contracts.caller_permissions.OPERATIONS`).
    legs:
        Its legs in the order a transaction lists the wallets. Directions are unique within a type
        (a ledger row's ``entry_id`` is ``{txn_id}:{direction}``).
    extra_attributes:
        Attributes its transaction items carry beyond the common ones; until the lake has a column
        for one, the decoder keeps it in ``extra_attributes`` (docs/architecture.md).
    """

    name: str
    operation: Operation
    legs: tuple[LegSpec, ...]
    extra_attributes: tuple[str, ...] = ()
    #: True when the request names a second wallet (its items carry ``to_wallet_id``).
    has_target: bool = dataclasses.field(init=False)
    #: What one movement does to the system's money, per unit of its amount (in: 1, out: -1).
    flow: int = dataclasses.field(init=False)
    #: True when every leg's other side is a wallet of the system (a transfer's kind).
    internal: bool = dataclasses.field(init=False)
    #: Its legs' directions, in leg order.
    directions: tuple[str, ...] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        # Derived once, held as plain attributes: the decoder's checks read them per batch
        # without a call into this module (docs: a record's walk enters each module once).
        legs = self.legs
        object.__setattr__(self, "has_target", any(TARGET in (leg.wallet, leg.counterparty) for leg in legs))
        object.__setattr__(self, "flow", sum(leg.flow for leg in legs))
        object.__setattr__(self, "internal", not any(leg.external for leg in legs))
        object.__setattr__(self, "directions", tuple(leg.direction for leg in legs))

    def leg(self, direction: str) -> LegSpec | None:
        """The leg of ``direction``, or None when the type has none."""
        for leg in self.legs:
            if leg.direction == direction:
                return leg
        return None


class MovementTypeError(ValueError):
    """A movement type the rest of the system could not carry."""


_COMMON_ATTRIBUTES: Final = frozenset(
    value for name, value in vars(Attr).items() if not name.startswith("_") and isinstance(value, str)
)


def _check(kind: MovementType) -> None:
    """Refuse a type whose rows the ledger, the decoder or the SQL could not tell apart or balance."""
    if not kind.name or not kind.name.isidentifier():
        raise MovementTypeError(f"movement type name {kind.name!r} is not a plain word")
    if kind.operation not in OPERATIONS:
        raise MovementTypeError(f"{kind.name}: operation {kind.operation!r} is not one of {OPERATIONS}")
    if not kind.legs:
        raise MovementTypeError(f"{kind.name}: a movement has at least one leg")
    directions = kind.directions
    if len(set(directions)) != len(directions) or not set(directions) <= {DIRECTION_DEBIT, DIRECTION_CREDIT}:
        raise MovementTypeError(
            f"{kind.name}: legs must be at most one debit and one credit, not {directions}"
        )
    if kind.legs[0].wallet != ADDRESSED:
        raise MovementTypeError(f"{kind.name}: the first leg is the addressed wallet's")
    if kind.internal:
        if len(kind.legs) != 2 or kind.flow != FLOW_WITHIN:
            raise MovementTypeError(f"{kind.name}: a movement within the system is one debit and one credit")
        first, second = kind.legs
        if (
            first.counterparty != second.wallet
            or second.counterparty != first.wallet
            or first.wallet == second.wallet
        ):
            raise MovementTypeError(f"{kind.name}: each leg's counterparty is the other leg's wallet")
    elif len(kind.legs) != 1:
        raise MovementTypeError(f"{kind.name}: money entering or leaving the system is one leg")
    if clash := _COMMON_ATTRIBUTES.intersection(kind.extra_attributes):
        raise MovementTypeError(f"{kind.name}: extra attributes {sorted(clash)} are the items' own")


_REGISTRY: Final[dict[str, MovementType]] = {}
#: Every registered movement type by its name, in registration order (a read-only view).
MOVEMENT_TYPES: Final[Mapping[str, MovementType]] = types.MappingProxyType(_REGISTRY)
_revision = [0]


def register(kind: MovementType) -> MovementType:
    """Add ``kind`` to the registry (refused when its name is taken or it could not be carried)."""
    _check(kind)
    if kind.name in _REGISTRY:
        raise MovementTypeError(f"movement type {kind.name!r} is registered already")
    _REGISTRY[kind.name] = kind
    _revision[0] += 1
    return kind


def unregister(name: str) -> None:
    """Take a type out of the registry (a test's own type, when the test is done)."""
    del _REGISTRY[name]
    _revision[0] += 1


@contextlib.contextmanager
def registered(kind: MovementType) -> Iterator[MovementType]:
    """``kind`` registered for the ``with`` block only: a test's type never outlives the test."""
    register(kind)
    try:
        yield kind
    finally:
        unregister(kind.name)


def revision() -> int:
    """A number that changes whenever the registry does: the key of anything built from it."""
    return _revision[0]


def movement_type(name: str) -> MovementType:
    """The registered type ``name``; :class:`MovementTypeError` for a name nothing registered.

    Examples
    --------
    >>> [leg.direction for leg in movement_type("transfer").legs]
    ['debit', 'credit']
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise MovementTypeError(f"unknown movement type {name!r}") from None


def money_moving_operations() -> tuple[Operation, ...]:
    """The operations that move money (a caller permitted one may hold a nonce's record)."""
    return tuple(dict.fromkeys(kind.operation for kind in _REGISTRY.values()))


def movement_legs() -> tuple[tuple[str, str, int], ...]:
    """``(type, direction, flow)`` of every leg of every registered type: the SQL's ``movement_legs``."""
    return tuple((kind.name, leg.direction, leg.flow) for kind in _REGISTRY.values() for leg in kind.legs)


#: Money enters the system: one credit of the addressed wallet, from outside (permission ``deposit``).
DEPOSIT: Final = register(MovementType(TXN_DEPOSIT, "deposit", (LegSpec(ADDRESSED, DIRECTION_CREDIT, None),)))
#: Money moves from the addressed wallet (the payer) to the target wallet (the payee).
TRANSFER: Final = register(
    MovementType(
        TXN_TRANSFER,
        "transfer",
        (LegSpec(ADDRESSED, DIRECTION_DEBIT, TARGET), LegSpec(TARGET, DIRECTION_CREDIT, ADDRESSED)),
    )
)
