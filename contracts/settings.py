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
from typing import Any

from contracts.caller_permissions import CallerPermissions
from contracts.setting_names import (
    ADMIN_ROUTES_VARIABLE,
    ATHENA_WORKGROUP_VARIABLE,
    AUDIT_LOG_VARIABLE,
    AUDIT_TAG_RETENTION_DAYS_VARIABLE,
    BIND_HOST_VARIABLE,
    BUCKET_VARIABLE,
    CALLER_PERMISSIONS_VARIABLE,
    CALLER_SESSION_PATTERN_VARIABLE,
    CHECKPOINT_TABLE_VARIABLE,
    COMMIT_INTERVAL_SECONDS_VARIABLE,
    COMPACTION_UNIT_MINUTES_CHOICES,
    COMPACTION_UNIT_MINUTES_VARIABLE,
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
    DEFAULT_PRINCIPAL_VARIABLE,
    DEFAULT_SNAPSHOT_SEGMENTS,
    DEFAULT_TLS,
    DEFAULT_TRUST_FRONT,
    DEFAULT_UNLOAD_PREFIX,
    DEFAULT_WRITES_IN_FLIGHT,
    DEPLOYED_VARIABLES,
    DRAIN_SECONDS_VARIABLE,
    GLUE_DATABASE_VARIABLE,
    HOT_TTL_SECONDS_VARIABLE,
    ICEBERG_CATALOG_URI_VARIABLE,
    ICEBERG_WAREHOUSE_VARIABLE,
    IDEMPOTENCY_TABLE_VARIABLE,
    IDEMPOTENCY_WINDOW_SECONDS_VARIABLE,
    KEEP_ALIVE_SECONDS_VARIABLE,
    LAKE_FORMAT_VARIABLE,
    LAKE_PREFIX_VARIABLE,
    LAMBDA_FUNCTION_VARIABLE,
    LATTICE_SERVICE_ARN_VARIABLE,
    LEASE_TABLE_VARIABLE,
    MAX_REQUESTS_IN_FLIGHT_VARIABLE,
    MAX_SNAPSHOT_SEGMENTS,
    METRICS_INTERVAL_SECONDS_VARIABLE,
    MIN_DRAIN_SECONDS,
    OWNERS_TABLE_VARIABLE,
    QUERY_ENGINE_VARIABLE,
    S3_ENDPOINT_VARIABLES,
    SERVER_VARIABLES,
    SNAPSHOT_READ_UNITS_VARIABLE,
    SNAPSHOT_SEGMENTS_VARIABLE,
    TABLE_VARIABLE,
    TLS_CERT_FILE_VARIABLE,
    TLS_KEY_FILE_VARIABLE,
    TLS_VARIABLE,
    TRUST_FRONT_VARIABLE,
    UNLOAD_PREFIX_VARIABLE,
    WRITES_IN_FLIGHT_VARIABLE,
    LakeFormat,
    QueryEngine,
    SettingsError,
    TlsMode,
    TrustFront,
)
from contracts.setting_variables import (
    ENVIRONMENT_VARIABLES,
    VARIABLES,
    Variable,
    environment_for,
    variable_named,
)

#: What other modules import from here (the names live in the two modules above).
__all__ = [
    "ADMIN_ROUTES_VARIABLE",
    "ATHENA_WORKGROUP_VARIABLE",
    "AUDIT_LOG_VARIABLE",
    "AUDIT_TAG_RETENTION_DAYS_VARIABLE",
    "BIND_HOST_VARIABLE",
    "BUCKET_VARIABLE",
    "CALLER_PERMISSIONS_VARIABLE",
    "CALLER_SESSION_PATTERN_VARIABLE",
    "CHECKPOINT_TABLE_VARIABLE",
    "COMMIT_INTERVAL_SECONDS_VARIABLE",
    "COMPACTION_UNIT_MINUTES_CHOICES",
    "COMPACTION_UNIT_MINUTES_VARIABLE",
    "DEFAULT_AUDIT_TAG_RETENTION_DAYS",
    "DEFAULT_BIND_HOST",
    "DEFAULT_COMMIT_INTERVAL_SECONDS",
    "DEFAULT_COMPACTION_UNIT_MINUTES",
    "DEFAULT_DRAIN_SECONDS",
    "DEFAULT_HOT_TTL_SECONDS",
    "DEFAULT_IDEMPOTENCY_WINDOW_SECONDS",
    "DEFAULT_KEEP_ALIVE_SECONDS",
    "DEFAULT_LAKE_FORMAT",
    "DEFAULT_MAX_REQUESTS_IN_FLIGHT",
    "DEFAULT_METRICS_INTERVAL_SECONDS",
    "DEFAULT_PRINCIPAL",
    "DEFAULT_PRINCIPAL_VARIABLE",
    "DEFAULT_SNAPSHOT_SEGMENTS",
    "DEFAULT_TLS",
    "DEFAULT_TRUST_FRONT",
    "DEFAULT_UNLOAD_PREFIX",
    "DEFAULT_WRITES_IN_FLIGHT",
    "DEPLOYED_VARIABLES",
    "DRAIN_SECONDS_VARIABLE",
    "ENVIRONMENT_VARIABLES",
    "GLUE_DATABASE_VARIABLE",
    "HOT_TTL_SECONDS_VARIABLE",
    "ICEBERG_CATALOG_URI_VARIABLE",
    "ICEBERG_WAREHOUSE_VARIABLE",
    "IDEMPOTENCY_TABLE_VARIABLE",
    "IDEMPOTENCY_WINDOW_SECONDS_VARIABLE",
    "KEEP_ALIVE_SECONDS_VARIABLE",
    "LAKE_FORMAT_VARIABLE",
    "LAKE_PREFIX_VARIABLE",
    "LAMBDA_FUNCTION_VARIABLE",
    "LATTICE_SERVICE_ARN_VARIABLE",
    "LEASE_TABLE_VARIABLE",
    "MAX_REQUESTS_IN_FLIGHT_VARIABLE",
    "MAX_SNAPSHOT_SEGMENTS",
    "METRICS_INTERVAL_SECONDS_VARIABLE",
    "MIN_DRAIN_SECONDS",
    "OWNERS_TABLE_VARIABLE",
    "QUERY_ENGINE_VARIABLE",
    "S3_ENDPOINT_VARIABLES",
    "SERVER_VARIABLES",
    "SNAPSHOT_READ_UNITS_VARIABLE",
    "SNAPSHOT_SEGMENTS_VARIABLE",
    "TABLE_VARIABLE",
    "TLS_CERT_FILE_VARIABLE",
    "TLS_KEY_FILE_VARIABLE",
    "TLS_VARIABLE",
    "TRUST_FRONT_VARIABLE",
    "UNLOAD_PREFIX_VARIABLE",
    "VARIABLES",
    "WRITES_IN_FLIGHT_VARIABLE",
    "HandlerSettings",
    "LakeFormat",
    "QueryEngine",
    "Settings",
    "SettingsError",
    "TlsMode",
    "TrustFront",
    "Variable",
    "environment_for",
    "variable_named",
]


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
    owners_table:
        The DynamoDB table of which wallets each person owns (:mod:`contracts.owners_table`),
        written in each wallet's creation transaction; ``GET …/wallets/me/`` reads it.
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
    caller_permissions, lattice_service_arn, caller_session_pattern:
        Who a trusted front may vouch for and for what (:mod:`wallet.authorization`): the roles
        and their operations (:mod:`contracts.caller_permissions`), the one Lattice service whose
        requests are served, and the session names a role's session must have so that a movement
        names a person. None: not checked.
    audit_log:
        ``stdout`` or a file the API writes its audit lines to (:mod:`contracts.audit_log`);
        None: none.
    tls, tls_cert_file, tls_key_file:
        Whether ``walletlake serve`` speaks HTTPS and with which certificate (:data:`TlsMode`,
        ``walletlake/tls.py``): behind VPC Lattice the caller's identity header crosses the VPC to
        the task, so the deployment turns it on there; the two files only with ``files``.
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
    owners_table: str = "walletlake-owners"
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
    caller_permissions: CallerPermissions | None = None
    lattice_service_arn: str | None = None
    caller_session_pattern: str | None = None
    audit_log: str | None = None
    tls: TlsMode = DEFAULT_TLS
    tls_cert_file: str | None = None
    tls_key_file: str | None = None

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
        contracts.setting_names.SettingsError: WALLETLAKE_TABLE is required but not set
        """
        env = os.environ if environ is None else environ
        required = [variable_named(name).name for name in require]
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
            has_local_s3 = any(env.get(name) for name in S3_ENDPOINT_VARIABLES)
            values["query_engine"] = "duckdb" if has_local_s3 else "athena"
        region = env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION")
        if region:
            values["region"] = region
        settings = cls(**values)
        settings.check_idempotency_window()
        settings.check_tls()
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

    def check_tls(self) -> None:
        """Refuse certificate files without ``tls=files``, or ``files`` without both (one line).

        A path given while the server makes its own certificate would be silently unused: the
        operator who mounted a CA-issued certificate would believe it served.
        """
        files = {TLS_CERT_FILE_VARIABLE: self.tls_cert_file, TLS_KEY_FILE_VARIABLE: self.tls_key_file}
        if self.tls == "files":
            missing = [name for name, path in files.items() if path is None]
            if missing:
                raise SettingsError(f"{TLS_VARIABLE}=files needs {' and '.join(missing)}")
        elif any(path is not None for path in files.values()):
            given = " and ".join(name for name, path in files.items() if path is not None)
            raise SettingsError(f"{given} is read only with {TLS_VARIABLE}=files, not {self.tls}")

    def to_env(self, names: Iterable[str] | None = None) -> dict[str, str]:
        """The variables that make :meth:`from_env` read back these settings (only ``names``, if given).

        A field that is None (an unpaced snapshot) has no variable: unset reads back as None.

        Examples
        --------
        >>> Settings(table="t").to_env(["WALLETLAKE_TABLE", "WALLETLAKE_HOT_TTL_SECONDS"])
        {'WALLETLAKE_TABLE': 't', 'WALLETLAKE_HOT_TTL_SECONDS': '28800'}
        """
        chosen = VARIABLES if names is None else [variable_named(name) for name in names]
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
