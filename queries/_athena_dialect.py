"""Athena's (Trino's) dialect held on the local engine: what Athena refuses is refused, its functions answer.

DuckDB is the embedded stack's Athena, but it is more lenient and knows other functions. An analyst who
tries a query locally must get Athena's answer or a one-line reason why not, never a different answer:

- **Parsed as Trino first.** The statement is parsed with sqlglot's ``trino`` dialect and its types are
  inferred against the lake's columns (:func:`lake_schema`), as Athena's analyzer does.
- **Refused where Athena refuses.** A comparison between a string and a date or timestamp (``dt = DATE
  '…'`` on the string partition column, ``created_at > '2026-11-01'``) is an error in Trino ("Cannot
  apply operator"), which DuckDB would silently cast: :func:`check` raises :class:`AthenaDialectError`.
  So is dividing decimals, which Trino answers as a decimal rounded to a scale and DuckDB as a double.
- **Trino's functions with Trino's results.** sqlglot transpiles most; the rest are rewritten here
  (``format_datetime``'s Joda pattern to ``strftime``, ``date_diff`` counting whole units as Trino does,
  integer ``/`` truncating) or are DuckDB macros (:data:`MACROS`: ``to_iso8601``, ``with_timezone``,
  ``at_timezone``…). A function DuckDB does not have is one line, "not available locally; runs on
  Athena" (:func:`local_gap`).

A value moved to a zone (``x AT TIME ZONE 'America/New_York'``, ``at_timezone``) is that zone's wall
clock locally, without the zone's name: its date, hour and text are Athena's; compare instants before
moving them to a zone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, TypeAlias

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from contracts.lake_tables import PARTITION_COLUMN, TABLES, glue_type


class AthenaDialectError(ValueError):
    """A statement Athena would refuse, or one the local engine cannot answer as Athena would."""


#: Trino's spelling of each column type, for the tables the local engine reads from Iceberg (zoned
#: timestamps, as Athena reads Iceberg ``timestamptz``) and from the nightly Parquet (Hive ``timestamp``).
_ICEBERG_TYPES: Final = {"string": "VARCHAR", "bigint": "BIGINT", "timestamp": "TIMESTAMP WITH TIME ZONE"}
_HIVE_TYPES: Final = {"string": "VARCHAR", "bigint": "BIGINT", "timestamp": "TIMESTAMP"}

_TEXT: Final = frozenset(exp.DataType.TEXT_TYPES)
_TEMPORAL: Final = frozenset(exp.DataType.TEMPORAL_TYPES)
_INTEGERS: Final = frozenset(exp.DataType.INTEGER_TYPES)
_DECIMAL: Final = exp.DataType.Type.DECIMAL
#: The mark a node whose rewrite depends on its types carries from the statement to its typed copy.
_MARK: Final = "walletlake_typed"
#: Those nodes: a division (integer in Trino), date arithmetic (a date in Trino, a timestamp in DuckDB).
_TYPED_REWRITES: Final = (exp.Div, exp.Add, exp.Sub, exp.DateAdd, exp.DateSub, exp.DateTrunc, exp.ArraySize)
_DATE_ARITHMETIC: Final = (exp.Add, exp.Sub, exp.DateAdd, exp.DateSub, exp.DateTrunc)
_DATE: Final = exp.DataType.Type.DATE


def lake_schema(iceberg_tables: frozenset[str]) -> dict[str, dict[str, str]]:
    """The lake's tables and their Trino column types, ``dt`` included, as sqlglot's optimizer takes them."""
    schema = {}
    for name, columns in TABLES.items():
        types = _ICEBERG_TYPES if name in iceberg_tables else _HIVE_TYPES
        schema[name] = {field.name: types[glue_type(field.type)] for field in columns}
        schema[name][PARTITION_COLUMN] = "VARCHAR"
    return schema


def to_duckdb(sql: str, schema: Mapping[str, Mapping[str, str]]) -> str:
    """The DuckDB statement a Trino statement becomes, after :func:`check`; ``AthenaDialectError`` if refused.

    Examples
    --------
    >>> to_duckdb("SELECT 7 / 2", {})
    'SELECT 7 // 2 AS _col0'
    >>> to_duckdb("SELECT format_datetime(TIMESTAMP '2026-11-22 09:05:00', 'yyyy-MM-dd HH:mm') AS t", {})
    "SELECT STRFTIME(CAST('2026-11-22 09:05:00' AS TIMESTAMP(0)), '%Y-%m-%d %H:%M') AS t"
    """
    trees = [tree for tree in sqlglot.parse(sql, read="trino") if tree is not None]
    if len(trees) != 1:
        raise ValueError(f"expected one SQL statement, found {len(trees)}")
    tree = trees[0]
    for number, node in enumerate(tree.find_all(*_TYPED_REWRITES)):
        node.meta[_MARK] = number
    # Types are inferred on a qualified copy (qualifying renames outputs); the statement itself is
    # rewritten, the nodes whose rewrite depends on a type found by their mark.
    typed = _typed(tree, schema)
    check(typed)
    kinds = {
        node.meta[_MARK]: (_kind(node), _kind(node.this), _kind(node.expression))
        for node in typed.find_all(*_TYPED_REWRITES)
        if _MARK in node.meta
    }
    return _name_outputs(_rewrite(tree, kinds)).sql(dialect="duckdb")


def _name_outputs(tree: exp.Expr) -> exp.Expr:
    """Unnamed result columns named as Athena names them (``_col0``, ``_col1``… by position)."""
    if isinstance(tree, exp.Select):
        for position, projection in enumerate(tree.expressions):
            if not isinstance(projection, exp.Alias | exp.Column | exp.Star):
                projection.replace(exp.alias_(projection.copy(), f"_col{position}"))
    return tree


def _typed(tree: exp.Expr, schema: Mapping[str, Mapping[str, str]]) -> exp.Expr:
    """The tree with its expressions' Trino types inferred (columns qualified where they can be)."""
    known: dict[str, object] = {name: dict(columns) for name, columns in schema.items()}
    try:
        qualified = qualify(
            tree.copy(),
            schema=known,
            dialect="trino",
            validate_qualify_columns=False,
            quote_identifiers=False,
            expand_stars=False,
        )
    except (OptimizeError, SqlglotError):
        qualified = tree.copy()  # DuckDB's binder names what does not resolve
    try:
        return annotate_types(qualified, schema=known, dialect="trino")
    except (OptimizeError, SqlglotError):
        return qualified  # untyped: nothing is refused or rewritten on a type, DuckDB has the last word


def check(tree: exp.Expr) -> None:
    """Raise :class:`AthenaDialectError` for what Athena's analyzer refuses and the local engine would not."""
    for node in tree.find_all(exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between, exp.In):
        operands = _operands(node)
        kinds = {_kind(operand) for operand in operands}
        if kinds & _TEXT and kinds & _TEMPORAL:
            text = next(o for o in operands if _kind(o) in _TEXT)
            other = next(o for o in operands if _kind(o) in _TEMPORAL)
            raise AthenaDialectError(_mismatch(node, text, other))
    for division in tree.find_all(exp.Div):
        if _DECIMAL in {_kind(division.left), _kind(division.right)} and not _floating(division):
            raise AthenaDialectError(
                f"{division.sql(dialect='trino')}: dividing decimals is not available locally (Athena "
                "answers a decimal rounded to the operands' scale, DuckDB a double); runs on Athena, or "
                "divide doubles"
            )


def _operands(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Between):
        return [node.this, node.args["low"], node.args["high"]]
    if isinstance(node, exp.In):
        return [node.this, *node.expressions]
    return [node.this, node.expression]


_Kind: TypeAlias = exp.DType | None


def _kind(node: exp.Expr | None) -> _Kind:
    kind = node.type if isinstance(node, exp.Expr) else None
    return kind.this if isinstance(kind, exp.DataType) else None


def _floating(division: exp.Div) -> bool:
    return bool({_kind(division.left), _kind(division.right)} & set(exp.DataType.REAL_TYPES) - {_DECIMAL})


def _mismatch(node: exp.Expr, text: exp.Expr, other: exp.Expr) -> str:
    """Athena's refusal, with the fix an analyst needs (the ``dt`` partition is a string)."""
    shown = node.sql(dialect="trino")
    kind = "date" if _kind(other) == exp.DataType.Type.DATE else "timestamp"
    if isinstance(text, exp.Column) and text.name == PARTITION_COLUMN:
        return (
            f"{shown}: Athena refuses comparing {PARTITION_COLUMN} (a string 'YYYY-MM-DD') with a {kind}; "
            f"compare it with a string: {PARTITION_COLUMN} = '2026-11-22'"
        )
    return (
        f"{shown}: Athena refuses comparing a string with a {kind} (cannot apply operator); "
        f"write a {kind} literal, e.g. TIMESTAMP '2026-11-22 09:00:00 UTC' or DATE '2026-11-22'"
    )


# --------------------------------------------------------------------------- Trino functions


#: Joda-Time pattern letters (Trino's ``format_datetime``) and their ``strftime`` spelling in DuckDB,
#: longest first.
_JODA: Final = (
    ("yyyy", "%Y"),
    ("yy", "%y"),
    ("MMMM", "%B"),
    ("MMM", "%b"),
    ("MM", "%m"),
    ("M", "%-m"),
    ("dd", "%d"),
    ("d", "%-d"),
    ("HH", "%H"),
    ("H", "%-H"),
    ("hh", "%I"),
    ("h", "%-I"),
    ("mm", "%M"),
    ("m", "%-M"),
    ("ss", "%S"),
    ("s", "%-S"),
    ("SSSSSS", "%f"),
    ("SSS", "%g"),
    ("a", "%p"),
    ("EEEE", "%A"),
    ("EEE", "%a"),
    ("DDD", "%j"),
)
_JODA_TOKEN: Final = re.compile("|".join(re.escape(joda) for joda, _ in _JODA) + r"|'[^']*'|[A-Za-z]")


def joda_to_strftime(pattern: str) -> str:
    """A Joda-Time pattern as a ``strftime`` format; ``AthenaDialectError`` for letters with no match.

    Examples
    --------
    >>> joda_to_strftime("yyyy-MM-dd'T'HH:mm:ss.SSS")
    '%Y-%m-%dT%H:%M:%S.%g'
    """
    spelled = dict(_JODA)
    parts: list[str] = []
    position = 0
    for match in _JODA_TOKEN.finditer(pattern):
        parts.append(pattern[position : match.start()].replace("%", "%%"))
        token = match.group(0)
        if token.startswith("'"):
            quoted = token[1:-1]
            parts.append(quoted.replace("%", "%%") if quoted else "'")
        elif token in spelled:
            parts.append(spelled[token])
        else:
            raise AthenaDialectError(
                f"format_datetime pattern letter {token!r} ({pattern!r}): not available locally; "
                "runs on Athena"
            )
        position = match.end()
    parts.append(pattern[position:].replace("%", "%%"))
    return "".join(parts)


def _rewrite(tree: exp.Expr, kinds: Mapping[int, tuple[_Kind, _Kind, _Kind]]) -> exp.Expr:
    """Trino's functions and operators whose DuckDB transpilation would answer differently, rewritten.

    ``kinds`` holds the Trino types (the node's, its left and right operand's) of the marked nodes.
    """

    def visit(node: exp.Expr) -> exp.Expr:
        own, left, right = kinds.get(node.meta.get(_MARK, -1), (None, None, None))
        if isinstance(node, exp.Div) and {left, right} <= _INTEGERS:
            # Trino's integer division truncates; DuckDB's / is a double, its // truncates as Trino does.
            return exp.IntDiv(this=node.left, expression=node.right)
        if isinstance(node, exp.ArraySize):
            # cardinality(): DuckDB's array_length takes no map.
            function = "CARDINALITY" if left == exp.DataType.Type.MAP else "LEN"
            return exp.Anonymous(this=function, expressions=[node.this])
        if isinstance(node, exp.ArraySlice):
            # Trino's slice(array, start, length); DuckDB's list_slice takes the last position.
            start, length = node.args["start"], node.args["end"]
            last = exp.Sub(
                this=exp.Add(this=start.copy(), expression=length), expression=exp.Literal.number(1)
            )
            return exp.Anonymous(this="LIST_SLICE", expressions=[node.this, start, last])
        if isinstance(node, exp.DataType) and node.this == exp.DataType.Type.TIMESTAMP and node.expressions:
            # A Trino literal's precision (TIMESTAMP '… .000' is timestamp(3)) would make DuckDB's
            # TIMESTAMP_MS, which it refuses to compare with a zoned column; microseconds hold every value.
            return exp.DataType.build("TIMESTAMP")
        if own == _DATE and isinstance(node, _DATE_ARITHMETIC):
            # A date plus days or months, or truncated, stays a date in Trino; DuckDB makes a timestamp.
            node.meta.pop(_MARK, None)
            return exp.cast(node, exp.DataType.build("DATE"))
        if isinstance(node, exp.DateDiff):
            # Trino counts whole units elapsed; DuckDB's date_diff counts boundaries crossed, date_sub units.
            unit = node.args.get("unit")
            return exp.Anonymous(
                this="DATE_SUB",
                expressions=[exp.Literal.string(unit.name if unit else "day"), node.expression, node.this],
            )
        if isinstance(node, exp.Anonymous) and node.name.lower() == "format_datetime":
            value, pattern = [*node.expressions, None, None][:2]
            if not isinstance(pattern, exp.Literal) or not pattern.is_string:
                raise AthenaDialectError(
                    "format_datetime with a pattern that is not a literal: not available locally; "
                    "runs on Athena"
                )
            return exp.Anonymous(
                this="STRFTIME", expressions=[value, exp.Literal.string(joda_to_strftime(pattern.this))]
            )
        return node

    return tree.transform(visit, copy=False)


#: Trino functions sqlglot leaves as they are, as DuckDB macros with Trino's results (UTC session zone,
#: microseconds: what Athena gives over Iceberg ``timestamptz``).
MACROS: Final = (
    # to_iso8601: a zoned value in UTC ends in Z (Trino prints the zone's offset; the lake's is UTC),
    # a date is its day, a wall-clock timestamp has no zone.
    "CREATE OR REPLACE MACRO to_iso8601(x) AS CASE "
    "WHEN typeof(x) = 'TIMESTAMP WITH TIME ZONE' THEN strftime(x::TIMESTAMPTZ, '%Y-%m-%dT%H:%M:%S.%fZ') "
    "WHEN typeof(x) = 'DATE' THEN strftime(x::DATE, '%Y-%m-%d') "
    "ELSE strftime(x::TIMESTAMP, '%Y-%m-%dT%H:%M:%S.%f') END",
    # with_timezone: a wall-clock timestamp read in a zone: the instant it is there.
    "CREATE OR REPLACE MACRO with_timezone(x, zone) AS timezone(zone, x::TIMESTAMP)",
    # at_timezone: the same instant seen in another zone (locally: its wall clock there).
    "CREATE OR REPLACE MACRO at_timezone(x, zone) AS timezone(zone, x::TIMESTAMPTZ)",
    "CREATE OR REPLACE MACRO to_unixtime(x) AS epoch_us(x::TIMESTAMPTZ) / 1e6",
    "CREATE OR REPLACE MACRO from_iso8601_timestamp_nanos(x) AS x::TIMESTAMPTZ",
    "CREATE OR REPLACE MACRO last_day_of_month(x) AS last_day(x::DATE)",
)

_MISSING_FUNCTION: Final = re.compile(
    r"(?:Scalar|Aggregate|Table)? ?Function with name \"?(\w+)\"? does not exist"
)


def local_gap(error: BaseException) -> str | None:
    """One line for a DuckDB error that means "Trino has it, DuckDB does not", else None."""
    found = _MISSING_FUNCTION.search(str(error))
    if found is None:
        return None
    return (
        f"function {found.group(1)}: not available locally; runs on Athena (walletlake sql --engine athena)"
    )
