"""The lake as of a point an analyst names: a snapshot id of one of its tables, or an instant.

``walletlake sql --as-of`` reads every Iceberg table at one consistent point. An instant pins each
table to the snapshot that was current then (:func:`queries.time_travel.versions_as_of`). A
snapshot id belongs to one table; that table is pinned to it and the others to the snapshots
current at the last instant it was its table's current one (the committer commits the tables one
after the other, so the same cycle's commits of the others are included).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING, Final

from contracts.lake_tables import STREAM_TABLES
from queries.time_travel import versions_as_of

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from contracts.settings import Settings

#: Any whole number is a snapshot id (``--as-of 123`` is then "no such snapshot", not "wrong form").
_SNAPSHOT_ID: Final = re.compile(r"-?\d+")


def parse_point(text: str) -> int | dt.datetime:
    """A snapshot id (digits) or an ISO-8601 instant (naive means UTC), else ``ValueError``.

    Examples
    --------
    >>> parse_point("6844087072380450424")
    6844087072380450424
    >>> parse_point("2026-11-22T09:00:00Z")
    datetime.datetime(2026, 11, 22, 9, 0, tzinfo=datetime.timezone.utc)
    """
    stripped = text.strip()
    if _SNAPSHOT_ID.fullmatch(stripped):
        return int(stripped)
    try:
        moment = dt.datetime.fromisoformat(stripped)
    except ValueError:
        raise ValueError(
            f"--as-of takes a snapshot id or an ISO-8601 instant (2026-11-22T09:00:00Z), not {text}"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def lake_versions_at(
    settings: Settings, point: int | dt.datetime, catalog: Catalog | None = None
) -> dict[str, int | None]:
    """Per Iceberg table, the snapshot read at ``point`` (None: the table had none then)."""
    if isinstance(point, dt.datetime):
        return versions_as_of(settings, point, catalog)
    from lake.iceberg_catalog import cached_catalog
    from lake.iceberg_tables import identifier

    catalog = catalog or cached_catalog(settings)
    for name in STREAM_TABLES:
        table = catalog.load_table(identifier(settings.glue_database, name))
        snapshot = table.snapshot_by_id(point)
        if snapshot is not None:
            # The last instant this snapshot was its table's current one: the committer commits the
            # tables one after the other, so the others' snapshots of the same cycle are then in.
            later = [s.timestamp_ms for s in table.snapshots() if s.timestamp_ms > snapshot.timestamp_ms]
            until = (
                dt.datetime.fromtimestamp((min(later) - 1) / 1000, dt.UTC)
                if later
                else dt.datetime.now(dt.UTC)
            )
            return {**versions_as_of(settings, until, catalog), name: point}
    raise ValueError(f"no Iceberg table of the lake has a snapshot {point} (expired, or mistyped)")
