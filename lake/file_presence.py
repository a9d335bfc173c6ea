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
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pyiceberg.io import FileIO

#: HEADs in flight at once (each one round trip to S3, ~10-30 ms).
CHECKERS: Final = 16


class FilePresence:
    """Whether each path exists, asked of storage once (then remembered for the cycle). One cycle's
    tables commit one after another, so it is used from one thread at a time."""

    def __init__(self, s3: Any = None) -> None:
        """``s3``: a boto3 S3 client, to HEAD ``s3://`` paths with their checksum
        (``ChecksumMode=ENABLED``: the CRC32 the SDK sent with the PUT); without one, the
        table's own FileIO answers the size alone."""
        self._s3 = s3
        self._known: dict[str, bool] = {}
        self._sizes: dict[str, int | None] = {}
        self._checksums: dict[str, str | None] = {}

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
                answers = list(pool.map(lambda path: self._head(io, path), new))
            for path, (size, checksum) in zip(new, answers, strict=True):
                self._sizes[path], self._checksums[path], self._known[path] = size, checksum, size is not None
        return {path: self._known[path] for path in wanted}

    def size(self, path: str) -> int | None:
        """The size storage answered for ``path`` (None: gone, or never asked)."""
        return self._sizes.get(path)

    def checksum(self, path: str) -> str | None:
        """The CRC32 storage answered for ``path`` (None: none kept, not asked with a client)."""
        return self._checksums.get(path)

    def torn(self, path: str, size: int, crc32: str | None) -> str:
        """How the stored file is not the bytes its landing record describes (``size``, ``crc32``):
        another size, or another CRC32 where both the record and storage have one; ``""`` if whole."""
        stored, checksum = self.size(path), self.checksum(path)
        if stored is not None and size and stored != size:
            return f"is {stored} bytes, its landing record says {size}"
        if crc32 is not None and checksum is not None and checksum != crc32:
            return f"has CRC32 {checksum}, its landing record says {crc32}"
        return ""

    def _head(self, io: FileIO, path: str) -> tuple[int | None, str | None]:
        if self._s3 is None or not path.startswith("s3://"):
            return _size(io, path), None
        from botocore.exceptions import ClientError

        bucket, _, key = path.removeprefix("s3://").partition("/")
        try:
            answer = self._s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None, None
            raise
        return int(answer["ContentLength"]), answer.get("ChecksumCRC32")


def _size(io: FileIO, path: str) -> int | None:
    """The object's size by one HEAD, None when it is not there."""
    try:
        return len(io.new_input(path))
    except FileNotFoundError:
        return None
