"""How large a compacted file may grow, on the plain lake and on the Iceberg lake.

Apart from the compactions that use them (which load pyarrow and DuckDB), so that ``walletlake
compact --help`` can say the defaults without loading either.
"""

from __future__ import annotations

from typing import Final

#: The plain lake (:mod:`lake.compaction`). Athena reads files of 128 MB to 1 GB most efficiently;
#: 256 MB keeps a day of a busy ledger in a handful of files that still spread over Athena's workers.
PLAIN_TARGET_FILE_BYTES: Final = 256 * 2**20
#: The Iceberg lake (:mod:`lake.iceberg_maintenance`). The DuckDB kernel sorts the whole day
#: (spilling past :data:`lake.iceberg_maintenance.COMPACTION_MEMORY_LIMIT`) and writes each output a
#: row group at a time (:mod:`lake.compaction_output`), so the size costs no memory; 128 MB keeps a
#: 1 % day in about 22 files that spread over Athena's workers. A one-wallet read opens one or two
#: row groups of the day whatever the size.
ICEBERG_TARGET_FILE_BYTES: Final = 128 * 2**20
