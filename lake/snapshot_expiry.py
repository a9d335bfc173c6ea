"""Expire an Iceberg table's old snapshots: the committer keeps its own metadata small.

A commit every 30 s is 2,880 snapshots a day per table. pyiceberg's transaction deep-copies the
whole table metadata about 17 times per commit (profiled), so a commit's CPU grows with the
snapshots kept, about 1 ms per snapshot (``bench/commit_metadata.py``: 480 snapshots, a
three-table cycle of 1.3 s CPU, 5.5 s on a 512 MB Lambda). Hence a short retention,
:data:`lake.iceberg_tables.SNAPSHOT_RETENTION_HOURS`, enforced by the committer itself as soon as
:data:`EXPIRE_AT_LEAST` snapshots are past it (every ten minutes at 30-second commits) and at
every hourly tidy (:func:`lake.committer.commit_landed`): at most about 270 snapshots per table.
It is the only expiry (no Glue retention optimizer: ``walletlake_cdk.catalog``); the files of
expired snapshots are deleted by Glue's orphan file deletion on AWS and by
:mod:`lake.iceberg_cleanup` locally.

What is never expired: the head of a branch and every tagged snapshot (``reconciled-{day}``: what
``reconcile --replay`` and pinned queries read), and the last
:data:`lake.iceberg_tables.SNAPSHOTS_TO_KEEP` snapshots of ``main``. Removing snapshots changes
no row any snapshot kept shows, and no progress: the committer's progress is a table property.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING, Final

from lake.iceberg_tables import SNAPSHOT_RETENTION_HOURS, SNAPSHOTS_TO_KEEP
from lake.snapshot_tags import is_walletlake_tag

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata

_logger = logging.getLogger(__name__)

#: Expire as soon as this many snapshots are past retention (ten minutes of 30-second commits).
EXPIRE_AT_LEAST: Final = 20


def expirable(
    metadata: TableMetadata,
    now: float,
    *,
    retention_hours: float = SNAPSHOT_RETENTION_HOURS,
    keep: int = SNAPSHOTS_TO_KEEP,
) -> list[int]:
    """Snapshots older than the retention that no ref protects and are not among the last
    ``keep`` of ``main`` (pure: the decision alone)."""
    protected = {ref.snapshot_id for ref in metadata.refs.values()}
    main = metadata.refs.get("main")
    recent: set[int] = set()
    snapshot_id = main.snapshot_id if main is not None else None
    while snapshot_id is not None and len(recent) < keep:
        recent.add(snapshot_id)
        snapshot = metadata.snapshot_by_id(snapshot_id)
        snapshot_id = snapshot.parent_snapshot_id if snapshot is not None else None
    cutoff_ms = (now - retention_hours * 3600) * 1000
    return [
        snapshot.snapshot_id
        for snapshot in metadata.snapshots
        if snapshot.timestamp_ms < cutoff_ms
        and snapshot.snapshot_id not in protected
        and snapshot.snapshot_id not in recent
    ]


def expired_tags(metadata: TableMetadata, now: float, *, tag_retention_ms: int | None = None) -> list[str]:
    """Tags past their retention (pure): the age of the snapshot a tag names, as Iceberg's Java
    expiry measures it, against the tag's own ``max-ref-age-ms``, or for a tag walletlake made
    (:func:`lake.snapshot_tags.is_walletlake_tag`) against ``tag_retention_ms`` when given (the
    audit retention setting, ``WALLETLAKE_AUDIT_TAG_RETENTION_DAYS``, so a changed setting applies
    to the tags made before it too). Removing them is what lets a night's snapshots, and their
    files, go once their retention is over; ``main`` and branches are never removed."""
    doomed = []
    for name, ref in metadata.refs.items():
        if ref.snapshot_ref_type != "tag":
            continue
        limit = tag_retention_ms if tag_retention_ms is not None and is_walletlake_tag(name) else None
        limit = ref.max_ref_age_ms if limit is None else limit
        if limit is None:
            continue
        snapshot = metadata.snapshot_by_id(ref.snapshot_id)
        if snapshot is None or now * 1000 - snapshot.timestamp_ms > limit:
            doomed.append(name)
    return sorted(doomed)


def expire_snapshots(
    table: Table,
    now: float,
    *,
    retention_hours: float = SNAPSHOT_RETENTION_HOURS,
    keep: int = SNAPSHOTS_TO_KEEP,
    tag_retention_ms: int | None = None,
) -> int:
    """Remove the table's tags past their retention (:func:`expired_tags`), then its
    :func:`expirable` snapshots; returns how many snapshots were removed.

    A concurrent commit (the committer's next, a compaction) is not disturbed: the update removes
    snapshots by id, which the catalog applies to whatever metadata is current; a refusal is
    logged and left to the next run. So is a concurrent expiry (another committer removing the
    same snapshots first: the catalog then finds an id gone, which pyiceberg raises as
    ``ValueError``): its work is this one's, nothing is lost by leaving it to the next run.
    """
    from pyiceberg.exceptions import CommitFailedException

    tags = expired_tags(table.metadata, now, tag_retention_ms=tag_retention_ms)
    try:
        if tags:
            with table.manage_snapshots() as manage:
                for tag in tags:
                    manage.remove_tag(tag)
            _logger.info("removed tags of %s past their max-ref-age: %s", table.name()[-1], ", ".join(tags))
            table = table.refresh()
        doomed = expirable(table.metadata, now, retention_hours=retention_hours, keep=keep)
        if not doomed:
            return 0
        table.maintenance.expire_snapshots().by_ids(doomed).commit()
    except (CommitFailedException, ValueError) as error:
        _logger.warning(
            "snapshot expiry of %s left to the next run (a concurrent change: %s)", table.name()[-1], error
        )
        return 0
    _logger.info(
        "expired %d snapshots of %s older than %s",
        len(doomed),
        table.name()[-1],
        dt.datetime.fromtimestamp(now - retention_hours * 3600, dt.UTC).isoformat(),
    )
    return len(doomed)
