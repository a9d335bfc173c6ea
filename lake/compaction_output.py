"""Compaction's outputs: the sorted stream written a row group at a time into files that roll at a size.

A day's sorted rows are far larger than memory (a 1 % day is 29 million ledger rows, 3 GB of
Parquet and several times that in Arrow), so no output file is ever held whole: each row group is
encoded into a local file as soon as its rows arrive, and the file is closed and handed on when
the next group would take it past the target size, as Iceberg's rolling data writers do. What is
held at any time is one row group's rows and the writer's buffers for one group, whatever the
target. (The earlier way, collecting a file's rows and encoding them at once, held a 128 MB file
as about 1 GB of Arrow, twice over while cutting it: most of a 1 % day's compaction peak.)

Every group but the very last has exactly ``row_group_rows`` rows, so a reader's pruning works
alike in every file; a file holds at least one group, so a row group larger than the target still
makes progress.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lake import parquet
from lake.compaction_kernel import compacted_name

#: Stores one finished output: its file name and the local file, which is deleted once this returns.
PutFile = Callable[[str, Path], None]


class RollingFiles:
    """Cuts a sorted stream of tables into files of whole row groups under ``target_file_bytes``."""

    def __init__(
        self,
        put: PutFile,
        name: str,
        folder: Path,
        *,
        target_file_bytes: int,
        row_group_rows: int,
        file_prefix: str = "",
        statistics_columns: tuple[str, ...] | None = None,
    ) -> None:
        self._put = put
        self._name = name
        self._folder = folder
        self._target_file_bytes = target_file_bytes
        self._row_group_rows = row_group_rows
        self._file_prefix = file_prefix
        self._statistics_columns = statistics_columns
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._schema: pa.Schema | None = None
        self._file: tuple[Path, pa.NativeFile, pq.ParquetWriter] | None = None
        self._file_rows = 0
        self._last_group_bytes = 0
        self.names: list[str] = []
        self.bytes = 0
        self.rows = 0

    def add(self, table: pa.Table) -> None:
        """Take the next rows of the stream (any number, in order)."""
        self._schema = self._schema or table.schema
        if table.num_rows:
            self._pending.append(table)
            self._pending_rows += table.num_rows
        while self._pending_rows >= self._row_group_rows:
            self._write_group(self._take(self._row_group_rows))

    def close(self) -> None:
        """Write what is left and hand on the last file.

        Inputs with no row still give one empty file: it makes the partition one generation's
        files, the state every reader and the next run recognise as compacted.
        """
        if self._pending_rows:
            self._write_group(self._take(self._pending_rows))
        if self._file is None and not self.names and self._schema is not None:
            self._open()
        self._finish()

    def _take(self, rows: int) -> pa.Table:
        combined = pa.concat_tables(self._pending)
        rest = combined.slice(rows)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows
        return combined.slice(0, rows).combine_chunks()

    def _write_group(self, group: pa.Table) -> None:
        if self._file is not None and self._file[1].tell() + self._last_group_bytes > self._target_file_bytes:
            self._finish()
        if self._file is None:
            self._open()
        assert self._file is not None
        _, sink, writer = self._file
        before = sink.tell()
        writer.write_table(group, row_group_size=group.num_rows)
        self._last_group_bytes = sink.tell() - before
        self._file_rows += group.num_rows

    def _open(self) -> None:
        assert self._schema is not None
        path = self._folder / compacted_name(self._name, len(self.names), self._file_prefix)
        sink = pa.OSFile(str(path), "wb")
        columns = self._statistics_columns
        self._file = (path, sink, parquet.open_writer(sink, self._schema, statistics_columns=columns))

    def _finish(self) -> None:
        if self._file is None:
            return
        path, sink, writer = self._file
        writer.close()
        sink.close()
        self._file = None
        try:
            self._put(path.name, path)
        finally:
            size = path.stat().st_size
            path.unlink()
        self.names.append(path.name)
        self.bytes += size
        self.rows += self._file_rows
        self._file_rows = 0
