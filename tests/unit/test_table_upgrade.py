"""A table as the template first deployed it is brought to today's contract by provisioning."""

from __future__ import annotations

from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog

from contracts.lake_tables import STREAM_TABLES
from lake.iceberg_tables import (
    CREATION_PROPERTY_KEYS,
    TABLE_PROPERTIES,
    ensure_tables,
    iceberg_creation_schema,
    iceberg_schema,
    identifier,
)


def test_tables_created_as_first_deployed_gain_the_new_columns_and_properties(tmp_path: Path) -> None:
    # GIVEN the stream tables as CloudFormation creates them (the creation schema and properties)
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("lake")
    for name in STREAM_TABLES:
        catalog.create_table(
            identifier("lake", name),
            iceberg_creation_schema(name),
            properties={k: v for k, v in TABLE_PROPERTIES.items() if k in CREATION_PROPERTY_KEYS},
        )

    # WHEN provisioning runs (the committer's cold start), twice
    first = ensure_tables(catalog, "lake")
    second = ensure_tables(catalog, "lake")

    # THEN every table has the contract's columns, by name, and every property
    for name in STREAM_TABLES:
        table = catalog.load_table(identifier("lake", name))
        # (the added columns come after dt: union by name appends them)
        assert set(table.schema().column_names) == set(iceberg_schema(name).column_names)
        assert all(table.properties.get(k) == v for k, v in TABLE_PROPERTIES.items() if k != "format-version")
    assert any("columns added: extra_attributes" in line and ".ledger:" in line for line in first)
    assert any("properties set:" in line for line in first)
    assert all(line.endswith(": exists") for line in second)
