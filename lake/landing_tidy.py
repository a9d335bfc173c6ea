"""Tidying the landing log: deleting landing records past retention that every table committed.

Records are the committer's only input; once every table's position is past a record and the
stream can no longer redeliver its range (:data:`RECORD_RETENTION_SECONDS`), it is only a cost
(a LIST entry for every cycle that lists its shard). The tidy runs within the committer's hourly
cycle, a bounded slice of the log per call, resuming from a cursor object.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final

from contracts.lake_layout import tidy_cursor_key
from contracts.lake_tables import STREAM_TABLES
from lake.commit_progress import read_progress
from lake.landing_log import log_prefix, range_of_key
from lake.objects import delete_keys

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from pyiceberg.catalog import Catalog

    from contracts.settings import Settings

_logger = logging.getLogger(__name__)

#: Landing records are kept this long after they landed: past DynamoDB Streams' 24-hour retention
#: no retry can redeliver their records, so the consumer's coverage check no longer needs them.
RECORD_RETENTION_SECONDS: Final = 25 * 3600
#: Landing-log keys one tidy run examines; the next run goes on from where this one stopped.
TIDY_KEYS_PER_RUN: Final = 100_000


@dataclasses.dataclass(frozen=True, slots=True)
class TidyReport:
    """One tidy pass: keys examined and deleted, whether it reached the end of the log, and for
    how many passes in a row it has not (``behind``: the ``TidyBehind`` metric; 0 once caught up)."""

    examined: int
    deleted: int
    caught_up: bool
    behind: int


def tidy_log(
    settings: Settings,
    s3: S3Client,
    catalog: Catalog,
    *,
    tables: Iterable[str] = tuple(STREAM_TABLES),
    clock: Callable[[], float] = time.time,
    max_keys: int = TIDY_KEYS_PER_RUN,
) -> int:
    """:func:`tidy_pass`; returns how many records it deleted."""
    return tidy_pass(settings, s3, catalog, tables=tables, clock=clock, max_keys=max_keys).deleted


def tidy_pass(
    settings: Settings,
    s3: S3Client,
    catalog: Catalog,
    *,
    tables: Iterable[str] = tuple(STREAM_TABLES),
    clock: Callable[[], float] = time.time,
    max_keys: int = TIDY_KEYS_PER_RUN,
) -> TidyReport:
    """Delete landing records past retention that every table has committed past.

    Bounded and resumable: one call examines at most ``max_keys`` keys in all (whatever the page
    size of the listing), starting after the key the previous call stopped at (kept in the object
    :func:`contracts.lake_layout.tidy_cursor_key`), and starts over from the beginning once it
    reached the end. A pass that stops short leaves the cursor set, and the committer tidies again
    at its next cycle (:func:`tidy_pending`) until a pass reaches the end: the tidy keeps up with
    any landing rate a cycle's budget can list, and how long it has been behind is a metric. A
    record's range is committed in a table when the table's position for its shard is at or past
    its last sequence number (a batch without a file for a table moves the position too, at most
    :data:`lake.commit_progress.EMPTY_COMMIT_AFTER_SECONDS` later).
    """
    from lake.iceberg_tables import identifier

    now = clock()
    positions = [
        read_progress(catalog.load_table(identifier(settings.glue_database, name))) for name in tables
    ]
    prefix = log_prefix(settings.lake_prefix)
    cursor_key = tidy_cursor_key(settings.lake_prefix)
    start_after, behind = _read_cursor(s3, settings.bucket, cursor_key)
    doomed: list[str] = []
    listed, next_cursor = list_page(s3, settings.bucket, prefix, start_after, max_keys)
    for key, modified in listed:
        source = key[len(prefix) :].rsplit("/", 1)[0]
        _first, last = range_of_key(key)
        committed = all(source in progress and int(progress[source][0]) >= last for progress in positions)
        if committed and now - modified > RECORD_RETENTION_SECONDS:
            doomed.append(key)
    if doomed:
        delete_keys(s3, settings.bucket, doomed)
        _logger.info("deleted %d landing records past retention", len(doomed))
    behind = behind + 1 if next_cursor else 0
    body = json.dumps({"after": next_cursor, "behind": behind}).encode()
    s3.put_object(Bucket=settings.bucket, Key=cursor_key, Body=body)
    _logger.info(
        "tidy examined %d keys after %r; next run starts after %r", len(listed), start_after, next_cursor
    )
    return TidyReport(len(listed), len(doomed), not next_cursor, behind)


def tidy_pending(s3: S3Client, settings: Settings) -> bool:
    """True when the last tidy pass stopped before the end of the log (the next cycle goes on)."""
    return bool(_read_cursor(s3, settings.bucket, tidy_cursor_key(settings.lake_prefix))[0])


def list_page(
    s3: S3Client, bucket: str, prefix: str, start_after: str, max_keys: int
) -> tuple[list[tuple[str, float]], str]:
    """At most ``max_keys`` ``(record key, last modified)`` after ``start_after``, and where the next
    page starts (``""``: the listing reached the end, start over). The limit holds exactly, not
    per page of the listing: a page is cut where the limit is reached."""
    kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    if start_after:
        kwargs["StartAfter"] = start_after
    listed: list[tuple[str, float]] = []
    for page in s3.get_paginator("list_objects_v2").paginate(**kwargs):
        for item in page.get("Contents", []):
            if len(listed) >= max_keys:
                return listed, listed[-1][0]
            if item["Key"].endswith(".json"):
                listed.append((item["Key"], item["LastModified"].timestamp()))
        if not page.get("IsTruncated"):
            break
    return listed, ""


def _read_cursor(s3: S3Client, bucket: str, key: str) -> tuple[str, int]:
    """``(key to start after, passes behind)``; the plain-key cursor of an older walletlake too."""
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
    except s3.exceptions.NoSuchKey:
        return "", 0
    if not body.startswith("{"):
        return body, 0
    state = json.loads(body)
    return str(state.get("after", "")), int(state.get("behind", 0))


def iter_modified(s3: S3Client, bucket: str, prefix: str) -> Iterable[tuple[str, float]]:
    """``(key, last modified epoch s)`` of the records under ``prefix``."""
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            if item["Key"].endswith(".json"):
                yield item["Key"], item["LastModified"].timestamp()
