"""Replay a DynamoDB export into the lake: the backfill after an outage past the stream's 24 hours.

Every wallet item of a DynamoDB export (``DYNAMODB_JSON``: a full export at a point in time, or an
``INCREMENTAL_EXPORT`` of a window) becomes the INSERT record the stream carried for it, and every
transaction item the wallet MODIFY records its entries made, numbered back from the wallet items
(:mod:`stream_processor.export_entries`); decoded as usual and landed as the export's own source
(``export/{export id}``, a position per file and chunk). On the Iceberg lake the commit keeps only
the rows the tables do not hold (:mod:`lake.entry_identity`), so exports that overlap each other or
what the stream delivered add every entry once.

The numbering holds the export's items in memory. ``part=(k, n)`` bounds it: only the wallets whose
:func:`wallet_part` is ``k`` of ``n`` (and the transactions touching them) are read into memory and
landed, as the source ``export/{export id}~part-{k}-of-{n}``; the ``n`` parts of one export are
independent units (run them one after another, or at once on as many hosts).
"""

from __future__ import annotations

import gzip
import time
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import boto3

from contracts.settings import Settings
from contracts.wallets_table import ENTITY_TRANSACTION, ENTITY_WALLET, Attr
from lake.objects import iter_objects
from lake.writer import write_landing
from stream_processor.decoded import DecodedBatch
from stream_processor.decoder import decode_records
from stream_processor.export_entries import NumberedEntries, number_entries
from stream_processor.export_records import (
    _entity,
    _modify_record,
    export_items,
    export_records,
    export_window,
)
from stream_processor.replay_report import REPLAYED_TABLES, ReplayReport
from stream_processor.replay_sources import export_position, is_done

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

#: Records decoded and landed at a time (a chunk: one position of the export's source).
_RECORDS_PER_EXPORT_BATCH: Final = 10_000


def wallet_part(wallet_id: str, parts: int) -> int:
    """The part (of ``parts``) a wallet's rows are replayed in: a stable hash, the same everywhere.

    >>> wallet_part("wallet-1", 16), wallet_part("wallet-2", 16)
    (4, 14)
    """
    return zlib.crc32(wallet_id.encode()) % parts


def in_part(part: tuple[int, int] | None) -> Callable[[str | None], bool]:
    """Whether a wallet id is of ``part`` (every wallet without a part)."""

    def mine(wallet_id: str | None) -> bool:
        return part is None or (wallet_id is not None and wallet_part(wallet_id, part[1]) == part[0])

    return mine


def parse_part(text: str) -> tuple[int, int]:
    """``K/N`` (``0 <= K < N``) as given to ``--part``.

    >>> parse_part("3/16")
    (3, 16)
    """
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 0 <= int(k) < int(n)):
        raise ValueError(f"not K/N with 0 <= K < N: {text!r}")
    return int(k), int(n)


def replay_export(
    settings: Settings,
    export_uri: str,
    *,
    dry_run: bool = False,
    s3: S3Client | None = None,
    clock: Callable[[], float] = time.time,
    part: tuple[int, int] | None = None,
    on_decoded: Callable[[DecodedBatch], None] | None = None,
) -> ReplayReport:
    """Land every wallet and every numbered entry of a DynamoDB export (DYNAMODB_JSON): a full
    export at a point in time, or an ``INCREMENTAL_EXPORT`` of a window (``NEW_AND_OLD_IMAGES``),
    whose transactions written in the window are numbered back from its wallets' state at the
    window's end.

    ``export_uri`` is the export's folder, ``s3://{bucket}/{prefix}/AWSDynamoDB/{export id}/``.
    Wallet items (and transaction items of the compare-and-swap write path, which carried their
    entries) become the INSERT records the stream carried, one data file at a time. The entries of
    the single-write path are numbered from the whole export
    (:func:`stream_processor.export_entries.number_entries`), which holds every wallet item and
    every transaction item of the export in memory (``bench/backfill.py`` measures it); ``part``
    keeps only a ``k``-of-``n`` share of the wallets in memory (the module's docstring).
    """
    s3 = s3 or boto3.client("s3", region_name=settings.region)
    bucket, folder = _split_s3_uri(export_uri)
    folder = folder.rstrip("/")
    export_name = folder.rsplit("/", 1)[-1]
    # the source a part lands as: its own, so each part's positions are its own
    export_id = export_name if part is None else f"{export_name}~part-{part[0]}-of-{part[1]}"

    mine = in_part(part)
    report = ReplayReport(source="export", dry_run=dry_run)
    data_keys = [key for key, _ in iter_objects(s3, bucket, f"{folder}/data/") if key.endswith(".json.gz")]
    if not data_keys:
        raise FileNotFoundError(
            f"no data/*.json.gz under {export_uri}: is it a DYNAMODB_JSON export's folder?"
        )

    landed: tuple[list[tuple[int, int]], int] = ([], 0)
    if settings.lake_format == "iceberg" and not dry_run:
        from lake.iceberg_catalog import open_catalog
        from stream_processor.replay_sources import done_positions, table_progresses

        progresses = table_progresses(settings, open_catalog(settings))
        landed = done_positions(s3, settings, progresses, "export", export_id)

    def land(records: list[dict[str, Any]], name: str, index: int) -> None:
        for start in range(0, len(records), _RECORDS_PER_EXPORT_BATCH):
            decoded = decode_records(
                records[start : start + _RECORDS_PER_EXPORT_BATCH], ingested_at_ms=int(clock() * 1000)
            )
            report.add_decoded(decoded)
            if on_decoded is not None:
                on_decoded(decoded)
            if dry_run:
                continue
            if settings.lake_format == "iceberg":
                position = export_position(index, start // _RECORDS_PER_EXPORT_BATCH)
                if not is_done(position, *landed):
                    _land_export_chunk(s3, settings, decoded, export_id, position, report)
                continue
            objects = write_landing(
                s3,
                settings.bucket,
                settings.lake_prefix,
                {table: rows for table, rows in decoded.tables().items() if table in REPLAYED_TABLES},
                event_source_arn="export",
                first_sequence_number=f"{export_id}-{name}-{start // _RECORDS_PER_EXPORT_BATCH}",
            )
            report.add_written(objects)

    wallets: list[dict[str, Any]] = []
    transactions: list[dict[str, Any]] = []
    for index, key in enumerate(data_keys):
        report.sources_read += 1
        body = gzip.decompress(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        inserted = _sort_items(export_items(body.decode("utf-8").splitlines()), mine, wallets, transactions)
        land(
            list(export_records(inserted, export_id)), key.rsplit("/", 1)[-1].removesuffix(".json.gz"), index
        )
    if transactions:
        numbered = _number(s3, bucket, folder, wallets, transactions, report, mine if part else None)
        # in time order, so each landed chunk spans a short time (the commit's identity check
        # reads the table's rows of that span only)
        images = sorted(numbered.images, key=lambda pair: int(pair[1][Attr.UPDATED_AT]["N"]))
        land([_modify_record(old, new, export_id) for old, new in images], "entries", len(data_keys))
    return report


def export_ledger(
    settings: Settings, export_uri: str, *, part: tuple[int, int] | None = None, s3: S3Client | None = None
) -> Any:
    """The ledger rows an export makes, landing nothing (the export as the source of truth for a
    repair, :mod:`lake.entry_repair`)."""
    import pyarrow as pa

    parts: list[Any] = []
    replay_export(
        settings,
        export_uri,
        dry_run=True,
        s3=s3,
        part=part,
        on_decoded=lambda decoded: parts.append(decoded.ledger) if decoded.ledger.num_rows else None,
    )
    return pa.concat_tables(parts) if parts else None


def _number(
    s3: S3Client,
    bucket: str,
    folder: str,
    wallets: list[dict[str, Any]],
    transactions: list[dict[str, Any]],
    report: ReplayReport,
    only: Callable[[str], bool] | None = None,
) -> NumberedEntries:
    """The export's entries numbered back from its wallets (full or incremental), counted."""
    window = export_window(s3, bucket, folder)
    if window.incremental:
        # An incremental export holds the items written in its window (as they are at its end)
        # and those deleted in it (as they were): every transaction of the window, none
        # missing, so nothing is skipped as expired; but a deletion (TTL) of an item written
        # before the window would be a leg whose neighbours are not there, so only the
        # window's own transactions are numbered.
        start_ms = (window.from_time_s or 0) * 1000
        older = [t for t in transactions if int(t[Attr.CREATED_AT]["N"]) < start_ms]
        report.ignored += len(older)
        transactions = [t for t in transactions if int(t[Attr.CREATED_AT]["N"]) >= start_ms]
        numbered = number_entries(wallets, transactions, export_time_s=0, only=only)
    else:
        numbered = number_entries(wallets, transactions, export_time_s=window.export_time_s, only=only)
    report.ignored += numbered.expired
    report.problems += numbered.problems
    report.still_failing += len(numbered.problems)
    return numbered


def _sort_items(
    items: list[dict[str, Any]],
    mine: Callable[[str | None], bool],
    wallets: list[dict[str, Any]],
    transactions: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Of one data file's items, those of this part: transaction items of the single-write path
    to ``transactions`` (numbered at the end), wallet items to ``wallets`` too; returns the items
    that become INSERT records (wallets, and transaction items of the compare-and-swap path)."""
    inserted = []
    for item in items:
        if not (mine(_text(item, Attr.WALLET_ID)) or mine(_text(item, Attr.TO_WALLET_ID))):
            continue  # another part's
        if _entity(item) == ENTITY_TRANSACTION and Attr.WALLET_VERSION not in item:
            transactions.append(item)
            continue
        if _entity(item) == ENTITY_WALLET:
            wallets.append(item)
        inserted.append(item)
    return inserted


def _text(item: dict[str, Any], name: str) -> str | None:
    value = item.get(name)
    return value.get("S") if isinstance(value, dict) else None


def _land_export_chunk(
    s3: S3Client,
    settings: Settings,
    decoded: DecodedBatch,
    export_id: str,
    position: int,
    report: ReplayReport,
) -> None:
    """The Iceberg lake: one chunk of an export landed in the export's one source
    ``export/{export id}`` at ``position`` (:func:`stream_processor.replay_sources.export_position`);
    the caller lands only positions neither landed nor committed, so a rerun lands nothing twice
    and the committer's progress holds one entry per export."""
    from lake.iceberg_landing import land_rows

    tables = {table: rows for table, rows in decoded.tables().items() if table in REPLAYED_TABLES}
    report.add_landed(
        land_rows(
            s3, settings, tables, event_source_arn="export", shard=export_id, first=position, last=position
        )
    )


def _split_s3_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        raise ValueError(f"not an s3://bucket/prefix/ URI: {uri!r}")
    bucket, _, key = uri[5:].partition("/")
    return bucket, key
