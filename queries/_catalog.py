"""The ``.sql`` files under ``queries/sql/``: one question each, described by its header comment.

A file's header is its leading ``--`` comment block::

    -- A wallet's ledger entries between two instants, with the running balance.
    -- @param wallet_id  string     the wallet
    -- @param start      timestamp  ISO-8601 UTC, inclusive

Lines without ``@param`` are the description; each ``@param`` line declares a parameter's name,
type (see :mod:`queries._parameters`) and meaning. The query's name is the file's stem. The body is
Athena (Trino) SQL with ``:name`` placeholders, and every query of a partitioned table must bound
``dt`` so Athena reads only the partitions it needs.

A body line ``-- @include NAME`` is replaced by ``sql/fragments/NAME.sql`` when the catalog loads,
so two questions that share their heaviest part (the reconciliation's entry checks) share one text;
every user of a query (DuckDB, Athena, the CDK's named queries) sees it expanded. Besides the
files, the fragment ``movement_legs`` is made from the movement-type registry
(:func:`movement_legs_fragment`): one row per leg of every registered type with its flow (money in,
out, or within), so a query sums money in and out by joining it and never names a type.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import re
from collections.abc import Mapping
from importlib import resources
from typing import Final

from contracts import movement_types
from queries._parameters import PARSERS, PLACEHOLDER, ParameterError, QueryValue, parse_value

SQL_PACKAGE: Final = "queries"
SQL_FOLDER: Final = "sql"
_PARAM_LINE: Final = re.compile(r"@param\s+(\w+)\s+(\w+)\s*(.*)")
_COMMENT: Final = re.compile(r"--[^\n]*")
_INCLUDE: Final = re.compile(r"^[ \t]*--[ \t]*@include[ \t]+(\w+)[ \t]*$", re.MULTILINE)
FRAGMENTS_FOLDER: Final = "fragments"
#: The fragment made from :mod:`contracts.movement_types` rather than read from a file.
MOVEMENT_LEGS: Final = "movement_legs"


@dataclasses.dataclass(frozen=True, slots=True)
class QueryParameter:
    """One declared parameter of a query."""

    name: str
    type: str
    description: str


@dataclasses.dataclass(frozen=True, slots=True)
class QueryInfo:
    """A named query: what it answers, what it takes, and its Trino SQL."""

    name: str
    description: str
    parameters: tuple[QueryParameter, ...]
    sql: str
    #: What an empty answer means, when it means the question was about nothing (``-- @empty`` line;
    #: ``:name`` stands for a parameter): ``walletlake query`` refuses with it instead of printing no rows.
    empty_note: str = ""

    def empty_answer(self, params: Mapping[str, str]) -> str:
        """The one line an empty answer gets, parameters filled in ("" when an empty answer is an answer)."""
        return PLACEHOLDER.sub(lambda match: params.get(match.group(1), match.group(0)), self.empty_note)

    def bind(self, params: Mapping[str, str]) -> dict[str, QueryValue]:
        """Parse textual parameters into typed values; refuses missing and unknown names."""
        declared = {parameter.name: parameter for parameter in self.parameters}
        unknown = sorted(set(params) - set(declared))
        if unknown:
            raise ParameterError(
                f"{self.name} takes no parameter {', '.join(unknown)} (it takes: {self.signature()})"
            )
        missing = [name for name in declared if name not in params]
        if missing:
            raise ParameterError(f"{self.name} needs {', '.join(missing)} (it takes: {self.signature()})")
        values: dict[str, QueryValue] = {}
        for name, parameter in declared.items():
            try:
                values[name] = parse_value(parameter.type, params[name])
            except ParameterError as error:
                raise ParameterError(f"{self.name}: {name}: {error}") from None
        check_ranges(self.name, values)
        return values

    def signature(self) -> str:
        """``name type, …`` as ``query --list`` prints it."""
        return ", ".join(f"{p.name} {p.type}" for p in self.parameters) or "no parameters"


#: Parameters that bound a range, first and last: a range that ends before it starts is refused.
RANGES: Final = (("start_date", "end_date"), ("start", "end"))


def check_ranges(name: str, values: Mapping[str, QueryValue]) -> None:
    """Refuse a range whose start is after its end: it holds nothing, and an empty answer would say
    "no data" where the parameters were swapped."""
    for first, last in RANGES:
        start, end = values.get(first), values.get(last)
        if start is not None and end is not None and type(start) is type(end) and start > end:  # type: ignore[operator]
            raise ParameterError(f"{name}: {first} {params_text(start)} is after {last} {params_text(end)}")


def params_text(value: QueryValue) -> str:
    """A parameter as the user wrote it, near enough (ISO-8601)."""
    return value.isoformat() if isinstance(value, dt.datetime) else str(value)


def parse_query(name: str, text: str) -> QueryInfo:
    """Read a ``.sql`` file's header and check its placeholders against its declarations."""
    description: list[str] = []
    parameters: list[QueryParameter] = []
    empty_note = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("--"):
            break
        comment = stripped[2:].strip()
        match = _PARAM_LINE.match(comment)
        if comment.startswith("@empty "):
            empty_note = comment.removeprefix("@empty ").strip()
        elif match:
            parameter_name, parameter_type, meaning = match.groups()
            if parameter_type not in PARSERS:
                raise ValueError(f"{name}.sql: parameter {parameter_name} has unknown type {parameter_type}")
            parameters.append(QueryParameter(parameter_name, parameter_type, meaning.strip()))
        elif comment:
            description.append(comment)
    body = _COMMENT.sub("", text)
    used = {match.group(1) for match in PLACEHOLDER.finditer(body) if not match.group(1)[0].isdigit()}
    declared = {parameter.name for parameter in parameters}
    if used != declared:
        raise ValueError(
            f"{name}.sql: placeholders {sorted(used)} do not match its @param lines {sorted(declared)}"
        )
    return QueryInfo(name, " ".join(description), tuple(parameters), text, empty_note)


def expand_includes(name: str, text: str, fragments: Mapping[str, str]) -> str:
    """``text`` with every ``-- @include NAME`` line replaced by that fragment's text."""

    def fragment(match: re.Match[str]) -> str:
        included = match.group(1)
        if included not in fragments:
            raise ValueError(f"{name}.sql: no fragment named {included!r} (known: {sorted(fragments)})")
        return fragments[included].rstrip("\n")

    return _INCLUDE.sub(fragment, text)


def movement_legs_fragment() -> str:
    """The CTE ``movement_legs (txn_type, direction, flow)``: every leg of every registered type.

    ``flow`` is 1 where money enters the system (an external credit), -1 where it leaves (an
    external debit) and 0 where it moves between two wallets; a ledger row joined to no leg is of
    no registered type. Included after ``WITH``, it ends with a comma like every fragment.

    Examples
    --------
    >>> print(movement_legs_fragment().splitlines()[1])
    movement_legs (txn_type, direction, flow) AS (
    """
    rows = ",\n".join(
        f"        ('{name}', '{direction}', {flow})"
        for name, direction, flow in movement_types.movement_legs()
    )
    return (
        "-- every leg of every movement type (made from contracts.movement_types)\n"
        "movement_legs (txn_type, direction, flow) AS (\n"
        f"    VALUES\n{rows}\n"
        "),\n"
    )


def _catalog() -> dict[str, QueryInfo]:
    """The queries, made again whenever the movement-type registry changes (its revision)."""
    return _catalog_of(movement_types.revision())


@functools.cache
def _catalog_of(revision: int) -> dict[str, QueryInfo]:
    folder = resources.files(SQL_PACKAGE) / SQL_FOLDER
    fragments = {
        entry.name.removesuffix(".sql"): entry.read_text(encoding="utf-8")
        for entry in (folder / FRAGMENTS_FOLDER).iterdir()
        if entry.name.endswith(".sql")
    }
    fragments[MOVEMENT_LEGS] = movement_legs_fragment()
    queries = {}
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            name = entry.name.removesuffix(".sql")
            text = expand_includes(name, entry.read_text(encoding="utf-8"), fragments)
            queries[name] = parse_query(name, text)
    return dict(sorted(queries.items()))


class UnknownQueryError(ParameterError, KeyError):
    """No query has that name: bad input (exit 2), and a ``KeyError`` for the callers that catch
    one, printed without the quotes ``KeyError`` puts around its message."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def list_queries() -> list[QueryInfo]:
    """Every named query, by name."""
    return list(_catalog().values())


def get_query(name: str) -> QueryInfo:
    """The named query, or an :class:`UnknownQueryError` naming the ones that exist."""
    try:
        return _catalog()[name]
    except KeyError:
        raise UnknownQueryError(f"no query named {name}; known: {', '.join(_catalog())}") from None
