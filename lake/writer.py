"""Landing objects: the rows of one stream batch become one Parquet object per table, day and slot.

Objects are named after the batch that wrote them (:func:`contracts.lake_layout.landing_key`: the stream's
label and the batch's first sequence number), never at random, so a retried batch overwrites its own
objects instead of adding copies (docs/architecture.md, "The lake"; awswrangler's dataset mode names
files at random, which is why it is not used here). Each table's ``dt`` and slot (its five
minutes of the day, :mod:`contracts.lake_layout`) come from its day column (:mod:`contracts.lake_tables`):
``created_at`` for ledger and wallets rows, the ingestion time for quarantine entries. A batch
usually falls in one slot (a batching window of 30 s crosses a slot boundary one time in ten),
so slots rarely add an object; they let compaction work a closed hour at a time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from contracts.lake_layout import SLOT_MINUTES, SLOTS_PER_DAY, landing_key
from contracts.lake_tables import STREAM_TABLES
from lake.objects import delete_keys, put_table

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_logger = logging.getLogger(__name__)


_MS_PER_SLOT: Final = SLOT_MINUTES * 60_000
_EPOCH: Final = dt.date(1970, 1, 1)


class LandingWriteError(RuntimeError):
    """A batch's objects could not all be written; whatever it did write was removed (best effort)."""


@dataclasses.dataclass(frozen=True, slots=True)
class LandingObject:
    """One object written for a batch."""

    table: str
    day: dt.date
    key: str
    rows: int
    size: int
    slot: int = 0


def split_by_slot(table: pa.Table, column: str) -> dict[tuple[dt.date, int], pa.Table]:
    """Rows of ``table`` grouped by the UTC day and five-minute slot of its timestamp ``column``.

    Examples
    --------
    >>> import pyarrow as pa
    >>> t = pa.table({"at": pa.array([299_999, 300_000, 86_400_000], pa.timestamp("ms", tz="UTC"))})
    >>> {(d.isoformat(), s): p.num_rows for (d, s), p in split_by_slot(t, "at").items()}
    {('1970-01-01', 0): 1, ('1970-01-01', 1): 1, ('1970-01-02', 0): 1}
    """
    if table.num_rows == 0:
        return {}
    slots = np.floor_divide(pc.cast(table[column], pa.int64()).to_numpy(), _MS_PER_SLOT)
    first, last = int(slots.min()), int(slots.max())
    if first == last:  # the usual batch: one slot, no copy
        return {_day_and_slot(first): table}
    return {_day_and_slot(int(slot)): table.filter(pa.array(slots == slot)) for slot in np.unique(slots)}


def write_landing(
    s3: S3Client,
    bucket: str,
    lake_prefix: str,
    tables: Mapping[str, pa.Table],
    *,
    event_source_arn: str,
    first_sequence_number: str,
) -> list[LandingObject]:
    """Write a batch's tables: one object per table, day and slot, named after the batch.

    A retry of the same batch writes the same keys, and a PUT replaces an object whole, so readers
    never see a partial or doubled batch. If any PUT fails, the objects this call already wrote are
    deleted (best effort) and :class:`LandingWriteError` is raised: the caller then retries the
    batch from its first record, which rewrites them.
    """
    planned = [
        (name, day, slot, part)
        for name, table in tables.items()
        for (day, slot), part in split_by_slot(table, STREAM_TABLES[name].day_column).items()
    ]
    written: list[LandingObject] = []
    for name, day, slot, part in planned:
        key = landing_key(lake_prefix, name, day, event_source_arn, first_sequence_number, slot)
        try:
            size = put_table(s3, bucket, key, part, text_statistics=False)  # arrival order
        except Exception as error:
            _remove_partial(s3, bucket, [done.key for done in written])
            raise LandingWriteError(
                f"could not write s3://{bucket}/{key} ({len(written)} of {len(planned)} objects written, "
                f"then removed): {error}"
            ) from error
        written.append(LandingObject(table=name, day=day, key=key, rows=part.num_rows, size=size, slot=slot))
    return written


def _remove_partial(s3: S3Client, bucket: str, keys: list[str]) -> None:
    if not keys:
        return
    try:
        delete_keys(s3, bucket, keys)
    except Exception:
        _logger.warning(
            "could not remove %d objects of a failed batch (%s); the batch's retry overwrites them",
            len(keys),
            ", ".join(keys),
            exc_info=True,
        )


def _day_and_slot(slots_since_epoch: int) -> tuple[dt.date, int]:
    days, slot = divmod(slots_since_epoch, SLOTS_PER_DAY)
    return _day(days), slot


def _day(days_since_epoch: int) -> dt.date:
    return _EPOCH + dt.timedelta(days=days_since_epoch)
