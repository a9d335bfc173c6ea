"""A lost catalog on pyiceberg's SQL catalog (which registers a metadata file whole): provisioning
refuses to create a table over its own files, and :func:`lake.iceberg_register.register_tables`
puts every table back as its newest metadata file holds it, committing nothing of its own."""

from __future__ import annotations

from pathlib import Path

from support.sql_lake import NAMESPACE, column, record, sql_catalog

from contracts.lake_tables import STREAM_TABLES
from lake.commit_progress import read_progress
from lake.committer import commit_table
from lake.iceberg_register import register_tables, restoring_updates
from lake.iceberg_tables import ensure_tables, identifier

WAREHOUSE = "warehouse"


def test_a_table_dropped_from_the_catalog_is_refused_then_registered_whole(tmp_path: Path) -> None:
    # GIVEN a lake with two commits, and a catalog that then lost every table (files kept)
    catalog = sql_catalog(tmp_path)
    root = f"file://{tmp_path / WAREHOUSE}"
    for wallets in (["w1", "w2"], ["w3"]):
        batch = record(tmp_path, wallets=wallets, entries=[f"{w}:credit" for w in wallets])
        for name in ("ledger", "wallets"):
            commit_table(catalog, identifier(NAMESPACE, name), [batch], live_sources={batch.source})
    before = {name: catalog.load_table(identifier(NAMESPACE, name)).metadata for name in STREAM_TABLES}
    for name in STREAM_TABLES:
        catalog.drop_table(identifier(NAMESPACE, name))

    # WHEN provisioning runs
    lines = ensure_tables(catalog, NAMESPACE, location_root=root)
    # THEN each table is refused in one line naming the command; none is created
    assert [line.split(":", 1)[0] for line in lines] == [
        f"REFUSED iceberg table {NAMESPACE}.{name}" for name in STREAM_TABLES
    ]
    assert all(
        line.endswith("run `walletlake lake register` to register it from its files") for line in lines
    )
    assert catalog.list_tables(NAMESPACE) == []

    # WHEN the tables are registered (a dry run first), and again
    dry = register_tables(catalog, NAMESPACE, (root,), dry_run=True)
    done = register_tables(catalog, NAMESPACE, (root,))
    again = register_tables(catalog, NAMESPACE, (root,))

    # THEN each is back as its newest metadata file holds it, the catalog's registration taken whole
    assert [(r.table, r.state, r.snapshots) for r in dry] == [
        (name, "would register", len(before[name].snapshots)) for name in STREAM_TABLES
    ]
    assert [(r.state, r.restored) for r in done] == [("registered", 0)] * len(STREAM_TABLES)
    assert {r.state for r in again} == {"in the catalog"}
    for name, metadata in before.items():
        table = catalog.load_table(identifier(NAMESPACE, name))
        assert table.metadata.snapshots == metadata.snapshots
        assert table.metadata.properties == metadata.properties  # the committer's progress among them
        assert read_progress(table) or name == "quarantine"  # no batch of it was committed
        assert restoring_updates(table.metadata, metadata) == ()
    assert sorted(column(catalog, "wallets", "wallet_id")) == ["w1", "w2", "w3"]
    assert not [line for line in ensure_tables(catalog, NAMESPACE, location_root=root) if "REFUSED" in line]
