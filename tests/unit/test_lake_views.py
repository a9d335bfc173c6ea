"""Views every engine offers by name: joined to a statement as WITH entries, in Athena's dialect."""

from __future__ import annotations

import sqlglot

from queries._lake_views import lake_views, with_views


def test_a_statement_naming_the_view_gets_its_definition_first() -> None:
    # GIVEN a statement with a WITH of its own that reads the view
    statement = (
        "WITH mine AS (SELECT dt, sum(balance) AS total FROM balance_snapshots_latest GROUP BY dt) "
        "SELECT * FROM mine WHERE dt = '2026-11-22'"
    )
    # WHEN the views are added
    tree = sqlglot.parse_one(with_views(statement), read="trino")
    # THEN the view's entry comes first (the statement's own may read it), the statement's stays
    names = [cte.alias for cte in tree.find_all(sqlglot.exp.CTE)]
    assert names == ["balance_snapshots_latest", "mine"]
    assert "balance_snapshots_latest" in lake_views()


def test_a_statement_not_naming_a_view_or_defining_it_itself_is_left_alone() -> None:
    assert with_views("SELECT count(*) FROM balance_snapshots") == "SELECT count(*) FROM balance_snapshots"
    own = "WITH balance_snapshots_latest AS (SELECT 1 AS x) SELECT x FROM balance_snapshots_latest"
    assert with_views(own) == own
