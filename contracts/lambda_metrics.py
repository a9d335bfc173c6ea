"""The Lambda functions' metrics: each function's service name and the metrics it publishes.

Every entry point in :mod:`walletlake.handlers` publishes through Powertools ``Metrics`` (CloudWatch
embedded metric format) under :data:`NAMESPACE` with the dimension ``service=<its service>``; the
CDK app's alarms and dashboard (``cdk/walletlake_cdk/monitoring.py``) read the same names from
here, so an alarm cannot watch a metric nobody publishes any more.
"""

from __future__ import annotations

from typing import Final

from contracts import api_metrics

#: One namespace and one dimension for the API and every function.
NAMESPACE: Final = api_metrics.NAMESPACE
SERVICE_DIMENSION: Final = api_metrics.SERVICE_DIMENSION

#: The stream consumer (``walletlake.handlers.stream``): per batch, counts and sizes.
CONSUMER_SERVICE: Final = "stream_processor"
RECORDS_IN: Final = "RecordsIn"
LEDGER_ROWS: Final = "LedgerRows"
WALLET_ROWS: Final = "WalletRows"
TTL_EXPIRED: Final = "TtlExpired"
IGNORED: Final = "Ignored"
QUARANTINED: Final = "Quarantined"
FILES_WRITTEN: Final = "FilesWritten"
BYTES_WRITTEN: Final = "BytesWritten"
BATCH_SECONDS: Final = "BatchSeconds"
MAX_RECORD_AGE_SECONDS: Final = "MaxRecordAgeSeconds"
BATCH_WRITE_FAILURES: Final = "BatchWriteFailures"
#: The consumer's counts the dashboard graphs (sizes and timings are in the logs' batch lines).
CONSUMER_GRAPHED: Final = (
    RECORDS_IN,
    LEDGER_ROWS,
    WALLET_ROWS,
    TTL_EXPIRED,
    IGNORED,
    QUARANTINED,
    FILES_WRITTEN,
    BATCH_WRITE_FAILURES,
)

#: The Iceberg committer (``walletlake.handlers.commit``): per commit cycle.
COMMITTER_SERVICE: Final = "committer"
COMMITTED_ROWS: Final = "CommittedRows"
COMMIT_SECONDS: Final = "CommitSeconds"
#: Landed files a table could not take, kept aside under ``_misfits/`` (any one alarms: its rows
#: are not in the table until ``walletlake lake reland``).
MISFIT_FILES: Final = "MisfitFiles"
#: Landed files gone from storage when their batch was committed (any one alarms: their whole
#: batch is left out of every table; only an export replay brings it back).
MISSING_FILES: Final = "MissingFiles"
#: Tidy passes in a row that stopped short of the landing log's end (0: caught up). The committer
#: tidies every cycle while behind; a long streak means records land faster than it deletes them.
TIDY_BEHIND: Final = "TidyBehind"
#: Tables the committer holds because the contract changed a column's type in a way Iceberg
#: cannot promote (any one alarms: the table's batches wait).
BLOCKED_TABLES: Final = "BlockedTables"

#: Compaction of the plain-Parquet lake (``walletlake.handlers.compaction``): per unit.
COMPACTION_SERVICE: Final = "compaction"
COMPACTED_ROWS: Final = "CompactedRows"
COMPACTION_SECONDS: Final = "CompactionSeconds"
COMPACTION_UNITS_PLANNED: Final = "CompactionUnitsPlanned"

#: The compaction lease (``walletlake.handlers.lease``): how often a state machine found it taken,
#: and releases that still held it.
LEASE_SERVICE: Final = "compaction-lease"
LEASE_BUSY: Final = "LeaseBusy"
LEASE_RELEASED: Final = "LeaseReleased"

#: The nightly steps (``walletlake.handlers.nightly``): one count per reconciliation status, and
#: 1 on a day that did not pass (what an operator alarms on besides the execution's own failure).
NIGHTLY_SERVICE: Final = "nightly"
RECONCILIATION_FAILED: Final = "ReconciliationFailed"
SNAPSHOT_WALLETS: Final = "SnapshotWallets"


def reconciliation_status_metric(status: str) -> str:
    """``mismatch`` → ``ReconciliationMismatch``: one metric per finding status."""
    return "Reconciliation" + "".join(part.capitalize() for part in status.split("_"))
