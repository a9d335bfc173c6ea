"""The wallet API's metrics: each counter's name, and the CloudWatch metric it is published as.

The API counts (:mod:`wallet.telemetry`), publishes (:mod:`wallet.emf`) and the CDK app alarms and
graphs (``cdk/walletlake_cdk/monitoring.py``) under these names, so a counter cannot be renamed in
one and missed in another.
"""

from __future__ import annotations

from typing import Final

NAMESPACE: Final = "walletlake"
#: The dimension every API metric carries, and its value.
SERVICE_DIMENSION: Final = "service"
SERVICE: Final = "wallet-api"
UNIT: Final = "Count"

# Counter names (one spelling, used by the store, the API and the tests).
SUCCEEDED: Final = "requests_succeeded"
FAILED: Final = "requests_failed"
REPLAYS: Final = "idempotent_replays"
#: Replays answered from the process's memory of recent nonces (wallet.nonce_memory), DynamoDB
#: not called; a subset of ``idempotent_replays``.
MEMORY_REPLAYS: Final = "replays_from_memory"
CLOCK_RETRIES: Final = "dynamodb_clock_retries"
TRANSACTION_CONFLICTS: Final = "dynamodb_transaction_conflicts"
THROTTLES: Final = "dynamodb_throttles"
INTERNAL_ERRORS: Final = "dynamodb_internal_errors"
NETWORK_ERRORS: Final = "dynamodb_network_errors"
UNEXPECTED_ERRORS: Final = "dynamodb_unexpected_errors"
RETRIES: Final = "dynamodb_retries"
CONTENTION_EXHAUSTED: Final = "contention_exhausted"
#: Group commits (wallet.commit_queue): transactions that carried more than one request, the
#: requests they carried, and those DynamoDB cancelled (their requests were written again alone).
GROUP_COMMITS: Final = "group_commits"
GROUPED_REQUESTS: Final = "grouped_requests"
GROUP_SPLITS: Final = "group_splits"
#: Requests of a cancelled group refused from its reasons alone (a missing wallet, funds short
#: of the amount), answered without a write of their own.
GROUP_REFUSALS: Final = "group_refusals"
#: Requests a balance hint (wallet.balance_hints) said would be refused, written as a
#: transaction of their own so they cannot cancel a group; and hints a commit proved wrong (the
#: wallet's balance moved in another process; each costs at most one request written alone).
HINTED_SINGLES: Final = "balance_hint_singles"
HINT_MISSES: Final = "balance_hint_misses"
#: Whole-group writes again after DynamoDB cancelled a group only for ``TransactionConflict``
#: (another process's transaction on one of its wallets), instead of splitting it.
GROUP_CONFLICT_RETRIES: Final = "group_conflict_retries"
#: Refusals stored under their nonce (a repeat gets the same refusal, wallet.outcomes); outcome
#: lookups that found no record and voided the nonce (the request did not commit, and never will);
#: failures answered ``outcome_unknown`` because an earlier attempt of the request went unanswered.
DECLINES_STORED: Final = "declines_stored"
OUTCOMES_VOIDED: Final = "outcomes_voided"
OUTCOMES_UNKNOWN_KEPT: Final = "outcomes_unknown_after_failure"
#: Answers by kind: 429 (any cause), 429 of admission control alone (the process had its bound of
#: requests in flight; DynamoDB was not called), and 5xx.
THROTTLED: Final = "requests_throttled"
SHED: Final = "requests_shed"
SERVER_ERRORS: Final = "requests_server_errors"
#: Requests refused before anything was read or written (wallet.authorization): no principal a
#: trusted front vouched for (401: no identity, anonymous), or one not allowed what it asked
#: (403: another Lattice service's target, a role not named or not allowed the operation, a
#: session name that names no person). Any of either is alarmed: Lattice lets through only
#: signed callers its policy allows, so a refusal here means a path around it or a policy that
#: drifted from the server's map.
UNAUTHENTICATED: Final = "requests_unauthenticated"
FORBIDDEN: Final = "requests_forbidden"
#: Requests refused because the addressed wallet is not the caller's and its role may not act on
#: any wallet (wallet.ownership: 403 ``not_wallet_owner``, nothing written). Not alarmed: a
#: customer trying another's wallet is no front bypassed; a rise is worth a look.
NOT_OWNER: Final = "requests_not_owner"
#: Audit lines (wallet.audit) not written whole: the write failed or wrote part of the line. Every
#: answered request's line is written or counted here; any is alarmed (a request off the record).
AUDIT_LINES_LOST: Final = "audit_lines_lost"

#: Every counter, in the order ``GET /metrics`` lists them, with the CloudWatch metric it is
#: published as (namespace ``walletlake``, dimension ``service=wallet-api``, unit Count; each
#: line carries what was counted since the previous one, so a metric's Sum is the fleet's count).
PUBLISHED: Final[dict[str, str]] = {
    SUCCEEDED: "RequestsSucceeded",
    FAILED: "RequestsFailed",
    THROTTLED: "RequestsThrottled",
    SHED: "RequestsShed",
    SERVER_ERRORS: "RequestsServerErrors",
    UNAUTHENTICATED: "RequestsUnauthenticated",
    FORBIDDEN: "RequestsForbidden",
    AUDIT_LINES_LOST: "AuditLinesLost",
    NOT_OWNER: "RequestsNotOwner",
    REPLAYS: "IdempotentReplays",
    MEMORY_REPLAYS: "ReplaysFromMemory",
    CLOCK_RETRIES: "DynamoDBClockRetries",
    TRANSACTION_CONFLICTS: "DynamoDBTransactionConflicts",
    THROTTLES: "DynamoDBThrottles",
    INTERNAL_ERRORS: "DynamoDBInternalErrors",
    NETWORK_ERRORS: "DynamoDBNetworkErrors",
    UNEXPECTED_ERRORS: "DynamoDBUnexpectedErrors",
    RETRIES: "DynamoDBRetries",
    CONTENTION_EXHAUSTED: "ContentionExhausted",
    GROUP_COMMITS: "GroupCommits",
    GROUPED_REQUESTS: "GroupedRequests",
    GROUP_SPLITS: "GroupSplits",
    GROUP_REFUSALS: "GroupRefusals",
    HINTED_SINGLES: "BalanceHintSingles",
    HINT_MISSES: "BalanceHintMisses",
    GROUP_CONFLICT_RETRIES: "GroupConflictRetries",
    DECLINES_STORED: "DeclinesStored",
    OUTCOMES_VOIDED: "OutcomesVoided",
    OUTCOMES_UNKNOWN_KEPT: "OutcomesUnknownAfterFailure",
}
