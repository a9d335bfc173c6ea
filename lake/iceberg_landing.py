"""Landing a stream batch into the Iceberg tables' storage: data files first, then its landing record.

The files are Parquet data files in the table's own location (``{location}/data/dt=YYYY-MM-DD/``),
one per table and UTC day, under names no other write uses (shard, first sequence number and a
random part): a file the committer has appended is never overwritten, whatever retries happen.
They are invisible to readers until the committer appends them (:mod:`lake.committer`), which it
does only for a batch whose landing record exists (:mod:`lake.landing_log`), so a batch that dies
half-written is never half in the lake. Before writing, the records an earlier attempt already
landed are dropped (:func:`lake.landing_log.uncovered_from`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from contracts.lake_layout import stream_label
from contracts.lake_tables import STREAM_TABLES
from lake.iceberg_tables import to_iceberg_rows
from lake.landing_log import (
    LandedFile,
    LandingRecord,
    landed_ranges,
    put_record,
    sequence_number,
    uncovered_from,
)
from lake.objects import delete_keys, put_table
from lake.writer import LandingWriteError, split_by_slot

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from contracts.settings import Settings

_logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Landed:
    """What landing a batch did: the record written (None when every record was landed before)."""

    record: LandingRecord | None
    skipped_records: int


def split_bucket_key(path: str) -> tuple[str, str]:
    """``("bucket", "key")`` of an ``s3://bucket/key`` path."""
    if not path.startswith("s3://"):
        raise ValueError(f"not an s3:// path: {path}")
    bucket, _, key = path[len("s3://") :].partition("/")
    return bucket, key


@functools.lru_cache(maxsize=8)
def table_locations(settings: Settings) -> Mapping[str, str]:
    """Each Iceberg table's location, from the catalog once per process (locations never move)."""
    from lake.iceberg_catalog import load_table

    return {name: load_table(settings, name).location().rstrip("/") for name in STREAM_TABLES}


def land_batch(
    s3: S3Client,
    settings: Settings,
    records: Sequence[Mapping[str, Any]],
    decode: Callable[[Sequence[Mapping[str, Any]]], Mapping[str, pa.Table]],
    *,
    event_source_arn: str,
    shard: str,
    locations: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.time,
) -> Landed:
    """Land the records of a batch no earlier attempt landed; returns what was written.

    ``decode`` turns records into the lake tables' rows (ledger, wallets, quarantine). If a data
    file cannot be written, the ones written are deleted (best effort) and
    :class:`lake.writer.LandingWriteError` is raised: no record is written, so the committer never
    sees the batch, and its retry lands it again.
    """
    ranges = landed_ranges(s3, settings.bucket, settings.lake_prefix, event_source_arn, shard)
    pending = uncovered_from(records, ranges)
    if not pending:
        return Landed(record=None, skipped_records=len(records))
    record = land_rows(
        s3,
        settings,
        decode(pending),
        event_source_arn=event_source_arn,
        shard=shard,
        first=sequence_number(pending[0]),
        last=sequence_number(pending[-1]),
        locations=locations,
        clock=clock,
    )
    return Landed(record=record, skipped_records=len(records) - len(pending))


def land_rows(
    s3: S3Client,
    settings: Settings,
    tables: Mapping[str, pa.Table],
    *,
    event_source_arn: str,
    shard: str,
    first: int,
    last: int,
    locations: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.time,
) -> LandingRecord:
    """Write rows as data files plus their landing record, for the source ``shard`` and the range
    ``first..last`` (the caller makes sure no landed record covers it: :func:`land_batch` for the
    stream, a replay by naming its own source).

    If a file or the record cannot be written, the files written are deleted (best effort) and
    :class:`lake.writer.LandingWriteError` is raised: the committer never sees a partial landing.
    """
    where = locations or table_locations(settings)
    written: list[LandedFile] = []
    label = f"{stream_label(event_source_arn)}-{shard}-{first}"
    for name, rows in tables.items():
        if name not in STREAM_TABLES or rows.num_rows == 0:
            continue
        for (day, _slot), part in _by_day(rows, STREAM_TABLES[name].day_column).items():
            path = f"{where[name]}/data/dt={day}/{label}-{uuid.uuid4().hex[:12]}.parquet"
            bucket, key = split_bucket_key(path)
            try:
                size = put_table(s3, bucket, key, to_iceberg_rows(name, part, day), text_statistics=True)
            except Exception as error:
                _remove(s3, written)
                raise LandingWriteError(
                    f"could not write {path} ({len(written)} files removed): {error}"
                ) from error
            written.append(LandedFile(table=name, path=path, rows=part.num_rows, size=size))
    record = LandingRecord(
        stream=stream_label(event_source_arn),
        shard=shard,
        first=first,
        last=last,
        files=tuple(written),
        landed_at=clock(),
    )
    try:
        put_record(s3, settings.bucket, settings.lake_prefix, event_source_arn, record)
    except Exception as error:
        _remove(s3, written)
        raise LandingWriteError(f"could not write the landing record of {label}: {error}") from error
    return record


def _by_day(rows: pa.Table, column: str) -> dict[tuple[str, int], pa.Table]:
    by_day: dict[str, list[pa.Table]] = {}
    for (day, _slot), part in split_by_slot(rows, column).items():
        by_day.setdefault(day.isoformat(), []).append(part)
    return {(day, 0): pa.concat_tables(parts) for day, parts in by_day.items()}


def _remove(s3: S3Client, written: list[LandedFile]) -> None:
    for file in written:
        bucket, key = split_bucket_key(file.path)
        try:
            delete_keys(s3, bucket, [key])
        except Exception:
            _logger.warning(
                "could not remove %s of a failed batch; orphan removal will", file.path, exc_info=True
            )
