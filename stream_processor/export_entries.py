"""Number the entries of a point-in-time export: the wallet MODIFYs the stream carried, rebuilt.

Pure. The write path states an entry's version and balance after only on the wallet item, whose
stream MODIFY the lake reads; a transaction item holds the movement (wallets, amount, time) but
not where it landed in each wallet's history. An export at time T still numbers every recent
entry exactly, because of two rules of the write path:

- per wallet, ``created_at`` strictly increases with ``version`` (the ``updated_at < :now``
  condition), so a wallet's transaction items ordered by time are ordered by version;
- TTL never deletes an item before its ``expires_at``, so every transaction item with
  ``expires_at`` after T is in the export: for each wallet they are the newest entries, with no gap.

So for each wallet, its legs in those items, newest first, end at the wallet item's own state in
the export: the newest is version V with balance B (and must be the item's ``entry_txn_id``), the
next V - 1 with B minus the newest's delta, and so on. Each leg becomes the wallet MODIFY record
the stream carried (OLD and NEW images), which the decoder then checks and decodes as usual. Items
already past ``expires_at`` at T may be missing their neighbours and are left to the export before
(the backfill takes exports less than 8 hours apart).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from contracts.movement_types import ADDRESSED, TARGET, MovementTypeError, movement_type
from contracts.wallets_table import DIRECTION_DEBIT, ENTRY_FIELDS, Attr

_N: Final = "N"
_S: Final = "S"


@dataclasses.dataclass(frozen=True, slots=True)
class _Leg:
    wallet_id: str
    created_at: int
    txn_id: str
    txn_type: str
    direction: str
    amount: int
    nonce: str
    counterparty: str | None
    initiated_by: str | None = None

    @property
    def delta(self) -> int:
        return -self.amount if self.direction == DIRECTION_DEBIT else self.amount


@dataclasses.dataclass(slots=True)
class NumberedEntries:
    """What an export's transaction items became.

    ``images`` holds one ``(old, new)`` wallet image pair per entry, as the stream's MODIFY
    carried them; ``expired`` counts items left to the earlier export; ``problems`` says, per
    wallet, why its entries could not be numbered (none of them is then returned).
    """

    images: list[tuple[dict[str, Any], dict[str, Any]]] = dataclasses.field(default_factory=list)
    expired: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)


def number_entries(
    wallets: Iterable[Mapping[str, Any]],
    transactions: Iterable[Mapping[str, Any]],
    *,
    export_time_s: int,
    only: Callable[[str], bool] | None = None,
) -> NumberedEntries:
    """The wallet MODIFY images of every transaction item not yet expired at ``export_time_s``.

    ``wallets`` are the export's wallet items and ``transactions`` its transaction items of the
    single-write path (without ``wallet_version``), in DynamoDB JSON. ``only``: number the legs of
    these wallets alone (a part of the export: a transfer's other leg is another part's).

    Examples
    --------
    >>> wallet = {"wallet_id": {"S": "w"}, "balance": {"N": "7"}, "version": {"N": "1"},
    ...           "updated_at": {"N": "5000"}, "entry_txn_id": {"S": "t"}}
    >>> txn = {"txn_id": {"S": "t"}, "type": {"S": "deposit"}, "wallet_id": {"S": "w"},
    ...        "amount": {"N": "7"}, "nonce": {"S": "n"}, "created_at": {"N": "5000"},
    ...        "expires_at": {"N": "99"}}
    >>> numbered = number_entries([wallet], [txn], export_time_s=9)
    >>> [(old["version"], new["version"]) for old, new in numbered.images]
    [({'N': '0'}, {'N': '1'})]
    """
    result = NumberedEntries()
    legs: dict[str, list[_Leg]] = defaultdict(list)
    unnumbered: dict[str, str] = {}  # a wallet with an item of no registered type: why
    for item in transactions:
        if int(item[Attr.EXPIRES_AT][_N]) <= export_time_s:
            result.expired += 1
            continue
        try:
            item_legs = _legs(item)
        except MovementTypeError as error:
            # never guessed at: every wallet of the item is left unnumbered, with the reason
            for name in (Attr.WALLET_ID, Attr.TO_WALLET_ID):
                if name in item:
                    unnumbered.setdefault(item[name][_S], str(error))
            continue
        for leg in item_legs:
            if only is None or only(leg.wallet_id):
                legs[leg.wallet_id].append(leg)
    by_id = {wallet[Attr.WALLET_ID][_S]: wallet for wallet in wallets}
    for wallet_id, reason in sorted(unnumbered.items()):
        if only is None or only(wallet_id):
            result.problems.append(f"wallet {wallet_id}: {reason}")
    for wallet_id, wallet_legs in sorted(legs.items()):
        if wallet_id in unnumbered:
            continue
        wallet = by_id.get(wallet_id)
        if wallet is None:
            result.problems.append(f"wallet {wallet_id}: its item is not in the export")
            continue
        images, problem = _walk_back(wallet, wallet_legs)
        if problem is not None:
            result.problems.append(f"wallet {wallet_id}: {problem}")
            continue
        result.images.extend(images)
    return result


def _legs(item: Mapping[str, Any]) -> list[_Leg]:
    """The item's legs as its movement type lists them (:mod:`contracts.movement_types`).

    Raises :class:`~contracts.movement_types.MovementTypeError` for a type nobody registered: an
    unknown type is never taken for a credit.
    """
    txn_type = item[Attr.TYPE][_S]
    kind = movement_type(txn_type)
    parties = {ADDRESSED: item[Attr.WALLET_ID][_S]}
    if kind.has_target:
        parties[TARGET] = item[Attr.TO_WALLET_ID][_S]
    common = {
        "created_at": int(item[Attr.CREATED_AT][_N]),
        "txn_id": item[Attr.TXN_ID][_S],
        "txn_type": txn_type,
        "amount": int(item[Attr.AMOUNT][_N]),
        "nonce": item[Attr.NONCE][_S],
        # who asked for it: the transaction item's, never the wallet item's latest entry's
        "initiated_by": (item.get(Attr.INITIATED_BY) or {}).get(_S),
    }
    return [
        _Leg(
            wallet_id=parties[spec.wallet],
            direction=spec.direction,
            counterparty=None if spec.counterparty is None else parties[spec.counterparty],
            **common,
        )
        for spec in kind.legs
    ]


#: The wallet item's attributes that state its latest entry (:data:`ENTRY_FIELDS`, but for its
#: time, the item's own ``updated_at``): a rebuilt MODIFY states its own entry instead.
_ENTRY_ATTRIBUTES: Final = frozenset(
    {
        *(field.attribute for field in ENTRY_FIELDS if field.attribute != Attr.UPDATED_AT),
        Attr.ENTRIES_BEFORE,
    }
)


def _entry_image(leg: _Leg) -> dict[str, Any]:
    """The leg's entry as the wallet item states it, every field of :data:`ENTRY_FIELDS` it has."""
    values = {
        "created_at": leg.created_at,
        "txn_id": leg.txn_id,
        "txn_type": leg.txn_type,
        "direction": leg.direction,
        "amount": leg.amount,
        "nonce": leg.nonce,
        "counterparty_wallet_id": leg.counterparty,
        "initiated_by": leg.initiated_by,
    }
    return {
        field.attribute: {field.type_tag: str(value)}
        for field in ENTRY_FIELDS
        if (value := values[field.column]) is not None
    }


def _walk_back(
    wallet: Mapping[str, Any], legs: list[_Leg]
) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], str | None]:
    """From the wallet's state in the export back through its legs, newest first."""
    legs = sorted(legs, key=lambda leg: leg.created_at, reverse=True)
    if any(newer.created_at == older.created_at for newer, older in itertools.pairwise(legs)):
        return [], "two entries share a created_at, so their order is unknown"
    newest = legs[0]
    if wallet.get(Attr.ENTRY_TXN_ID, {}).get(_S) != newest.txn_id:
        return [], "the newest transaction item is not the wallet item's latest entry"
    version = int(wallet[Attr.VERSION][_N])
    balance = int(wallet[Attr.BALANCE][_N])
    if version < len(legs):
        return [], f"version {version} is below its {len(legs)} unexpired entries"
    # each rebuilt MODIFY is one entry: the item's own entry attributes (and a group commit's
    # entries_before, which the transaction items state again one by one) are not carried over
    base = {name: value for name, value in wallet.items() if name not in _ENTRY_ATTRIBUTES}
    images = []
    for leg in legs:
        new = {
            **base,
            Attr.BALANCE: {_N: str(balance)},
            Attr.VERSION: {_N: str(version)},
            **_entry_image(leg),
        }
        balance -= leg.delta
        version -= 1
        old = {**base, Attr.BALANCE: {_N: str(balance)}, Attr.VERSION: {_N: str(version)}}
        images.append((old, new))
    return images, None
