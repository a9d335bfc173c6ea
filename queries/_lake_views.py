"""Views over the lake's tables that every engine offers by name: ``balance_snapshots_latest``.

``balance_snapshots`` keeps every snapshot scan (a day snapshotted three times holds each wallet three
times), so a plain ``sum(balance)`` over a day counts the money several times. The view keeps each
day's last scan only. It is defined once, in ``queries/sql/views/``, in Athena's dialect, and joined
to a statement that names it as a ``WITH`` entry: the same text on DuckDB and on Athena, with no
catalog object to deploy or to drift.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Final

import sqlglot
from sqlglot import exp

from queries._catalog import SQL_FOLDER, SQL_PACKAGE

VIEWS_FOLDER: Final = "views"


@functools.cache
def lake_views() -> dict[str, str]:
    """Each view's name and its Trino ``SELECT``."""
    folder = resources.files(SQL_PACKAGE).joinpath(SQL_FOLDER, VIEWS_FOLDER)
    return {
        entry.name.removesuffix(".sql"): entry.read_text(encoding="utf-8")
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    }


def with_views(sql: str) -> str:
    """The statement with every view it names (and does not define itself) added as a ``WITH`` entry.

    Examples
    --------
    >>> "WITH balance_snapshots_latest AS" in with_views("SELECT sum(balance) FROM balance_snapshots_latest")
    True
    >>> with_views("SELECT 1")
    'SELECT 1'
    """
    views = lake_views()
    if not any(name in sql for name in views):
        return sql
    tree = sqlglot.parse_one(sql, read="trino")
    defined = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    named = sorted(
        {table.name for table in tree.find_all(exp.Table) if not table.db and table.name in views} - defined
    )
    if not named or not isinstance(tree, exp.Query):
        return sql
    # First in the WITH list: the statement's own entries may read the views.
    entries = [
        exp.CTE(
            this=sqlglot.parse_one(views[name], read="trino"),
            alias=exp.TableAlias(this=exp.to_identifier(name)),
        )
        for name in named
    ]
    existing = tree.args.get("with_") or tree.args.get("with")
    if existing is None:
        tree.set("with_" if "with_" in tree.arg_types else "with", exp.With(expressions=entries))
    else:
        existing.set("expressions", [*entries, *existing.expressions])
    return tree.sql(dialect="trino", comments=False)
