"""Query parameters: typed values parsed from text, and their rendering into Trino SQL literals.

The ``.sql`` files use awswrangler's ``named`` parameter style: ``:name`` placeholders that the
client replaces with SQL literals before the query leaves the machine. The Athena engine hands the
typed values to awswrangler (``paramstyle="named"``); the DuckDB engine renders them here with the
same pattern and the same literal spelling, then transpiles the rendered Trino SQL. One rendering
rule for both engines is what keeps a query's meaning identical on AWS and on the embedded stack
(``tests/stack/test_queries.py`` checks this renderer against awswrangler's own).

Types, as the ``@param`` lines of a ``.sql`` header declare them:

``string``
    a Trino ``varchar`` literal, quotes doubled.
``timestamp``
    ISO-8601; an offset or ``Z`` is converted to UTC, a naive value is taken as UTC; a bare date is
    refused (an instant is asked for, and its midnight is a guess). Rendered as
    ``TIMESTAMP 'yyyy-MM-dd HH:mm:ss.SSS'`` (milliseconds: the lake's precision), comparable with
    the lake's ``timestamp`` columns, which hold UTC.
``date``
    ``yyyy-MM-dd``. Rendered as a *string* literal, because the column every date parameter is
    compared with, the partition column ``dt``, is a string (``dt = '2026-11-22'`` prunes
    partitions in Athena; ``dt = DATE '…'`` would not even type-check in Trino).
``integer``
    a signed decimal integer, rendered as a bare number.
``count``
    an integer of 1 or more, rendered as a bare number: what ``LIMIT`` takes. Checked here, so
    ``limit=-1`` is refused in one line before any SQL runs, not by the engine's binder.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from typing import Final

#: A parameter's value once parsed: what awswrangler's ``named`` style accepts.
QueryValue = str | int | dt.datetime

#: awswrangler's placeholder pattern (``awswrangler/_sql_formatter.py``): ``:name`` not preceded by
#: another colon (``::`` casts stay intact) and not followed by a word character.
PLACEHOLDER: Final = re.compile(r"(?<!:):([A-Za-z0-9_]+)(?![A-Za-z0-9_])")
_INTEGER: Final = re.compile(r"[+-]?\d+")
_DATE_ONLY: Final = re.compile(r"\d{4}-?\d{2}-?\d{2}")


class ParameterError(ValueError):
    """A parameter is missing, unknown, or its text does not parse as its declared type."""


def _parse_string(text: str) -> str:
    return text


def _parse_timestamp(text: str) -> dt.datetime:
    if _DATE_ONLY.fullmatch(text.strip()):
        # fromisoformat would read a bare day as its midnight without a word: an instant is asked for.
        raise ParameterError(
            f"{text.strip()} is a date, not an instant: give the time too "
            f"({text.strip()}T00:00:00Z for its start)"
        )
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ParameterError(f"{text} is not an ISO-8601 timestamp (2026-11-22T09:00:00Z)") from None
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def _parse_date(text: str) -> str:
    try:
        return dt.date.fromisoformat(text.strip()).isoformat()
    except ValueError:
        raise ParameterError(f"{text} is not a date (yyyy-MM-dd)") from None


def _parse_integer(text: str) -> int:
    if not _INTEGER.fullmatch(text.strip()):
        raise ParameterError(f"{text} is not an integer")
    return int(text)


def _parse_count(text: str) -> int:
    value = _parse_integer(text)
    if value < 1:
        raise ParameterError(f"{text.strip()} is not a count (an integer of 1 or more)")
    return value


PARSERS: Final[dict[str, Callable[[str], QueryValue]]] = {
    "string": _parse_string,
    "timestamp": _parse_timestamp,
    "date": _parse_date,
    "integer": _parse_integer,
    "count": _parse_count,
}


def parse_value(parameter_type: str, text: str) -> QueryValue:
    """The typed value of a parameter given as text (the CLI's ``--param k=v``)."""
    try:
        parser = PARSERS[parameter_type]
    except KeyError:
        raise ParameterError(f"unknown parameter type {parameter_type}") from None
    return parser(text)


def literal(value: QueryValue) -> str:
    """The Trino literal awswrangler's ``named`` style writes for ``value``.

    Examples
    --------
    >>> literal("it's")
    "'it''s'"
    >>> literal(dt.datetime(2026, 11, 22, 10, 30))
    "TIMESTAMP '2026-11-22 10:30:00.000'"
    """
    if isinstance(value, bool):  # bool is an int; never a valid parameter here
        raise TypeError("boolean parameters are not supported")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            raise TypeError(f"timestamps are rendered naive (UTC), got {value}")
        return f"TIMESTAMP '{value.isoformat(sep=' ', timespec='milliseconds')}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(f"unsupported parameter value {value!r}")


def render(sql: str, values: Mapping[str, QueryValue]) -> str:
    """Replace every ``:name`` with its literal; placeholders without a value are left alone."""

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        return literal(values[name]) if name in values else match.group(0)

    return PLACEHOLDER.sub(substitute, sql)
