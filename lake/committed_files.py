"""Committed data files that storage no longer has: found, named, and told how to bring back.

The committer checks every *landed* file before it commits it (presence and size:
:mod:`lake.file_presence`); a file it already committed can still go later (a lifecycle rule, a
hand). Every read of that day then fails with the storage's 404, which says neither the table nor
the remedy. The lake bucket is versioned (the CDK app keeps noncurrent versions for
``noncurrent_version_days``), so the file's last version can be restored in place; this module
finds the missing files of a day (one HEAD per committed file of the day) and words the refusal.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote, urlsplit

from contracts.lake_tables import PARTITION_COLUMN, STREAM_TABLES

if TYPE_CHECKING:
    from pyiceberg.table import Table

#: Where a data file sits: ``…/{table}/data/dt=YYYY-MM-DD/{name}.parquet``.
_DATA_PATH: Final = re.compile(r"/(?P<table>[a-z_]+)/data/dt=(?P<day>\d{4}-\d{2}-\d{2})/[^/]+\.parquet$")
#: A path or URL of a Parquet file inside an error's text.
_IN_TEXT: Final = re.compile(r"(?:s3a?|https?)://[^\s'\"]+?\.parquet")
#: Where the runbook tells how to restore a file's noncurrent version.
RUNBOOK: Final = 'docs/operations.md, "A committed file deleted"'


def locate(path: str) -> tuple[str, dt.date] | None:
    """The table and day of a data file's path, None when it is not a lake table's data file.

    >>> locate("s3://b/lake/ledger/data/dt=2026-11-28/x-1.parquet")
    ('ledger', datetime.date(2026, 11, 28))
    >>> locate("s3://b/other/file.parquet") is None
    True
    """
    found = _DATA_PATH.search(path)
    if found is None or found["table"] not in STREAM_TABLES:
        return None
    return found["table"], dt.date.fromisoformat(found["day"])


def path_in_text(text: str) -> str | None:
    """The ``s3://bucket/key`` of the first Parquet file an error's text names (an S3 URL of the
    path style, as DuckDB's HTTP errors give it, is turned back into one).

    >>> path_in_text("error reading 'http://127.0.0.1:9/bkt/t/ledger/data/dt%3D2026-01-02/a.parquet' (404)")
    's3://bkt/t/ledger/data/dt=2026-01-02/a.parquet'
    """
    found = _IN_TEXT.search(text)
    if found is None:
        return None
    url = unquote(found.group(0))
    parts = urlsplit(url)
    if parts.scheme in ("s3", "s3a"):
        return f"s3://{parts.netloc}{parts.path}"
    bucket, _, key = parts.path.lstrip("/").partition("/")
    if parts.netloc.endswith(".amazonaws.com") and ".s3." in f".{parts.netloc}" and not key:
        return None
    return f"s3://{bucket}/{key}"


def missing_of_day(table: Table, day: dt.date) -> list[str]:
    """The day's data files the table's current snapshot names and storage does not have."""
    from concurrent.futures import ThreadPoolExecutor

    from pyiceberg.expressions import EqualTo, Reference
    from pyiceberg.expressions.literals import literal

    if table.current_snapshot() is None:
        return []
    tasks = table.scan(row_filter=EqualTo(term=Reference(PARTITION_COLUMN), value=literal(day.isoformat())))
    paths = sorted({task.file.file_path for task in tasks.plan_files()})
    with ThreadPoolExecutor(max_workers=16) as pool:
        present = list(pool.map(lambda path: bool(table.io.new_input(path).exists()), paths))
    return [path for path, here in zip(paths, present, strict=True) if not here]


def gone_message(paths: list[str]) -> str:
    """One line naming the missing files (the first, and how many more), their table and day,
    and the remedy."""
    first = paths[0]
    where = locate(first)
    place = f" (table {where[0]}, day {where[1].isoformat()})" if where else ""
    more = f" and {len(paths) - 1} more" if len(paths) > 1 else ""
    return (
        f"the lake's committed file {first}{place}{more} is gone from storage: restore its noncurrent "
        f"version in the versioned lake bucket ({RUNBOOK}); nothing was written"
    )
