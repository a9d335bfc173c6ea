"""What the commit protocol costs after days of commits: today's (main's) protocol against the new one.

The seed's load: 108 live shards, each rolled by DynamoDB every 4 hours (staggered), one commit per
table every 30 s, for 5 days, retention as deployed (main: snapshots kept 5 days; now: 2 hours,
:data:`lake.iceberg_tables.SNAPSHOT_RETENTION_HOURS`, plus the
:data:`lake.snapshot_expiry.EXPIRE_AT_LEAST` waiting for the committer's next expiry). Every
figure comes from pyiceberg's own metadata writer on its SQL catalog (SQLite) over a local
folder; nothing is mocked.

What is **measured** and what is **extrapolated** (printed beside each figure):

1. *Measured, real commits*: ``--commits`` commits per protocol (60; 12 with ``--quick``), each
   appending one data file, at simulated moments spread over the 5 days, each writing what its
   protocol writes at that moment: main's the whole per-shard map (every shard ever seen, never
   forgotten) into the table property **and** the snapshot summary
   (:func:`old_commit`, main's ``lake/committer.py`` reduced to its metadata writes); the new
   one the live sources in the property (:func:`lake.committer.prune`) and a constant-size
   commit identity in the summary (:func:`lake.committer.commit_decision` itself). Gives each
   protocol's summary bytes, property bytes and metadata.json bytes per retained snapshot.
2. *Measured, a full-size table*: a metadata.json holding every snapshot the protocol keeps after
   5 days (new: 2 h of commits and the ones awaiting expiry, 260; main: 400 of its day-1
   snapshots, as many as can be written in a few minutes, then scaled), built by cloning the
   last real snapshot (its summary as the protocol writes it at that moment), written by
   pyiceberg and registered in the catalog; then one committer cycle
   on it, three tables' worth (load the table, decide, commit: pyiceberg parses and rewrites the
   whole metadata.json each time), timed on this machine's CPU.
3. *Extrapolated*: main's metadata.json after 5 days (the sum over its retained snapshots of the
   measured per-snapshot bytes at the shard count of each), and its cycle time from the
   measured seconds per metadata byte (parsing and rewriting the JSON is linear in its size).

A 512 MB Lambda gets 512/1769 of a vCPU (Lambda gives a full vCPU at 1,769 MB and CPU in
proportion to memory): the Lambda figure is the cycle's CPU time (``time.process_time``) divided
by that share, plus its wall time not spent on CPU (local disk here, S3 there: S3 round trips
are not included).

4. *Measured, the long view* (``--days``, 400): the table after 400 days of nightly
   tags, planning's and ``reconciled-`` (each kept by its 400-day max-ref-age, removed after it by the
   committer's expiry) and an export replay every 30 days (one progress source per export),
   built as in 2 and written by pyiceberg (:func:`measure_years`).

Run: ``python bench/commit_metadata.py`` (about 2 minutes) or ``--quick`` (seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa
import pyarrow.parquet as pq

from contracts.lake_tables import STREAM_TABLES
from lake.committer import (
    PROGRESS_PROPERTY,
    RECORD_RETENTION_SECONDS,
    Decision,
    commit_decision,
    prune,
)
from lake.iceberg_tables import (
    SNAPSHOT_RETENTION_HOURS,
    ensure_tables,
    iceberg_file_schema,
    identifier,
)
from lake.landing_log import LandedFile, LandingRecord
from lake.snapshot_expiry import EXPIRE_AT_LEAST

LIVE_SHARDS = 108
ROLL_SECONDS = 4 * 3600
INTERVAL_SECONDS = 30
DAYS = 5
HORIZON_SECONDS = DAYS * 86_400
MAIN_RETENTION_SECONDS = 5 * 86_400  # main's snapshot_retention_days = 5
NEW_RETENTION_SECONDS = SNAPSHOT_RETENTION_HOURS * 3600
LAMBDA_CPU_SHARE = 512 / 1769
NAMESPACE = "bench"
STREAM = "2026-11-26T00-00-00.000"


def shard_name(index: int) -> str:
    """A DynamoDB Streams shard id of realistic length."""
    return f"shardId-{17_956_610_42266 + index:020d}-{index:08x}"


def shards_seen(at: float) -> int:
    """Shards that ever carried records by ``at``: 108 slots, each rolled every 4 h, staggered."""
    return LIVE_SHARDS + int(LIVE_SHARDS * at / ROLL_SECONDS)


def main_progress(at: float) -> dict[str, list[float]]:
    """main's progress map at ``at``: every shard ever seen, never forgotten."""
    seen = shards_seen(at)
    return {f"{STREAM}/{shard_name(i)}": [10**20 + i * 7919, at] for i in range(seen)}


def new_progress(at: float) -> dict[str, list[float]]:
    """The new protocol's property at ``at``: :func:`lake.committer.prune` of every shard, with
    the log holding records of shards that committed within its 25-hour retention."""
    seen = shards_seen(at)
    retired = seen - LIVE_SHARDS
    progress: dict[str, list[float]] = {}
    live_sources = set()
    for i in range(seen):
        # shard i retired at about (i - LIVE_SHARDS + 1) * ROLL / LIVE_SHARDS; live ones commit now
        last = at if i >= retired else (i + 1) * ROLL_SECONDS / LIVE_SHARDS
        source = f"{STREAM}/{shard_name(i)}"
        progress[source] = [10**20 + i * 7919, last]
        if at - last <= RECORD_RETENTION_SECONDS:
            live_sources.add(source)
    return prune(progress, live_sources, at)


def old_commit(table: Any, data_file_path: str, progress: dict[str, list[float]]) -> None:
    """main's commit, as far as metadata goes: the whole map into the property and the summary."""
    from pyiceberg.io.pyarrow import parquet_file_to_data_file

    text = json.dumps(progress, separators=(",", ":"), sort_keys=True)
    data_file = parquet_file_to_data_file(table.io, table.metadata, data_file_path)
    transaction = table.transaction()
    transaction.set_properties({PROGRESS_PROPERTY: text})
    with transaction.update_snapshot(snapshot_properties={PROGRESS_PROPERTY: text}).fast_append() as append:
        append.append_data_file(data_file)
    transaction.commit_transaction()


def new_commit(table: Any, data_file_path: str, progress: dict[str, list[float]], at: float) -> None:
    """The new protocol's commit: :func:`lake.committer.commit_decision`, with one landing record."""
    record = LandingRecord(
        stream=STREAM,
        shard=shard_name(0),
        first=int(at),
        last=int(at),
        files=(LandedFile(table="ledger", path=data_file_path, rows=1, size=_size(data_file_path)),),
        landed_at=at,
    )
    decision = Decision(chosen=(record,), skipped=0, progress=progress, commit=True)
    commit_decision(table, decision, list(record.files))


def _size(path: str) -> int:
    return os.path.getsize(path.removeprefix("file://"))


def data_file(folder: Path, index: int) -> str:
    """One small ledger data file with Iceberg field ids, as the landing writes them."""
    from lake.iceberg_tables import to_iceberg_rows

    schema = STREAM_TABLES["ledger"].schema
    row = {
        "entry_id": f"t{index}:credit",
        "txn_id": f"t{index}",
        "txn_type": "deposit",
        "wallet_id": f"w{index % 97}",
        "counterparty_wallet_id": None,
        "direction": "credit",
        "amount": 1,
        "delta": 1,
        "wallet_version": index + 1,
        "balance_after": index + 1,
        "nonce": f"n{index}",
        "created_at": 1_795_000_000_000,
        "stream_sequence": str(index),
        "ingested_at": 1_795_000_000_000,
        "extra_attributes": None,
        "initiated_by": None,
    }
    rows = pa.Table.from_pylist([row], schema=schema)
    path = folder / "files" / f"{index}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(to_iceberg_rows("ledger", rows, "2026-11-26").cast(iceberg_file_schema("ledger")), path)
    return f"file://{path}"


def catalog_in(folder: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    folder.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{folder / 'catalog.db'}", warehouse=f"file://{folder}")
    ensure_tables(catalog, NAMESPACE, location_root=f"file://{folder / 'warehouse'}")
    return catalog


def metadata_bytes(table: Any) -> int:
    return os.path.getsize(table.metadata_location.removeprefix("file://"))


def real_commits(folder: Path, protocol: str, commits: int) -> dict[str, Any]:
    """``commits`` real commits at moments spread over the 5 days; per-commit figures."""
    catalog = catalog_in(folder / protocol)
    table_id = identifier(NAMESPACE, "ledger")
    sizes: list[int] = []
    summaries: list[int] = []
    walletlake_summaries: list[int] = []
    properties: list[int] = []
    for index in range(commits):
        at = HORIZON_SECONDS * (index + 1) / commits
        table = catalog.load_table(table_id)
        path = data_file(folder / protocol, index)
        if protocol == "main":
            old_commit(table, path, main_progress(at))
        else:
            new_commit(table, path, new_progress(at), at)
        table = catalog.load_table(table_id)
        snapshot = table.current_snapshot()
        summary = dict(snapshot.summary.additional_properties) if snapshot and snapshot.summary else {}
        summaries.append(len(json.dumps({"operation": "append", **summary}, separators=(",", ":"))))
        ours = {key: value for key, value in summary.items() if key.startswith("walletlake.")}
        walletlake_summaries.append(len(json.dumps(ours, separators=(",", ":"))))
        properties.append(len(table.metadata.properties.get(PROGRESS_PROPERTY, "")))
        sizes.append(metadata_bytes(table))
    return {
        "sizes": sizes,
        "summaries": summaries,
        "walletlake_summaries": walletlake_summaries,
        "properties": properties,
        "catalog": catalog,
    }


def full_size_table(catalog: Any, snapshots: int, summary_at: Any) -> Any:
    """The ledger table with ``snapshots`` snapshots: real ones cloned, as retention leaves them."""
    from pyiceberg.serializers import ToOutputFile
    from pyiceberg.table.metadata import SnapshotLogEntry

    table_id = identifier(NAMESPACE, "ledger")
    table = catalog.load_table(table_id)
    metadata = table.metadata
    real = table.current_snapshot()
    assert real is not None
    clones = []
    parent = None
    first_ms = real.timestamp_ms - snapshots * INTERVAL_SECONDS * 1000
    for index in range(snapshots - 1):
        summary = real.summary.model_copy(update={}) if real.summary else None
        if summary is not None:
            summary = summary.model_copy()
            summary.additional_properties.update(summary_at(index))
        clone = real.model_copy(
            update={
                "snapshot_id": 10**15 + index,
                "parent_snapshot_id": parent,
                "timestamp_ms": first_ms + index * INTERVAL_SECONDS * 1000,
                "summary": summary,
            }
        )
        clones.append(clone)
        parent = clone.snapshot_id
    current = real.model_copy(update={"parent_snapshot_id": parent})
    every = [*clones, current]
    log = [SnapshotLogEntry(snapshot_id=s.snapshot_id, timestamp_ms=s.timestamp_ms) for s in every]
    big = metadata.model_copy(update={"snapshots": every, "snapshot_log": log})
    path = f"{table.location().rstrip('/')}/metadata/99999-full.metadata.json"
    ToOutputFile.table_metadata(big, table.io.new_output(path), overwrite=True)
    catalog.drop_table(table_id)
    return catalog.register_table(table_id, path)


def timed_cycle(catalog: Any, folder: Path, protocol: str, at: float, tables: int = 3) -> dict[str, float]:
    """One committer cycle of ``tables`` tables on the full-size ledger table: load, decide, commit."""
    table_id = identifier(NAMESPACE, "ledger")
    paths = [data_file(folder / protocol, 10_000 + index) for index in range(tables)]  # the landing's
    cpu, wall = time.process_time(), time.perf_counter()
    for path in paths:
        table = catalog.load_table(table_id)
        progress = main_progress(at) if protocol == "main" else new_progress(at)
        if protocol == "main":
            old_commit(table, path, progress)
        else:
            new_commit(table, path, progress, at)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "cpu_s": cpu,
        "wall_s": wall,
        "lambda_512mb_s": cpu / LAMBDA_CPU_SHARE + max(0.0, wall - cpu),
        "metadata_bytes": metadata_bytes(catalog.load_table(table_id)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few commits and smaller tables (seconds)")
    parser.add_argument("--commits", type=int, default=None, help="real commits per protocol")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--days", type=int, default=YEAR_DAYS, help="the long view: days of nightly tags and monthly exports"
    )
    args = parser.parse_args()
    commits = args.commits or (12 if args.quick else 60)
    report: dict[str, Any] = {"commits_measured": commits, "quick": args.quick}
    with tempfile.TemporaryDirectory(prefix="commit-metadata-") as directory:
        folder = Path(directory)
        report["main"] = measure_main(folder, commits, quick=args.quick)
        report["new"] = measure_new(folder, commits, quick=args.quick)
        report["years"] = measure_years(folder, args.days)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)
    return 0


def measure_main(folder: Path, commits: int, *, quick: bool) -> dict[str, Any]:
    """main's protocol: real commits, a day-1 table measured, 5 days extrapolated."""
    measured = real_commits(folder, "main", commits)
    catalog = measured.pop("catalog")
    at = 86_400.0
    text = json.dumps(main_progress(at), separators=(",", ":"), sort_keys=True)
    sample = 60 if quick else 400  # snapshots written for real, each with the day-1 map

    def summary_of(_index: int) -> dict[str, str]:
        return {PROGRESS_PROPERTY: text}

    table = full_size_table(catalog, sample, summary_of)
    sample_bytes = metadata_bytes(table)
    cycle = timed_cycle(catalog, folder, "main", at)
    # every retained snapshot carries the map of its own moment (about 100 bytes a shard)
    entry = len(text) / shards_seen(at)
    fixed = (sample_bytes - sample * len(text)) / sample
    retained = MAIN_RETENTION_SECONDS // INTERVAL_SECONDS

    def size_after(seconds: int) -> float:
        kept = min(retained, seconds // INTERVAL_SECONDS)
        first = seconds // INTERVAL_SECONDS - kept
        snapshots = sum(fixed + entry * shards_seen(i * INTERVAL_SECONDS) for i in range(first, first + kept))
        return snapshots + entry * shards_seen(seconds)

    five_days = size_after(HORIZON_SECONDS)
    return {
        "summary_bytes_first": measured["summaries"][0],
        "summary_bytes_last": measured["summaries"][-1],
        "walletlake_summary_bytes_last": measured["walletlake_summaries"][-1],
        "property_bytes_last": measured["properties"][-1],
        "full_size_snapshots": sample,
        "full_size_bytes": sample_bytes,
        "cycle": cycle,
        "metadata_bytes_1_day": int(size_after(86_400)),
        "metadata_bytes_5_days": int(five_days),
        "metadata_5_days_measured": False,
        "cycle_lambda_512mb_s_5_days": cycle["lambda_512mb_s"] / cycle["metadata_bytes"] * five_days,
    }


def measure_new(folder: Path, commits: int, *, quick: bool) -> dict[str, Any]:
    """The new protocol: real commits, and the table it keeps after 5 days, measured."""
    measured = real_commits(folder, "new", commits)
    catalog = measured.pop("catalog")
    # expired as soon as EXPIRE_AT_LEAST snapshots are past retention, the last 10 always kept
    retained = NEW_RETENTION_SECONDS // INTERVAL_SECONDS + EXPIRE_AT_LEAST
    snapshots = retained // 4 if quick else retained
    table = full_size_table(catalog, snapshots, lambda _index: {})
    size = metadata_bytes(table)
    cycle = timed_cycle(catalog, folder, "new", HORIZON_SECONDS)
    return {
        "summary_bytes_first": measured["summaries"][0],
        "summary_bytes_last": measured["summaries"][-1],
        "walletlake_summary_bytes_last": measured["walletlake_summaries"][-1],
        "walletlake_summary_bytes_first": measured["walletlake_summaries"][0],
        "property_bytes_last": measured["properties"][-1],
        "full_size_snapshots": snapshots,
        "full_size_bytes": size,
        "cycle": cycle,
        "metadata_bytes_1_day": int(size * retained / snapshots),
        "metadata_bytes_5_days": int(size * retained / snapshots),
        "metadata_5_days_measured": snapshots == retained,
    }


#: The long view (``--days``): two tags per night (planning's ``night-{day}-{id}`` and
#: ``reconciled-{day}``, kept 400 days by their max-ref-age) and an export replay a month, each
#: export of 500 data files.
YEAR_DAYS = 400
EXPORTS_PER_DAYS = 30
FILES_PER_EXPORT = 500


def measure_years(folder: Path, days: int) -> dict[str, Any]:
    """The new protocol's ledger table after ``days`` days, measured: the snapshots retention keeps,
    plus one tagged snapshot per night (its tag removed past its max-ref-age by the committer's
    expiry, :func:`lake.snapshot_expiry.expired_tags`, applied here to the table built), and the
    progress holding the live shards and one source per export (an export of 500 data files was
    500 sources before: that property's bytes are printed beside)."""
    from pyiceberg.serializers import ToOutputFile
    from pyiceberg.table.metadata import SnapshotLogEntry
    from pyiceberg.table.refs import SnapshotRef, SnapshotRefType

    from contracts.settings import DEFAULT_AUDIT_TAG_RETENTION_DAYS
    from lake.committer import progress_text
    from lake.snapshot_expiry import expired_tags
    from lake.snapshot_tags import DAY_MS

    catalog = catalog_in(folder / "years")
    table_id = identifier(NAMESPACE, "ledger")
    new_commit(catalog.load_table(table_id), data_file(folder / "years", 0), new_progress(0.0), 0.0)
    table = catalog.load_table(table_id)
    real = table.current_snapshot()
    assert real is not None
    now_ms = real.timestamp_ms
    retained = NEW_RETENTION_SECONDS // INTERVAL_SECONDS + EXPIRE_AT_LEAST
    recent, parent = [], None
    for index in range(retained - 1):
        clone = real.model_copy(
            update={
                "snapshot_id": 10**15 + index,
                "parent_snapshot_id": parent,
                "timestamp_ms": now_ms - (retained - index) * INTERVAL_SECONDS * 1000,
                "sequence_number": 10**6 + index,
            }
        )
        recent.append(clone)
        parent = clone.snapshot_id
    recent.append(real.model_copy(update={"parent_snapshot_id": parent, "sequence_number": 10**6 + retained}))
    nights = [
        real.model_copy(
            update={
                "snapshot_id": 2 * 10**15 + night,
                "parent_snapshot_id": None,  # expiry clears the parent of a kept snapshot
                "timestamp_ms": now_ms - (days - night) * 86_400_000,
                "sequence_number": 1 + night * 2_880,
            }
        )
        for night in range(days)
    ]
    refs = {"main": SnapshotRef(snapshot_id=real.snapshot_id, snapshot_ref_type=SnapshotRefType.BRANCH)}
    for night, snapshot in zip(range(days), nights, strict=True):
        # planning's tag and classification's, on the same snapshot (lake.snapshot_tags)
        for name in (f"night-{night:04d}-{snapshot.snapshot_id}", f"reconciled-night-{night:04d}"):
            refs[name] = SnapshotRef(
                snapshot_id=snapshot.snapshot_id,
                snapshot_ref_type=SnapshotRefType.TAG,
                max_ref_age_ms=DEFAULT_AUDIT_TAG_RETENTION_DAYS * DAY_MS,
            )
    exports = days // EXPORTS_PER_DAYS
    progress = new_progress(HORIZON_SECONDS)
    old_progress = dict(progress)
    for export in range(exports):
        progress[f"export/0177{export:04d}-e5f6a7b8"] = [exports * 10**6, 0.0]
        for file in range(FILES_PER_EXPORT):
            old_progress[f"export/0177{export:04d}-e5f6a7b8-{file:032x}"] = [1, 0.0]
    every = [*nights, *recent]
    log = [SnapshotLogEntry(snapshot_id=s.snapshot_id, timestamp_ms=s.timestamp_ms) for s in every]
    properties = {**table.metadata.properties, PROGRESS_PROPERTY: progress_text(progress)}
    big = table.metadata.model_copy(
        update={"snapshots": every, "snapshot_log": log, "refs": refs, "properties": properties}
    )
    # the committer's expiry: tags past their max-ref-age go, and with them their snapshots
    doomed = set(expired_tags(big, now_ms / 1000))
    gone = {big.refs[name].snapshot_id for name in doomed}
    big = big.model_copy(
        update={
            "refs": {name: ref for name, ref in big.refs.items() if name not in doomed},
            "snapshots": [s for s in big.snapshots if s.snapshot_id not in gone],
            "snapshot_log": [e for e in big.snapshot_log if e.snapshot_id not in gone],
        }
    )
    path = f"{table.location().rstrip('/')}/metadata/99999-years.metadata.json"
    ToOutputFile.table_metadata(big, table.io.new_output(path), overwrite=True)
    catalog.drop_table(table_id)
    registered = catalog.register_table(table_id, path)
    return {
        "days": days,
        "tags_kept": sum(1 for ref in big.refs.values() if ref.snapshot_ref_type == SnapshotRefType.TAG),
        "snapshots_kept": len(big.snapshots),
        "exports": exports,
        "property_bytes": len(progress_text(progress)),
        "property_bytes_source_per_export_file": len(progress_text(old_progress)),
        "metadata_bytes": metadata_bytes(registered),
    }


def _print(report: dict[str, Any]) -> None:
    mb = 1024**2
    old, new = report["main"], report["new"]
    how = "measured" if new["metadata_5_days_measured"] else "scaled from the quick table"
    rows = [
        ("snapshot summary bytes, first commit", old["summary_bytes_first"], new["summary_bytes_first"], "m"),
        ("snapshot summary bytes, day 5", old["summary_bytes_last"], new["summary_bytes_last"], "m"),
        (
            "  of which walletlake's keys, day 5",
            old["walletlake_summary_bytes_last"],
            new["walletlake_summary_bytes_last"],
            "m",
        ),
        ("progress property bytes, day 5", old["property_bytes_last"], new["property_bytes_last"], "m"),
        ("full-size table: snapshots", old["full_size_snapshots"], new["full_size_snapshots"], "m"),
        ("full-size table: metadata.json MB", old["full_size_bytes"] / mb, new["full_size_bytes"] / mb, "m"),
        (
            "metadata.json after 1 day, MB",
            old["metadata_bytes_1_day"] / mb,
            new["metadata_bytes_1_day"] / mb,
            "x",
        ),
        (
            "metadata.json after 5 days, MB",
            old["metadata_bytes_5_days"] / mb,
            new["metadata_bytes_5_days"] / mb,
            "x",
        ),
        ("cycle of 3 tables on it: CPU s here", old["cycle"]["cpu_s"], new["cycle"]["cpu_s"], "m"),
        ("cycle on a 512 MB Lambda, s", old["cycle"]["lambda_512mb_s"], new["cycle"]["lambda_512mb_s"], "m"),
        (
            "cycle on a 512 MB Lambda after 5 days, s",
            old["cycle_lambda_512mb_s_5_days"],
            new["cycle"]["lambda_512mb_s"],
            "x",
        ),
    ]
    print(
        f"commit metadata at the seed's load: {LIVE_SHARDS} live shards rolled every 4 h, a commit every "
        f"{INTERVAL_SECONDS} s, {DAYS} days; {report['commits_measured']} real commits per protocol"
        + (" (--quick)" if report["quick"] else "")
    )
    print(f"{'':46}{'main (today)':>16}{'new':>16}")
    for label, before, after, kind in rows:
        cell = (lambda v: f"{v:>16,.2f}") if isinstance(before, float) else (lambda v: f"{v:>16,}")
        print(f"{label + f' [{kind}]':46}{cell(before)}{cell(after)}")
    print(
        "[m] measured (pyiceberg's writer, SQL catalog, local folder); [x] main: extrapolated from its "
        f"measured per-snapshot bytes and seconds per byte; new: its table after 5 days, {how}."
    )
    years = report["years"]
    print(
        f"after {years['days']} days, two tags a night (planning's, classification's) and "
        f"{years['exports']} exports of "
        f"{FILES_PER_EXPORT} files [m]: metadata.json {years['metadata_bytes'] / mb:,.2f} MB, "
        f"{years['snapshots_kept']} snapshots, "
        f"{years['tags_kept']} tags; progress property {years['property_bytes']:,} bytes "
        f"(a source per export file: {years['property_bytes_source_per_export_file']:,})"
    )
    summary_constant = new["walletlake_summary_bytes_first"] == new["walletlake_summary_bytes_last"]
    small = new["metadata_bytes_5_days"] <= 10 * mb
    print(
        f"goals: metadata.json <= 10 MB after 5 days: {'met' if small else 'NOT met'}"
        f"; summary independent of shards: {'met' if summary_constant else 'NOT met'}"
        f"; cycle <= 5 s: {'met' if new['cycle']['lambda_512mb_s'] <= 5 else 'NOT met'}"
        f"; metadata.json <= 10 MB after {years['days']} days: "
        f"{'met' if years['metadata_bytes'] <= 10 * mb else 'NOT met'}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
