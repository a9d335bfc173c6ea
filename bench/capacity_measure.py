"""The capacity model's unit costs, measured on this machine: consumer, compaction, reconciliation.

What :func:`capacity.model` multiplies by the seed's load: the stream consumer's CPU per record
(its batch loop, without a network), the compaction's and the reconciliation's rows per core
second, the Parquet bytes per row, and the share of the day's files the reconciliation reads.
Apart from the model so each stays one job: this module runs things and times them, the model
is pure arithmetic over :class:`Measured`.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import pyarrow.parquet as pq
import sqlglot
from sqlglot import exp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reconcile import DAY, SNAPSHOT_AT, build_lake, timed_reconciliation
from stream_to_parquet import StreamGenerator

from contracts.settings import Settings
from lake.compaction import compact_files
from lake.compaction_kernel import generation
from lake.snapshots import SnapshotRef
from queries.reconciliation import TRANSFERS_QUERY, WALLETS_QUERY, day_parameters, rendered_sql
from stream_processor.batch import process_batch

#: Server CPU per request of `walletlake serve` (group commit on; bench/write_path.py and
#: bench/hot_wallet.py print it): 500-700 µs measured on this x86 machine, its upper end taken.
#: The tasks run on Graviton (ARM64): no ARM machine was available to measure on, so the same
#: figure is ASSUMED there (replace it with bench/write_path.py's figure from a Graviton task).
API_CPU_US_PER_REQUEST: Final = 700
API_CPU_BASIS: Final = "measured on x86, assumed equal on ARM64 (Graviton): not measured on ARM"


@dataclasses.dataclass(frozen=True)
class Measured:
    """Unit costs measured on this machine."""

    consumer_cpu_us_per_record: float
    stream_record_json_bytes: float
    compaction_rows_per_core_second: float
    compaction_bytes_per_core_second: float
    reconciliation_rows_per_core_second: float
    parquet_bytes_per_row: float
    reconciliation_read_fraction: float
    api_cpu_us_per_request: float = API_CPU_US_PER_REQUEST


class _CountingS3:
    """Takes the consumer's PUTs without a network: the body is made, its length counted."""

    def __init__(self) -> None:
        self.bytes = 0
        self.puts = 0

    def put_object(self, **request: Any) -> dict[str, Any]:
        self.bytes += len(request["Body"])
        self.puts += 1
        return {}


def measure_consumer(records: int, events: int) -> tuple[float, float]:
    """CPU microseconds per record through the handler's batch loop, and a record's JSON bytes."""
    generator = StreamGenerator(seed=3)
    batches = [generator.event(records)["Records"] for _ in range(events)]
    json_bytes = sum(len(json.dumps(record)) for record in batches[0]) / records
    # The decode → Parquet → PUT loop without a catalog: the Iceberg landing encodes the same rows
    # (plus a landing record of a few hundred bytes), so its CPU per record is this one's.
    settings = Settings(lake_format="parquet")
    process_batch(batches[0], settings, s3=_CountingS3())  # type: ignore[arg-type]  # warm-up
    started = time.process_time()
    for batch in batches:
        process_batch(batch, settings, s3=_CountingS3())  # type: ignore[arg-type]
    cpu = time.process_time() - started
    return cpu * 1e6 / (records * events), json_bytes


def compact_landing(day_dir: Path, out_dir: Path, scratch: Path) -> tuple[int, int, int]:
    """Compact one set of landing files (the unit of work); returns (rows, bytes in, bytes out)."""
    inputs = sorted(day_dir.glob("*.parquet"))
    done = compact_files(
        "ledger",
        [str(path) for path in inputs],
        lambda name, path: shutil.copyfile(path, out_dir / name),
        name=generation([(path.name, path.stat().st_size) for path in inputs]),
        scratch=scratch,
    )
    return done.rows_out, sum(path.stat().st_size for path in inputs), done.bytes_out


def reconciliation_read_fraction(compacted: list[Path]) -> float:
    """The share of the compacted ledger's bytes in the columns the reconciliation queries name."""
    snapshot = SnapshotRef(day=SNAPSHOT_AT.date(), snapshot_at=SNAPSHOT_AT, keys=())
    parameters = day_parameters(DAY, snapshot)
    names: set[str] = set()
    for query in (WALLETS_QUERY, TRANSFERS_QUERY):
        tree = sqlglot.parse_one(rendered_sql(query, parameters), read="trino")
        names |= {column.name for column in tree.find_all(exp.Column)}
    read = total = 0
    for path in compacted:
        metadata = pq.read_metadata(path)
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            for index in range(row_group.num_columns):
                chunk = row_group.column(index)
                total += chunk.total_compressed_size
                if chunk.path_in_schema in names:
                    read += chunk.total_compressed_size
    return read / total if total else 1.0


def measure(rows: int, wallets: int, records: int, events: int) -> Measured:
    """Every unit cost, in one run (ratios within one run; the machine is shared)."""
    cpu_per_record, record_bytes = measure_consumer(records, events)
    root = Path(tempfile.mkdtemp(prefix="walletlake-capacity-"))
    try:
        build_lake(root, rows, wallets)
        day_dir = root / "ledger" / f"dt={DAY.isoformat()}"
        out_dir = root / "compacted"
        out_dir.mkdir()
        started = time.process_time()
        rows_out, bytes_in, bytes_out = compact_landing(day_dir, out_dir, root / "spill")
        compaction_cpu = time.process_time() - started
        for path in day_dir.glob("*.parquet"):
            path.unlink()
        compacted = []
        for path in out_dir.iterdir():
            compacted.append(path.rename(day_dir / path.name))
        fraction = reconciliation_read_fraction(compacted)
        _, reconcile_cpu, outcome = timed_reconciliation(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return Measured(
        consumer_cpu_us_per_record=cpu_per_record,
        stream_record_json_bytes=record_bytes,
        compaction_rows_per_core_second=rows_out / compaction_cpu,
        compaction_bytes_per_core_second=bytes_in / compaction_cpu,
        reconciliation_rows_per_core_second=outcome.ledger_rows / reconcile_cpu,
        parquet_bytes_per_row=bytes_out / rows_out,
        reconciliation_read_fraction=fraction,
    )
