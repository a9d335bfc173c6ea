"""Cleanup of the Iceberg tables: snapshot expiry and orphan removal, after a compaction or alone.

:func:`expire_snapshots` drops old snapshots from the metadata, never the current one, a tagged
one (reconciliation tags the snapshots it read, so an audit can read them again) nor the last few.
pyiceberg only edits the metadata; the files no snapshot references any more are deleted by
:func:`remove_orphan_files`, which also keeps every file a landing record names (landed, perhaps not
yet committed) and every file younger than a threshold far above the commit interval (landed but
its record not yet written, or the output of a compaction in flight).

The compaction itself (and :func:`lake.iceberg_maintenance.maintain`, which runs all three in
order) is in :mod:`lake.iceberg_maintenance`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

import boto3

from lake.commit_progress import read_progress
from lake.iceberg_tables import identifier
from lake.landing_log import list_sources, records_after
from lake.objects import delete_keys

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

    from contracts.settings import Settings

_logger = logging.getLogger(__name__)

#: Snapshots younger than this are kept: a reader (or a rerun pinned to a snapshot) needs them.
DEFAULT_SNAPSHOT_AGE_SECONDS: Final = 5 * 24 * 3600
#: The newest snapshots of the main branch kept whatever their age.
DEFAULT_RETAIN_LAST: Final = 10
#: Files younger than this are never orphans: a batch's files are written before its landing
#: record, and a compaction's output before its commit. A day is far above either gap.
DEFAULT_ORPHAN_AGE_SECONDS: Final = 24 * 3600
#: Manifests read at once when listing the files the snapshots reference.
_READERS: Final = 16


@dataclasses.dataclass(frozen=True, slots=True)
class ExpiryResult:
    """Snapshots expired and kept."""

    table: str
    expired: tuple[int, ...]
    kept: int

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for logs and JSON."""
        return {"table": self.table, "expired": list(self.expired), "kept": self.kept}


@dataclasses.dataclass(frozen=True, slots=True)
class OrphanResult:
    """Files under the table's ``data/`` that were deleted, and why the others were kept."""

    table: str
    deleted: tuple[str, ...]
    referenced: int
    landed: int
    young: int

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for logs and JSON."""
        return {**dataclasses.asdict(self), "deleted": list(self.deleted)}


#: Tries of an expiry whose snapshots a concurrent expiry removed first.
_EXPIRY_ATTEMPTS: Final = 3


def expire_snapshots(
    settings: Settings,
    catalog: Catalog,
    table: str,
    older_than_seconds: float = DEFAULT_SNAPSHOT_AGE_SECONDS,
    retain_last: int = DEFAULT_RETAIN_LAST,
    *,
    clock: Callable[[], float] = time.time,
) -> ExpiryResult:
    """Expire snapshots older than ``older_than_seconds``, keeping the current one, the
    ``retain_last`` newest of the main branch and every snapshot a tag or branch names.

    Safe beside the committer's own expiry (:mod:`lake.snapshot_expiry`): when the other removed
    some of the same snapshots first (pyiceberg raises ``ValueError``) or a ref moved, the choice
    is made again from the table as it is now.

    pyiceberg 0.12's ``ExpireSnapshots`` refuses a tagged or branch-head snapshot itself
    (``by_id`` raises, ``older_than`` skips them, and the commit drops them again); the selection
    here keeps them as well, so the answer names only what was really expired.
    """
    from pyiceberg.exceptions import CommitFailedException

    for attempt in range(1, _EXPIRY_ATTEMPTS + 1):
        current = catalog.load_table(identifier(settings.glue_database, table))
        keep = protected_snapshots(current, retain_last)
        cutoff_ms = (clock() - older_than_seconds) * 1000
        doomed = sorted(
            snapshot.snapshot_id
            for snapshot in current.metadata.snapshots
            if snapshot.timestamp_ms < cutoff_ms and snapshot.snapshot_id not in keep
        )
        try:
            if doomed:
                current.maintenance.expire_snapshots().by_ids(doomed).commit()
            break
        except (CommitFailedException, ValueError) as error:
            # a concurrent expiry (the committer's) removed some first, or a tag moved: decide again
            _logger.warning("expiry of %s decided again (%s): %s", table, attempt, error)
            if attempt == _EXPIRY_ATTEMPTS:
                doomed = []
    result = ExpiryResult(table, tuple(doomed), len(current.metadata.snapshots) - len(doomed))
    _logger.info("expiry %s", json.dumps(result.as_dict()))
    return result


def protected_snapshots(table: Table, retain_last: int) -> set[int]:
    """Snapshot ids expiry must keep: every ref's (tags, branches, so the current one) and the
    ``retain_last`` newest ancestors of the current snapshot."""
    keep = {ref.snapshot_id for ref in table.metadata.refs.values()}
    snapshot = table.current_snapshot()
    while snapshot is not None and retain_last > 0:
        keep.add(snapshot.snapshot_id)
        retain_last -= 1
        parent = snapshot.parent_snapshot_id
        snapshot = table.metadata.snapshot_by_id(parent) if parent is not None else None
    return keep


def remove_orphan_files(
    settings: Settings,
    catalog: Catalog,
    table: str,
    older_than_seconds: float = DEFAULT_ORPHAN_AGE_SECONDS,
    *,
    s3: S3Client | None = None,
    clock: Callable[[], float] = time.time,
) -> OrphanResult:
    """Delete files under the table's ``data/`` that no snapshot references, no landing record
    names and that are older than ``older_than_seconds``.

    The order of the reads is what makes a file moving through the pipeline safe: the table's
    position, then the landing log past it (:func:`landed_paths`), then the table's metadata
    again, so a batch committed in between is then in the metadata; a file listed but in none
    was written before the threshold and was never committed (set aside, or left out with its
    batch), or no snapshot left holds it.
    """
    from lake.iceberg_landing import split_bucket_key

    s3 = s3 or boto3.client("s3", region_name=settings.region)
    ident = identifier(settings.glue_database, table)
    landed = landed_paths(s3, settings, catalog.load_table(ident))
    current = catalog.load_table(ident)
    referenced = referenced_paths(current)
    bucket, prefix = split_bucket_key(f"{current.location().rstrip('/')}/data/")
    cutoff = clock() - older_than_seconds
    doomed: list[str] = []
    counts = {"referenced": 0, "landed": 0, "young": 0}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            path = f"s3://{bucket}/{item['Key']}"
            if path in referenced:
                counts["referenced"] += 1
            elif path in landed:
                counts["landed"] += 1
            elif item["LastModified"].timestamp() >= cutoff:
                counts["young"] += 1
            else:
                doomed.append(item["Key"])
    if doomed:
        delete_keys(s3, bucket, doomed)
    result = OrphanResult(table, tuple(f"s3://{bucket}/{key}" for key in doomed), **counts)
    _logger.info("orphans %s", json.dumps(result.as_dict()))
    return result


def referenced_paths(table: Table) -> set[str]:
    """Every data file a snapshot still in the metadata references (each manifest read once)."""
    manifests = {
        manifest.manifest_path: manifest
        for snapshot in table.metadata.snapshots
        for manifest in snapshot.manifests(table.io)
    }
    with ThreadPoolExecutor(max_workers=_READERS) as pool:
        entries = pool.map(
            lambda manifest: [
                entry.data_file.file_path
                for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
            ],
            manifests.values(),
        )
        return {path for paths in entries for path in paths}


def landed_paths(s3: S3Client, settings: Settings, table: Table) -> set[str]:
    """Every file named by a landing record past ``table``'s committed position: landed, maybe not
    committed.

    Only those: a record at or before the position was committed, its files referenced or set
    aside (a misfit's copy lives under ``_misfits/``), so reading it protects nothing. The log
    keeps records for a day past their commit (:data:`lake.landing_tidy.RECORD_RETENTION_SECONDS`):
    reading them all was one GET per batch of the last 25 hours for each table, 1.2 million a
    night at the seed's load. One LIST per shard from its position, as the committer lists.
    """
    progress = read_progress(table)
    after = {
        source: int(progress[source][0]) if source in progress else None
        for source in list_sources(s3, settings.bucket, settings.lake_prefix)
    }
    records = records_after(s3, settings.bucket, settings.lake_prefix, after, table.io)  # as the committer
    return {file.path for record in records for file in record.files}
