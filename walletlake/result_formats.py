"""A query's result as the terminal, a spreadsheet or a program reads it: ``table``, ``csv``, ``json``.

In ``json`` integers (micro-USD amounts, versions, counts) and decimals (USD amounts) are strings of
digits, so no JSON reader rounds them through a float. pandas is imported only by what reads a
frame: the command line builds its ``--format`` choices from :data:`FORMATS` at every start.
"""

from __future__ import annotations

import decimal
import json
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import pandas as pd

FORMATS: Final = ("table", "csv", "json")


def render(frame: pd.DataFrame, output: str) -> str:
    """A result frame as ``table``, ``csv`` or ``json`` text, ending in a newline."""
    if output == "csv":
        return str(frame.to_csv(index=False))
    if output == "json":
        return (
            json.dumps([{k: _json_value(v) for k, v in row.items()} for row in frame.to_dict("records")])
            + "\n"
        )
    if frame.empty:
        return "(no rows)\n"
    return str(frame.to_string(index=False, na_rep="")) + "\n"


def _json_value(value: Any) -> Any:
    import pandas as pd  # loaded already: the value comes from a frame

    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int | decimal.Decimal):
        return str(value)
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if isinstance(value, float):
        return None if pd.isna(value) else value
    return value if isinstance(value, str) else str(value)
