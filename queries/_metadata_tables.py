"""Athena's Iceberg metadata tables (``"ledger$snapshots"``, ``$history``, ``$files``, ``$partitions``).

Athena exposes each Iceberg table's metadata as tables named ``"{table}$…"``, which
``docs/operations.md`` uses to find the commit that added a file. DuckDB's iceberg extension has no
such names, so the local engine builds them from the table's metadata through pyiceberg's
``inspect`` and registers them under Athena's names with Athena's columns (the columns an analyst
selects; the per-column metrics maps of ``$files`` are left out).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import pyarrow as pa

from contracts.lake_tables import STREAM_TABLES

if TYPE_CHECKING:
    from pyiceberg.table import Table

#: Athena's metadata tables and, per table, its columns built from pyiceberg's ``inspect``.
_BUILDERS: Final[dict[str, Callable[[Table], pa.Table]]] = {}


def _metadata_table(suffix: str) -> Callable[[Callable[[Table], pa.Table]], Callable[[Table], pa.Table]]:
    def register(build: Callable[[Table], pa.Table]) -> Callable[[Table], pa.Table]:
        _BUILDERS[suffix] = build
        return build

    return register


@_metadata_table("snapshots")
def _snapshots(table: Table) -> pa.Table:
    found = table.inspect.snapshots()
    return found.select(["committed_at", "snapshot_id", "parent_id", "operation", "manifest_list", "summary"])


@_metadata_table("history")
def _history(table: Table) -> pa.Table:
    return table.inspect.history().select(
        ["made_current_at", "snapshot_id", "parent_id", "is_current_ancestor"]
    )


@_metadata_table("files")
def _files(table: Table) -> pa.Table:
    found = table.inspect.files()
    return found.select(
        ["content", "file_path", "file_format", "partition", "record_count", "file_size_in_bytes"]
    )


@_metadata_table("partitions")
def _partitions(table: Table) -> pa.Table:
    found = table.inspect.partitions()
    return pa.table(
        {
            "partition": found["partition"],
            "record_count": found["record_count"],
            "file_count": found["file_count"],
            "total_size": found["total_data_file_size_in_bytes"],
        }
    )


#: Every metadata table name Athena knows for the lake's Iceberg tables.
METADATA_TABLES: Final = frozenset(f"{table}${suffix}" for table in STREAM_TABLES for suffix in _BUILDERS)


def split_name(name: str) -> tuple[str, str] | None:
    """``("ledger", "files")`` for ``ledger$files``; None for a name that is not a metadata table."""
    if name not in METADATA_TABLES:
        return None
    table, _, suffix = name.partition("$")
    return table, suffix


def metadata_table(table: Table, suffix: str) -> pa.Table:
    """The rows of ``{table}${suffix}`` as Athena shows them (timestamps zoned, UTC)."""
    return _BUILDERS[suffix](table)
