"""What a re-landed misfit may land (pyiceberg's SQL catalog): its rows in the lake's units, less
the rows the table already holds by identity, whatever became of its source's name."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from support.sql_lake import NAMESPACE, ledger_rows, record, sql_catalog

from lake.committer import commit_table
from lake.iceberg_tables import identifier, to_iceberg_rows
from lake.misfits import lake_rows, unheld_rows


def test_rows_the_table_holds_are_left_out_by_entry_id(tmp_path: Path) -> None:
    # GIVEN a ledger holding e1 and e2
    catalog = sql_catalog(tmp_path)
    batch = record(tmp_path, entries=["e1", "e2"])
    commit_table(catalog, identifier(NAMESPACE, "ledger"), [batch], live_sources={batch.source})
    table = catalog.load_table(identifier(NAMESPACE, "ledger"))
    # WHEN a misfit holding e1 and e3 is checked
    rows = ledger_rows(["e3", "e1"])
    # THEN only e3 is left to land, in the misfit's own order
    assert unheld_rows(table, rows).column("entry_id").to_pylist() == ["e3"]
    assert unheld_rows(table, ledger_rows(["e1", "e2"])).num_rows == 0


def test_a_file_walletlake_landed_is_read_back_in_milliseconds() -> None:
    # GIVEN rows as walletlake's landing writes them (Iceberg's microseconds, field ids)
    written = to_iceberg_rows("ledger", ledger_rows(["e1"]), "2026-03-01").drop_columns(["dt"])
    assert written.schema.field("created_at").type.unit == "us"
    # WHEN they are taken back as the lake's rows
    rows = lake_rows("ledger", written)
    # THEN the timestamps are the lake's milliseconds, the same instants
    assert rows.schema.field("created_at").type == pa.timestamp("ms", tz="UTC")
    assert rows.column("created_at").to_pylist() == ledger_rows(["e1"]).column("created_at").to_pylist()


def test_a_timestamp_finer_than_a_millisecond_is_refused_not_truncated() -> None:
    fine = pa.table({"created_at": pa.array([1_000_001], pa.timestamp("us", tz="UTC"))})
    with pytest.raises(pa.ArrowInvalid):
        lake_rows("wallets", fine)
