"""The lake's Parquet encoding choices (pure: bytes in memory, no stack)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from lake import parquet


def _table() -> pa.Table:
    return pa.table(
        {
            "wallet_id": pa.array(["w-2", "w-1", "w-3"], pa.string()),
            "direction": pa.array(["debit", "credit", "credit"], pa.string()),
            "delta": pa.array([-5, 5, 7], pa.int64()),
        }
    )


def _statistics(data: bytes) -> dict[str, tuple[object, object] | None]:
    group = pq.ParquetFile(pa.BufferReader(data)).metadata.row_group(0)
    found: dict[str, tuple[object, object] | None] = {}
    for index in range(group.num_columns):
        column = group.column(index)
        stats = column.statistics
        found[column.path_in_schema] = (
            (stats.min, stats.max) if stats is not None and stats.has_min_max else None
        )
    return found


def test_landing_files_keep_number_ranges_and_skip_text_ranges() -> None:
    # WHEN a table in arrival order is encoded without text statistics
    data = parquet.encode(_table(), text_statistics=False)

    # THEN numbers keep their min/max (ranges prune), text columns have none, and the rows are intact
    assert _statistics(data) == {"wallet_id": None, "direction": None, "delta": (-5, 7)}
    assert parquet.decode(data).equals(_table())


def test_sorted_files_keep_every_range() -> None:
    # WHEN encoded with the default (compacted, sorted files)
    data = parquet.encode(_table())

    # THEN the id column's min/max is there for a one-wallet reader to skip row groups
    assert _statistics(data)["wallet_id"] == ("w-1", "w-3")
    assert _statistics(data)["delta"] == (-5, 7)


def test_compacted_files_keep_text_statistics_of_the_sort_key_only() -> None:
    # WHEN a table sorted by wallet is encoded keeping the min/max of wallet_id among text columns
    data = parquet.encode(_table(), text_statistics=["wallet_id"])
    # THEN wallet_id (what prunes) and the numbers keep theirs; other text columns have none
    assert _statistics(data) == {"wallet_id": ("w-1", "w-3"), "direction": None, "delta": (-5, 7)}


def test_statistics_columns_name_exactly_the_columns_with_min_max() -> None:
    data = parquet.encode(_table(), statistics_columns=["wallet_id"])
    assert _statistics(data) == {"wallet_id": ("w-1", "w-3"), "direction": None, "delta": None}
