"""A wallet's rows of each ledger data file, read once per process and kept while they are used.

A history page filters the day's files on the wallet and on versions below its cursor; the next
page asks the same files for older versions. Read afresh, every page opened, decoded and filtered
every file again: a wallet's walk through a day of ``n`` files cost ``pages x n`` file reads, and a
day not yet compacted (no file sorted by wallet) makes ``n`` every file of the day.

Here a file is read for a wallet once: the wallet's rows of it (every version, the page's own
bounds applied after) are kept, least recently used first out, within :data:`MAX_BYTES`. An
Iceberg data file never changes once written (a compaction writes new files; a lost file restored
is the same bytes), so a kept part cannot go stale; its key still holds the file's size and row
count beside its path, and the table's schema, so a file that would differ, or a schema evolved
under a running API, is read again, never served from what was kept.
"""

from __future__ import annotations

import collections
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import DataScan, FileScanTask

#: What a process keeps of wallets' rows (Arrow bytes); a page's files are a few rows each.
MAX_BYTES: Final = 64 * 1024 * 1024
#: Files read side by side on a page's first read (their own reads use pyiceberg's pool).
READERS: Final = 8

_Key = tuple[str, int, int, int, str]


class WalletFileRows:
    """The kept rows of (data file, wallet), least recently used first out within ``max_bytes``."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._parts: collections.OrderedDict[_Key, pa.Table] = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._readers = ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="ledger-files")
        #: Files read from storage and files served from what was kept, since this process began.
        self.reads = 0
        self.hits = 0

    def rows(
        self, scan: DataScan, tasks: list[FileScanTask], wallet: BooleanExpression, wallet_id: str
    ) -> list[pa.Table]:
        """The wallet's rows of each planned file (``scan``'s columns), in the tasks' order.

        ``wallet`` is the filter that selects the wallet's rows: the kept part of a file must hold
        every row of the wallet, whatever the page's other bounds.
        """
        schema_id = scan.table_metadata.current_schema_id
        keys = [
            (task.file.file_path, task.file.file_size_in_bytes, task.file.record_count, schema_id, wallet_id)
            for task in tasks
        ]
        found: dict[_Key, pa.Table] = {}
        with self._lock:
            for key in keys:
                part = self._parts.get(key)
                if part is not None:
                    self._parts.move_to_end(key)
                    found[key] = part
            self.hits += len(found)
        missing = [(key, task) for key, task in zip(keys, tasks, strict=True) if key not in found]
        if missing:
            read = list(self._readers.map(lambda pair: _read(scan, pair[1], wallet), missing))
            with self._lock:
                self.reads += len(missing)
                for (key, _), part in zip(missing, read, strict=True):
                    found[key] = part
                    self._keep(key, part)
        return [found[key] for key in keys]

    def _keep(self, key: _Key, part: pa.Table) -> None:
        if key in self._parts or part.nbytes > self.max_bytes:
            return
        self._parts[key] = part
        self._bytes += part.nbytes
        while self._bytes > self.max_bytes:
            _, oldest = self._parts.popitem(last=False)
            self._bytes -= oldest.nbytes


def _read(scan: DataScan, task: FileScanTask, wallet: BooleanExpression) -> pa.Table:
    """The rows of one file that ``wallet`` selects, projected as the scan projects."""
    from pyiceberg.io.pyarrow import ArrowScan

    return ArrowScan(scan.table_metadata, scan.io, scan.projection(), wallet, scan.case_sensitive).to_table(
        [task]
    )
