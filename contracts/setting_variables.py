"""How each ``WALLETLAKE_*`` variable is read and written: one :class:`Variable` row per setting.

:meth:`contracts.settings.Settings.from_env` reads the rows, :func:`environment_for` writes them
(the CDK app builds its functions' environments there) and :data:`ENVIRONMENT_VARIABLES`
documents them, so a name cannot drift between the code, the deployment and ``--help``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import re
from collections.abc import Callable, Iterable
from typing import Final

from contracts.caller_permissions import CallerPermissions, CallerPermissionsError
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
    DEFAULT_UNLOAD_PREFIX,
    DEFAULT_WRITES_IN_FLIGHT,
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
    LATTICE_SERVICE_ARN_VARIABLE,
    LEASE_TABLE_VARIABLE,
    MAX_REQUESTS_IN_FLIGHT_VARIABLE,
    MAX_SNAPSHOT_SEGMENTS,
    METRICS_INTERVAL_SECONDS_VARIABLE,
    MIN_DRAIN_SECONDS,
    OWNERS_TABLE_VARIABLE,
    QUERY_ENGINE_VARIABLE,
    SNAPSHOT_READ_UNITS_VARIABLE,
    SNAPSHOT_SEGMENTS_VARIABLE,
    TABLE_VARIABLE,
    TLS_CERT_FILE_VARIABLE,
    TLS_KEY_FILE_VARIABLE,
    TLS_MODES,
    TLS_VARIABLE,
    TRUST_FRONT_VARIABLE,
    UNLOAD_PREFIX_VARIABLE,
    WRITES_IN_FLIGHT_VARIABLE,
    SettingsError,
)


@dataclasses.dataclass(frozen=True, slots=True)
class Variable:
    """One ``WALLETLAKE_*`` variable: the :class:`Settings` field it sets and how its text is read.

    Attributes
    ----------
    name:
        The variable.
    field:
        The :class:`Settings` field it sets.
    expects:
        What a usable value is, for the error (``"an integer in 1..1000"``).
    meaning:
        One line for ``--help`` and the README, with the default.
    parse:
        Text (never empty) to the field's value; raises :class:`ValueError` when it is not
        ``expects``.
    """

    name: str
    field: str
    expects: str
    meaning: str
    parse: Callable[[str], object] = str

    def read(self, text: str) -> object:
        """The field's value for ``text``, or :class:`SettingsError` naming the variable and the text."""
        try:
            return self.parse(text)
        except ValueError:
            # repr() keeps the message on one line whatever the value holds
            raise SettingsError(f"{self.name} must be {self.expects}, not {text!r}") from None


def _integer(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text) if text.isascii() and text.isdigit() else low - 1
        if value < low or (high is not None and value > high):
            raise ValueError(text)
        return value

    return parse


def _one_of(choices: Iterable[object]) -> Callable[[str], object]:
    by_text = {str(choice): choice for choice in choices}

    def parse(text: str) -> object:
        if text not in by_text:
            raise ValueError(text)
        return by_text[text]

    return parse


def _positive_number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(text)
    return value


def _key_prefix(text: str) -> str:
    """A key prefix inside the bucket, without its surrounding slashes."""
    prefix = text.strip("/")
    if not prefix or "://" in prefix or any(character.isspace() for character in prefix):
        raise ValueError(text)
    return prefix


def _url(text: str) -> str:
    if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", text):
        raise ValueError(text)
    return text.rstrip("/")


_KEY_PREFIX = "a key prefix inside the bucket (no s3://, no spaces)"

_HOST_LABEL: Final = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME: Final = re.compile(rf"{_HOST_LABEL}(\.{_HOST_LABEL})*")


def _principal(text: str) -> str:
    if len(text) > 256 or not text.isprintable():
        raise ValueError(text)
    return text


def _caller_permissions(text: str) -> CallerPermissions:
    try:
        return CallerPermissions.parse(text)
    except CallerPermissionsError as error:
        raise ValueError(str(error)) from error


def _lattice_service_arn(text: str) -> str:
    if not re.fullmatch(r"arn:aws[\w-]*:vpc-lattice:[a-z0-9-]+:\d{12}:service/svc-[0-9a-z]{17}", text):
        raise ValueError(text)
    return text


def _session_pattern(text: str) -> str:
    re.compile(text)  # re.error is a ValueError
    return text


def _audit_destination(text: str) -> str:
    if text != "stdout" and (not text.startswith("/") or any(c.isspace() for c in text)):
        raise ValueError(text)
    return text


def _absolute_file(text: str) -> str:
    """An absolute path to a file (a task's mounted secret, a certificate written at start)."""
    if not text.startswith("/") or text.endswith("/") or any(c.isspace() for c in text):
        raise ValueError(text)
    return text


def _switch(text: str) -> bool:
    if text not in ("on", "off"):
        raise ValueError(text)
    return text == "on"


def _host(text: str) -> str:
    """An IP address (``0.0.0.0``, ``::``) or a host name to listen on."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        if len(text) > 253 or not _HOSTNAME.fullmatch(text):
            raise
        return text


#: Every ``WALLETLAKE_*`` variable, in the order ``--help`` and the README list them.
VARIABLES: Final[tuple[Variable, ...]] = (
    Variable(TABLE_VARIABLE, "table", "a table name", "the DynamoDB table (default wallets)"),
    Variable(BUCKET_VARIABLE, "bucket", "a bucket name", "the lake bucket (default walletlake-lake)"),
    Variable(
        LAKE_PREFIX_VARIABLE,
        "lake_prefix",
        _KEY_PREFIX,
        "key prefix of the lake inside the bucket (default lake)",
        _key_prefix,
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
        _one_of(("duckdb", "athena")),
    ),
    Variable(
        HOT_TTL_SECONDS_VARIABLE,
        "hot_ttl_seconds",
        "a positive integer",
        f"lifetime of transaction items in DynamoDB (default {DEFAULT_HOT_TTL_SECONDS})",
        _integer(1),
    ),
    Variable(
        IDEMPOTENCY_WINDOW_SECONDS_VARIABLE,
        "idempotency_window_seconds",
        "a positive integer",
        "seconds a nonce is remembered: the same request replays its first outcome, another body is "
        f"409; at least the hot TTL (default {DEFAULT_IDEMPOTENCY_WINDOW_SECONDS})",
        _integer(1),
    ),
    Variable(
        IDEMPOTENCY_TABLE_VARIABLE,
        "idempotency_table",
        "a table name",
        "DynamoDB table of idempotency records, one per request for the idempotency window "
        "(default walletlake-idempotency)",
    ),
    Variable(
        OWNERS_TABLE_VARIABLE,
        "owners_table",
        "a table name",
        "DynamoDB table of which wallets each person owns, written with each wallet "
        "(default walletlake-owners)",
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
        _integer(1, 1000),
    ),
    Variable(
        COMPACTION_UNIT_MINUTES_VARIABLE,
        "compaction_unit_minutes",
        f"one of {', '.join(map(str, COMPACTION_UNIT_MINUTES_CHOICES))}",
        f"minutes of landing data one compaction unit merges (default {DEFAULT_COMPACTION_UNIT_MINUTES})",
        _one_of(COMPACTION_UNIT_MINUTES_CHOICES),
    ),
    Variable(
        SNAPSHOT_SEGMENTS_VARIABLE,
        "snapshot_segments",
        f"an integer in 1..{MAX_SNAPSHOT_SEGMENTS}",
        f"parallel-scan segments of the AWS nightly snapshot (default {DEFAULT_SNAPSHOT_SEGMENTS})",
        _integer(1, MAX_SNAPSHOT_SEGMENTS),
    ),
    Variable(
        SNAPSHOT_READ_UNITS_VARIABLE,
        "snapshot_read_units_per_second",
        "a positive number",
        "read units per second the AWS snapshot's segments share (default: unpaced)",
        _positive_number,
    ),
    Variable(
        UNLOAD_PREFIX_VARIABLE,
        "unload_prefix",
        _KEY_PREFIX,
        f"where the AWS reconciliation's UNLOADs write in the bucket (default {DEFAULT_UNLOAD_PREFIX})",
        _key_prefix,
    ),
    Variable(
        BIND_HOST_VARIABLE,
        "bind_host",
        "an IP address or a host name",
        f"address walletlake serve listens on (default {DEFAULT_BIND_HOST}; 0.0.0.0 in a container)",
        _host,
    ),
    Variable(
        DRAIN_SECONDS_VARIABLE,
        "drain_seconds",
        f"an integer in {MIN_DRAIN_SECONDS}..3600",
        "seconds from SIGTERM to exit, every request in flight answered; shorter than the load "
        f"balancer's deregistration delay (default {DEFAULT_DRAIN_SECONDS})",
        _integer(MIN_DRAIN_SECONDS, 3600),
    ),
    Variable(
        KEEP_ALIVE_SECONDS_VARIABLE,
        "keep_alive_seconds",
        "an integer in 1..4000",
        "seconds an idle keep-alive connection stays open; longer than the load balancer's idle "
        f"timeout (default {DEFAULT_KEEP_ALIVE_SECONDS})",
        _integer(1, 4000),
    ),
    Variable(
        MAX_REQUESTS_IN_FLIGHT_VARIABLE,
        "max_requests_in_flight",
        "an integer in 1..100000",
        "requests one API process serves at once; beyond them it answers 429 with Retry-After "
        f"(default {DEFAULT_MAX_REQUESTS_IN_FLIGHT})",
        _integer(1, 100_000),
    ),
    Variable(
        METRICS_INTERVAL_SECONDS_VARIABLE,
        "metrics_interval_seconds",
        "an integer in 0..3600",
        "seconds between an API process's CloudWatch embedded-metric-format lines on stdout; "
        f"0 prints none (default {DEFAULT_METRICS_INTERVAL_SECONDS})",
        _integer(0, 3600),
    ),
    Variable(
        TLS_VARIABLE,
        "tls",
        " or ".join(TLS_MODES),
        f"whether walletlake serve speaks HTTPS (default {DEFAULT_TLS}): self-signed (a key and a "
        "certificate made at start; VPC Lattice validates no target certificate) or files "
        "(WALLETLAKE_TLS_CERT_FILE and WALLETLAKE_TLS_KEY_FILE)",
        _one_of(TLS_MODES),
    ),
    Variable(
        TLS_CERT_FILE_VARIABLE,
        "tls_cert_file",
        "an absolute file path",
        "with tls=files, the server's PEM certificate chain, e.g. one ACM Private CA issued (default: none)",
        _absolute_file,
    ),
    Variable(
        TLS_KEY_FILE_VARIABLE,
        "tls_key_file",
        "an absolute file path",
        "with tls=files, the PEM private key of WALLETLAKE_TLS_CERT_FILE (default: none)",
        _absolute_file,
    ),
    Variable(
        LAKE_FORMAT_VARIABLE,
        "lake_format",
        "iceberg or parquet",
        f"how the stream's tables are kept: Iceberg tables or plain Parquet (default {DEFAULT_LAKE_FORMAT})",
        _one_of(("parquet", "iceberg")),
    ),
    Variable(
        ICEBERG_CATALOG_URI_VARIABLE,
        "iceberg_catalog_uri",
        "an http(s) URL",
        "the Iceberg REST catalog (default: Glue's Iceberg endpoint in the region)",
        _url,
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
        _one_of(("none", "lattice", "apigateway")),
    ),
    Variable(
        DEFAULT_PRINCIPAL_VARIABLE,
        "default_principal",
        "a principal name of 1..256 characters",
        f"the initiated_by of writes no trusted front vouches for (default {DEFAULT_PRINCIPAL})",
        _principal,
    ),
    Variable(
        ADMIN_ROUTES_VARIABLE,
        "admin_routes",
        "on or off",
        "serve /docs, /redoc, /openapi.json and /metrics (default on; off on the deployed tasks)",
        _switch,
    ),
    Variable(
        CALLER_PERMISSIONS_VARIABLE,
        "caller_permissions",
        "role-arn[=operation+operation],... (operations: create_wallet, deposit, transfer, read)",
        "the roles a trusted front may vouch for and what each may do; others are refused 403 "
        "(default: every verified caller may do everything)",
        _caller_permissions,
    ),
    Variable(
        LATTICE_SERVICE_ARN_VARIABLE,
        "lattice_service_arn",
        "a VPC Lattice service ARN (arn:aws:vpc-lattice:<region>:<account>:service/svc-...)",
        "with trust_front=lattice, the only service whose requests are served "
        "(x-amzn-lattice-target); others are refused 403 (default: not checked)",
        _lattice_service_arn,
    ),
    Variable(
        CALLER_SESSION_PATTERN_VARIABLE,
        "caller_session_pattern",
        "a regular expression",
        "the session names a verified caller's role session must match in full, so that a "
        "movement names the person who acted; others are refused 403 (default: any)",
        _session_pattern,
    ),
    Variable(
        AUDIT_LOG_VARIABLE,
        "audit_log",
        "stdout or an absolute file path",
        "where the API writes one JSON audit line per request (default: none)",
        _audit_destination,
    ),
    Variable(
        COMMIT_INTERVAL_SECONDS_VARIABLE,
        "commit_interval_seconds",
        "an integer in 1..900",
        "seconds between two commits of the Iceberg committer, the lake's freshness bound "
        f"(default {DEFAULT_COMMIT_INTERVAL_SECONDS})",
        _integer(1, 900),
    ),
    Variable(
        AUDIT_TAG_RETENTION_DAYS_VARIABLE,
        "audit_tag_retention_days",
        "an integer in 2..36500",
        "days a night's tags keep the lake snapshots it read, for replays and audits "
        f"(default {DEFAULT_AUDIT_TAG_RETENTION_DAYS})",
        _integer(2, 36_500),
    ),
)

_BY_NAME: Final = {variable.name: variable for variable in VARIABLES}
_BY_FIELD: Final = {variable.field: variable for variable in VARIABLES}


def variable_named(name: str) -> Variable:
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
