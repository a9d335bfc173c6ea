"""Turning untrusted JSON values into commands, or refusing them with :class:`InvalidRequestError`.

Pure functions: no I/O, so the rules are property-tested directly (tests/unit/test_wallet_validation.py).
The patterns below are also what the OpenAPI document publishes (:data:`AMOUNT_SCHEMA` and
friends), so the documentation cannot drift from the checks.

The rules (issue 2, docs/architecture.md "Money"):

- an **amount** is micro-USD, a positive integer 1..10^15 given as a JSON number whose exact value
  is an integer (``100``, and, as JSON Schema's ``integer`` reads them, ``100.0`` and ``1e2``), or a
  string of ASCII digits. A number with a fraction (``100.5``, ``100.0000000000000001``), booleans,
  and strings with signs, spaces, decimal points, exponents or leading zeros are refused. Money never
  passes through a float: a JSON number that is not a plain integer reaches :func:`parse_amount` as
  an exact :class:`~decimal.Decimal` (:func:`wallet.api` re-reads such a body with one), and one
  canonical spelling per string keeps ``"100"`` and ``100`` the same request without guessing what
  ``"0100"`` meant;
- a **nonce** is 1..64 characters of ``[0-9A-Za-z_-]`` (a JSON string). It becomes part of the
  transaction item's key ``{wallet_id}_{nonce}_{caller}#transaction``, so it may not contain the key's
  ``#`` nor anything that needs escaping in keys, logs or the lake;
- a **UUID** is the canonical 8-4-4-4-12 hexadecimal form, in either case; it is stored lower-case
  so ``6F9619FF-...`` and ``6f9619ff-...`` name the same user or wallet.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any, Final

import orjson

from contracts.money import MAX_AMOUNT, MIN_AMOUNT
from wallet.commands import CreateWallet, Deposit, Transfer
from wallet.errors import InvalidRequestError, SameWalletTransferError

MAX_NONCE_LENGTH: Final = 64

#: Exactly the strings of 1..10^15: up to 15 digits, or 10^15 itself (16 digits), so the published
#: pattern refuses what the server refuses and nothing else.
AMOUNT_PATTERN: Final = r"^(?:[1-9][0-9]{0,14}|1000000000000000)$"
NONCE_PATTERN: Final = rf"^[0-9A-Za-z_-]{{1,{MAX_NONCE_LENGTH}}}$"
UUID_PATTERN: Final = r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"

_AMOUNT_RE: Final = re.compile(AMOUNT_PATTERN.removesuffix("$") + r"\Z", re.ASCII)
_NONCE_RE: Final = re.compile(NONCE_PATTERN.removesuffix("$") + r"\Z", re.ASCII)
_UUID_RE: Final = re.compile(UUID_PATTERN.removesuffix("$") + r"\Z", re.ASCII)

#: JSON Schemas of the accepted values, published in the OpenAPI document.
AMOUNT_SCHEMA: Final[dict[str, Any]] = {
    "description": (
        "Micro-USD (1 USD = 1,000,000), a positive integer 1..10^15 as a string of digits or a JSON "
        "number whose exact value is an integer. Fractions, booleans, and strings with signs, exponents "
        "or leading zeros are refused."
    ),
    "oneOf": [
        {"type": "string", "pattern": AMOUNT_PATTERN, "example": "100000"},
        {"type": "integer", "minimum": MIN_AMOUNT, "maximum": MAX_AMOUNT},
    ],
}
NONCE_SCHEMA: Final[dict[str, Any]] = {
    "type": "string",
    "pattern": NONCE_PATTERN,
    "minLength": 1,
    "maxLength": MAX_NONCE_LENGTH,
    "description": (
        "Idempotency key chosen by the client, unique per addressed wallet (deposits and transfers "
        "share it). Remembered for the idempotency window (2 days by default)."
    ),
    "example": "18c3a3f2e9b1",
}
UUID_SCHEMA: Final[dict[str, Any]] = {"type": "string", "format": "uuid", "pattern": UUID_PATTERN}


def parse_uuid(value: object, field: str) -> str:
    """The canonical lower-case form of a UUID, or :class:`InvalidRequestError` naming ``field``.

    Examples
    --------
    >>> parse_uuid("6F9619FF-8B86-D011-B42D-00CF4FC964FF", "user_id")
    '6f9619ff-8b86-d011-b42d-00cf4fc964ff'
    """
    if isinstance(value, str) and _UUID_RE.match(value):
        return value.lower()
    raise InvalidRequestError(f"{field} must be a UUID like 6f9619ff-8b86-d011-b42d-00cf4fc964ff")


def is_uuid(value: str) -> bool:
    """Whether ``value`` is a UUID as :func:`parse_uuid` accepts it (without raising).

    Examples
    --------
    >>> is_uuid("6F9619FF-8B86-D011-B42D-00CF4FC964FF"), is_uuid("me")
    (True, False)
    """
    return _UUID_RE.match(value) is not None


def parse_amount(value: object) -> int:
    """Micro-USD as an ``int`` in 1..10^15, from a JSON integer or a string of digits.

    Examples
    --------
    >>> parse_amount("100"), parse_amount(100)
    (100, 100)
    """
    # bool is an int subclass: JSON true must not become 1 micro-USD.
    if type(value) is int:
        if MIN_AMOUNT <= value <= MAX_AMOUNT:
            return value
    elif isinstance(value, Decimal):
        # A JSON number with a fraction or exponent, read exactly: 100.0 is 100, 100.5 is refused.
        if value.is_finite() and value == value.to_integral_value() and MIN_AMOUNT <= value <= MAX_AMOUNT:
            return int(value)
    elif isinstance(value, str) and _AMOUNT_RE.match(value):
        amount = int(value)
        if amount <= MAX_AMOUNT:
            return amount
    raise InvalidRequestError(
        "amount must be a positive integer of micro-USD, 1..10^15, as a string of digits or an integer"
    )


def parse_nonce(value: object) -> str:
    """The nonce unchanged when it is 1..64 characters of ``[0-9A-Za-z_-]``."""
    if isinstance(value, str) and _NONCE_RE.match(value):
        return value
    raise InvalidRequestError(f"nonce must be a string of 1..{MAX_NONCE_LENGTH} characters of [0-9A-Za-z_-]")


#: The fields each request body may carry; anything else is refused (the OpenAPI document says
#: ``additionalProperties: false``), so a misspelt field (``"ammount"``) is an error, not ignored.
CREATE_WALLET_FIELDS: Final = frozenset({"user_id", "owner"})
#: Longest owner a body may name (a person's e-mail, an OIDC subject, a principal).
MAX_OWNER_LENGTH: Final = 256
MOVEMENT_FIELDS: Final = frozenset({"amount", "nonce"})


def parse_create_wallet(body: object) -> CreateWallet:
    """``{"user_id": "<uuid>"[, "owner": "<person>"]}`` → :class:`CreateWallet`.

    ``owner`` is who the wallet is for, when a service creates it for someone (only a caller
    granted ``create_wallet:any`` may name one: :mod:`wallet.ownership`); printable, no control
    character, at most :data:`MAX_OWNER_LENGTH` characters.
    """
    fields = _object(body, CREATE_WALLET_FIELDS)
    owner = fields.get("owner")
    if owner is not None and not (
        isinstance(owner, str) and 0 < len(owner) <= MAX_OWNER_LENGTH and owner.isprintable()
    ):
        raise InvalidRequestError(f"owner must be 1..{MAX_OWNER_LENGTH} printable characters")
    return CreateWallet(user_id=parse_uuid(_required(fields, "user_id"), "user_id"), owner=owner)


def parse_json_body(raw: bytes) -> Any:
    """A request body as JSON, numbers exact: ``100.0`` is read as ``Decimal("100.0")``.

    orjson reads 100.0 as a float; a body whose amount is one is read again with exact decimals,
    so the amount is judged by its written value (100.0 is 100; 100.0000000000000001 is not an
    integer).
    """
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise InvalidRequestError("the request body must be a JSON object") from None
    if isinstance(body, dict) and isinstance(body.get("amount"), float):
        body = json.loads(raw, parse_float=Decimal)
    return body


def parse_deposit(wallet_id: str, body: object, initiated_by: str | None = None) -> Deposit:
    """Path wallet id + ``{"amount", "nonce"}`` → :class:`Deposit` (of ``initiated_by``, already verified)."""
    wallet = parse_uuid(wallet_id, "wallet_id")
    fields = _object(body, MOVEMENT_FIELDS)
    return Deposit(
        wallet_id=wallet,
        amount=parse_amount(_required(fields, "amount")),
        nonce=parse_nonce(_required(fields, "nonce")),
        initiated_by=initiated_by,
    )


def parse_transfer(wallet_id: str, target_id: str, body: object, initiated_by: str | None = None) -> Transfer:
    """Path payer and payee ids + ``{"amount", "nonce"}`` → :class:`Transfer`.

    A transfer to the addressed wallet itself is malformed (422), not a no-op: it would consume a
    nonce and a version while moving nothing.
    """
    payer = parse_uuid(wallet_id, "wallet_id")
    payee = parse_uuid(target_id, "target_wallet_id")
    fields = _object(body, MOVEMENT_FIELDS)
    amount = parse_amount(_required(fields, "amount"))
    nonce = parse_nonce(_required(fields, "nonce"))
    if payer == payee:
        raise SameWalletTransferError("a transfer needs two different wallets")
    return Transfer(
        wallet_id=payer, to_wallet_id=payee, amount=amount, nonce=nonce, initiated_by=initiated_by
    )


def _object(body: object, allowed: frozenset[str]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidRequestError(
            f"unknown field(s) {', '.join(map(repr, unknown))}; allowed: {sorted(allowed)}"
        )
    return body


def _required(fields: dict[str, Any], name: str) -> object:
    try:
        return fields[name]
    except KeyError:
        raise InvalidRequestError(f"{name} is required") from None
