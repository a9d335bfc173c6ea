"""The one place where walletlake reads its configuration.

Every other module receives a :class:`Settings` instance; nothing deep inside the code reads
``os.environ``. Each ``WALLETLAKE_*`` variable is one row of :data:`VARIABLES`: the field it sets,
what a valid value is and what it means. :meth:`Settings.from_env` reads the rows,
:func:`environment_for` and :meth:`Settings.to_env` write them (the CDK app builds its functions'
environments there) and :data:`ENVIRONMENT_VARIABLES` documents them, so a name cannot drift
between the code, the deployment and ``--help``.

A Lambda handler module reads its settings once, through :class:`HandlerSettings`: on Lambda at
cold start, requiring every variable its deployment sets, so a function deployed without one fails
its init phase with one line naming the variable instead of running on a default.

The AWS SDK's own variables (``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL_*``) are left to the SDK,
which honours them exactly as it would on AWS; we only look at them to pick the query engine's
default.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from typing import Any, Final

from contracts.setting_values import (
    COMPACTION_UNIT_MINUTES_CHOICES,
    DEFAULT_AUDIT_TAG_RETENTION_DAYS,
    DEFAULT_BIND_HOST,
    DEFAULT_COMMIT_INTERVAL_SECONDS,
    DEFAULT_COMPACTION_UNIT_MINUTES,
    DEFAULT_DRAIN_SECONDS,
    DEFAULT_HOT_TTL_SECONDS,
    DEFAULT_IDEMPOTENCY_WINDOW_SECONDS,
    DEFAULT_KEEP_ALIVE_SECONDS,
    DEFAULT_LAKE_FORMAT,
    DEFAULT_MAX_REQUESTS_IN_FLIGHT,
    DEFAULT_METRICS_INTERVAL_SECONDS,
    DEFAULT_PRINCIPAL,
    DEFAULT_SNAPSHOT_SEGMENTS,
    DEFAULT_TRUST_FRONT,
    DEFAULT_UNLOAD_PREFIX,
    DEFAULT_WRITES_IN_FLIGHT,
    KEY_PREFIX_TEXT,
    MAX_SNAPSHOT_SEGMENTS,
    MIN_DRAIN_SECONDS,
    LakeFormat,
    QueryEngine,
    SettingsError,
    TrustFront,
    Variable,
    host_or_address,
    http_url,
    integer_in,
    key_prefix,
    on_off,
    one_of,
    positive_number,
    principal_name,
)

TABLE_VARIABLE: Final = "WALLETLAKE_TABLE"
BUCKET_VARIABLE: Final = "WALLETLAKE_BUCKET"
LAKE_PREFIX_VARIABLE: Final = "WALLETLAKE_LAKE_PREFIX"
GLUE_DATABASE_VARIABLE: Final = "WALLETLAKE_GLUE_DATABASE"
ATHENA_WORKGROUP_VARIABLE: Final = "WALLETLAKE_ATHENA_WORKGROUP"
QUERY_ENGINE_VARIABLE: Final = "WALLETLAKE_QUERY_ENGINE"
HOT_TTL_SECONDS_VARIABLE: Final = "WALLETLAKE_HOT_TTL_SECONDS"
IDEMPOTENCY_WINDOW_SECONDS_VARIABLE: Final = "WALLETLAKE_IDEMPOTENCY_WINDOW_SECONDS"
IDEMPOTENCY_TABLE_VARIABLE: Final = "WALLETLAKE_IDEMPOTENCY_TABLE"
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

#: What ``walletlake serve`` honours beyond the table: each is also a flag of the command, whose
#: default is the variable; the container's task definition sets them.
SERVER_VARIABLES: Final = (
    BIND_HOST_VARIABLE,
    DRAIN_SECONDS_VARIABLE,
    KEEP_ALIVE_SECONDS_VARIABLE,
    MAX_REQUESTS_IN_FLIGHT_VARIABLE,
    METRICS_INTERVAL_SECONDS_VARIABLE,
)

#: What the CDK app gives every function and the API tasks (``settings_environment``): the
#: resources it names, the query engine and the TTL. Each handler module requires these and its own
#: knobs. The idempotency table is here because the write path (API tasks and API function) writes
#: a record in every transaction and ``settings_environment`` is what their environment is made of.
DEPLOYED_VARIABLES: Final = (
    TABLE_VARIABLE,
    IDEMPOTENCY_TABLE_VARIABLE,
    BUCKET_VARIABLE,
    LAKE_PREFIX_VARIABLE,
    GLUE_DATABASE_VARIABLE,
    ATHENA_WORKGROUP_VARIABLE,
    QUERY_ENGINE_VARIABLE,
    HOT_TTL_SECONDS_VARIABLE,
)

#: Lambda sets it in every function's environment, from the init phase on.
LAMBDA_FUNCTION_VARIABLE: Final = "AWS_LAMBDA_FUNCTION_NAME"

_S3_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """Names of the resources walletlake talks to and the knobs it honours.

    Attributes
    ----------
    region:
        AWS region; the SDK's ``AWS_DEFAULT_REGION`` (``us-east-1`` when unset, so local runs work).
    table:
        The DynamoDB table holding wallets, user claims and hot transactions.
    bucket, lake_prefix:
        Where the lake lives: ``s3://{bucket}/{lake_prefix}/{table}/dt=YYYY-MM-DD/``.
    glue_database:
        Glue database holding one table per lake table (Athena reads through it).
    athena_workgroup:
        Workgroup the Athena engine runs in; it owns the result location and the scan cutoff.
    query_engine:
        ``duckdb`` (embedded stack) or ``athena`` (AWS).
    hot_ttl_seconds:
        Lifetime of transaction items in DynamoDB (the hot window of the ledger).
    idempotency_window_seconds:
        How long a nonce is remembered, by its idempotency record: at least ``hot_ttl_seconds``.
    idempotency_table:
        The DynamoDB table of idempotency records (:mod:`contracts.idempotency_table`): one per
        request, written in the movement's transaction, kept ``idempotency_window_seconds``.
    checkpoint_table:
        DynamoDB table of the local stream consumer's per-shard checkpoints.
    lease_table:
        DynamoDB table of the compaction lease the hourly and nightly runs take
        (:mod:`lake.compaction_lease`), so that they never compact at the same time.
    writes_in_flight:
        TransactWriteItems one API process keeps in flight at once; requests arriving while all
        are busy leave together in the next one (group commit, :mod:`wallet.commit_queue`).
    compaction_unit_minutes:
        Minutes of landing data one compaction unit merges (:mod:`lake.compaction_units`); the
        deployment picks it for its load.
    snapshot_segments, snapshot_read_units_per_second:
        Parallel-scan segments of the AWS nightly snapshot and the read pace they share (None:
        unpaced).
    unload_prefix:
        Key prefix in the lake bucket under which the AWS reconciliation's Athena ``UNLOAD``
        statements write their results.
    bind_host:
        Address ``walletlake serve`` listens on (``0.0.0.0`` in a container).
    drain_seconds:
        Seconds from SIGTERM to exit for ``walletlake serve``: it stops accepting, answers every
        request in flight and commits every group in its queue within them (shorter than the load
        balancer's deregistration delay).
    keep_alive_seconds:
        Seconds an idle HTTP keep-alive connection stays open (longer than the load balancer's
        idle timeout).
    max_requests_in_flight:
        Requests one API process serves at once; beyond them it answers 429 with ``Retry-After``
        at once, without calling DynamoDB (admission control, :mod:`wallet.admission`).
    lake_format:
        ``iceberg`` or ``parquet``: how the stream's tables are kept (:data:`LakeFormat`).
    iceberg_catalog_uri, iceberg_warehouse:
        The Iceberg REST catalog and its warehouse: on AWS Glue's endpoint
        (``https://glue.{region}.amazonaws.com/iceberg``, the default) and the account id; on the
        embedded stack SeaweedFS's catalog and its table bucket's name.
    commit_interval_seconds:
        Seconds between two commits of the Iceberg committer.
    audit_tag_retention_days:
        How long a night's tags keep the snapshots it read: their max-ref-age, applied by the
        committer's expiry (:mod:`lake.snapshot_expiry`) to every tag walletlake made.
    metrics_interval_seconds:
        Seconds between the CloudWatch embedded-metric-format lines each API process prints on
        stdout (:mod:`wallet.emf`), and once more at shutdown; 0 prints none.
    trust_front, default_principal:
        Who a movement is attributed to (``initiated_by``): the principal the front verified, from
        its identity headers only when ``trust_front`` names that front; otherwise
        ``default_principal`` (:mod:`wallet.principals`).
    admin_routes:
        Whether the API serves ``/docs``, ``/redoc``, ``/openapi.json`` and ``/metrics``; the
        deployed tasks turn them off (their counters go to CloudWatch as EMF lines instead).
    """

    region: str = "us-east-1"
    table: str = "wallets"
    bucket: str = "walletlake-lake"
    lake_prefix: str = "lake"
    glue_database: str = "walletlake"
    athena_workgroup: str = "walletlake"
    query_engine: QueryEngine = "athena"
    hot_ttl_seconds: int = DEFAULT_HOT_TTL_SECONDS
    checkpoint_table: str = "walletlake-checkpoints"
    lease_table: str = "walletlake-leases"
    idempotency_window_seconds: int = DEFAULT_IDEMPOTENCY_WINDOW_SECONDS
    idempotency_table: str = "walletlake-idempotency"
    writes_in_flight: int = DEFAULT_WRITES_IN_FLIGHT
    compaction_unit_minutes: int = DEFAULT_COMPACTION_UNIT_MINUTES
    snapshot_segments: int = DEFAULT_SNAPSHOT_SEGMENTS
    snapshot_read_units_per_second: float | None = None
    unload_prefix: str = DEFAULT_UNLOAD_PREFIX
    bind_host: str = DEFAULT_BIND_HOST
    drain_seconds: int = DEFAULT_DRAIN_SECONDS
    keep_alive_seconds: int = DEFAULT_KEEP_ALIVE_SECONDS
    max_requests_in_flight: int = DEFAULT_MAX_REQUESTS_IN_FLIGHT
    metrics_interval_seconds: int = DEFAULT_METRICS_INTERVAL_SECONDS
    lake_format: LakeFormat = DEFAULT_LAKE_FORMAT
    iceberg_catalog_uri: str | None = None
    iceberg_warehouse: str = "walletlake-tables"
    commit_interval_seconds: int = DEFAULT_COMMIT_INTERVAL_SECONDS
    audit_tag_retention_days: int = DEFAULT_AUDIT_TAG_RETENTION_DAYS
    trust_front: TrustFront = DEFAULT_TRUST_FRONT
    default_principal: str = DEFAULT_PRINCIPAL
    admin_routes: bool = True

    @property
    def catalog_uri(self) -> str:
        """The Iceberg REST catalog: the configured one, else Glue's Iceberg endpoint in the region."""
        return self.iceberg_catalog_uri or f"https://glue.{self.region}.amazonaws.com/iceberg"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, require: Iterable[str] = ()) -> Settings:
        """Build settings from ``WALLETLAKE_*`` variables, with the defaults of docs/architecture.md.

        An unset or empty variable means the field's default, unless it is named in ``require``.

        Raises
        ------
        SettingsError
            One line naming every required variable that is not set, or the first variable whose
            value is unusable, with that value.

        Examples
        --------
        >>> Settings.from_env({"WALLETLAKE_TABLE": "t", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:5000"}).table
        't'
        >>> Settings.from_env({}, require=["WALLETLAKE_TABLE"])
        Traceback (most recent call last):
        ...
        contracts.settings.SettingsError: WALLETLAKE_TABLE is required but not set
        """
        env = os.environ if environ is None else environ
        required = [_variable_named(name).name for name in require]
        missing = [name for name in required if not env.get(name)]
        if missing:
            verb = "is" if len(missing) == 1 else "are"
            raise SettingsError(f"{', '.join(missing)} {verb} required but not set")
        values: dict[str, Any] = {}
        for variable in VARIABLES:
            text = env.get(variable.name)
            if text:
                values[variable.field] = variable.read(text)
        if "query_engine" not in values:
            has_local_s3 = any(env.get(name) for name in _S3_ENDPOINT_VARIABLES)
            values["query_engine"] = "duckdb" if has_local_s3 else "athena"
        region = env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION")
        if region:
            values["region"] = region
        settings = cls(**values)
        settings.check_idempotency_window()
        return settings

    def check_idempotency_window(self) -> None:
        """Refuse a nonce window shorter than the hot TTL (one line, naming both variables).

        A nonce forgotten while its hot transaction item still exists would be judged by that item
        again (a replay or a 409) until TTL deleted it: its fate would depend on when TTL ran.
        """
        if self.idempotency_window_seconds < self.hot_ttl_seconds:
            raise SettingsError(
                f"{IDEMPOTENCY_WINDOW_SECONDS_VARIABLE} ({self.idempotency_window_seconds}) must be at "
                f"least {HOT_TTL_SECONDS_VARIABLE} ({self.hot_ttl_seconds}): a nonce must outlive its "
                "hot transaction item"
            )

    def to_env(self, names: Iterable[str] | None = None) -> dict[str, str]:
        """The variables that make :meth:`from_env` read back these settings (only ``names``, if given).

        A field that is None (an unpaced snapshot) has no variable: unset reads back as None.

        Examples
        --------
        >>> Settings(table="t").to_env(["WALLETLAKE_TABLE", "WALLETLAKE_HOT_TTL_SECONDS"])
        {'WALLETLAKE_TABLE': 't', 'WALLETLAKE_HOT_TTL_SECONDS': '28800'}
        """
        chosen = VARIABLES if names is None else [_variable_named(name) for name in names]
        return environment_for(**{variable.field: getattr(self, variable.field) for variable in chosen})

    def replace(self, **changes: object) -> Settings:
        """A copy with some fields changed (tests and the demo use their own table and bucket)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


class HandlerSettings:
    """The settings of one module of Lambda handlers: read once, and on Lambda at cold start.

    On Lambda (:data:`LAMBDA_FUNCTION_VARIABLE` is set from the init phase on) they are read while
    the module is imported, so a function deployed without a variable it needs, or with one it
    cannot use, fails its init phase with one line naming the variable, before it takes an event.
    Imported anywhere else (the command line reuses the modules' pure functions; tests import
    them before they set variables) they are read, with the same requirements, at the first call.

    Examples
    --------
    >>> settings = HandlerSettings([TABLE_VARIABLE], {"WALLETLAKE_TABLE": "t"})
    >>> settings().table
    't'
    """

    def __init__(self, required: Iterable[str], environ: Mapping[str, str] | None = None) -> None:
        self.required = tuple(required)
        self._environ = environ
        env = os.environ if environ is None else environ
        self._settings = (
            Settings.from_env(env, require=self.required) if env.get(LAMBDA_FUNCTION_VARIABLE) else None
        )

    def __call__(self) -> Settings:
        """The settings, read from the environment on the first call if not at import."""
        if self._settings is None:
            self._settings = Settings.from_env(self._environ, require=self.required)
        return self._settings


#: Every ``WALLETLAKE_*`` variable, in the order ``--help`` and the README list them.
VARIABLES: Final[tuple[Variable, ...]] = (
    Variable(TABLE_VARIABLE, "table", "a table name", "the DynamoDB table (default wallets)"),
    Variable(BUCKET_VARIABLE, "bucket", "a bucket name", "the lake bucket (default walletlake-lake)"),
    Variable(
        LAKE_PREFIX_VARIABLE,
        "lake_prefix",
        KEY_PREFIX_TEXT,
        "key prefix of the lake inside the bucket (default lake)",
        key_prefix,
    ),
    Variable(
        GLUE_DATABASE_VARIABLE,
        "glue_database",
        "a database name",
        "Glue database holding the lake tables (default walletlake)",
    ),
    Variable(
        ATHENA_WORKGROUP_VARIABLE,
        "athena_workgroup",
        "a workgroup name",
        "Athena workgroup for the AWS engine (default walletlake)",
    ),
    Variable(
        QUERY_ENGINE_VARIABLE,
        "query_engine",
        "duckdb or athena",
        "duckdb or athena (default duckdb when an S3 endpoint variable is set)",
        one_of(("duckdb", "athena")),
    ),
    Variable(
        HOT_TTL_SECONDS_VARIABLE,
        "hot_ttl_seconds",
        "a positive integer",
        f"lifetime of transaction items in DynamoDB (default {DEFAULT_HOT_TTL_SECONDS})",
        integer_in(1),
    ),
    Variable(
        IDEMPOTENCY_WINDOW_SECONDS_VARIABLE,
        "idempotency_window_seconds",
        "a positive integer",
        "seconds a nonce is remembered: the same request replays its first outcome, another body is "
        f"409; at least the hot TTL (default {DEFAULT_IDEMPOTENCY_WINDOW_SECONDS})",
        integer_in(1),
    ),
    Variable(
        IDEMPOTENCY_TABLE_VARIABLE,
        "idempotency_table",
        "a table name",
        "DynamoDB table of idempotency records, one per request for the idempotency window "
        "(default walletlake-idempotency)",
    ),
    Variable(
        CHECKPOINT_TABLE_VARIABLE,
        "checkpoint_table",
        "a table name",
        "DynamoDB table of the local consumer's checkpoints",
    ),
    Variable(
        LEASE_TABLE_VARIABLE,
        "lease_table",
        "a table name",
        "DynamoDB table of the compaction lease (default walletlake-leases)",
    ),
    Variable(
        WRITES_IN_FLIGHT_VARIABLE,
        "writes_in_flight",
        "an integer in 1..1000",
        "transactions one API process keeps in flight; the rest group-commit "
        f"(default {DEFAULT_WRITES_IN_FLIGHT})",
        integer_in(1, 1000),
    ),
    Variable(
        COMPACTION_UNIT_MINUTES_VARIABLE,
        "compaction_unit_minutes",
        f"one of {', '.join(map(str, COMPACTION_UNIT_MINUTES_CHOICES))}",
        f"minutes of landing data one compaction unit merges (default {DEFAULT_COMPACTION_UNIT_MINUTES})",
        one_of(COMPACTION_UNIT_MINUTES_CHOICES),
    ),
    Variable(
        SNAPSHOT_SEGMENTS_VARIABLE,
        "snapshot_segments",
        f"an integer in 1..{MAX_SNAPSHOT_SEGMENTS}",
        f"parallel-scan segments of the AWS nightly snapshot (default {DEFAULT_SNAPSHOT_SEGMENTS})",
        integer_in(1, MAX_SNAPSHOT_SEGMENTS),
    ),
    Variable(
        SNAPSHOT_READ_UNITS_VARIABLE,
        "snapshot_read_units_per_second",
        "a positive number",
        "read units per second the AWS snapshot's segments share (default: unpaced)",
        positive_number,
    ),
    Variable(
        UNLOAD_PREFIX_VARIABLE,
        "unload_prefix",
        KEY_PREFIX_TEXT,
        f"where the AWS reconciliation's UNLOADs write in the bucket (default {DEFAULT_UNLOAD_PREFIX})",
        key_prefix,
    ),
    Variable(
        BIND_HOST_VARIABLE,
        "bind_host",
        "an IP address or a host name",
        f"address walletlake serve listens on (default {DEFAULT_BIND_HOST}; 0.0.0.0 in a container)",
        host_or_address,
    ),
    Variable(
        DRAIN_SECONDS_VARIABLE,
        "drain_seconds",
        f"an integer in {MIN_DRAIN_SECONDS}..3600",
        "seconds from SIGTERM to exit, every request in flight answered; shorter than the load "
        f"balancer's deregistration delay (default {DEFAULT_DRAIN_SECONDS})",
        integer_in(MIN_DRAIN_SECONDS, 3600),
    ),
    Variable(
        KEEP_ALIVE_SECONDS_VARIABLE,
        "keep_alive_seconds",
        "an integer in 1..4000",
        "seconds an idle keep-alive connection stays open; longer than the load balancer's idle "
        f"timeout (default {DEFAULT_KEEP_ALIVE_SECONDS})",
        integer_in(1, 4000),
    ),
    Variable(
        MAX_REQUESTS_IN_FLIGHT_VARIABLE,
        "max_requests_in_flight",
        "an integer in 1..100000",
        "requests one API process serves at once; beyond them it answers 429 with Retry-After "
        f"(default {DEFAULT_MAX_REQUESTS_IN_FLIGHT})",
        integer_in(1, 100_000),
    ),
    Variable(
        METRICS_INTERVAL_SECONDS_VARIABLE,
        "metrics_interval_seconds",
        "an integer in 0..3600",
        "seconds between an API process's CloudWatch embedded-metric-format lines on stdout; "
        f"0 prints none (default {DEFAULT_METRICS_INTERVAL_SECONDS})",
        integer_in(0, 3600),
    ),
    Variable(
        LAKE_FORMAT_VARIABLE,
        "lake_format",
        "iceberg or parquet",
        f"how the stream's tables are kept: Iceberg tables or plain Parquet (default {DEFAULT_LAKE_FORMAT})",
        one_of(("parquet", "iceberg")),
    ),
    Variable(
        ICEBERG_CATALOG_URI_VARIABLE,
        "iceberg_catalog_uri",
        "an http(s) URL",
        "the Iceberg REST catalog (default: Glue's Iceberg endpoint in the region)",
        http_url,
    ),
    Variable(
        ICEBERG_WAREHOUSE_VARIABLE,
        "iceberg_warehouse",
        "a warehouse name",
        "the Iceberg catalog's warehouse: the account id on AWS, the table bucket locally "
        "(default walletlake-tables)",
    ),
    Variable(
        TRUST_FRONT_VARIABLE,
        "trust_front",
        "none, lattice or apigateway",
        "whose identity headers name a write's initiated_by: none (default: they are ignored), "
        "lattice (x-amzn-lattice-identity) or apigateway (the Lambda event's IAM identity)",
        one_of(("none", "lattice", "apigateway")),
    ),
    Variable(
        DEFAULT_PRINCIPAL_VARIABLE,
        "default_principal",
        "a principal name of 1..256 characters",
        f"the initiated_by of writes no trusted front vouches for (default {DEFAULT_PRINCIPAL})",
        principal_name,
    ),
    Variable(
        ADMIN_ROUTES_VARIABLE,
        "admin_routes",
        "on or off",
        "serve /docs, /redoc, /openapi.json and /metrics (default on; off on the deployed tasks)",
        on_off,
    ),
    Variable(
        COMMIT_INTERVAL_SECONDS_VARIABLE,
        "commit_interval_seconds",
        "an integer in 1..900",
        "seconds between two commits of the Iceberg committer, the lake's freshness bound "
        f"(default {DEFAULT_COMMIT_INTERVAL_SECONDS})",
        integer_in(1, 900),
    ),
    Variable(
        AUDIT_TAG_RETENTION_DAYS_VARIABLE,
        "audit_tag_retention_days",
        "an integer in 2..36500",
        "days a night's tags keep the lake snapshots it read, for replays and audits "
        f"(default {DEFAULT_AUDIT_TAG_RETENTION_DAYS})",
        integer_in(2, 36_500),
    ),
)

_BY_NAME: Final = {variable.name: variable for variable in VARIABLES}
_BY_FIELD: Final = {variable.field: variable for variable in VARIABLES}


def _variable_named(name: str) -> Variable:
    if name not in _BY_NAME:
        raise ValueError(f"not a walletlake variable: {name}")
    return _BY_NAME[name]


def environment_for(**values: object) -> dict[str, str]:
    """The variables that set these :class:`Settings` fields, checked as :meth:`Settings.from_env` would.

    The CDK app builds its functions' environments here, so a name or a value the code would
    refuse fails the synth, not the function's cold start. A None value sets no variable.

    Examples
    --------
    >>> environment_for(compaction_unit_minutes=5)
    {'WALLETLAKE_COMPACTION_UNIT_MINUTES': '5'}
    """
    environment: dict[str, str] = {}
    for field, value in values.items():
        if field not in _BY_FIELD:
            raise TypeError(f"no WALLETLAKE_* variable sets Settings.{field}")
        if value is None:
            continue
        variable = _BY_FIELD[field]
        text = ("on" if value else "off") if isinstance(value, bool) else str(value)
        variable.read(text)
        environment[variable.name] = text
    return environment


#: Every ``WALLETLAKE_*`` variable with its meaning, for ``--help`` texts and the README table.
ENVIRONMENT_VARIABLES: Final[dict[str, str]] = {variable.name: variable.meaning for variable in VARIABLES}
