"""Athena's per-table clauses taken out of a statement, for an engine that pins tables by their views.

An analyst's statement names the lake's tables as Athena does: bare (``ledger``), by database
(``walletlake.ledger``) or fully (``awsdatacatalog.walletlake.ledger``), and may read an Iceberg
table ``FOR VERSION AS OF`` a snapshot or ``FOR TIMESTAMP AS OF`` an instant. DuckDB has neither the
catalog nor the clauses: its views carry the bare names and read a table at one snapshot per
statement. :func:`split_table_clauses` turns the statement into that shape (one parse by sqlglot)
and returns what each clause asked for, which the engine resolves to snapshot ids.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

import sqlglot
from sqlglot import exp

from contracts.lake_tables import TABLES
from queries._metadata_tables import METADATA_TABLES

#: The catalog Athena names Glue's databases under.
ATHENA_CATALOG = "awsdatacatalog"

_Point = TypeVar("_Point", int, str)


@dataclasses.dataclass(frozen=True, slots=True)
class TableClauses:
    """A statement without its per-table clauses, and what they named.

    Attributes
    ----------
    sql:
        Trino SQL with bare table names and no ``FOR … AS OF``.
    versions:
        Per table, the snapshot id a ``FOR VERSION AS OF`` named.
    timestamps:
        Per table, the ``FOR TIMESTAMP AS OF`` expression (Trino SQL), for the engine to evaluate.
    """

    sql: str
    versions: dict[str, int]
    timestamps: dict[str, str]


def split_table_clauses(sql: str, database: str) -> TableClauses:
    """The statement with lake tables unqualified and their ``FOR … AS OF`` clauses taken out.

    Raises ``ValueError`` for a table read at two points in one statement: a view reads one.

    Examples
    --------
    >>> split_table_clauses("SELECT * FROM walletlake.ledger FOR VERSION AS OF 7", "walletlake").versions
    {'ledger': 7}
    """
    tree = sqlglot.parse_one(sql, read="trino")
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    versions: dict[str, int] = {}
    timestamps: dict[str, str] = {}
    changed = False
    for table in tree.find_all(exp.Table):
        if table.db == database and table.name not in TABLES and table.name not in METADATA_TABLES:
            raise ValueError(
                f"{database}.{table.name}: no such table in {database} (its tables: {', '.join(TABLES)})"
            )
        if (table.name not in TABLES and table.name not in METADATA_TABLES) or table.name in ctes:
            continue
        if table.db:
            if table.db != database or (table.catalog and table.catalog.lower() != ATHENA_CATALOG):
                continue
            table.set("db", None)
            table.set("catalog", None)
            changed = True
        version = table.args.get("version")
        if version is None:
            continue
        kind = str(version.this).upper()
        if kind == "VERSION" and isinstance(version.expression, exp.Literal):
            _once(versions, table.name, int(version.expression.this))
        elif kind == "TIMESTAMP":
            _once(timestamps, table.name, version.expression.sql(dialect="trino"))
        else:
            raise ValueError(f"{table.name}: cannot read {version.sql(dialect='trino')}")
        table.set("version", None)
        changed = True
    both = sorted(set(versions) & set(timestamps))
    if both:
        raise ValueError(f"{both[0]} is read at two points in one statement")
    return TableClauses(tree.sql(dialect="trino") if changed else sql, versions, timestamps)


def _once(found: dict[str, _Point], table: str, value: _Point) -> None:
    if found.setdefault(table, value) != value:
        raise ValueError(f"{table} is read at two points in one statement")
