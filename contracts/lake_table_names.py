"""The lake's tables the stream writes, by name alone.

:mod:`contracts.lake_tables` holds every table's spec, Arrow schemas included, so importing it
loads pyarrow (a tenth of a second); what needs only the names, such as the ``--table`` choices
the command line builds at every ``walletlake`` start, reads them here. The specs there are keyed
by these names.
"""

from __future__ import annotations

from typing import Final

#: The tables the stream writes (landing files, compaction, the Iceberg tables and their
#: committer), in the order every report lists them. Each has a time column and a compaction
#: layout in :data:`contracts.lake_tables.LAKE_TABLES`; no other table has a time column.
STREAM_TABLE_NAMES: Final = ("ledger", "wallets", "quarantine")
