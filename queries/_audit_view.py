"""The audit trail as the local engine reads it: ``api_access_log`` over the API's own audit lines.

On AWS the table is Glue's, over VPC Lattice's access logs in S3 (the CDK app); on the embedded
stack the API writes the same fields (:mod:`wallet.audit`) to ``WALLETLAKE_AUDIT_LOG``, and this
view reads that file, so the named query ``who_did_what`` runs unchanged on both.
"""

from __future__ import annotations

import os
from typing import Final

from contracts.audit_log import AUDIT_COLUMNS, AUDIT_TABLE
from queries._athena_dialect import AthenaDialectError

#: The Trino (and DuckDB) type of each Hive type the audit schema uses.
_TYPES: Final = {"string": "VARCHAR", "int": "INTEGER", "bigint": "BIGINT", "boolean": "BOOLEAN"}


def audit_schema() -> dict[str, dict[str, str]]:
    """The audit table's columns, as the dialect checker's schema takes them."""
    return {AUDIT_TABLE: {name: _TYPES[kind] for name, kind in AUDIT_COLUMNS}}


def audit_view(path: str | None) -> str:
    """The ``SELECT`` the local ``api_access_log`` view is, over the audit lines at ``path``.

    Raises
    ------
    AthenaDialectError
        No audit file is configured: the local audit trail is the API's own log, so a query of it
        without one would answer "nobody did anything".
    """
    if path is None or path == "stdout":
        raise AthenaDialectError(
            f"{AUDIT_TABLE} is read locally from the API's audit log: set WALLETLAKE_AUDIT_LOG to "
            "the file the API writes (walletlake local env exports it)"
        )
    columns = ", ".join(f"'{name}': '{_TYPES[kind]}'" for name, kind in AUDIT_COLUMNS)
    names = ", ".join(f'"{name}"' for name, _ in AUDIT_COLUMNS)
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        empty = ", ".join(f'CAST(NULL AS {_TYPES[kind]}) AS "{name}"' for name, kind in AUDIT_COLUMNS)
        return f"SELECT {empty} WHERE false"
    quoted = "'" + path.replace("'", "''") + "'"
    return f"SELECT {names} FROM read_json({quoted}, format = 'newline_delimited', columns = {{{columns}}})"
