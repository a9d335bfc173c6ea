"""The audit trail's one schema: a request, who made it, what it was and what it was answered.

Two writers keep it, one query reads both:

- VPC Lattice's access logs (delivered to S3 and CloudWatch Logs by the CDK app's access-log
  subscriptions) carry a JSON object per request, with Lattice's own field names ("Access log
  contents", VPC Lattice User Guide, monitoring-access-logs.html): every request Lattice saw,
  including those its auth policies denied (``authDeniedReason``).
- The API server writes one line per request in the same field names (:mod:`wallet.audit`),
  plus what only the server knows (the operation, the wallet, the transaction, a replay, a
  refusal of its own). On the tasks the line goes to the container's log; on the embedded stack to
  a file the local engine reads.

The Glue table over Lattice's logs (CDK app) and the local view over the server's lines
(:mod:`queries`) are both built from :data:`AUDIT_COLUMNS`, so the named query ``who_did_what``
runs on either. Retention: :data:`ACCESS_LOG_RETENTION_DAYS`.

Pure: names and types only.
"""

from __future__ import annotations

from typing import Final

#: Lattice's access-log field names, with the Athena (Hive DDL) type each is read as. The order is
#: the table's.
LATTICE_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("startTime", "string"),
    ("requestMethod", "string"),
    ("requestPath", "string"),
    ("responseCode", "int"),
    ("callerPrincipal", "string"),
    ("sourceVpcArn", "string"),
    ("serviceArn", "string"),
    ("targetGroupArn", "string"),
    ("authDeniedReason", "string"),
    ("duration", "bigint"),
    ("userAgent", "string"),
)
#: What the server adds (absent, so null, in Lattice's logs).
SERVER_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("operation", "string"),
    ("walletId", "string"),
    ("targetWalletId", "string"),
    ("transactionId", "string"),
    ("replayed", "boolean"),
    ("refusal", "string"),
    ("sessionName", "string"),
    # the owner of the addressed wallet, when the caller acted on a wallet not its own (a role
    # granted ``operation:any``) or was refused for it (issue 44)
    ("walletOwner", "string"),
)
AUDIT_COLUMNS: Final = LATTICE_COLUMNS + SERVER_COLUMNS

#: How long the access logs are kept: S3 lifecycle and CloudWatch Logs retention. Seven years is
#: what payment record-keeping rules commonly ask of transaction records (the ledger itself is
#: kept for good in the lake); an operator may shorten it, never to less than the ledger's audits.
ACCESS_LOG_RETENTION_DAYS: Final = 7 * 365 + 2
#: Where the access logs land in the lake bucket (S3 destination of the Lattice subscription).
ACCESS_LOG_PREFIX: Final = "access-logs/lattice"
#: The Glue / local table name analysts query.
AUDIT_TABLE: Final = "api_access_log"
