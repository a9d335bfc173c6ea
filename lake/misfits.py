"""Misfit files: landed data files a table cannot take, kept aside by the committer and landed
again, exactly once, by ``walletlake lake reland`` once the table can take them.

A misfit is copied to ``{lake_prefix}/_misfits/{table}/{file name}`` with a ``.reason.json``
(:func:`quarantine_misfit`), left out of its commit, and the table's position moves past its
batch: the batch's own landing record still covers the range, so no replay of the stream can land
it again (:func:`lake.iceberg_landing.land_batch` drops covered records). What lands it is a
source of its own, named by the misfit file (:func:`reland_source`, in the permanent ``replay``
stream whose positions are never forgotten): a rerun finds that source's landing record, or the
table's position for it, and lands nothing; a rerun after a crash between landing and committing
finds the record and lets the committer take it once.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from contracts.lake_tables import PARTITION_COLUMN, STREAM_TABLES

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
#: The stream a re-landed misfit's source belongs to: a permanent one
#: (:data:`lake.landing_log.PERMANENT_STREAMS`), so its committed position is never forgotten
#: and a rerun of the re-land years later still lands nothing.
RELAND_STREAM: Final = "replay"
#: The prefix of a re-landed misfit's shard, ``misfit~{table}~{file stem}``.
RELAND_PREFIX: Final = "misfit"


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
    torn: Mapping[str, tuple[int, int]] | None = None,
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
    causes += [
        f"torn: {path} is {size} bytes, its landing record says {expected}"
        for path, (size, expected) in sorted(torn.items())
    ]
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
    return f"{RELAND_PREFIX}~{table}~{stem}"


@dataclasses.dataclass(frozen=True, slots=True)
class Reland:
    """What the re-land did with one misfit file.

    ``state``: ``relanded`` (landed now; committed by the next commit), ``would reland`` (a dry
    run), ``already relanded`` (its source is landed or committed: nothing written), or
    ``refused`` (the table still cannot take it; ``reason`` says why).
    """

    table: str
    misfit: str
    source: str
    state: str
    rows: int = 0
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for logs and JSON."""
        return dataclasses.asdict(self)

    def line(self) -> str:
        """One line for a person."""
        name = self.misfit.rsplit("/", 1)[-1]
        source = f"{RELAND_STREAM}/{self.source}"
        detail = f": {self.reason}" if self.reason else f" ({self.rows} rows as {source})"
        return f"{self.table} {name}: {self.state}{detail}"


def already_relanded(source: str, landed: bool, progress: Mapping[str, Any]) -> bool:
    """True when the misfit's source is landed (a record in the log) or committed (the table holds
    a position for it, kept forever: a permanent stream): a rerun must land nothing.

    Examples
    --------
    >>> already_relanded("misfit~wallets~f", False, {"replay/misfit~wallets~f": [1, 0.0]})
    True
    >>> already_relanded("misfit~wallets~f", False, {})
    False
    """
    return landed or f"{RELAND_STREAM}/{source}" in progress


def fitting_rows(table: Table, rows: pa.Table) -> pa.Table:
    """The misfit's rows as the table takes them now (columns by name, cast to the table's current
    types), or ValueError naming what still does not fit: checked before anything is landed, so a
    refused re-land writes nothing and never makes a misfit of a misfit."""
    from lake.iceberg_tables import blocking_changes, to_iceberg_rows

    name = table.name()[-1]
    blocked = blocking_changes(name, table.schema())
    if blocked:
        raise ValueError(f"the table is blocked by a type change ({'; '.join(blocked)})")
    if PARTITION_COLUMN in rows.column_names:
        rows = rows.drop_columns([PARTITION_COLUMN])
    try:
        to_iceberg_rows(name, rows, "1970-01-01", table.schema())
    except (ValueError, TypeError, NotImplementedError) as error:  # pyarrow's cast errors are ValueErrors
        raise ValueError(f"still does not fit: {error}") from error
    return rows


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
    done: list[Reland] = []
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
            done.append(_reland_one(settings, s3, table, key, source, dry_run=dry_run))
    for reland in done:
        _logger.info("reland %s", json.dumps(reland.as_dict()))
    return done


def _reland_one(
    settings: Settings, s3: S3Client, table: Table, key: str, source: str, *, dry_run: bool
) -> Reland:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lake.iceberg_landing import land_rows

    name = table.name()[-1]
    path = f"s3://{settings.bucket}/{key}"
    body = s3.get_object(Bucket=settings.bucket, Key=key)["Body"].read()
    try:
        rows = fitting_rows(table, pq.read_table(pa.BufferReader(body)))
    except ValueError as error:
        return Reland(name, path, source, "refused", reason=str(error))
    if dry_run:
        return Reland(name, path, source, "would reland", rows=rows.num_rows)
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
    return Reland(name, path, source, "relanded", rows=rows.num_rows)
