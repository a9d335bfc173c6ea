"""A command that failed on a committed lake file gone from storage says so, with the remedy.

Storage answers a missing object with a 404 that names neither the table nor what to do (DuckDB:
an HTTP error with the object's URL; boto3: a HeadObject 404 without one). Every command's
failure passes here (:func:`walletlake.cli.main`, and ``walletlake sql`` before it calls an error
bad input): a 404 among the error's causes becomes a refusal with exit code
:data:`walletlake.refusals.LAKE_FILE_GONE`, naming the file, its table and day, and the runbook's
answer (restore its noncurrent version). Where the error does not name the file and the command
names a day, the day's committed files are checked (:func:`lake.committed_files.missing_of_day`).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator

from walletlake.refusals import LAKE_FILE_GONE, RefusalError

_logger = logging.getLogger(__name__)
_NOT_FOUND_CODES = frozenset({"404", "NoSuchKey", "NotFound"})


def gone_file_refusal(error: BaseException, *, day: object = None) -> RefusalError | None:
    """The refusal for ``error`` when a lake file it met is gone, else None."""
    from lake.committed_files import gone_message, locate, path_in_text

    chain = list(_causes(error))
    if not any(_not_found(cause) for cause in chain):
        return None
    for cause in chain:
        path = path_in_text(str(cause)) or path_in_text(str(getattr(cause, "filename", "") or ""))
        if path is not None and locate(path) is not None:
            return _refusal(gone_message([path]))
    if isinstance(day, dt.date):
        missing = _missing_on(day)
        if missing:
            return _refusal(gone_message(missing))
    return None


def _refusal(message: str) -> RefusalError:
    _logger.error("%s", message)
    return RefusalError(message, LAKE_FILE_GONE)


def _missing_on(day: dt.date) -> list[str]:
    from contracts.lake_tables import STREAM_TABLES
    from contracts.settings import Settings
    from lake.committed_files import missing_of_day
    from lake.iceberg_catalog import load_table

    settings = Settings.from_env()
    if settings.lake_format != "iceberg":
        return []
    return [path for name in STREAM_TABLES for path in missing_of_day(load_table(settings, name), day)]


def _causes(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _not_found(error: BaseException) -> bool:
    if isinstance(error, FileNotFoundError):
        return True
    response = getattr(error, "response", None)
    if isinstance(response, dict) and str(response.get("Error", {}).get("Code", "")) in _NOT_FOUND_CODES:
        return True
    text = str(error)
    return ("404" in text and ("HTTP" in text or "Not Found" in text)) or "NoSuchKey" in text
