"""Which landed files are still in storage, whole: one HEAD per file per committer cycle.

The HEAD answers the object's size too, which the commit compares with the size its landing
record states: a file shorter or longer than it was written (torn by a writer that died in
the middle of a copy, replaced by a hand) is as good as gone, and its batch is left out whole.

A batch with a file gone from storage is left out whole, in every table (:mod:`lake.committer`),
so each table's commit needs the presence of every file of every chosen batch, whatever its
table. Asked by each table's commit on its own, that is one HEAD per file per table (three
tables: three times the files a cycle landed). One :class:`FilePresence` per cycle asks each path
once and answers every table alike, so the tables also agree on which batches are left out even
if a file goes between their commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyiceberg.io import FileIO

#: HEADs in flight at once (each one round trip to S3, ~10-30 ms).
CHECKERS: Final = 16


class FilePresence:
    """Whether each path exists, asked of storage once (then remembered for the cycle). One cycle's
    tables commit one after another, so it is used from one thread at a time."""

    def __init__(self) -> None:
        self._known: dict[str, bool] = {}
        self._sizes: dict[str, int | None] = {}

    @property
    def asked(self) -> int:
        """How many paths storage was asked about."""
        return len(self._known)

    def of(self, io: FileIO, paths: Iterable[str]) -> Mapping[str, bool]:
        """The presence of each of ``paths``, HEADing (in parallel) only those not asked yet."""
        wanted = list(dict.fromkeys(paths))
        new = [path for path in wanted if path not in self._known]
        if new:
            with ThreadPoolExecutor(max_workers=min(CHECKERS, len(new))) as pool:
                sizes = list(pool.map(lambda path: _size(io, path), new))
            self._sizes.update(zip(new, sizes, strict=True))
            self._known.update((path, size is not None) for path, size in zip(new, sizes, strict=True))
        return {path: self._known[path] for path in wanted}

    def size(self, path: str) -> int | None:
        """The size storage answered for ``path`` (None: gone, or never asked)."""
        return self._sizes.get(path)


def _size(io: FileIO, path: str) -> int | None:
    """The object's size by one HEAD, None when it is not there."""
    try:
        return len(io.new_input(path))
    except FileNotFoundError:
        return None
