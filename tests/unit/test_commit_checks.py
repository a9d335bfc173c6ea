"""The committer's check and counters on pyiceberg's SQL catalog: refused only when what it decided
from changed; its commit-id read back when the catalog's answer is lost; counts that count what
happened."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support.sql_lake import NAMESPACE, column, record, sql_catalog, wallet_rows, write_file

from lake.committer import COMMIT_ID_PROPERTY, commit_table, committed_snapshot, read_progress
from lake.iceberg_tables import identifier
from lake.landing_log import LandedFile, LandingRecord

WALLETS = identifier(NAMESPACE, "wallets")


def compact(catalog: Any, folder: Path) -> None:
    """A compaction: one commit replacing every data file of the table by one file of the same
    rows (the progress property untouched), as Glue's optimizer or ``walletlake compact`` does."""
    from pyiceberg.io.pyarrow import parquet_file_to_data_file

    table = catalog.load_table(WALLETS)
    rows = table.scan().to_arrow()
    old_files = [task.file for task in table.scan().plan_files()]
    new = write_file(folder, "wallets", wallet_rows(rows.column("wallet_id").to_pylist()))
    data_file = parquet_file_to_data_file(table.io, table.metadata, new.path)
    with table.transaction() as transaction, transaction.update_snapshot().overwrite() as rewrite:
        for old in old_files:
            rewrite.delete_data_file(old)
        rewrite.append_data_file(data_file)


def test_compactions_between_every_load_and_commit_do_not_fail_the_commit(tmp_path: Path) -> None:
    # GIVEN a table with rows, and a batch to commit
    catalog = sql_catalog(tmp_path)
    first = record(tmp_path, wallets=["w1"])
    commit_table(catalog, WALLETS, [first], live_sources={first.source})
    batch = record(tmp_path, wallets=["w2"])
    compactions = 0

    def compact_before_commit(step: str) -> None:
        nonlocal compactions
        if step == "commit" and compactions < 7:
            compactions += 1
            compact(catalog, tmp_path)

    # WHEN a compaction commits between its load and its commit, seven times in a row (more than
    # the five refusals a changed progress may cost)
    done = commit_table(
        catalog, WALLETS, [first, batch], live_sources={first.source}, on_step=compact_before_commit
    )

    # THEN the commit went through on its eighth attempt, each wallet once, the held batch counted
    assert compactions == 7
    assert (done.attempts, done.rows, done.batches, done.skipped_batches) == (8, 1, 1, 1)
    assert sorted(column(catalog, "wallets", "wallet_id")) == ["w1", "w2"]


def test_a_lost_answer_is_settled_by_the_commit_id_in_the_snapshots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import CommitStateUnknownException

    # GIVEN a catalog that applies a commit and then loses its answer (the REST spec's 5xx)
    catalog = sql_catalog(tmp_path)
    batch = record(tmp_path, wallets=["w1", "w2"])
    real = SqlCatalog.commit_table
    lost: list[bool] = []

    def commit_then_lose(self: Any, *args: Any, **kwargs: Any) -> Any:
        answer = real(self, *args, **kwargs)
        if not lost:
            lost.append(True)
            raise CommitStateUnknownException("504 from the catalog")
        return answer

    monkeypatch.setattr(SqlCatalog, "commit_table", commit_then_lose)

    # WHEN the committer commits the batch
    done = commit_table(catalog, WALLETS, [batch], live_sources={batch.source})

    # THEN it read its commit-id back, found it landed, and did not commit again
    table = catalog.load_table(WALLETS)
    assert lost == [True]
    assert done.snapshot_id == table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    assert (done.rows, done.attempts) == (2, 1)
    assert len(table.metadata.snapshots) == 1
    assert committed_snapshot(table, table.current_snapshot().summary[COMMIT_ID_PROPERTY]) == done.snapshot_id  # type: ignore[union-attr,index]
    assert sorted(column(catalog, "wallets", "wallet_id")) == ["w1", "w2"]


def test_rows_exclude_a_misfits_rows_and_a_redelivery_counts_as_skipped(tmp_path: Path) -> None:
    import pyarrow as pa

    # GIVEN a batch with a good wallets file of 2 rows and a misfit of 3 rows
    catalog = sql_catalog(tmp_path)
    good = write_file(tmp_path, "wallets", wallet_rows(["w1", "w2"]))
    bad_path = tmp_path / "warehouse" / "wallets" / "data" / "bad.parquet"
    pq.write_table(pa.table({"wallet_id": ["w7", "w8", "w9"], "surprise": ["?", "?", "?"]}), bad_path)
    bad = LandedFile("wallets", f"file://{bad_path}", 3, bad_path.stat().st_size)
    batch = LandingRecord("stream", "shard-1", 1, 5, (good, bad), landed_at=0.0)

    # WHEN it is committed, then listed again (a redelivery) and committed again
    first = commit_table(catalog, WALLETS, [batch], live_sources={batch.source})
    second = commit_table(catalog, WALLETS, [batch], live_sources={batch.source})

    # THEN the first counts the 2 rows it appended (not the misfit's 3) and the second skipped it
    assert (first.rows, first.files, first.misfit_files, first.skipped_batches) == (2, 1, 1, 0)
    assert (second.rows, second.batches, second.skipped_batches) == (0, 0, 1)
    assert sorted(column(catalog, "wallets", "wallet_id")) == ["w1", "w2"]


def test_the_commit_reads_no_footer_and_appends_what_the_footer_would_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyiceberg.io.pyarrow

    from lake.iceberg_data_files import data_file_of

    # GIVEN a landed batch whose record describes its file, and footers that cannot be read
    catalog = sql_catalog(tmp_path)
    batch = record(tmp_path, wallets=["w1", "w2", "w3"])
    (landed,) = batch.files
    table = catalog.load_table(WALLETS)
    footer = pyiceberg.io.pyarrow.parquet_file_to_data_file(table.io, table.metadata, landed.path)

    def no_footer(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the commit read a footer")

    monkeypatch.setattr(pyiceberg.io.pyarrow, "parquet_file_to_data_file", no_footer)

    # WHEN it is committed
    done = commit_table(catalog, WALLETS, [batch], live_sources={batch.source})

    # THEN it is appended, described exactly as from its footer (counts, bounds, partition, size)
    assert done.rows == 3
    described = data_file_of(table.metadata, landed.path, landed.size, landed.description or {})
    for name in (
        "record_count",
        "file_size_in_bytes",
        "column_sizes",
        "value_counts",
        "null_value_counts",
        "lower_bounds",
        "upper_bounds",
        "partition",
    ):
        assert getattr(described, name) == getattr(footer, name), name
    (task,) = catalog.load_table(WALLETS).scan().plan_files()
    assert (task.file.record_count, task.file.lower_bounds) == (3, footer.lower_bounds)


def test_a_missing_file_leaves_out_its_whole_batch_in_every_table_and_nothing_else(tmp_path: Path) -> None:
    import json

    from lake.misfits import batch_note_location

    # GIVEN three batches of two shards; the second's wallets file was deleted after it landed,
    # its ledger file is still there
    catalog = sql_catalog(tmp_path)
    first = record(tmp_path, wallets=["w1"], entries=["t1:credit"])
    gone = record(tmp_path, wallets=["w2"], entries=["t2:credit"])
    third = record(tmp_path, shard="shard-2", wallets=["w3"], entries=["t3:credit"])
    gone_file = next(file for file in gone.files if file.table == "wallets")
    Path(gone_file.path.removeprefix("file://")).unlink()
    listed = [first, gone, third]

    # WHEN both tables commit
    wallets = commit_table(catalog, WALLETS, listed, live_sources={r.source for r in listed})
    ledger = commit_table(
        catalog, identifier(NAMESPACE, "ledger"), listed, live_sources={r.source for r in listed}
    )

    # THEN the second batch is left out of both tables, its ledger file too (whole, never half):
    # the other batches, of its shard and of the other, commit in both
    assert (wallets.rows, wallets.missing_files, wallets.misfit_files, wallets.batches) == (2, 1, 0, 3)
    assert (ledger.rows, ledger.missing_files, ledger.misfit_files, ledger.batches) == (2, 0, 0, 3)
    assert wallets.quarantined_batches == ledger.quarantined_batches == 1
    assert sorted(column(catalog, "wallets", "wallet_id")) == ["w1", "w3"]
    assert sorted(column(catalog, "ledger", "entry_id")) == ["t1:credit", "t3:credit"]  # type: ignore[type-var]
    # AND both positions move past it: later batches of its shard are not held behind it
    for table in (WALLETS, identifier(NAMESPACE, "ledger")):
        assert int(read_progress(catalog.load_table(table))[gone.source][0]) == gone.last
    # AND one note says which batch, which file is gone and why, listing every file it landed
    note_at = batch_note_location(catalog.load_table(WALLETS), gone)
    note = json.loads(Path(note_at.removeprefix("file://")).read_text())
    assert (note["batch"], note["first"], note["last"]) == (gone.source, gone.first, gone.last)
    assert note["reason"].startswith(f"missing: {gone_file.path} not in storage")
    assert {(f["table"], f["missing"]) for f in note["files"]} == {("wallets", True), ("ledger", False)}
    # AND the next cycle commits nothing more of it (its range is behind the positions)
    again = commit_table(catalog, WALLETS, listed, live_sources={r.source for r in listed})
    assert (again.rows, again.quarantined_batches) == (0, 0)


def test_a_cycles_tables_ask_storage_once_per_file_and_agree_on_what_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyiceberg.io.pyarrow

    from lake.file_presence import FilePresence

    # GIVEN two batches landed for both tables (four files), and storage's HEADs counted
    catalog = sql_catalog(tmp_path)
    listed = [
        record(tmp_path, wallets=["w1"], entries=["t1:credit"]),
        record(tmp_path, wallets=["w2"], entries=["t2:credit"]),
    ]
    heads: list[str] = []
    size = pyiceberg.io.pyarrow.PyArrowFile.__len__  # one HEAD: whether the file is there, and its size

    def counted(self: Any) -> int:
        heads.append(self.location)
        return int(size(self))

    monkeypatch.setattr(pyiceberg.io.pyarrow.PyArrowFile, "__len__", counted)
    presence = FilePresence()
    live = {r.source for r in listed}

    # WHEN one cycle commits both tables with its shared presence, and the second batch's wallets
    # file is deleted between the two tables' commits
    wallets = commit_table(catalog, WALLETS, listed, live_sources=live, presence=presence)
    second = next(file for file in listed[1].files if file.table == "wallets")
    Path(second.path.removeprefix("file://")).unlink()
    ledger = commit_table(
        catalog, identifier(NAMESPACE, "ledger"), listed, live_sources=live, presence=presence
    )

    # THEN storage was asked once per file, not once per file per table
    landed = sorted(file.path for r in listed for file in r.files)
    assert sorted(path for path in heads if path.endswith(".parquet")) == landed
    assert presence.asked == 4
    # AND both tables took both batches: no batch is half in one table and left out of the other
    assert (wallets.rows, ledger.rows) == (2, 2)
    assert (wallets.quarantined_batches, ledger.quarantined_batches) == (0, 0)
