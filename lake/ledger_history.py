"""A wallet's entries from the lake's Iceberg ledger, read directly by the API: never an Athena query.

The ledger is partitioned by day (``identity(dt)``) and each day's compacted files are sorted by
wallet, so a wallet's rows of a day sit in a few row groups of one file: a scan filtered on the
day range and the wallet opens only those (partition pruning in the manifests, the files' column
bounds, then the row groups' statistics). A page walks back from its newest day in windows that
double (1, 2, 4 … days) until it has its entries or reaches the wallet's creation, so a busy
wallet costs one window and a quiet one a handful, never a scan of its whole life.

The table's metadata is kept per process and reloaded every :data:`METADATA_SECONDS` (with a new
catalog client, so the task role's rotated credentials are used): a page reads one snapshot, whose
newest version of the wallet is the seam with DynamoDB (:mod:`wallet.history_seam`). A snapshot
outlives this reuse many times over (expiry keeps 2 hours), and a data file found gone (a
compaction's input, deleted after expiry) makes one reload and one retry.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from contracts.history_entry import HistoryEntry
from contracts.lake_tables import INITIATED_BY, PARTITION_COLUMN
from contracts.settings import Settings
from lake.iceberg_catalog import open_catalog
from lake.iceberg_tables import identifier
from lake.wallet_file_rows import WalletFileRows

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import Table

#: Seconds a process reuses the ledger's metadata before loading it again.
METADATA_SECONDS: Final = 30.0
#: The ledger's columns a history entry is made of.
COLUMNS: Final = (
    "wallet_version",
    "created_at",
    "txn_id",
    "nonce",
    "txn_type",
    "direction",
    "amount",
    "delta",
    "counterparty_wallet_id",
    "balance_after",
    INITIATED_BY,
)
_DAY: Final = datetime.timedelta(days=1)
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class LakeLedger:
    """The ledger table of one lake, its metadata reused for :data:`METADATA_SECONDS`."""

    def __init__(
        self,
        settings: Settings,
        *,
        metadata_seconds: float = METADATA_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.metadata_seconds = metadata_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._table: Table | None = None
        self._loaded_at = 0.0
        self._reloading: threading.Thread | None = None
        self._files = WalletFileRows()

    def table(self, *, fresh: bool = False) -> Table | None:
        """The ledger at a recent snapshot (``fresh``: loaded now); None while it does not exist.

        A new deployment's ledger is created by the committer's first run (``ensure_tables``):
        until then the lake holds no entry, and every entry is still DynamoDB's (its records
        outlive the first commit by days), so the history answers from DynamoDB alone. Its absence
        is not remembered: each call asks the catalog again until the table is there.

        The first call loads it; later ones reuse it, and once it is ``metadata_seconds`` old a
        thread of its own loads the next one while requests go on with this one (a reload is two
        round trips to the catalog: never on a request's path). With ``metadata_seconds`` 0 every
        call loads it.
        """
        with self._lock:
            current, age = self._table, self._clock() - self._loaded_at
            if current is not None and not fresh and age < self.metadata_seconds:
                return current
            if current is not None and not fresh and self.metadata_seconds > 0:
                if self._reloading is None or not self._reloading.is_alive():
                    self._reloading = threading.Thread(
                        target=self._reload, name="ledger-metadata", daemon=True
                    )
                    self._reloading.start()
                return current
        return self._reload()

    def _reload(self) -> Table | None:
        from pyiceberg.exceptions import NoSuchTableError

        loaded_at = self._clock()
        try:
            table = open_catalog(self.settings).load_table(identifier(self.settings.glue_database, "ledger"))
        except NoSuchTableError:
            return None
        with self._lock:
            if loaded_at >= self._loaded_at:
                self._table, self._loaded_at = table, loaded_at
            return self._table or table

    def newest(
        self,
        wallet_id: str,
        *,
        limit: int,
        below: int | None,
        newest_day: datetime.date,
        oldest_day: datetime.date,
        admits: Callable[[HistoryEntry], bool] = lambda entry: True,
        table: Table | None = None,
        first_width: int = 1,
    ) -> list[HistoryEntry]:
        """Up to ``limit`` of the wallet's newest admitted entries below version ``below``, newest first,
        from days ``oldest_day`` … ``newest_day``, in windows of ``first_width`` days, then twice
        as many each time."""
        table = table or self.table()
        if table is None:  # no ledger yet: the lake holds none of the wallet's entries
            return []
        found: list[HistoryEntry] = []
        high, width = newest_day, max(1, first_width)
        while high >= oldest_day and len(found) < limit:
            low = max(oldest_day, high - (width - 1) * _DAY)
            window = self._scan(table, wallet_id, low, high, below)
            found += _newest_admitted(window, limit - len(found), admits)
            high, width = low - _DAY, width * 2
        found.sort(key=lambda entry: entry.version, reverse=True)
        return found[:limit]

    def entry(self, wallet_id: str, txn_id: str) -> HistoryEntry | None:
        """The wallet's entry of a transaction, from every day (a lookup, not a page)."""
        from pyiceberg.expressions import And

        table = self.table()
        if table is None:
            return None
        rows = self._read(table, And(_equal("wallet_id", wallet_id), _equal("txn_id", txn_id)))
        return rows[0] if rows else None

    def _scan(
        self, table: Table, wallet_id: str, low: datetime.date, high: datetime.date, below: int | None
    ) -> pa.Table:
        from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan, LessThanOrEqual, Reference
        from pyiceberg.expressions.literals import literal

        condition: BooleanExpression = And(
            _equal("wallet_id", wallet_id),
            And(
                GreaterThanOrEqual(term=Reference(PARTITION_COLUMN), value=literal(low.isoformat())),
                LessThanOrEqual(term=Reference(PARTITION_COLUMN), value=literal(high.isoformat())),
            ),
        )
        if below is not None:
            condition = And(condition, LessThan(term=Reference("wallet_version"), value=literal(below)))
        try:
            return self._wallet_rows(table, condition, wallet_id, below)
        except FileNotFoundError:
            # a file of this snapshot is gone (compacted away and deleted): read a newer snapshot
            fresh = self.table(fresh=True)
            if fresh is None:  # the table itself is gone: nothing this page can be read from
                raise
            return self._wallet_rows(fresh, condition, wallet_id, below)

    def _wallet_rows(
        self, table: Table, condition: BooleanExpression, wallet_id: str, below: int | None
    ) -> pa.Table:
        """The rows ``condition`` selects: the files planned by it, each file's wallet rows kept.

        The manifests prune the files (the day range, the wallet's and versions' bounds); each
        file left gives the wallet's rows it holds, read once per process (:mod:`lake.wallet_file_rows`),
        and the page's version bound is applied to them here. A day is one partition (identity),
        so a planned file's rows are all within the day range.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        scan = table.scan(row_filter=condition, selected_fields=COLUMNS)
        tasks = list(scan.plan_files())
        if any(task.delete_files for task in tasks):  # never written by walletlake: pyiceberg applies them
            return scan.to_arrow()
        parts = self._files.rows(scan, tasks, _equal("wallet_id", wallet_id), wallet_id)
        if not parts:  # no file holds the wallet's rows of the window
            from pyiceberg.io.pyarrow import schema_to_pyarrow

            return schema_to_pyarrow(scan.projection(), include_field_ids=False).empty_table()
        rows = pa.concat_tables(parts, promote_options="permissive")
        if below is not None:
            rows = rows.filter(pc.less(rows["wallet_version"], below))
        return rows

    def _read(self, table: Table, condition: BooleanExpression) -> list[HistoryEntry]:
        return [_entry(row) for row in self._arrow(table, condition).to_pylist()]

    def _arrow(self, table: Table, condition: BooleanExpression) -> pa.Table:
        try:
            return table.scan(row_filter=condition, selected_fields=COLUMNS).to_arrow()
        except FileNotFoundError:
            # a file of this snapshot is gone (compacted away and deleted): read a newer snapshot
            fresh = self.table(fresh=True)
            if fresh is None:  # the table itself is gone: nothing this page can be read from
                raise
            return fresh.scan(row_filter=condition, selected_fields=COLUMNS).to_arrow()


def _newest_admitted(
    window: pa.Table, wanted: int, admits: Callable[[HistoryEntry], bool]
) -> list[HistoryEntry]:
    """The ``wanted`` newest admitted entries of a window's rows, newest first.

    Rows become entries newest first, a page's worth at a time, until the page has its entries: a
    page deep in a busy day scans the day's rows below its cursor but builds only what it shows
    (building every row made paging a day's entries quadratic in the day's length).
    """
    ordered = window.sort_by([("wallet_version", "descending")])
    chosen: list[HistoryEntry] = []
    start, step = 0, max(wanted, 16)
    while len(chosen) < wanted and start < ordered.num_rows:
        chosen += [entry for entry in map(_entry, ordered.slice(start, step).to_pylist()) if admits(entry)]
        start += step
    return chosen[:wanted]


def _equal(column: str, value: str) -> BooleanExpression:
    from pyiceberg.expressions import EqualTo, Reference
    from pyiceberg.expressions.literals import literal

    return EqualTo(term=Reference(column), value=literal(value))


def _entry(row: dict[str, Any]) -> HistoryEntry:
    created: datetime.datetime = row["created_at"]
    return HistoryEntry(
        version=row["wallet_version"],
        created_at_ms=(created - _EPOCH) // datetime.timedelta(milliseconds=1),
        txn_id=row["txn_id"],
        nonce=row["nonce"],
        txn_type=row["txn_type"],
        direction=row["direction"],
        amount=row["amount"],
        delta=row["delta"],
        counterparty=row["counterparty_wallet_id"],
        balance_after=row["balance_after"],
        initiated_by=row[INITIATED_BY],
    )
