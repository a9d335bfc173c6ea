"""A pyiceberg transaction that builds the table's metadata once per staged change, not per read.

pyiceberg 0.12's ``Transaction.table_metadata`` applies every staged update to the table's
metadata and deep-copies the result **at every read**, and an append reads it about 17 times
(its snapshot id, branch, schema, specs, parent, sequence number, properties...). The copy is of
the whole metadata: every snapshot kept, with its summary. So a commit's CPU grew with the
snapshots the table keeps: at 30-second commits, about 0.9 ms more per commit for every snapshot
(0.06 s a commit at the start of a day, 0.33 s after 300 commits, measured on the embedded stack),
up to the retention's bound (:mod:`lake.snapshot_expiry`), for every table and cycle.

:class:`StagedMetadataTransaction` keeps the metadata it built until the staged updates (or the
table's own metadata) change: pyiceberg replaces its tuple of updates whenever it stages one, and
its metadata models are frozen, so a read between two changes sees exactly what a rebuild would
have made. What is sent to the catalog (the updates and requirements) is untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyiceberg.table import Transaction

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata


class StagedMetadataTransaction(Transaction):
    """``Transaction`` whose ``table_metadata`` is rebuilt only when an update is staged."""

    _built: tuple[Any, Any, TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        """The table's metadata with the staged updates applied (built once per change)."""
        base, updates = self._table.metadata, self._updates
        built = self._built
        if built is None or built[0] is not base or built[1] is not updates:
            built = (base, updates, Transaction.table_metadata.fget(self))  # type: ignore[attr-defined]
            self._built = built
        return built[2]
