"""Misfit files: landed data files a table cannot take, kept aside by the committer and landed
again, exactly once, by ``walletlake lake reland`` once the table can take them.

A misfit is copied to ``{lake_prefix}/_misfits/{table}/{file name}`` with a ``.reason.json``
(:func:`quarantine_misfit`), left out of its commit, and the table's position moves past its
batch: the batch's own landing record still covers the range, so no replay of the stream can land
it again (:func:`lake.iceberg_landing.land_batch` drops covered records). What lands it is a
source of its own, named by the misfit file (:func:`reland_source`, in the ``replay`` stream): a
rerun finds that source's landing record, or the table's position for it, and lands nothing; a
rerun after a crash between landing and committing finds the record and lets the committer take it
once. Beyond the name, what decides is each row's identity (the table's compaction key:
``entry_id``, ``wallet_id``): rows the table already holds are never landed again, so the source's
position can be forgotten like a stream shard's (:func:`lake.landing_log.is_permanent`) and
metadata.json does not grow by one source per file re-landed, forever.

A misfit walletlake's own landing wrote holds the Iceberg file's microsecond timestamps; the
landing takes the lake's rows (millisecond timestamps, :data:`contracts.lake_tables.TABLES`), so
:func:`fitting_rows` gives them back in that unit. One file that cannot be read or landed is
reported ``failed`` and the others go on.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from contracts.lake_tables import PARTITION_COLUMN, STREAM_TABLES, TABLES
from lake.landing_log import RELAND_SHARD_PREFIX

if TYPE_CHECKING:
    import pyarrow as pa
    from mypy_boto3_s3 import S3Client
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

    from contracts.settings import Settings
    from lake.landing_log import LandingRecord

_logger = logging.getLogger(__name__)

#: Folder of a table's location where landed files that do not fit it are kept, with a reason
#: (when no lake-bucket root is given: :func:`misfit_location`).
MISFITS_FOLDER: Final = "misfits"
#: Folder of the misfits root holding the notes of batches left out whole (:func:`quarantine_batch`).
BATCHES_FOLDER: Final = "_batches"
#: The stream a re-landed misfit's source belongs to. Its position is forgotten like a stream
#: shard's (:func:`lake.landing_log.is_permanent`); a rerun years later still lands nothing,
#: because the rows the table holds are found by their identity (:func:`unheld_rows`).
RELAND_STREAM: Final = "replay"


def misfit_location(table: Table, path: str, root: str | None = None) -> str:
    """Where a misfit data file is kept: ``{root}/{table}/{file name}``, the lake bucket's
    ``{lake_prefix}/_misfits/`` for the committer (:func:`contracts.lake_layout.misfits_location`:
    a table bucket takes only the table's own files), or without a root
    ``{table location}/misfits/{file name}``; never under ``data/``, which orphan removal cleans."""
    name = path.rsplit("/", 1)[-1]
    if root is not None:
        return f"{root.rstrip('/')}/{table.name()[-1]}/{name}"
    return f"{table.location().rstrip('/')}/{MISFITS_FOLDER}/{name}"


def quarantine_misfit(table: Table, path: str, reason: str, root: str | None = None) -> str:
    """Copy a landed file that does not fit its table to :func:`misfit_location`, with a
    ``.reason.json`` beside it (the file, the table, why); returns where. Idempotent."""
    target = misfit_location(table, path, root)
    with table.io.new_input(path).open() as source:
        body = source.read()
    with table.io.new_output(target).create(overwrite=True) as sink:
        sink.write(body)
    note = json.dumps({"table": table.name()[-1], "landed_path": path, "reason": reason}).encode()
    with table.io.new_output(f"{target}.reason.json").create(overwrite=True) as sink:
        sink.write(note)
    _logger.warning("quarantined %s (does not fit %s): %s -> %s", path, table.name()[-1], reason, target)
    return target


def note_missing(table: Table, path: str, reason: str, root: str | None = None) -> str:
    """Note a landed file gone from storage (orphan removal after a long committer outage, a
    deletion by hand): ``{misfit location}.reason.json`` with ``missing: true``, no copy (there
    is nothing to copy; ``walletlake lake reland`` lands only ``.parquet`` files, so it never
    picks a note up). Its rows come back only from a replay of their source: an export
    (docs/operations.md, "Misfit files"). Returns the note's location. Idempotent."""
    target = misfit_location(table, path, root)
    note = json.dumps(
        {"table": table.name()[-1], "landed_path": path, "reason": reason, "missing": True}
    ).encode()
    with table.io.new_output(f"{target}.reason.json").create(overwrite=True) as sink:
        sink.write(note)
    _logger.error("landed file %s of %s is missing: %s", path, table.name()[-1], reason)
    return f"{target}.reason.json"


def batch_note_location(table: Table, record: LandingRecord, root: str | None = None) -> str:
    """Where the note of a batch left out whole is kept:
    ``{root}/_batches/{stream}~{shard}~{first}-{last}.reason.json`` (the committer's root is the
    lake bucket's ``{lake_prefix}/_misfits/``), or without a root under the table's ``misfits/``;
    the same for every table, so each table's commit writes the same note."""
    name = f"{record.stream}~{record.shard}~{record.first}-{record.last}.reason.json"
    base = root.rstrip("/") if root is not None else f"{table.location().rstrip('/')}/{MISFITS_FOLDER}"
    return f"{base}/{BATCHES_FOLDER}/{name}"


def quarantine_batch(
    table: Table,
    record: LandingRecord,
    gone: Collection[str],
    root: str | None = None,
    *,
    torn: Mapping[str, str] | None = None,
) -> str:
    """Note a batch left out of every table because files of it are gone from storage (orphan
    removal after a long committer outage, a deletion by hand): one ``.reason.json`` naming the
    batch (its source and range, its landing record), every file it landed (``missing`` or not)
    and why (:func:`batch_note_location`). The batch's rows then reach no table, so a replay of
    its range (an export: docs/operations.md, "Misfit files") brings it back whole, never half of
    it twice; other batches and tables are untouched. Returns the note's location. Idempotent."""
    target = batch_note_location(table, record, root)
    torn = torn or {}
    missing = sorted(path for path in gone if path not in torn)
    causes = [f"missing: {', '.join(missing)} not in storage (removed since it landed)"] if missing else []
    causes += [f"torn: {path} {why}" for path, why in sorted(torn.items())]
    note = {
        "batch": record.source,
        "first": record.first,
        "last": record.last,
        "landing_record": record.key,
        "reason": f"{'; '.join(causes)}; the whole batch is left out of every table",
        "files": [
            {"table": file.table, "path": file.path, "rows": file.rows, "missing": file.path in gone}
            for file in record.files
        ],
        "missing": True,
    }
    with table.io.new_output(target).create(overwrite=True) as sink:
        sink.write(json.dumps(note).encode())
    _logger.error(
        "batch %s %d-%d left out of %s: %s",
        record.source,
        record.first,
        record.last,
        table.name()[-1],
        note["reason"],
    )
    return target


def reland_source(table: str, misfit_path: str) -> str:
    """The shard a misfit is re-landed as: named by the table and the misfit file alone, so
    every run of the re-land, in any state, names the same source.

    Examples
    --------
    >>> reland_source("wallets", "s3://b/lake/_misfits/wallets/S-shard-1-10-ab12.parquet")
    'misfit~wallets~S-shard-1-10-ab12'
    """
    stem = misfit_path.rsplit("/", 1)[-1].removesuffix(".parquet")
    return f"{RELAND_SHARD_PREFIX}{table}~{stem}"


@dataclasses.dataclass(frozen=True, slots=True)
class Reland:
    """What the re-land did with one misfit file.

    ``state``: ``relanded`` (landed now; committed by the next commit), ``would reland`` (a dry
    run), ``already relanded`` (its source is landed or committed, or the table holds every row
    of it: nothing written), ``refused`` (the table still cannot take it; ``reason`` says why) or
    ``failed`` (it could not be read or landed; ``reason`` says why, nothing of it is committed).
    ``rows``: rows landed (or that would be); ``held``: rows left out because the table already
    holds them (by identity).
    """

    table: str
    misfit: str
    source: str
    state: str
    rows: int = 0
    reason: str = ""
    held: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for logs and JSON."""
        return dataclasses.asdict(self)

    def line(self) -> str:
        """One line for a person."""
        name = self.misfit.rsplit("/", 1)[-1]
        source = f"{RELAND_STREAM}/{self.source}"
        held = f", {self.held} already in the table" if self.held else ""
        detail = f": {self.reason}" if self.reason else f" ({self.rows} rows as {source}{held})"
        return f"{self.table} {name}: {self.state}{detail}"

    @property
    def stopped(self) -> bool:
        """True when the file's rows are not in (and will not reach) the table: refused or failed."""
        return self.state in ("refused", "failed")


def already_relanded(source: str, landed: bool, progress: Mapping[str, Any]) -> bool:
    """True when the misfit's source is landed (a record in the log) or committed (the table still
    holds a position for it): a rerun must land nothing. Once both are forgotten, the rows' identity
    decides (:func:`unheld_rows`).

    Examples
    --------
    >>> already_relanded("misfit~wallets~f", False, {"replay/misfit~wallets~f": [1, 0.0]})
    True
    >>> already_relanded("misfit~wallets~f", False, {})
    False
    """
    return landed or f"{RELAND_STREAM}/{source}" in progress


def fitting_rows(table: Table, rows: pa.Table) -> pa.Table:
    """The misfit's rows as the landing takes them (the lake's columns, timestamps in the lake's
    milliseconds: a file walletlake landed holds Iceberg's microseconds, which the landing would
    read as milliseconds), or ValueError naming what still does not fit the table now: checked
    before anything is landed, so a refused re-land writes nothing and never makes a misfit of a
    misfit."""
    from lake.iceberg_tables import blocking_changes, to_iceberg_rows

    name = table.name()[-1]
    blocked = blocking_changes(name, table.schema())
    if blocked:
        raise ValueError(f"the table is blocked by a type change ({'; '.join(blocked)})")
    if PARTITION_COLUMN in rows.column_names:
        rows = rows.drop_columns([PARTITION_COLUMN])
    try:
        to_iceberg_rows(name, rows, "1970-01-01", table.schema())
        return lake_rows(name, rows)
    except (ValueError, TypeError, NotImplementedError) as error:  # pyarrow's cast errors are ValueErrors
        raise ValueError(f"still does not fit: {error}") from error


def lake_rows(table: str, rows: pa.Table) -> pa.Table:
    """``rows`` with each timestamp column in the unit of the lake's contract (milliseconds) and
    without the file's field metadata; other columns as they are. A timestamp that is not a whole
    millisecond raises ValueError (pyarrow's safe cast) rather than be truncated.

    Examples
    --------
    >>> import pyarrow as pa
    >>> us = pa.array([1_700_000_000_123_000], pa.timestamp("us", tz="UTC"))
    >>> lake_rows("wallets", pa.table({"created_at": us})).schema.field("created_at").type
    TimestampType(timestamp[ms, tz=UTC])
    """
    import pyarrow as pa

    contract = TABLES[table]
    columns = []
    for name in rows.column_names:
        column = rows.column(name)
        wanted = contract.field(name).type if name in contract.names else None
        if wanted is not None and pa.types.is_timestamp(wanted) and pa.types.is_timestamp(column.type):
            column = column.cast(wanted)
        columns.append(column)
    return pa.Table.from_arrays(columns, names=rows.column_names)


def unheld_rows(table: Table, rows: pa.Table) -> pa.Table:
    """The rows whose identity the table does not hold yet (:mod:`lake.entry_identity`, read as the
    committer's own check reads it: :func:`lake.identity_guard.held_in_table`): what decides that a
    re-land adds no copy, whatever became of its source's name."""
    from lake.entry_identity import identity_columns, keep_new
    from lake.identity_guard import held_in_table

    if rows.num_rows == 0:
        return rows
    columns = identity_columns(table.name()[-1])
    return keep_new(rows, columns, held_in_table(table, rows)).rows


def reland_misfits(
    settings: Settings,
    s3: S3Client,
    catalog: Catalog,
    *,
    tables: Iterable[str] = tuple(STREAM_TABLES),
    dry_run: bool = False,
) -> list[Reland]:
    """Land every misfit file of ``tables`` the table can now take, each as its own source
    (:func:`reland_source`), at most once whatever the reruns; returns one :class:`Reland` per file.

    The files land beside the stream's (``data/`` of the table, one per day) with a landing record
    of range 1..1; the committer appends them at its next cycle (``walletlake lake reland`` then
    runs one). The misfit file is left where it is: the operator deletes it once the rows are in
    (docs/operations.md, "Misfit files").
    """
    from contracts.lake_layout import misfits_location
    from lake.commit_progress import read_progress
    from lake.iceberg_tables import identifier
    from lake.landing_log import landed_ranges
    from lake.objects import list_keys

    root = misfits_location(settings.bucket, settings.lake_prefix)
    file_errors = _file_errors()
    done: list[Reland] = []
    landed_now: set[tuple[Any, ...]] = set()  # identities this run landed, not committed yet
    for name in tables:
        table = catalog.load_table(identifier(settings.glue_database, name))
        progress = read_progress(table)
        folder = f"{root.removeprefix(f's3://{settings.bucket}/')}/{name}/"
        for key in list_keys(s3, settings.bucket, folder, ".parquet"):
            path = f"s3://{settings.bucket}/{key}"
            source = reland_source(name, path)
            landed = bool(landed_ranges(s3, settings.bucket, settings.lake_prefix, RELAND_STREAM, source))
            if already_relanded(source, landed, progress):
                done.append(Reland(name, path, source, "already relanded"))
                continue
            try:
                done.append(_reland_one(settings, s3, table, key, source, landed_now, dry_run=dry_run))
            except file_errors as error:  # one bad file is reported; the others go on
                _logger.exception("reland of %s failed", path)
                done.append(Reland(name, path, source, "failed", reason=f"{type(error).__name__}: {error}"))
    for reland in done:
        _logger.info("reland %s", json.dumps(reland.as_dict()))
    return done


def _not_landed_now(table: str, rows: pa.Table, landed_now: set[tuple[Any, ...]]) -> pa.Table:
    """``rows`` less those whose identity an earlier file of this run landed (two misfits holding
    one row: the table holds neither until the commit), and those identities noted."""
    import pyarrow as pa

    layout = STREAM_TABLES[table].compaction
    if layout is None or rows.num_rows == 0:
        return rows
    identities = [
        (table, *values) for values in zip(*(rows.column(c).to_pylist() for c in layout.key), strict=True)
    ]
    keep = [identity not in landed_now for identity in identities]
    landed_now.update(identities)
    return rows.filter(pa.array(keep, pa.bool_()))


def _file_errors() -> tuple[type[Exception], ...]:
    """What one file's read or landing raises without saying anything of the others: a corrupt or
    truncated Parquet file (pyarrow's errors), storage refusing it (botocore's), a landing that
    could not be written (:class:`lake.writer.LandingWriteError`)."""
    import pyarrow as pa
    from botocore.exceptions import BotoCoreError, ClientError

    from lake.writer import LandingWriteError

    return (pa.ArrowException, OSError, ClientError, BotoCoreError, LandingWriteError)


def _reland_one(
    settings: Settings,
    s3: S3Client,
    table: Table,
    key: str,
    source: str,
    landed_now: set[tuple[Any, ...]],
    *,
    dry_run: bool,
) -> Reland:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lake.iceberg_landing import land_rows

    name = table.name()[-1]
    path = f"s3://{settings.bucket}/{key}"
    body = s3.get_object(Bucket=settings.bucket, Key=key)["Body"].read()
    read = pq.read_table(pa.BufferReader(body))  # a file that cannot be read fails, alone
    try:
        fitting = fitting_rows(table, read)
    except ValueError as error:
        return Reland(name, path, source, "refused", reason=str(error))
    rows = _not_landed_now(name, unheld_rows(table, fitting), landed_now)
    held = fitting.num_rows - rows.num_rows
    if rows.num_rows == 0 and held:
        return Reland(name, path, source, "already relanded", held=held)
    if dry_run:
        return Reland(name, path, source, "would reland", rows=rows.num_rows, held=held)
    land_rows(
        s3,
        settings,
        {name: rows},
        event_source_arn=RELAND_STREAM,
        shard=source,
        first=1,
        last=1,
        locations={name: table.location().rstrip("/")},
        schemas={name: table.schema()},
    )
    return Reland(name, path, source, "relanded", rows=rows.num_rows, held=held)
