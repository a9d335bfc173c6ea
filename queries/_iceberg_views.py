"""Which Iceberg snapshot each lake view reads: the current one, or one pinned for time travel.

With ``lake_format = "iceberg"`` the stream's tables (ledger, wallets, quarantine) are Iceberg
tables; the DuckDB engine reads each through ``iceberg_scan`` of the table's current metadata file,
asked of the catalog on every query run (as the Parquet views are re-made per run), so a commit
made since the last query is seen. The scan names its snapshot explicitly
(``snapshot_from_id => id``, the iceberg extension's parameter), the current one unless the
engine was given a pin: a rerun of a past night passes the snapshot ids that night recorded
(:func:`queries.time_travel.current_versions`), and reads exactly the rows it read, whatever
was committed or compacted since (as long as those snapshots have not been expired).

A pin of ``None`` means "the table had no snapshot then": the view is empty, as it was. The pins
are the Athena engine's ``versions`` (:mod:`queries.time_travel`), which can only name snapshots.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from contracts.lake_tables import STREAM_TABLES
from contracts.settings import Settings
from lake.iceberg_table_heads import table_head

if TYPE_CHECKING:
    import boto3

#: A snapshot id per Iceberg table; ``None`` for a table without a snapshot (no commit yet).
Snapshots = Mapping[str, int | None]


@dataclasses.dataclass(frozen=True, slots=True)
class IcebergSource:
    """What one view of an Iceberg table reads.

    Attributes
    ----------
    table:
        The lake table's name.
    metadata_location:
        The table's current metadata file (``s3://.../metadata/vN.metadata.json``).
    snapshot_id:
        The snapshot read; ``None`` when there is none (the view is empty).
    """

    table: str
    metadata_location: str
    snapshot_id: int | None


def is_iceberg_view(settings: Settings, table: str) -> bool:
    """Whether the engine reads ``table`` from Iceberg under these settings."""
    return settings.lake_format == "iceberg" and table in STREAM_TABLES


def check_pins(snapshots: Snapshots) -> dict[str, int | None]:
    """The pins as a plain dict, refusing names that are not Iceberg tables of the lake."""
    unknown = sorted(set(snapshots) - set(STREAM_TABLES))
    if unknown:
        raise ValueError(
            f"snapshots pinned for {', '.join(unknown)}: only {', '.join(STREAM_TABLES)} are Iceberg tables"
        )
    return dict(snapshots)


def resolve(
    settings: Settings, table: str, pins: Snapshots, session: boto3.Session | None = None
) -> IcebergSource:
    """The metadata file and snapshot the view of ``table`` reads now (one catalog round trip,
    without pyiceberg: :mod:`lake.iceberg_table_heads`).

    Raises ``ValueError`` for a pinned snapshot the table no longer has (expired, or another table's).
    """
    head = table_head(settings, table, session)
    if table in pins:
        pinned = pins[table]
        if pinned is not None and pinned not in head.snapshot_ids:
            raise ValueError(
                f"Iceberg table {table} has no snapshot {pinned} (expired, or not one of its snapshots)"
            )
        return IcebergSource(table, head.metadata_location, pinned)
    return IcebergSource(table, head.metadata_location, head.current_snapshot_id)
