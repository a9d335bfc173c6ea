"""Keep a Glue table's archived versions under Glue's quota: delete all but the newest few.

Glue keeps an archived *table version* each time a table is updated without ``SkipArchive``
(``UpdateTable``: "By default, UpdateTable always creates an archived version of the table before
updating it"). Its quotas are **100,000 table versions per table and 1,000,000 per account**
(AWS General Reference, "AWS Glue endpoints and quotas", https://docs.aws.amazon.com/general/latest/gr/glue.html;
the errors read "Number of TABLE_VERSION resources exceeds the limit 100000 per TABLE" and "...
the account limit 1000000"). A commit every 30 s per table is 2,880 updates a day: a table
would reach its quota in 35 days, the account's three tables in 116, and every commit after that
would fail.

Whether a commit through Glue's Iceberg REST endpoint archives a version is not documented;
pyiceberg's own Glue catalog sets ``SkipArchive`` by default for this very reason. walletlake
does not rely on either: the committer deletes archived versions past the newest
:data:`VERSIONS_TO_KEEP` in its hourly tidy (``BatchDeleteTableVersion``, up to 100 ids a call),
so whatever the endpoint does, the count stays far below the quota. An archived version is the
Glue table entry as it was (its metadata location), not data: the Iceberg history is in the
metadata files, which snapshot retention governs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from mypy_boto3_glue import GlueClient

_logger = logging.getLogger(__name__)

#: Archived versions kept per table (a day of hourly tidies' worth of commits is ~2,880).
VERSIONS_TO_KEEP: Final = 100
#: ``BatchDeleteTableVersion`` takes at most this many version ids.
_DELETE_BATCH: Final = 100
#: Versions deleted per table and run at most (one tidy's share; the backlog of an older lake
#: drains over a few runs, each well inside the committer's time).
MAX_DELETED_PER_RUN: Final = 5_000


def versions_to_delete(version_ids: Iterable[str], keep: int = VERSIONS_TO_KEEP) -> list[str]:
    """All but the ``keep`` newest version ids (Glue numbers versions upwards), oldest first.

    Examples
    --------
    >>> versions_to_delete(["1", "10", "2", "9"], keep=2)
    ['1', '2']
    """
    ordered = sorted(version_ids, key=int)
    return ordered[: max(0, len(ordered) - keep)]


def prune_table_versions(
    glue: GlueClient,
    database: str,
    table: str,
    *,
    keep: int = VERSIONS_TO_KEEP,
    limit: int = MAX_DELETED_PER_RUN,
) -> int:
    """Delete the table's archived versions but the newest ``keep`` (at most ``limit``); returns how many."""
    ids: list[str] = []
    paginator = glue.get_paginator("get_table_versions")
    for page in paginator.paginate(DatabaseName=database, TableName=table):
        ids.extend(str(version["VersionId"]) for version in page.get("TableVersions", []))
    doomed = versions_to_delete(ids, keep)[:limit]
    deleted = 0
    for start in range(0, len(doomed), _DELETE_BATCH):
        chunk = doomed[start : start + _DELETE_BATCH]
        answer: dict[str, Any] = dict(
            glue.batch_delete_table_version(DatabaseName=database, TableName=table, VersionIds=chunk)
        )
        errors = answer.get("Errors") or []
        for error in errors:
            _logger.warning("could not delete version %s of %s: %s", error.get("VersionId"), table, error)
        deleted += len(chunk) - len(errors)
    if deleted:
        _logger.info("deleted %d archived Glue versions of %s.%s", deleted, database, table)
    return deleted
