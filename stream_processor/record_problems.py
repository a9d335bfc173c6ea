"""What is wrong with a stream record, and what names a batch: the decoder's slow path, apart.

The fast path (:mod:`stream_processor.decoder`) trusts shapes and falls back here only for the
records it could not take, so these checks can afford to look at everything; the batch's identity
(its first and last sequence numbers, its stream, its first record's time) is read once a batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from contracts.money import INTEGER_TEXT
from contracts.wallets_table import (
    ENTITY_IDEMPOTENCY,
    ENTITY_TRANSACTION,
    ENTITY_USER,
    ENTITY_WALLET,
    ENTRY_FIELDS,
    Attr,
    EntryKey,
)
from stream_processor.lambda_records import (
    EVENT_INSERT,
    EVENT_MODIFY,
    EVENT_REMOVE,
    NEW_IMAGE,
    OLD_IMAGE,
    SEQUENCE_NUMBER,
)

_KNOWN_ENTITIES: Final = frozenset({ENTITY_TRANSACTION, ENTITY_WALLET, ENTITY_USER, ENTITY_IDEMPOTENCY})
_ENTRIES_BEFORE: Final = Attr.ENTRIES_BEFORE


@dataclasses.dataclass(frozen=True, slots=True)
class RecordKind:
    """One kind of stream record: how to decode it and which typed attributes it must carry.

    The decoder's table of kinds (:data:`stream_processor.decoder.RECORD_KINDS`) is made of these;
    what they require is what :func:`describe_problem` checks.
    """

    name: str
    decode: Callable[..., None]
    required: tuple[tuple[str, str], ...] = ()
    optional: tuple[tuple[str, str], ...] = ()
    #: ``(mark, attributes)``: an image holding ``mark`` must hold every one of ``attributes``.
    required_with: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()


def describe_problem(record: Any, kinds: Mapping[tuple[str, str], RecordKind]) -> str | None:
    """Why ``record`` cannot be decoded, or None when its shape is fine for its kind.

    Called only for records the fast path could not take (and for every record of a batch in which
    a value of the wrong type turned up), so it can afford to check everything.

    ``kinds``: the decoder's record kinds (:data:`stream_processor.decoder.RECORD_KINDS`): what each
    ``(eventName, entity)`` requires and may carry.

    Examples
    --------
    >>> describe_problem({"eventName": "INSERT", "dynamodb": {"SequenceNumber": "1", "NewImage": {}}}, {})
    'missing attribute entity'
    """
    if not isinstance(record, Mapping):
        return "record is not an object"
    event = record.get("eventName")
    if not isinstance(event, str):
        return "missing eventName"
    change = record.get("dynamodb")
    if not isinstance(change, Mapping):
        return "missing dynamodb"
    if not isinstance(change.get(SEQUENCE_NUMBER), str):
        return f"missing {SEQUENCE_NUMBER}"
    image_name = OLD_IMAGE if event == EVENT_REMOVE else NEW_IMAGE
    image = change.get(image_name)
    if not isinstance(image, Mapping):
        return f"missing {image_name}"
    problem = _typed(image, Attr.ENTITY, "S")
    if problem is not None:
        return problem
    entity = image[Attr.ENTITY]["S"]
    kind = kinds.get((event, entity))
    if kind is None:
        return _unexpected(event, entity)
    required = [*kind.required]
    for mark, attributes in kind.required_with:
        if mark in image:
            required += attributes
    for name, type_tag in required:
        problem = _typed(image, name, type_tag)
        if problem is not None:
            return problem
    for name, type_tag in kind.optional:
        if name in image and (problem := _typed(image, name, type_tag)) is not None:
            return problem
    if (event, entity) == (EVENT_MODIFY, ENTITY_WALLET) and _ENTRIES_BEFORE in image:
        return _entries_before_problem(image[_ENTRIES_BEFORE]["L"])
    return None


#: What each map of ``entries_before`` must hold, and may (:data:`ENTRY_FIELDS`' keys).
_EARLIER_REQUIRED: Final = tuple((field.key, field.type_tag) for field in ENTRY_FIELDS if field.required)
_EARLIER_OPTIONAL: Final = tuple((field.key, field.type_tag) for field in ENTRY_FIELDS if not field.required)


def _entries_before_problem(earlier: Sequence[Any]) -> str | None:
    for index, wrapped in enumerate(earlier):
        entry = wrapped.get("M") if isinstance(wrapped, Mapping) else None
        if not isinstance(entry, Mapping):
            return f"{_ENTRIES_BEFORE}[{index}] is not of type M"
        for name, type_tag in _EARLIER_REQUIRED:
            if (problem := _typed(entry, name, type_tag)) is not None:
                return f"{_ENTRIES_BEFORE}[{index}]: {problem}"
        for name, type_tag in _EARLIER_OPTIONAL:
            if name in entry and (problem := _typed(entry, name, type_tag)) is not None:
                return f"{_ENTRIES_BEFORE}[{index}]: {problem}"
        if not INTEGER_TEXT.match(entry[EntryKey.AMOUNT]["N"]):
            return f"{_ENTRIES_BEFORE}[{index}]: amount is not an integer"
    return None


def _typed(image: Mapping[str, Any], name: str, type_tag: str) -> str | None:
    """Problem with one typed attribute (``{"S": "..."}``, ``{"N": "..."}``, ``{"L": [...]}``), or None."""
    value = image.get(name)
    if value is None:
        return f"missing attribute {name}"
    if type_tag == "L":
        if not isinstance(value, Mapping) or not isinstance(value.get("L"), list):
            return f"attribute {name} is not of type L"
        return None
    if not isinstance(value, Mapping) or not isinstance(text := value.get(type_tag), str):
        return f"attribute {name} is not of type {type_tag}"
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            return f"attribute {name} is not valid UTF-8 text"
    return None


def _unexpected(event: Any, entity: Any) -> str:
    if entity not in _KNOWN_ENTITIES:
        return f"unknown entity {entity!r}"
    if event not in (EVENT_INSERT, EVENT_MODIFY, EVENT_REMOVE):
        return f"unknown eventName {event!r}"
    return f"unexpected {event} of a {entity} item"
