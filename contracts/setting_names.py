"""The names, defaults and value types of walletlake's settings, shared by every module that reads them.

Kept apart from :mod:`contracts.settings` (the :class:`~contracts.settings.Settings` object) and
:mod:`contracts.setting_variables` (how each variable's text is read) so that both import the
same names without importing each other.
"""

from __future__ import annotations

from typing import Final, Literal

QueryEngine = Literal["duckdb", "athena"]

#: Eight hours: the hot window of seed 000, after which DynamoDB's TTL removes transaction items
#: and the lake becomes the only history.
DEFAULT_HOT_TTL_SECONDS = 8 * 60 * 60

#: Two days: how long a nonce is remembered (seed 000 keeps its nonces 2 days), by an idempotency
#: record of its own (``contracts.idempotency_table``), whatever became of the hot
#: transaction item. Never shorter than the hot TTL: a nonce forgotten while its transaction item is
#: still in the table would make a second request with it a replay of the first by chance alone.
DEFAULT_IDEMPOTENCY_WINDOW_SECONDS: Final = 2 * 24 * 60 * 60

#: Transactions one API process keeps in flight (``bench/hot_wallet.py`` measures the choice).
DEFAULT_WRITES_IN_FLIGHT = 2

#: Where ``walletlake serve`` listens unless told otherwise: loopback, so a laptop never exposes the
#: API by accident; the container's environment says ``0.0.0.0`` (the load balancer reaches the task).
DEFAULT_BIND_HOST: Final = "127.0.0.1"

#: Seconds from SIGTERM to exit: a load balancer's deregistration delay must be longer (ALB's default
#: is 300 s; walletlake's deployment sets 30 s), so no request is routed to a server that has left.
DEFAULT_DRAIN_SECONDS: Final = 25
#: The smallest drain bound: one second for requests, two for the commit queue and the last metrics.
MIN_DRAIN_SECONDS: Final = 3

#: Seconds an idle keep-alive connection stays open: longer than the load balancer's idle timeout
#: (ALB's default is 60 s), so the balancer, never the server, closes an idle connection and never
#: sends a request down one the server is closing.
DEFAULT_KEEP_ALIVE_SECONDS: Final = 65

#: Requests one API process serves at once before it answers 429 (admission control). At the
#: 500-700 requests/s one process serves, 128 in flight is about 200 ms of waiting.
DEFAULT_MAX_REQUESTS_IN_FLIGHT: Final = 128

#: Seconds between two embedded-metric-format lines of one API process (0: none).
DEFAULT_METRICS_INTERVAL_SECONDS: Final = 60

#: Minutes one compaction unit may span (:mod:`lake.compaction_units`): whole five-minute slots
#: that divide an hour, so units tile a day.
COMPACTION_UNIT_MINUTES_CHOICES: Final = (5, 10, 15, 20, 30, 60)
DEFAULT_COMPACTION_UNIT_MINUTES: Final = 60

#: Parallel-scan segments of the AWS nightly snapshot (:mod:`lake.snapshots`), at
#: most as many as a Distributed Map runs at once.
DEFAULT_SNAPSHOT_SEGMENTS: Final = 4
MAX_SNAPSHOT_SEGMENTS: Final = 10_000

#: How the stream's tables (ledger, wallets, quarantine) are kept: ``iceberg`` tables committed by one
#: committer (:mod:`lake.committer`), or the older plain Parquet under ``dt=`` prefixes.
LakeFormat = Literal["parquet", "iceberg"]
DEFAULT_LAKE_FORMAT: Final = "iceberg"
#: Seconds between two commits of the committer: each commit appends everything landed since the
#: last one, so this is the lake's freshness bound and one table's commit rate (one per interval).
DEFAULT_COMMIT_INTERVAL_SECONDS: Final = 30

#: Whose identity headers the API believes (:mod:`wallet.principals`): ``none`` (every write is
#: attributed to ``default_principal``; identity headers are ignored, since any client can send
#: them), ``lattice`` (VPC Lattice's ``x-amzn-lattice-identity``, on the ECS tasks only Lattice
#: reaches) or ``apigateway`` (the IAM identity API Gateway verified, in the Lambda event).
TrustFront = Literal["none", "lattice", "apigateway"]
DEFAULT_TRUST_FRONT: Final = "none"
#: Who a write is attributed to when no front vouches for its caller (a laptop, the embedded stack).
DEFAULT_PRINCIPAL: Final = "local"

#: Whether ``walletlake serve`` speaks TLS, and with which certificate (``walletlake/tls.py``): ``off``
#: (plain HTTP: a laptop, the embedded stack, the internal ALB), ``self-signed`` (a key and a certificate
#: made at start, in a private temporary folder: VPC Lattice encrypts to the task and validates no
#: target certificate) or ``files`` (``WALLETLAKE_TLS_CERT_FILE`` and ``WALLETLAKE_TLS_KEY_FILE``, e.g.
#: a certificate ACM Private CA issued, for callers that do validate).
TlsMode = Literal["off", "self-signed", "files"]
TLS_MODES: Final[tuple[TlsMode, ...]] = ("off", "self-signed", "files")
DEFAULT_TLS: Final[TlsMode] = "off"

#: Where the AWS reconciliation's UNLOADs write, under the workgroup's results prefix.
DEFAULT_UNLOAD_PREFIX: Final = "athena-results/unload/reconcile"

#: Days a night's tags keep the Iceberg snapshots it read (``night-…`` at planning,
#: ``reconciled-{day}``: replays and audits), a year and a month; at least two, so that a night's
#: run and a rerun of it keep them.
DEFAULT_AUDIT_TAG_RETENTION_DAYS: Final = 400

TABLE_VARIABLE: Final = "WALLETLAKE_TABLE"
BUCKET_VARIABLE: Final = "WALLETLAKE_BUCKET"
LAKE_PREFIX_VARIABLE: Final = "WALLETLAKE_LAKE_PREFIX"
GLUE_DATABASE_VARIABLE: Final = "WALLETLAKE_GLUE_DATABASE"
ATHENA_WORKGROUP_VARIABLE: Final = "WALLETLAKE_ATHENA_WORKGROUP"
QUERY_ENGINE_VARIABLE: Final = "WALLETLAKE_QUERY_ENGINE"
HOT_TTL_SECONDS_VARIABLE: Final = "WALLETLAKE_HOT_TTL_SECONDS"
IDEMPOTENCY_WINDOW_SECONDS_VARIABLE: Final = "WALLETLAKE_IDEMPOTENCY_WINDOW_SECONDS"
IDEMPOTENCY_TABLE_VARIABLE: Final = "WALLETLAKE_IDEMPOTENCY_TABLE"
OWNERS_TABLE_VARIABLE: Final = "WALLETLAKE_OWNERS_TABLE"
CHECKPOINT_TABLE_VARIABLE: Final = "WALLETLAKE_CHECKPOINT_TABLE"
LEASE_TABLE_VARIABLE: Final = "WALLETLAKE_LEASE_TABLE"
WRITES_IN_FLIGHT_VARIABLE: Final = "WALLETLAKE_WRITES_IN_FLIGHT"
COMPACTION_UNIT_MINUTES_VARIABLE: Final = "WALLETLAKE_COMPACTION_UNIT_MINUTES"
SNAPSHOT_SEGMENTS_VARIABLE: Final = "WALLETLAKE_SNAPSHOT_SEGMENTS"
SNAPSHOT_READ_UNITS_VARIABLE: Final = "WALLETLAKE_SNAPSHOT_READ_UNITS_PER_SECOND"
UNLOAD_PREFIX_VARIABLE: Final = "WALLETLAKE_UNLOAD_PREFIX"
BIND_HOST_VARIABLE: Final = "WALLETLAKE_BIND_HOST"
DRAIN_SECONDS_VARIABLE: Final = "WALLETLAKE_DRAIN_SECONDS"
KEEP_ALIVE_SECONDS_VARIABLE: Final = "WALLETLAKE_KEEP_ALIVE_SECONDS"
MAX_REQUESTS_IN_FLIGHT_VARIABLE: Final = "WALLETLAKE_MAX_REQUESTS_IN_FLIGHT"
METRICS_INTERVAL_SECONDS_VARIABLE: Final = "WALLETLAKE_METRICS_INTERVAL_SECONDS"
LAKE_FORMAT_VARIABLE: Final = "WALLETLAKE_LAKE_FORMAT"
ICEBERG_CATALOG_URI_VARIABLE: Final = "WALLETLAKE_ICEBERG_CATALOG_URI"
ICEBERG_WAREHOUSE_VARIABLE: Final = "WALLETLAKE_ICEBERG_WAREHOUSE"
COMMIT_INTERVAL_SECONDS_VARIABLE: Final = "WALLETLAKE_COMMIT_INTERVAL_SECONDS"
AUDIT_TAG_RETENTION_DAYS_VARIABLE: Final = "WALLETLAKE_AUDIT_TAG_RETENTION_DAYS"
TRUST_FRONT_VARIABLE: Final = "WALLETLAKE_TRUST_FRONT"
DEFAULT_PRINCIPAL_VARIABLE: Final = "WALLETLAKE_DEFAULT_PRINCIPAL"
ADMIN_ROUTES_VARIABLE: Final = "WALLETLAKE_ADMIN_ROUTES"
CALLER_PERMISSIONS_VARIABLE: Final = "WALLETLAKE_CALLER_PERMISSIONS"
LATTICE_SERVICE_ARN_VARIABLE: Final = "WALLETLAKE_LATTICE_SERVICE_ARN"
CALLER_SESSION_PATTERN_VARIABLE: Final = "WALLETLAKE_CALLER_SESSION_PATTERN"
AUDIT_LOG_VARIABLE: Final = "WALLETLAKE_AUDIT_LOG"
TLS_VARIABLE: Final = "WALLETLAKE_TLS"
TLS_CERT_FILE_VARIABLE: Final = "WALLETLAKE_TLS_CERT_FILE"
TLS_KEY_FILE_VARIABLE: Final = "WALLETLAKE_TLS_KEY_FILE"

#: What ``walletlake serve`` honours beyond the table: each is also a flag of the command, whose
#: default is the variable; the container's task definition sets them.
SERVER_VARIABLES: Final = (
    BIND_HOST_VARIABLE,
    DRAIN_SECONDS_VARIABLE,
    KEEP_ALIVE_SECONDS_VARIABLE,
    MAX_REQUESTS_IN_FLIGHT_VARIABLE,
    METRICS_INTERVAL_SECONDS_VARIABLE,
    TLS_VARIABLE,
    TLS_CERT_FILE_VARIABLE,
    TLS_KEY_FILE_VARIABLE,
)

#: What the CDK app gives every function and the API tasks (``settings_environment``): the
#: resources it names, the query engine and the TTL. Each handler module requires these and its own
#: knobs. The idempotency table is here because the write path (API tasks and API function) writes
#: a record in every transaction and ``settings_environment`` is what their environment is made of.
DEPLOYED_VARIABLES: Final = (
    TABLE_VARIABLE,
    IDEMPOTENCY_TABLE_VARIABLE,
    OWNERS_TABLE_VARIABLE,
    BUCKET_VARIABLE,
    LAKE_PREFIX_VARIABLE,
    GLUE_DATABASE_VARIABLE,
    ATHENA_WORKGROUP_VARIABLE,
    QUERY_ENGINE_VARIABLE,
    HOT_TTL_SECONDS_VARIABLE,
)

#: Lambda sets it in every function's environment, from the init phase on.
LAMBDA_FUNCTION_VARIABLE: Final = "AWS_LAMBDA_FUNCTION_NAME"

S3_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


class SettingsError(ValueError):
    """A ``WALLETLAKE_*`` variable is missing or holds a value walletlake cannot use."""
