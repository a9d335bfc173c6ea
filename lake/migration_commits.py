"""What one commit of a migration into Iceberg is: how many files it registers, how it is marked.

Apart from the migration itself (:mod:`lake.iceberg_migration`, which loads pyarrow, DuckDB and
pyiceberg), so that ``walletlake lake migrate --help`` can say the default without loading them.
"""

from __future__ import annotations

from typing import Final

#: Snapshot summary key and value that mark a migration's commits.
OPERATION_PROPERTY: Final = "walletlake.operation"
OPERATION: Final = "migration"
#: Snapshot summary key naming the first and last day a migration commit registered files of.
DAYS_PROPERTY: Final = "walletlake.migration-days"
#: Files per commit: a manifest of a thousand entries is a few hundred KB, and a failed commit
#: loses little work; a big lake becomes a few hundred commits.
DEFAULT_FILES_PER_COMMIT: Final = 1_000
