"""The report's tables: how a value, a query result and a list of facts are shown in HTML.

Money in query results is integer micro-USD. Tables show it in USD, the unit of the plots beside
them, converted exactly (a decimal, never a float: ``1,000,000,000.000001``) and labelled in the
column's header; the exact USD columns a query adds (``*_usd``) are then not shown twice. Ids are
shortened to their first characters (the full id in the cell's tooltip) and never get thousands
separators (a snapshot id is a name, not an amount). A number is never broken across lines: numeric
cells do not wrap, and a table wider than its box scrolls inside it (``.scroll``) rather than
breaking its figures mid-digit. Null cells are empty. All of it is pure.
"""

from __future__ import annotations

import datetime as dt
import decimal
import html
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

import pandas as pd

#: Rows shown per table; the rest is counted, not shown, so a large result cannot bloat the file.
MAX_TABLE_ROWS: Final = 50

#: Columns of the named queries that hold micro-USD: shown in USD, labelled so.
MONEY_COLUMNS: Final = frozenset(
    {
        "amount",
        "delta",
        "balance",
        "balance_after",
        "running_balance",
        "closing_balance",
        "net_delta",
        "net_change",
        "money_in",
        "money_out",
        "transfer_amount",
        "total_amount",
        "credit_amount",
        "debit_amount",
        "net_amount",
    }
)
#: Id columns (UUIDs): shown by their first characters, the whole id in the tooltip.
_ID_SUFFIXES: Final = ("_id",)
_ID_SHOWN: Final = 8
_MICRO: Final = decimal.Decimal(1).scaleb(-6)
#: A name that says its value is an identifier (``snapshot_id``, "ledger snapshot id"): digits alone.
_IDENTIFIER: Final = re.compile(r"(?:^|[\s_])id(?:$|[\s_])", re.IGNORECASE)


def is_identifier(name: str) -> bool:
    """Whether a column or fact named so holds an identifier, shown without thousands separators.

    Examples
    --------
    >>> is_identifier("snapshot_id"), is_identifier("ledger snapshot id after the last commit")
    (True, True)
    >>> is_identifier("wallets"), is_identifier("valid")
    (False, False)
    """
    return bool(_IDENTIFIER.search(name))


def usd_text(micro_usd: Any) -> str:
    """Integer micro-USD as exact USD text: cents when the amount is whole cents, else micro-dollars.

    Examples
    --------
    >>> usd_text(1_000_000_000_000_001), usd_text(12_340_000), usd_text(-5)
    ('1,000,000,000.000001', '12.34', '-0.000005')
    """
    if _is_null(micro_usd):
        return ""
    amount = decimal.Decimal(int(micro_usd)) * _MICRO
    places = 2 if int(micro_usd) % 10_000 == 0 else 6
    return f"{amount:,.{places}f}"


def format_value(value: Any) -> str:
    """Text of one cell: integers exact with thousands separators, floats to 4 significant digits."""
    if _is_null(value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iu"):
        return f"{int(value):,}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e15 else f"{value:.4e}"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="milliseconds" if value.microsecond else "seconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def _is_null(value: Any) -> bool:
    return (
        value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value))
    )


def display_frame(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """The frame as a table shows it, and each shown column's header.

    Micro-USD columns become exact USD text with ``(USD)`` in the header; a query's own ``*_usd``
    column is dropped when its micro-USD twin is shown (the same figure twice). Other cells are
    left to :func:`format_value`.
    """
    shown = frame.copy()
    headers: dict[str, str] = {}
    money = {str(column) for column in frame.columns if str(column) in MONEY_COLUMNS}
    twins = {
        str(column)
        for column in frame.columns
        if str(column).endswith("_usd")
        and any(str(column).removesuffix("_usd") in (m, m.removesuffix("_amount")) for m in money)
    }
    shown = shown.drop(columns=sorted(twins))
    for column in shown.columns:
        name = str(column)
        if name in money:
            shown[column] = [usd_text(value) for value in shown[column]]
            headers[name] = f"{name} (USD)"
        elif name.endswith("_usd"):
            headers[name] = f"{name.removesuffix('_usd')} (USD)"
        else:
            headers[name] = name
    return shown, headers


def result_table(frame: pd.DataFrame) -> str:
    """A query result as a table: amounts in USD, ids short, one row turned into key/value pairs."""
    shown, headers = display_frame(frame)
    if len(shown) == 1 and len(shown.columns) > 4:
        row = shown.iloc[0]
        return key_value_table((headers[str(column)], row[column]) for column in shown.columns)
    money = {name for name, header in headers.items() if header.endswith("(USD)")}
    numeric = money | {
        str(column)
        for column in shown.columns
        if pd.api.types.is_numeric_dtype(shown[column]) and not pd.api.types.is_bool_dtype(shown[column])
    }
    return html_table(shown, numeric_columns=numeric, headers=headers)


def key_value_table(pairs: Iterable[tuple[str, Any]]) -> str:
    """Facts as a two-column table: names (which wrap) and values (numbers never broken)."""
    rows = "".join(
        f"<tr><th>{escape(key)}</th><td{_num_class(value)}>{escape(_text(key, value))}</td></tr>"
        for key, value in pairs
    )
    # A key/value table's keys may be long sentences ("expired from DynamoDB by TTL while watched"):
    # they wrap inside the card, which CSS keeps from growing wider than its box.
    return f"<table>{rows}</table>"


def html_table(
    frame: pd.DataFrame, numeric_columns: set[str] | None = None, headers: Mapping[str, str] | None = None
) -> str:
    numeric = numeric_columns or {
        str(column)
        for column in frame.columns
        if pd.api.types.is_numeric_dtype(frame[column]) and not pd.api.types.is_bool_dtype(frame[column])
    }
    names = headers or {}
    head = "".join(f"<th>{escape(names.get(str(column), str(column)))}</th>" for column in frame.columns)
    body = []
    for row in frame.head(MAX_TABLE_ROWS).itertuples(index=False, name=None):
        cells = "".join(
            _cell(str(column), value, str(column) in numeric)
            for column, value in zip(frame.columns, row, strict=True)
        )
        body.append(f"<tr>{cells}</tr>")
    note = (
        f'<p class="note">showing {MAX_TABLE_ROWS:,} of {len(frame):,} rows</p>'
        if len(frame) > MAX_TABLE_ROWS
        else ""
    )
    # In a box of its own that scrolls sideways when the page is narrower than the table: figures
    # stay whole (numeric cells never wrap) and the page itself never scrolls sideways.
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>{note}"
    )


def _cell(column: str, value: Any, numeric: bool) -> str:
    text = _text(column, value)
    if column.endswith(_ID_SUFFIXES) and len(text) > _ID_SHOWN + 1:
        return f'<td class=id title="{escape(text)}">{escape(text[:_ID_SHOWN])}…</td>'
    kind = " class=num" if numeric and not is_identifier(column) else ""
    if isinstance(value, dt.date | pd.Timestamp):
        kind = " class=time"
    return f"<td{kind}>{escape(text)}</td>"


def _text(name: str, value: Any) -> str:
    """A value's text; an identifier's digits without separators."""
    if is_identifier(name) and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return format_value(value)


def _num_class(value: Any) -> str:
    return " class=num" if isinstance(value, int | float) and not isinstance(value, bool) else ""


def escape(text: str) -> str:
    return html.escape(text, quote=True)
