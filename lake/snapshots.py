"""Balance snapshots: every wallet's balance and version, read from DynamoDB into the lake.

Reconciliation compares the lake with the table, so it needs the table's side as data: a parallel
Scan (``Segment``/``TotalSegments``) of the table keeping only wallet items (``entity = wallet``),
written to ``balance_snapshots/dt=<snapshot day>/``.

Not disturbing the write path
    A Scan reads every item of the table, whatever the filter (DynamoDB filters after reading and
    bills what it read), so the snapshot's cost follows the table's size, hot transaction items
    included. Reads are eventually consistent (half the read units of strongly consistent ones)
    and paced by a token bucket shared by all segments: each page's ``ConsumedCapacity`` is
    charged to the bucket, and a segment whose charge overdraws it sleeps until the bucket is
    back in credit. Over any interval of T seconds the snapshot consumes at most
    ``max_read_units_per_second * (T + 1)`` read units, whatever the number of segments. The
    default, :data:`DEFAULT_MAX_READ_UNITS_PER_SECOND`, is a small share of what an on-demand table
    serves at once (a new on-demand table sustains 12,000 read units per second; the write path
    itself reads with strongly consistent ``GetItem``s on other partitions' budgets), and at
    eventually consistent pricing it reads about 8 MB of items per second. Pass ``None`` to run
    unpaced (tests, an idle table).

What a snapshot means
    ``snapshot_at`` is when the scan began. Each wallet item is read at some instant after it, so
    its ``version`` counts at least every entry committed before ``snapshot_at``, and possibly
    some after: reconciliation compares the lake with each wallet at that wallet's own version.

Completeness
    Each segment writes its own object, ``snapshot-<stamp>-<segment>-of-<segments>.parquet``. A
    snapshot counts (:func:`latest_snapshot`) only when every segment's object exists, so a run
    killed half way is never mistaken for a table with fewer wallets.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

import boto3
import pyarrow as pa
import pyarrow.compute as pc

from contracts.lake_layout import PARQUET_SUFFIX, partition_day, partition_prefix, table_prefix
from contracts.lake_tables import BALANCE_SNAPSHOTS
from contracts.settings import DEFAULT_SNAPSHOT_SEGMENTS, Settings
from contracts.timestamps import parse_utc_text, utc_text
from contracts.wallets_table import ENTITY_WALLET, Attr
from lake import objects
from lake.read_budget import DEFAULT_MAX_READ_UNITS_PER_SECOND, ReadBudget

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client

_logger = logging.getLogger(__name__)

TABLE: Final = "balance_snapshots"
_STAMP_FORMAT: Final = "%Y%m%dT%H%M%S"
_OBJECT_NAME: Final = re.compile(r"snapshot-(\d{8}T\d{6}\d{3}Z)-(\d{3,})-of-(\d{3,})\.parquet$")


@dataclasses.dataclass(frozen=True, slots=True)
class SnapshotRef:
    """A complete snapshot in the lake."""

    day: dt.date
    snapshot_at: dt.datetime
    keys: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class SnapshotReport:
    """What one snapshot read and wrote."""

    snapshot_at: dt.datetime
    day: dt.date
    wallets: int
    segments: int
    read_units: float
    throttled_seconds: float
    seconds: float
    keys: tuple[str, ...]
    skipped_items: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "snapshot_at": utc_text(self.snapshot_at),
            "day": self.day.isoformat(),
            "wallets": self.wallets,
            "segments": self.segments,
            "read_units": round(self.read_units, 1),
            "throttled_seconds": round(self.throttled_seconds, 3),
            "seconds": round(self.seconds, 3),
            "skipped_items": self.skipped_items,
            "keys": list(self.keys),
        }


def snapshot_key(lake_prefix: str, snapshot_at: dt.datetime, segment: int, segments: int) -> str:
    """Object key of one segment of the snapshot begun at ``snapshot_at``."""
    moment = snapshot_at.astimezone(dt.UTC)
    stamp = f"{moment.strftime(_STAMP_FORMAT)}{moment.microsecond // 1000:03d}Z"
    name = f"snapshot-{stamp}-{segment:03d}-of-{segments:03d}{PARQUET_SUFFIX}"
    return partition_prefix(lake_prefix, TABLE, moment.date()) + name


def take_snapshot(
    settings: Settings,
    *,
    segments: int = DEFAULT_SNAPSHOT_SEGMENTS,
    max_read_units_per_second: float | None = DEFAULT_MAX_READ_UNITS_PER_SECOND,
    now: dt.datetime | None = None,
    session: boto3.Session | None = None,
) -> SnapshotReport:
    """Scan every wallet item in parallel, paced, into ``balance_snapshots/dt=<day of now>/``.

    Parameters
    ----------
    segments:
        Parallel scan segments, one thread and one object each.
    max_read_units_per_second:
        The pace (see the module docstring); ``None`` for none.
    now:
        The snapshot time (default: the clock at the start of the scan), stored as ``snapshot_at``.
    """
    if segments < 1:
        raise ValueError("segments must be at least 1")
    session = session or boto3.Session(region_name=settings.region)
    dynamodb: DynamoDBClient = session.client("dynamodb")
    s3: S3Client = session.client("s3")
    snapshot_at = _to_ms(now or dt.datetime.now(dt.UTC))
    budget = ReadBudget(max_read_units_per_second) if max_read_units_per_second else None
    started = time.perf_counter()

    def run(segment: int) -> tuple[str, int, float, int]:
        table, units, skipped = _scan_segment(
            dynamodb, settings.table, segment, segments, budget, snapshot_at
        )
        key = snapshot_key(settings.lake_prefix, snapshot_at, segment, segments)
        objects.put_table(s3, settings.bucket, key, table)
        return key, table.num_rows, units, skipped

    with ThreadPoolExecutor(max_workers=segments, thread_name_prefix="snapshot") as pool:
        results = list(pool.map(run, range(segments)))
    report = SnapshotReport(
        snapshot_at=snapshot_at,
        day=snapshot_at.date(),
        wallets=sum(rows for _, rows, _, _ in results),
        segments=segments,
        read_units=sum(units for _, _, units, _ in results),
        throttled_seconds=budget.waited if budget else 0.0,
        seconds=time.perf_counter() - started,
        keys=tuple(key for key, _, _, _ in results),
        skipped_items=sum(skipped for _, _, _, skipped in results),
    )
    _logger.info(
        "snapshot %s: %d wallets, %.0f read units", utc_text(snapshot_at), report.wallets, report.read_units
    )
    return report


@dataclasses.dataclass(frozen=True, slots=True)
class SnapshotSegment:
    """One segment of a snapshot: a unit of work that writes exactly one object.

    The local :func:`take_snapshot` runs every segment on a thread; in AWS a Step Functions Map
    runs each as its own Lambda invocation (``walletlake.handlers.nightly.snapshot_segment_handler``),
    so the table's size is split over as many 15-minute functions as the plan asks for. A segment
    rerun rewrites its own object (the key depends on the plan, not on the run), so a retry
    neither loses nor doubles wallets.
    """

    snapshot_at: dt.datetime
    segment: int
    segments: int
    max_read_units_per_second: float | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.segment < self.segments:
            raise ValueError(f"segment must be 0..{self.segments - 1}, not {self.segment}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (a Map item)."""
        return {
            "snapshot_at": utc_text(self.snapshot_at),
            "segment": self.segment,
            "segments": self.segments,
            "max_read_units_per_second": self.max_read_units_per_second,
        }

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> SnapshotSegment:
        """The inverse of :meth:`to_dict`; a clear error for a malformed item."""
        try:
            moment = parse_utc_text(str(value["snapshot_at"]))
            rate = value.get("max_read_units_per_second")
            return cls(
                snapshot_at=_to_ms(moment),
                segment=int(value["segment"]),
                segments=int(value["segments"]),
                max_read_units_per_second=None if rate is None else float(rate),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a snapshot segment: {value!r} ({error})") from None


def plan_snapshot(
    *,
    segments: int = DEFAULT_SNAPSHOT_SEGMENTS,
    max_read_units_per_second: float | None = DEFAULT_MAX_READ_UNITS_PER_SECOND,
    now: dt.datetime | None = None,
) -> list[SnapshotSegment]:
    """The segments of one snapshot taken ``now``; the read pace is shared out evenly among them.

    Segments that run in separate processes cannot share one token bucket, so each gets
    ``max_read_units_per_second / segments``: together they never exceed the total.
    """
    if segments < 1:
        raise ValueError("segments must be at least 1")
    snapshot_at = _to_ms(now or dt.datetime.now(dt.UTC))
    share = max_read_units_per_second / segments if max_read_units_per_second else None
    return [SnapshotSegment(snapshot_at, segment, segments, share) for segment in range(segments)]


def snapshot_segment(
    settings: Settings, unit: SnapshotSegment, *, session: boto3.Session | None = None
) -> dict[str, Any]:
    """Scan one segment and write its object; returns what it read and wrote."""
    session = session or boto3.Session(region_name=settings.region)
    budget = ReadBudget(unit.max_read_units_per_second) if unit.max_read_units_per_second else None
    started = time.perf_counter()
    table, units, skipped = _scan_segment(
        session.client("dynamodb"), settings.table, unit.segment, unit.segments, budget, unit.snapshot_at
    )
    key = snapshot_key(settings.lake_prefix, unit.snapshot_at, unit.segment, unit.segments)
    objects.put_table(session.client("s3"), settings.bucket, key, table)
    return {
        **unit.to_dict(),
        "key": key,
        "wallets": table.num_rows,
        "read_units": round(units, 1),
        "throttled_seconds": round(budget.waited if budget else 0.0, 3),
        "skipped_items": skipped,
        "seconds": round(time.perf_counter() - started, 3),
    }


def _scan_segment(
    dynamodb: DynamoDBClient,
    table_name: str,
    segment: int,
    segments: int,
    budget: ReadBudget | None,
    snapshot_at: dt.datetime,
) -> tuple[pa.Table, float, int]:
    wallet_ids: list[str] = []
    balances: list[int] = []
    versions: list[int] = []
    updated: list[int] = []
    units = 0.0
    skipped = 0
    request: dict[str, Any] = {
        "TableName": table_name,
        "Segment": segment,
        "TotalSegments": segments,
        "FilterExpression": "#entity = :wallet",
        "ProjectionExpression": "#wallet_id, #balance, #version, #updated_at",
        "ExpressionAttributeNames": {
            "#entity": Attr.ENTITY,
            "#wallet_id": Attr.WALLET_ID,
            "#balance": Attr.BALANCE,
            "#version": Attr.VERSION,
            "#updated_at": Attr.UPDATED_AT,
        },
        "ExpressionAttributeValues": {":wallet": {"S": ENTITY_WALLET}},
        "ReturnConsumedCapacity": "TOTAL",
        "ConsistentRead": False,
    }
    while True:
        page = dynamodb.scan(**request)
        spent = float(page.get("ConsumedCapacity", {}).get("CapacityUnits", 0.0))
        units += spent
        if budget is not None and spent:
            budget.charge(spent)
        for item in page.get("Items", []):
            try:
                wallet_id = item[Attr.WALLET_ID]["S"]
                balance = int(item[Attr.BALANCE]["N"])
                version = int(item[Attr.VERSION]["N"])
                updated_at = int(item[Attr.UPDATED_AT]["N"])
            except (KeyError, ValueError):
                skipped += 1
                _logger.warning("snapshot: skipping a wallet item without balance/version/updated_at")
                continue
            wallet_ids.append(wallet_id)
            balances.append(balance)
            versions.append(version)
            updated.append(updated_at)
        last_key = page.get("LastEvaluatedKey")
        if not last_key:
            break
        request["ExclusiveStartKey"] = last_key
    table = pa.table(
        {
            "wallet_id": pa.array(wallet_ids, pa.string()),
            "balance": pa.array(balances, pa.int64()),
            "version": pa.array(versions, pa.int64()),
            "updated_at": pa.array(updated, pa.int64()).cast(BALANCE_SNAPSHOTS.field("updated_at").type),
            "snapshot_at": pa.array(
                [snapshot_at] * len(wallet_ids), BALANCE_SNAPSHOTS.field("snapshot_at").type
            ),
        },
        schema=BALANCE_SNAPSHOTS,
    )
    return table.take(pc.sort_indices(table, [("wallet_id", "ascending")])), units, skipped


def latest_snapshot(s3: S3Client, settings: Settings, *, not_before: dt.date) -> SnapshotRef | None:
    """The most recent complete snapshot whose day is ``not_before`` or later, if any."""
    complete = complete_snapshots(s3, settings, not_before=not_before)
    return complete[-1] if complete else None


def snapshot_taken_at(s3: S3Client, settings: Settings, at: dt.datetime) -> SnapshotRef | None:
    """The complete snapshot taken at ``at`` (what a recorded reconciliation compared with), if any."""
    for snapshot in complete_snapshots(s3, settings, not_before=at.astimezone(dt.UTC).date()):
        if snapshot.snapshot_at == _to_ms(at):
            return snapshot
    return None


def complete_snapshots(s3: S3Client, settings: Settings, *, not_before: dt.date) -> list[SnapshotRef]:
    """Every complete snapshot whose day is ``not_before`` or later, oldest first."""
    prefix = table_prefix(settings.lake_prefix, TABLE)
    start_after = partition_prefix(settings.lake_prefix, TABLE, not_before - dt.timedelta(days=1)) + "~"
    found: dict[tuple[str, int], dict[int, str]] = {}
    paginator = s3.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=settings.bucket, Prefix=prefix, StartAfter=start_after):
        for item in page.get("Contents", []):
            key = item["Key"]
            match = _OBJECT_NAME.search(key)
            day = partition_day(key)
            if match is None or day is None or day < not_before:
                continue
            stamp, segment, segments = match.group(1), int(match.group(2)), int(match.group(3))
            found.setdefault((stamp, segments), {})[segment] = key
    complete = sorted(
        (stamp, parts) for (stamp, segments), parts in found.items() if set(parts) == set(range(segments))
    )
    snapshots = []
    for stamp, parts in complete:
        snapshot_at = dt.datetime.strptime(stamp[:15], _STAMP_FORMAT).replace(
            microsecond=int(stamp[15:18]) * 1000, tzinfo=dt.UTC
        )
        snapshots.append(
            SnapshotRef(
                day=snapshot_at.date(), snapshot_at=snapshot_at, keys=tuple(parts[i] for i in sorted(parts))
            )
        )
    return snapshots


def _to_ms(moment: dt.datetime) -> dt.datetime:
    """UTC, truncated to the millisecond: the precision the lake stores."""
    if moment.tzinfo is None:
        raise ValueError("snapshot time must be timezone-aware")
    moment = moment.astimezone(dt.UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)
