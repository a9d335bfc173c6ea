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

from contracts.lake_layout import late_shard, stream_label
from contracts.lake_tables import PARTITION_COLUMN, STREAM_TABLES
from lake.iceberg_data_files import describe_written
from lake.iceberg_tables import to_iceberg_rows
from lake.landing_log import (
    LandedFile,
    LandingRecord,
    landed_ranges,
    outside,
    put_record,
    sequence_number,
    uncovered_from,
)
from lake.objects import delete_keys
from lake.parquet import encode
from lake.writer import LandingWriteError, split_by_slot

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from pyiceberg.schema import Schema

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


@dataclasses.dataclass(frozen=True, slots=True)
class TableLayout:
    """Where a table's data files go and the Iceberg schema (field ids) they are written with."""

    location: str
    schema: Schema


@functools.lru_cache(maxsize=8)
def table_layouts(settings: Settings) -> Mapping[str, TableLayout]:
    """Each Iceberg table's location and schema, from the catalog once per process.

    A table lacking a column the contract has (a lake written by an older walletlake) is evolved
    first (:func:`lake.iceberg_tables.evolve_table`): the column is in the table before this
    process writes it. Locations never move; a schema only gains columns, so one read per process
    is enough (a file written with fewer columns reads them as null).
    """
    from lake.iceberg_catalog import load_table
    from lake.iceberg_tables import evolve_table

    layouts: dict[str, TableLayout] = {}
    for name in STREAM_TABLES:
        table = load_table(settings, name)
        if evolve_table(table):
            table = load_table(settings, name)
        layouts[name] = TableLayout(table.location().rstrip("/"), table.schema())
    return layouts


def table_locations(settings: Settings) -> Mapping[str, str]:
    """Each Iceberg table's location (:func:`table_layouts`)."""
    return {name: layout.location for name, layout in table_layouts(settings).items()}


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
    late: bool = False,
) -> Landed:
    """Land the records of a batch no earlier attempt landed; returns what was written.

    ``late``: a replayed batch whose shard went on without it (the dead-letter queue's): the
    committer's position for the shard may be past it, so it lands as a source of its own,
    ``{shard}~late-{first}`` (:func:`contracts.lake_layout.late_shard`), with only the records
    neither the shard's records nor an earlier replay of it cover. Replayed twice, it is covered.

    ``decode`` turns records into the lake tables' rows (ledger, wallets, quarantine). If a data
    file cannot be written, the ones written are deleted (best effort) and
    :class:`lake.writer.LandingWriteError` is raised: no record is written, so the committer never
    sees the batch, and its retry lands it again.
    """
    if late and records:
        own = late_shard(shard, str(sequence_number(records[0])))
        ranges = [
            *landed_ranges(s3, settings.bucket, settings.lake_prefix, event_source_arn, shard),
            *landed_ranges(s3, settings.bucket, settings.lake_prefix, event_source_arn, own),
        ]
        pending = outside(records, ranges)
        shard = own
    else:
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
    schemas: Mapping[str, Schema] | None = None,
) -> LandingRecord:
    """Write rows as data files plus their landing record, for the source ``shard`` and the range
    ``first..last`` (the caller makes sure no landed record covers it: :func:`land_batch` for the
    stream, a replay by naming its own source).

    If a file or the record cannot be written, the files written are deleted (best effort) and
    :class:`lake.writer.LandingWriteError` is raised: the committer never sees a partial landing.
    """
    if locations is None or schemas is None:
        layouts = table_layouts(settings)
        locations = locations or {name: layout.location for name, layout in layouts.items()}
        schemas = schemas or {name: layout.schema for name, layout in layouts.items()}
    where = locations
    written: list[LandedFile] = []
    label = f"{stream_label(event_source_arn)}-{shard}-{first}"
    for name, rows in tables.items():
        if name not in STREAM_TABLES or rows.num_rows == 0:
            continue
        for (day, _slot), part in _by_day(rows, STREAM_TABLES[name].day_column).items():
            path = f"{where[name]}/data/dt={day}/{label}-{uuid.uuid4().hex[:12]}.parquet"
            bucket, key = split_bucket_key(path)
            try:
                rows_out = to_iceberg_rows(name, part, day, schemas.get(name))
                body = encode(rows_out, text_statistics=True)
                # described from the bytes in hand, so the commit never reads this file's footer
                description = describe_written(body, {PARTITION_COLUMN: day})
                answer = s3.put_object(
                    Bucket=bucket, Key=key, Body=body, ContentType="application/vnd.apache.parquet"
                )
            except Exception as error:
                _remove(s3, written)
                raise LandingWriteError(
                    f"could not write {path} ({len(written)} files removed): {error}"
                ) from error
            written.append(
                LandedFile(
                    table=name,
                    path=path,
                    rows=part.num_rows,
                    size=len(body),
                    description=description,
                    crc32=answer.get("ChecksumCRC32"),
                )
            )
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
