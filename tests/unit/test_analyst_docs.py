"""docs/analysts.md stays true to the code: every lake column, with its type, and every named query."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contracts.lake_tables import TABLES, glue_type
from queries import list_queries

_ROW = re.compile(r"^\| `(?P<name>\w+)` \| (?P<type>\w+) \| (?P<meaning>.+) \|$")


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    following = text.find("\n#", start + len(heading))
    return text[start : following if following != -1 else len(text)]


@pytest.fixture(scope="module")
def analysts_doc(project_root: Path) -> str:
    return (project_root / "docs" / "analysts.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_column_of_every_table_is_documented_with_its_type(analysts_doc: str, table: str) -> None:
    # GIVEN the table's section of the analysts' doc
    section = _section(analysts_doc, f"### `{table}`")
    rows = [match.groupdict() for line in section.splitlines() if (match := _ROW.match(line))]
    # THEN it lists exactly the schema's columns, in order, with the Glue type Athena shows
    assert [(row["name"], row["type"]) for row in rows] == [
        (field.name, glue_type(field.type)) for field in TABLES[table]
    ]
    # AND says what each one means
    assert all(len(row["meaning"]) > 10 for row in rows)


def test_every_named_query_is_documented_with_an_example(analysts_doc: str) -> None:
    section = _section(analysts_doc, "## Named queries")
    for query in list_queries():
        assert f"`{query.name}`" in section, query.name
        assert f"walletlake query {query.name}" in section, query.name


def test_the_audit_table_is_documented_with_every_column_and_its_type(analysts_doc: str) -> None:
    # GIVEN the audit table's section, one schema for Lattice's logs and the API's own lines
    from contracts.audit_log import AUDIT_COLUMNS, AUDIT_TABLE

    section = _section(analysts_doc, f"### `{AUDIT_TABLE}`")
    rows = [match.groupdict() for line in section.splitlines() if (match := _ROW.match(line))]
    # THEN it lists exactly the contract's columns, in order, with their types
    assert [(row["name"], row["type"]) for row in rows] == list(AUDIT_COLUMNS)
