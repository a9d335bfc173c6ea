"""RollingFiles: compaction's outputs written a row group at a time, rolled at the size target."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lake.compaction_output import RollingFiles


def _rows(start: int, count: int) -> pa.Table:
    ids = [f"{index:012d}" for index in range(start, start + count)]
    return pa.table({"wallet_id": ids, "amount": list(range(start, start + count))})


class _Stored:
    """The puts a run made: each file's name and its Parquet metadata, read before the file goes."""

    def __init__(self) -> None:
        self.files: list[tuple[str, pq.FileMetaData, int]] = []

    def __call__(self, name: str, path: Path) -> None:
        self.files.append((name, pq.read_metadata(path), path.stat().st_size))


def _roll(
    tmp_path: Path,
    pieces: list[pa.Table],
    *,
    target: int,
    group: int,
    statistics: tuple[str, ...] | None = None,
) -> tuple[RollingFiles, _Stored]:
    stored = _Stored()
    output = RollingFiles(
        stored, "gen", tmp_path, target_file_bytes=target, row_group_rows=group, statistics_columns=statistics
    )
    for piece in pieces:
        output.add(piece)
    output.close()
    return output, stored


def test_pieces_of_any_size_become_groups_of_exactly_the_group_rows_but_the_last(tmp_path: Path) -> None:
    # GIVEN 1,000 rows arriving in uneven pieces, 64-row groups and a target no file reaches
    pieces = [_rows(0, 7), _rows(7, 300), _rows(307, 1), _rows(308, 692)]
    output, stored = _roll(tmp_path, pieces, target=10**9, group=64)
    # THEN one file of 15 full groups and a last one of 40, holding every row once, in order
    assert [name for name, _, _ in stored.files] == ["compacted-gen-0000.parquet"]
    metadata = stored.files[0][1]
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [64] * 15 + [40]
    assert (output.rows, output.names, output.bytes) == (
        1_000,
        ["compacted-gen-0000.parquet"],
        stored.files[0][2],
    )
    # AND the local files are gone once stored
    assert list(tmp_path.iterdir()) == []


def test_files_roll_before_the_group_that_would_pass_the_target(tmp_path: Path) -> None:
    # GIVEN 3,000 rows in 100-row groups and a target of about three groups' bytes
    (tmp_path / "probe").mkdir()
    _, probe = _roll(tmp_path / "probe", [_rows(0, 100)], target=10**9, group=100)
    group_bytes = probe.files[0][2]
    output, stored = _roll(tmp_path, [_rows(0, 3_000)], target=3 * group_bytes, group=100)
    # THEN several files, each of whole 100-row groups, none past the target by more than its footer
    assert len(stored.files) > 1
    for _, metadata, size in stored.files:
        assert all(metadata.row_group(i).num_rows == 100 for i in range(metadata.num_row_groups))
        assert size <= 3 * group_bytes + metadata.serialized_size + 64
    assert sum(metadata.num_rows for _, metadata, _ in stored.files) == output.rows == 3_000
    assert output.names == [f"compacted-gen-{index:04d}.parquet" for index in range(len(stored.files))]


def test_a_group_larger_than_the_target_still_makes_one_file_each(tmp_path: Path) -> None:
    _, stored = _roll(tmp_path, [_rows(0, 300)], target=1, group=100)
    assert [metadata.num_rows for _, metadata, _ in stored.files] == [100, 100, 100]


def test_inputs_with_no_row_give_one_empty_file_and_no_input_gives_none(tmp_path: Path) -> None:
    _, stored = _roll(tmp_path, [_rows(0, 0)], target=10**9, group=100)
    assert [(name, metadata.num_rows) for name, metadata, _ in stored.files] == [
        ("compacted-gen-0000.parquet", 0)
    ]
    _, nothing = _roll(tmp_path, [], target=10**9, group=100)
    assert nothing.files == []


def test_only_the_named_columns_keep_min_max(tmp_path: Path) -> None:
    _, stored = _roll(tmp_path, [_rows(0, 200)], target=10**9, group=100, statistics=("wallet_id", "absent"))
    metadata = stored.files[0][1]
    kept = {
        metadata.schema.column(column).name: metadata.row_group(0).column(column).is_stats_set
        for column in range(metadata.num_columns)
    }
    assert kept == {"wallet_id": True, "amount": False}
    assert metadata.row_group(1).column(0).statistics.min == f"{100:012d}"


def test_a_failed_put_leaves_no_local_file_and_raises(tmp_path: Path) -> None:
    def refuse(name: str, path: Path) -> None:
        raise OSError(f"no room for {name}")

    output = RollingFiles(refuse, "gen", tmp_path, target_file_bytes=10**9, row_group_rows=10)
    output.add(_rows(0, 25))
    with pytest.raises(OSError, match="no room for compacted-gen-0000"):
        output.close()
    assert list(tmp_path.iterdir()) == []
    assert output.names == []
