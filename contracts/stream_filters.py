"""Which stream records invoke the consumer: the event source mapping's filter patterns.

About half the records the table's stream carries make no lake row: the INSERT of each
transaction item (the request's idempotency record; the wallet MODIFYs carry the entries), the
TTL REMOVE of each, user claims, and the write path's idempotency records. Invoking Lambda for
them costs invocations and batch bytes for nothing, so the mapping lets through only records
that may make a row, **and every record the decoder would quarantine**: anything unexpected
still reaches it.

A DynamoDB event source mapping filters on the record's ``dynamodb`` member only (Lambda's
"Using event filtering with a DynamoDB event source"), so ``eventName`` and ``userIdentity`` are
out of reach: an INSERT is a record with a NewImage and no OldImage, a REMOVE the other way
round. Lambda invokes for a record that matches **any** pattern (at most 5 per mapping by
default). What passes:

1. a NewImage whose ``entity`` is none of transaction, user, idempotency: wallet INSERTs and
   MODIFYs (the ledger's rows) and any unknown entity (quarantined);
2. any MODIFY (both images carry an ``entity``): wallet MODIFYs again, and MODIFYs of the
   other entities, which the decoder counts or quarantines;
3. a transaction INSERT carrying ``wallet_version``: written by the compare-and-swap write path,
   it still makes ledger rows;
4. a REMOVE of anything but a transaction or an idempotency record (a wallet or a user claim
   removed is unexpected: quarantined);
5. a record where neither image holds an ``entity`` string (malformed: quarantined).

What does not pass: INSERTs of transactions (without ``wallet_version``), of user claims and
idempotency records; every REMOVE of a transaction or an idempotency record. The TTL deletions
among those are counted by DynamoDB itself (``TimeToLiveDeletedItemCount``, on the dashboard);
a REMOVE of a transaction item *not* made by TTL (an operator's ``DeleteItem``) can no longer
be told apart by the mapping (its ``userIdentity`` is outside ``dynamodb``) and is filtered with
them: no role of the stack may delete items of the table, and reconciliation, not the
quarantine, is what would show a transaction item removed early (nothing of the ledger lives on
it).
"""

from __future__ import annotations

import json
from typing import Any, Final

from contracts.wallets_table import ENTITY_IDEMPOTENCY, ENTITY_TRANSACTION, ENTITY_USER, Attr

_NO_ROW_INSERTS: Final = [ENTITY_TRANSACTION, ENTITY_USER, ENTITY_IDEMPOTENCY]
_EXPECTED_REMOVES: Final = [ENTITY_TRANSACTION, ENTITY_IDEMPOTENCY]


def _entity(condition: list[Any]) -> dict[str, Any]:
    return {Attr.ENTITY: {"S": condition}}


#: The mapping's filter patterns (JSON objects; see the module's list for what each lets through).
STREAM_FILTER_PATTERNS: Final[tuple[dict[str, Any], ...]] = (
    {"dynamodb": {"NewImage": _entity([{"anything-but": _NO_ROW_INSERTS}])}},
    {"dynamodb": {"NewImage": _entity([{"exists": True}]), "OldImage": _entity([{"exists": True}])}},
    {
        "dynamodb": {
            "NewImage": {**_entity([ENTITY_TRANSACTION]), Attr.WALLET_VERSION: {"N": [{"exists": True}]}}
        }
    },
    {
        "dynamodb": {
            "OldImage": _entity([{"anything-but": _EXPECTED_REMOVES}]),
            "NewImage": _entity([{"exists": False}]),
        }
    },
    {"dynamodb": {"NewImage": _entity([{"exists": False}]), "OldImage": _entity([{"exists": False}])}},
)


def filter_patterns() -> list[str]:
    """The patterns as the mapping's ``FilterCriteria.Filters[].Pattern`` strings."""
    return [json.dumps(pattern, separators=(",", ":"), sort_keys=True) for pattern in STREAM_FILTER_PATTERNS]
