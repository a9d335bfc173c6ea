"""The landing log: one small JSON object per stream batch that landed, the committer's only input.

A batch's data files (one per Iceberg table and day, :mod:`lake.iceberg_landing`) become part of
the lake only when the committer appends them (:mod:`lake.committer`). What tells the committer
that a batch landed whole is its *landing record*, written last, after every data file::

    s3://{bucket}/{lake_prefix}/_landed/{stream}/{shard}/{first:0>40}-{last:0>40}.json

naming the stream, the shard, the batch's first and last sequence numbers and its files. A batch
that died before its record is not in the log (its files are orphans, removed later); a record
is written with ``If-None-Match: *``, so a record is never replaced.

**No overlap, by construction.** Before a batch is written, the shard's records are listed and the
records they already cover are dropped from the batch (:func:`uncovered_from`): a retried batch
(after a crash after its record, a Lambda retry, a bisected batch, a local consumer restarted from
an older checkpoint) lands only what was not landed. So the records of one shard form disjoint
ranges, and the committer, which keeps per table and shard the last sequence number it committed,
takes each range exactly once without reading a single committed file.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from contracts.lake_layout import LANDING_LOG_FOLDER, stream_label
from lake.objects import iter_objects, put_if_absent

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from pyiceberg.io import FileIO

_WIDTH: Final = 40  # DynamoDB Streams sequence numbers are decimal, at most 40 digits
#: Streams (the first part of a source) whose sources can land again at any time, so their
#: committed positions are never forgotten: exports and quarantine replays (few sources).
PERMANENT_STREAMS: Final = frozenset({"export", "replay"})
#: The shard prefix of a re-landed misfit (``replay/misfit~{table}~{file}``, :mod:`lake.misfits`):
#: one source per file ever re-landed, so unlike the other replays its position is forgotten as a
#: stream shard's is (:func:`is_permanent`); a rerun of the re-land then finds the rows in the
#: table by their identity and lands nothing.
RELAND_SHARD_PREFIX: Final = "misfit~"
#: The shard prefix of a replayed stream range (``replay/range~{shard}~{first}``,
#: :mod:`stream_processor.range_replay`): forgotten like a re-landed misfit's, for the same reason.
RANGE_SHARD_PREFIX: Final = "range~"
#: Landing records held in memory per process: a record never changes once written, so a warm
#: committer reads each at most once. A record describes its files for the commit (about 11 KB
#: in memory for a batch of two files, measured), so 5,000 are about 60 MB: more than ten cycles
#: of the seed's load (about 430 records a 30-second cycle).
_CACHED_RECORDS: Final = 5_000
_cache: dict[str, LandingRecord] = {}


def is_permanent(source: str) -> bool:
    """Whether a ``stream/shard`` source's committed position is kept forever (an export, a
    quarantine replay), rather than forgotten once its records are tidied and it is quiet.

    Examples
    --------
    >>> is_permanent("export/01772000000000-a1b2c3d4"), is_permanent("replay/misfit~wallets~f")
    (True, False)
    >>> is_permanent("replay/range~shardId-1~300")
    False
    """
    stream, _, shard = source.partition("/")
    return stream in PERMANENT_STREAMS and not shard.startswith((RELAND_SHARD_PREFIX, RANGE_SHARD_PREFIX))


class OverlapError(RuntimeError):
    """Two landing records of one shard cover the same sequence numbers (the consumer's invariant broke)."""


@dataclasses.dataclass(frozen=True, slots=True)
class LandedFile:
    """One data file of a landed batch.

    ``description``: what the commit needs to append it without reading its footer (its fields,
    partition, counts and bounds: :func:`lake.iceberg_data_files.describe_written`); None in
    records of an older walletlake, whose files the commit describes from their footers.
    """

    table: str
    path: str  # s3://bucket/key
    rows: int
    size: int
    description: Mapping[str, Any] | None = dataclasses.field(default=None, hash=False, compare=False)
    #: The CRC32 storage computed of the bytes as written (S3's ``ChecksumCRC32``, base64), when
    #: it answered one: the commit compares it with the one a HEAD answers now.
    crc32: str | None = dataclasses.field(default=None, hash=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for the record's JSON."""
        values = {"table": self.table, "path": self.path, "rows": self.rows, "size": self.size}
        if self.description is not None:
            values["description"] = dict(self.description)
        if self.crc32 is not None:
            values["crc32"] = self.crc32
        return values


@dataclasses.dataclass(frozen=True, slots=True)
class LandingRecord:
    """A batch that landed: its shard, its sequence range and its files."""

    stream: str  # the stream's label (:func:`contracts.lake_layout.stream_label`)
    shard: str
    first: int
    last: int
    files: tuple[LandedFile, ...]
    landed_at: float  # epoch seconds
    key: str = ""

    @property
    def source(self) -> str:
        """``stream/shard``: the committer's progress key."""
        return f"{self.stream}/{self.shard}"

    def files_of(self, table: str) -> list[LandedFile]:
        """This batch's files of one table."""
        return [file for file in self.files if file.table == table]

    def to_json(self) -> bytes:
        """The record's body."""
        body = {
            "stream": self.stream,
            "shard": self.shard,
            "first": str(self.first),
            "last": str(self.last),
            "files": [file.as_dict() for file in self.files],
            "landed_at": self.landed_at,
        }
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, body: bytes, key: str = "") -> LandingRecord:
        """Read a record's body."""
        data = json.loads(body)
        return cls(
            stream=data["stream"],
            shard=data["shard"],
            first=int(data["first"]),
            last=int(data["last"]),
            files=tuple(LandedFile(**file) for file in data["files"]),
            landed_at=float(data["landed_at"]),
            key=key,
        )


def log_prefix(lake_prefix: str) -> str:
    """Key prefix of the whole log, ending in ``/``."""
    prefix = lake_prefix.strip("/")
    return f"{prefix}/{LANDING_LOG_FOLDER}/" if prefix else f"{LANDING_LOG_FOLDER}/"


def shard_prefix(lake_prefix: str, event_source_arn: str, shard: str) -> str:
    """Key prefix of one shard's records, ending in ``/``."""
    return f"{log_prefix(lake_prefix)}{source_of(event_source_arn, shard)}/"


def source_of(event_source_arn: str, shard: str) -> str:
    """``stream/shard``: where a shard's records live in the log, and its key in the committer's progress."""
    return f"{stream_label(event_source_arn)}/{shard}"


def record_key(lake_prefix: str, event_source_arn: str, shard: str, first: int, last: int) -> str:
    """The key of a batch's record; records of a shard list in sequence order.

    Examples
    --------
    >>> record_key("lake", "arn:aws:dynamodb:r:1:table/w/stream/S", "shard-1", 7, 12)[-30:]
    '0000000000000000000000012.json'
    """
    return f"{shard_prefix(lake_prefix, event_source_arn, shard)}{first:0>{_WIDTH}}-{last:0>{_WIDTH}}.json"


def range_of_key(key: str) -> tuple[int, int]:
    """``(first, last)`` from a record's key, without reading it."""
    name = key.rsplit("/", 1)[-1].removesuffix(".json")
    first, last = name.split("-")
    return int(first), int(last)


def uncovered_from(
    records: Sequence[Mapping[str, Any]], ranges: Iterable[tuple[int, int]]
) -> list[Mapping[str, Any]]:
    """The records of a batch that no landed record covers (a suffix of the batch, possibly empty).

    Raises
    ------
    OverlapError
        A landed range covers records of the batch after an uncovered one: the records of the
        shard would no longer be disjoint ranges.
    """
    spans = sorted(ranges)
    kept: list[Mapping[str, Any]] = []
    for record in records:
        sequence = sequence_number(record)
        inside = any(start <= sequence <= end for start, end in spans)
        if inside and kept:
            raise OverlapError(
                f"sequence number {sequence} is landed but {sequence_number(kept[0])} before it is not"
            )
        if not inside:
            kept.append(record)
    return kept


def outside(
    records: Sequence[Mapping[str, Any]], ranges: Iterable[tuple[int, int]]
) -> list[Mapping[str, Any]]:
    """The records no landed range covers, anywhere in the batch (a late batch: the shard's later
    records are landed, and some of its own may be, by an invocation that failed after landing).

    Examples
    --------
    >>> batch = [{"dynamodb": {"SequenceNumber": str(n)}} for n in (5, 6, 7, 8)]
    >>> [sequence_number(r) for r in outside(batch, [(1, 5), (7, 7)])]
    [6, 8]
    """
    spans = sorted(ranges)
    return [r for r in records if not any(start <= sequence_number(r) <= end for start, end in spans)]


def sequence_number(record: Mapping[str, Any]) -> int:
    """A Lambda-shaped stream record's sequence number."""
    return int(record["dynamodb"]["SequenceNumber"])


def landed_ranges(
    s3: S3Client, bucket: str, lake_prefix: str, event_source_arn: str, shard: str
) -> list[tuple[int, int]]:
    """The ranges one shard's landing records cover (one LIST; records older than the stream's
    24-hour retention are deleted by the committer, so a shard has at most a day of them)."""
    prefix = shard_prefix(lake_prefix, event_source_arn, shard)
    return [range_of_key(key) for key, _ in iter_objects(s3, bucket, prefix) if key.endswith(".json")]


def put_record(
    s3: S3Client, bucket: str, lake_prefix: str, event_source_arn: str, record: LandingRecord
) -> bool:
    """Write a batch's record (never replacing one); False when the same range was already recorded."""
    key = record_key(lake_prefix, event_source_arn, record.shard, record.first, record.last)
    return put_if_absent(s3, bucket, key, record.to_json(), content_type="application/json")


def list_sources(s3: S3Client, bucket: str, lake_prefix: str) -> list[str]:
    """Every ``stream/shard`` with records, from two levels of delimited listing (keys never read)."""
    root = log_prefix(lake_prefix)
    sources: list[str] = []
    for stream_folder in _folders(s3, bucket, root):
        for shard_folder in _folders(s3, bucket, stream_folder):
            sources.append(shard_folder[len(root) :].rstrip("/"))
    return sources


def keys_after(s3: S3Client, bucket: str, lake_prefix: str, source: str, after: int | None) -> list[str]:
    """Keys of one ``stream/shard``'s records that start after sequence number ``after`` (all if None).

    One LIST that starts past the committed part, so its cost does not grow with the day.
    """
    prefix = f"{log_prefix(lake_prefix)}{source}/"
    kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    if after is not None:
        kwargs["StartAfter"] = f"{prefix}{after:0>{_WIDTH}}-{'9' * _WIDTH}.json"
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(**kwargs):
        keys.extend(item["Key"] for item in page.get("Contents", []) if item["Key"].endswith(".json"))
    return keys


def read_record(s3: S3Client, bucket: str, key: str, io: FileIO | None = None) -> LandingRecord:
    """One landing record: through ``io`` when given (a table's FileIO: pyarrow's S3 client, in
    C++ and outside the GIL), else one boto3 GET.

    A committer cycle reads every record landed since the last one, about 500 an hour's worth at
    1 % of the seed's load: through boto3 each GET cost about 1.6 ms of CPU under the GIL, through
    pyarrow about 0.9 ms outside it (measured alternated on the embedded stack)."""
    if io is None:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    else:
        with io.new_input(f"s3://{bucket}/{key}").open(seekable=False) as stream:
            body = stream.read()
    return LandingRecord.from_json(body, key)


def records_after(
    s3: S3Client,
    bucket: str,
    lake_prefix: str,
    after: Mapping[str, int | None],
    io: FileIO | None = None,
) -> list[LandingRecord]:
    """The records of each ``stream/shard`` in ``after`` that start past its sequence number there
    (all of the shard's if None): one LIST per shard from that position (:func:`keys_after`), then
    one GET per record not read before (:func:`read_records`). What the committer lists each cycle
    and what orphan removal protects. ``io``: read the records through it (:func:`read_record`)."""
    keys = [
        key
        for source, position in after.items()
        for key in keys_after(s3, bucket, lake_prefix, source, position)
    ]
    return read_records(s3, bucket, keys, io)


def read_records(
    s3: S3Client, bucket: str, keys: Sequence[str], io: FileIO | None = None
) -> list[LandingRecord]:
    """Landing records, read in parallel (one GET each through ``io`` when given, else boto3:
    :func:`read_record`; a record describing its files is about 10 KB), each at most once per
    process (records are immutable: written once, never replaced)."""
    from concurrent.futures import ThreadPoolExecutor

    missing = [key for key in keys if f"{bucket}/{key}" not in _cache]
    with ThreadPoolExecutor(max_workers=16) as pool:
        read = list(pool.map(lambda key: read_record(s3, bucket, key, io), missing))
    found = {key: _cache[f"{bucket}/{key}"] for key in keys if f"{bucket}/{key}" in _cache}
    found.update(zip(missing, read, strict=True))
    if len(_cache) + len(read) > _CACHED_RECORDS:
        _cache.clear()
    _cache.update({f"{bucket}/{key}": record for key, record in zip(missing, read, strict=True)})
    return [found[key] for key in keys]


def _folders(s3: S3Client, bucket: str, prefix: str) -> list[str]:
    folders: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
        folders.extend(item["Prefix"] for item in page.get("CommonPrefixes", []))
    return folders
