"""The tags that keep the snapshots a night reads, made before anything reads them.

The committer expires untagged snapshots two hours old (:mod:`lake.snapshot_expiry`), and a
nightly run takes longer than that between the moment it pins the tables' snapshots (planning)
and the moment it has read them all (classification, and any rerun of the night). So the
snapshots are tagged **at planning**, under a name made of the night and the snapshot
(:func:`night_tag`): planning again with the same snapshot finds its tag and changes nothing, and
no run ever moves a tag another run's snapshot depends on. Classification tags the same snapshots
``reconciled-{day}`` as well (:func:`set_tag`: the day's latest run, the name audits look for).

Both kinds carry the audit retention as their max-ref-age (``WALLETLAKE_AUDIT_TAG_RETENTION_DAYS``),
and the committer's expiry removes a walletlake tag once its snapshot is older than that
retention (:func:`lake.snapshot_expiry.expired_tags`), then the snapshot. A tag commit asserts only
the tag itself (Iceberg's ``assert-ref-snapshot-id`` on the tag's name), so the committer's
commits to ``main`` never refuse it; two planners tagging at once are the one refusal, settled by
reading the tag back.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyiceberg.table import Table

_logger = logging.getLogger(__name__)

#: The tag a night's planning makes (``night-{day}-{snapshot id}``) and the one its classification
#: makes (``reconciled-{day}``): the tags walletlake makes, whose retention the setting decides.
NIGHT_TAG_PREFIX: Final = "night-"
RECONCILED_TAG_PREFIX: Final = "reconciled-"
WALLETLAKE_TAG_PREFIXES: Final = (NIGHT_TAG_PREFIX, RECONCILED_TAG_PREFIX)

#: Milliseconds in a day (a retention setting in days to Iceberg's max-ref-age).
DAY_MS: Final = 24 * 3600 * 1000

#: Tries of a tag commit refused by a concurrent change of the same tag.
_ATTEMPTS: Final = 3


def night_tag(day: dt.date, snapshot_id: int) -> str:
    """The planning tag of a night's snapshot: the same for every planning of that night that
    reads that snapshot, another for any other snapshot (so no run moves another run's tag).

    Examples
    --------
    >>> night_tag(dt.date(2026, 3, 1), 42)
    'night-2026-03-01-42'
    """
    return f"{NIGHT_TAG_PREFIX}{day.isoformat()}-{snapshot_id}"


def is_walletlake_tag(name: str) -> bool:
    """True for the tags walletlake makes (their retention is the audit setting's)."""
    return name.startswith(WALLETLAKE_TAG_PREFIXES)


def keep_tag(table: Table, snapshot_id: int, name: str, *, max_ref_age_ms: int) -> bool:
    """Tag ``snapshot_id`` as ``name`` unless the table already has that tag on it; returns True
    when this call made the tag. Idempotent; a tag of that name on another snapshot is replaced."""
    return _tag(table, snapshot_id, name, max_ref_age_ms, replace_same=False)


def set_tag(table: Table, snapshot_id: int, name: str, *, max_ref_age_ms: int) -> None:
    """Tag ``snapshot_id`` as ``name`` with this max-ref-age, replacing any tag of that name."""
    _tag(table, snapshot_id, name, max_ref_age_ms, replace_same=True)


class SnapshotGoneError(ValueError):
    """The snapshot to tag is no longer in the table: expiry removed it (its tags expired, or it
    was never tagged). Nothing was tagged; what read it must be planned again on a snapshot that
    exists."""


def _gone(table: Table, snapshot_id: int, name: str) -> SnapshotGoneError:
    return SnapshotGoneError(
        f"snapshot {snapshot_id} of {table.name()[-1]} is gone (expired): it cannot be tagged {name}"
    )


def _tag(table: Table, snapshot_id: int, name: str, max_ref_age_ms: int, *, replace_same: bool) -> bool:
    from pyiceberg.exceptions import CommitFailedException

    for attempt in range(1, _ATTEMPTS + 1):
        if table.metadata.snapshot_by_id(snapshot_id) is None:
            raise _gone(table, snapshot_id, name)
        current = table.metadata.refs.get(name)
        if current is not None and current.snapshot_id == snapshot_id and not replace_same:
            return False
        try:
            with table.manage_snapshots() as manage:
                if current is not None:
                    manage.remove_tag(name)
                manage.create_tag(snapshot_id, name, max_ref_age_ms=max_ref_age_ms)
            _logger.info("tagged %s of %s as %s", snapshot_id, table.name()[-1], name)
            return True
        except CommitFailedException:
            # another planner changed the same tag meanwhile: read it back and decide again
            if attempt == _ATTEMPTS:
                raise
            table = table.refresh()
        except ValueError as error:
            # the catalog applies the tag to its current metadata: an expiry committed since this
            # table was loaded removed the snapshot (pyiceberg: "Cannot set ... unknown snapshot")
            table = table.refresh()
            if table.metadata.snapshot_by_id(snapshot_id) is None:
                raise _gone(table, snapshot_id, name) from error
            raise
    return False
