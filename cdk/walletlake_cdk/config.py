"""Deployment knobs of the CDK app, read once from CDK context (``cdk deploy -c key=value``).

Resource *names* come from :class:`contracts.settings.Settings` (the same defaults the CLI and
the embedded stack use), so a deployed stack and ``walletlake`` agree without configuration.
Everything else here is a deployment choice with a default sized for the seed's load
(20,000 write requests/s) and a reason next to it.

Context values given on the command line arrive as strings, values in ``cdk.json`` keep their
JSON types; :meth:`DeploymentConfig.from_context` accepts both.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, Final, Literal

from contracts.caller_permissions import CallerPermissions, CallerPermissionsError
from contracts.settings import (
    COMPACTION_UNIT_MINUTES_CHOICES,
    DEFAULT_COMMIT_INTERVAL_SECONDS,
    LakeFormat,
    Settings,
)

BillingMode = Literal["on_demand", "provisioned"]
ApiAuth = Literal["iam", "jwt"]
ApiFront = Literal["lattice", "alb", "lambda"]
LambdaDeps = Literal["install", "skip"]

#: DynamoDB Streams keep records for 24 hours; the consumer must give up on a record before that.
STREAM_RETENTION_HOURS: Final = 24
#: How the deployed lake keeps the stream's tables unless ``-c lake_format=parquet``.
DEFAULT_DEPLOYED_LAKE_FORMAT: Final[LakeFormat] = "iceberg"


#: The one line synthesis stops with when a front that verifies callers has no caller map to enforce.
CALLERS_REQUIRED: Final = (
    "api_callers is required with api_front=lattice or lambda: pass -c api_callers=arn:aws:iam::"
    "<account>:role/<caller>[=operation+operation][,...] (the roles allowed to invoke the API and what "
    "each may do; with api_auth=jwt, OIDC subjects https://<issuer>#<sub> too)"
)
#: The one line synthesis stops with when a caller map names an OIDC subject no front can verify.
SUBJECTS_NEED_JWT: Final = (
    "api_callers: an OIDC subject (https://<issuer>#<sub>) is a caller of api_front=lambda with "
    "api_auth=jwt only; behind Lattice or IAM callers are IAM roles"
)
#: The one line synthesis stops with when the Lattice front has no caller VPC to admit requests from.
CALLER_VPCS_REQUIRED: Final = (
    "caller_vpc_ids is required with api_front=lattice: pass -c caller_vpc_ids=vpc-...[,...] (the VPCs "
    "callers send from; the service's auth policy admits requests from these only)"
)
#: The one line synthesis stops with when the Lattice front's managed prefix list can be neither
#: looked up (an environment-agnostic stack: no account and region) nor was given.
LATTICE_PREFIX_LIST_REQUIRED: Final = (
    "lattice_prefix_list_id cannot be looked up without the stack's account and region (the CDK CLI "
    "sets CDK_DEFAULT_ACCOUNT/CDK_DEFAULT_REGION from your credentials): synthesize with them, or pass "
    "-c lattice_prefix_list_id=pl-... (aws ec2 describe-managed-prefix-lists --filters "
    "Name=prefix-list-name,Values=com.amazonaws.<region>.vpc-lattice --query 'PrefixLists[0].PrefixListId')"
)
#: Who a caller's role session must name (``caller_session_pattern``): an e-mail address, the
#: session name IAM Identity Center and SAML federations give a person's session (the user name or
#: e-mail), which no SDK default (``botocore-session-<epoch>``) or task credential (a task id) is.
#: Session names allow ``[\w+=,.@-]`` only (AWS STS API Reference, AssumeRole, RoleSessionName).
DEFAULT_CALLER_SESSION_PATTERN: Final = r"[A-Za-z0-9._+-]{1,40}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
_VPC_ID: Final = re.compile(r"vpc-[0-9a-f]{8,17}")
_PREFIX_LIST_ID: Final = re.compile(r"pl-[0-9a-f]{8,17}")


def _deployed_settings() -> Settings:
    return Settings(lake_format=DEFAULT_DEPLOYED_LAKE_FORMAT, query_engine="athena")


class DeploymentConfigError(ValueError):
    """A context value the app cannot deploy with; the message names the key."""


@dataclasses.dataclass(frozen=True, slots=True)
class DeploymentConfig:
    """Everything the stack needs besides the shared definitions.

    Attributes
    ----------
    settings:
        Resource names (table, lake prefix, Glue database, Athena workgroup, hot TTL) and the
        lake's format (``-c lake_format=iceberg|parquet``, default ``iceberg``): Iceberg tables
        committed by the committer function and maintained by Glue's table optimizers, or the
        older plain Parquet under ``dt=`` prefixes with the hourly compaction state machine
        (kept deployable: it is the same code paths behind one switch).
    bucket_name:
        Lake bucket name, or None for ``{settings.bucket}-{account}-{region}``: S3 names are
        global, so the bare default ``walletlake-lake`` would collide across accounts.
    billing_mode:
        ``on_demand`` (default: no capacity planning, no throttling on ramp-up) or ``provisioned``
        (cheaper at a sustained, known load) with auto scaling between the ``*_capacity`` bounds.
    api_front:
        How the write path is served (``walletlake_cdk.api_service``): ``lattice`` (default), a
        fleet of ``walletlake serve`` tasks on ECS Fargate (ARM64) behind VPC Lattice with an
        ``AWS_IAM`` auth policy; ``alb``, the same fleet behind an internal ALB (no IAM
        authentication: network-level access only); ``lambda``, API Gateway + Lambda, cheaper
        only at low load (README, "What it costs").
    api_azs, api_task_cpu, api_task_memory_mb:
        Availability Zones of the fleet (at least two) and each task's size (one worker per vCPU).
    api_min_tasks, api_max_tasks, api_target_cpu_percent, api_requests_per_task_per_second:
        Scaling bounds and targets: CPU at 50 % (seed 000's rule) and requests per task
        (``bench/capacity.py`` derives the default from the measured CPU per request).
    api_callers:
        The roles allowed to invoke the API through VPC Lattice and what each may do, in
        :class:`contracts.caller_permissions.CallerPermissions`' form
        (``-c api_callers=arn:...:role/treasury=deposit+read,arn:...:role/payments``; a role named
        without operations may do everything but ``deposit``): required with ``api_front=lattice``
        and ``api_front=lambda`` (with ``api_auth=jwt`` it may name OIDC subjects,
        ``https://<issuer>#<sub>``). The service's auth policy allows each role its operations'
        routes only, the network's names the same roles; the tasks and the function refuse any
        other (``WALLETLAKE_CALLER_PERMISSIONS``).
    caller_session_pattern:
        The session names a caller's role session must have (a regular expression, whole name):
        the person behind ``initiated_by`` (:data:`DEFAULT_CALLER_SESSION_PATTERN`: an e-mail).
    caller_vpc_ids:
        VPCs of the callers (``-c caller_vpc_ids=vpc-...,vpc-...``): required with
        ``api_front=lattice``. Each is associated with the service network (clients resolve and
        reach the service only from an associated VPC) and named in the service's auth policy's
        ``vpc-lattice-svcs:SourceVpc`` condition. The API's own VPC is not associated: nothing in
        it calls the API, and Lattice's health checks need no association.
    lattice_prefix_list_id:
        The id of the region's AWS-managed prefix list ``com.amazonaws.<region>.vpc-lattice``: the
        only source the tasks' security group admits. Optional: without it the app looks the list
        up by that name when it synthesizes for an account and region (a CDK context lookup the
        CLI resolves and caches in ``cdk.context.json``); given, it overrides the lookup.
    dynamodb_prefix_list_id, s3_prefix_list_id:
        The region's gateway-endpoint prefix lists (``com.amazonaws.<region>.dynamodb``, ``.s3``),
        to limit the tasks' HTTPS egress to them; without them the egress is HTTPS to any address,
        which in the isolated subnets reaches the endpoints only (no NAT, no internet route).
    api_auth:
        Lambda front only. ``iam`` (default): callers are services signing with SigV4. ``jwt``: an
        OIDC issuer's tokens (``jwt_issuer``, ``jwt_audience``) are checked by API Gateway.
    api_rate_limit, api_burst_limit:
        Stage throttling: the seed's 20,000 requests/s plus 10 % headroom; bursts above that are
        refused with 429 before they reach Lambda or DynamoDB.
    stream_batch_size, stream_batching_window_seconds:
        Chosen for the seed's load (``docs/operations.md``, "Batching"): Lambda's largest batch
        for a DynamoDB stream (10,000 records) and a 30 s window. At 20,000 transactions/s
        (about 74,000 stream records/s) a batch closes on Lambda's 6 MB invocation payload
        (a few thousand records) well before the window, so the lake receives about 15 landing
        objects per second instead of 74 with 1,000-record batches; at low load the window
        closes it, so a record waits at most 30 s before its batch is read: the freshness cost.
    warm_write_units_per_second, warm_read_units_per_second:
        Pre-warmed throughput (0: none). A new on-demand table serves about 4,000 writes/s at
        first and doubles with traffic; the seed's 20,000 transfers/s need about 120,000 write
        units/s from the first minute, which warm throughput provides (a one-time charge).
    stream_parallelization:
        Concurrent batches per shard; Lambda keeps records of one item key in order across them.
        The Iceberg lake needs 1 (``walletlake_cdk.stream_consumer`` says why).
    stream_tumbling_window_seconds:
        The Iceberg lake's tumbling window: how Lambda tells the consumer which shard a batch
        comes from (``shardId``). It does not delay batches (they still close on size or the
        batching window); its length only bounds the window's (unused) state.
    committer_memory_mb, commit_interval_seconds:
        The Iceberg committer (``walletlake.handlers.commit``), invoked every minute: its size and
        the seconds between its commits (the lake's freshness bound).
    orphan_file_retention_days:
        Glue's orphan file deletion of the Iceberg tables (``walletlake_cdk.catalog``): an
        unreferenced file younger than this is never deleted (far above the commit interval: see
        ``catalog.py``). Snapshot retention is the tables' own property, in hours
        (``lake.iceberg_tables.SNAPSHOT_RETENTION_HOURS``).
    nightly_schedule, nightly_timeout_hours:
        The nightly state machine (snapshot → compaction of what is left → reconciliation) and
        the bound on one execution.
    compaction_schedule, compaction_max_concurrency, compaction_memory_mb:
        The hourly state machine (``HH:10``: the hour that closed ten minutes earlier, after the
        consumer's batching window and retries) and how many unit functions run at once.
    compaction_unit_minutes:
        Minutes of landing data one compaction unit merges (5..60, dividing an hour;
        ``lake.compaction_units``). 5 at the seed's load keeps a unit near 10 million rows (about
        1 GB, ~20 s on a 4 GB function: ``bench/capacity.py``); 60 suits 1 % of it.
    snapshot_segments, snapshot_read_units_per_second:
        Parallel-scan segments (one Lambda each, all at once) and the read pace they share. A
        scan reads the whole table, hot transaction items included (about 580 million at the
        seed's load), so the pace sets the snapshot's duration: ``bench/capacity.py`` prints it.
    classify_memory_mb:
        The function that classifies a day's reconciliation result (one row per wallet).
    stream_retry_attempts, stream_max_record_age_hours:
        Bounded retries; after either limit the batch's shard and sequence range go to the
        on-failure queue while the records are still in the stream (24 h) for a replay.
    """

    settings: Settings = dataclasses.field(default_factory=_deployed_settings)
    bucket_name: str | None = None
    billing_mode: BillingMode = "on_demand"
    read_capacity: int = 2_000
    write_capacity: int = 10_000
    max_read_capacity: int = 60_000
    max_write_capacity: int = 200_000
    warm_write_units_per_second: int = 0
    warm_read_units_per_second: int = 0
    api_front: ApiFront = "lattice"
    api_azs: int = 3
    api_task_cpu: int = 2_048
    api_task_memory_mb: int = 4_096
    api_min_tasks: int = 3
    api_max_tasks: int = 60
    api_target_cpu_percent: int = 50
    api_requests_per_task_per_second: int = 1_400
    api_callers: tuple[str, ...] = ()
    caller_session_pattern: str = DEFAULT_CALLER_SESSION_PATTERN
    caller_vpc_ids: tuple[str, ...] = ()
    lattice_prefix_list_id: str | None = None
    dynamodb_prefix_list_id: str | None = None
    s3_prefix_list_id: str | None = None
    api_auth: ApiAuth = "iam"
    jwt_issuer: str | None = None
    jwt_audience: tuple[str, ...] = ()
    api_rate_limit: int = 22_000
    api_burst_limit: int = 5_000
    api_memory_mb: int = 1_024
    stream_batch_size: int = 10_000
    stream_batching_window_seconds: int = 30
    stream_parallelization: int = 1
    stream_tumbling_window_seconds: int = 60
    committer_memory_mb: int = 512
    commit_interval_seconds: int = DEFAULT_COMMIT_INTERVAL_SECONDS
    orphan_file_retention_days: int = 3
    stream_retry_attempts: int = 10
    stream_max_record_age_hours: int = 12
    consumer_memory_mb: int = 1_024
    nightly_schedule: str = "cron(30 1 * * ? *)"
    nightly_timeout_hours: int = 3
    compaction_schedule: str = "cron(10 * * * ? *)"
    compaction_max_concurrency: int = 100
    compaction_memory_mb: int = 4_096
    compaction_unit_minutes: int = 5
    snapshot_segments: int = 200
    snapshot_read_units_per_second: int = 60_000
    classify_memory_mb: int = 4_096
    athena_bytes_scanned_cutoff_gb: int = 200
    lake_intelligent_tiering_days: int = 30
    lake_glacier_ir_days: int = 365
    noncurrent_version_days: int = 30
    athena_results_days: int = 30
    access_log_days: int = 365
    log_retention_days: int = 90
    alarm_email: str | None = None
    lambda_deps: LambdaDeps = "install"

    def __post_init__(self) -> None:
        if self.billing_mode not in ("on_demand", "provisioned"):
            raise DeploymentConfigError(
                f"billing_mode must be on_demand or provisioned, not {self.billing_mode!r}"
            )
        if self.api_front not in ("lattice", "alb", "lambda"):
            raise DeploymentConfigError(f"api_front must be lattice, alb or lambda, not {self.api_front!r}")
        if not 2 <= self.api_azs <= 6:
            raise DeploymentConfigError(
                f"api_azs must be 2..6 (a fleet spans Availability Zones), not {self.api_azs}"
            )
        if not 1 <= self.api_min_tasks <= self.api_max_tasks:
            raise DeploymentConfigError("api_min_tasks must be at least 1 and at most api_max_tasks")
        if self.api_task_cpu not in (256, 512, 1024, 2048, 4096, 8192, 16384):
            raise DeploymentConfigError(f"api_task_cpu must be a Fargate CPU size, not {self.api_task_cpu}")
        if not 10 <= self.api_target_cpu_percent <= 90:
            raise DeploymentConfigError("api_target_cpu_percent must be 10..90")
        if self.api_front in ("lattice", "lambda"):
            self._check_callers()
        if self.api_auth not in ("iam", "jwt"):
            raise DeploymentConfigError(f"api_auth must be iam or jwt, not {self.api_auth!r}")
        if self.api_auth == "jwt" and not (self.jwt_issuer and self.jwt_audience):
            raise DeploymentConfigError("api_auth=jwt needs jwt_issuer and jwt_audience")
        if self.lambda_deps not in ("install", "skip"):
            raise DeploymentConfigError(f"lambda_deps must be install or skip, not {self.lambda_deps!r}")
        if not 1 <= self.stream_max_record_age_hours < STREAM_RETENTION_HOURS:
            raise DeploymentConfigError(
                "stream_max_record_age_hours must be at least 1 and under the stream's "
                f"{STREAM_RETENTION_HOURS}-hour retention, not {self.stream_max_record_age_hours}"
            )
        if not 1 <= self.stream_batch_size <= 10_000:
            raise DeploymentConfigError(f"stream_batch_size must be 1..10000, not {self.stream_batch_size}")
        if not 0 <= self.stream_batching_window_seconds <= 300:
            raise DeploymentConfigError("stream_batching_window_seconds must be 0..300")
        if not 1 <= self.stream_parallelization <= 10:
            raise DeploymentConfigError("stream_parallelization must be 1..10")
        if self.lake_format not in ("iceberg", "parquet"):
            raise DeploymentConfigError(f"lake_format must be iceberg or parquet, not {self.lake_format!r}")
        if self.lake_format == "iceberg":
            self._check_iceberg()
        if not 1 <= self.compaction_max_concurrency <= 10_000:
            raise DeploymentConfigError("compaction_max_concurrency must be 1..10000 (Distributed Map)")
        if self.compaction_unit_minutes not in COMPACTION_UNIT_MINUTES_CHOICES:
            raise DeploymentConfigError(
                f"compaction_unit_minutes must be one of {COMPACTION_UNIT_MINUTES_CHOICES}"
            )
        if not 1 <= self.snapshot_segments <= 10_000:
            raise DeploymentConfigError("snapshot_segments must be 1..10000 (Distributed Map)")
        if self.snapshot_read_units_per_second < self.snapshot_segments:
            raise DeploymentConfigError("snapshot_read_units_per_second must be at least one per segment")
        if not 1 <= self.nightly_timeout_hours <= 24:
            raise DeploymentConfigError("nightly_timeout_hours must be 1..24")
        if not 0 <= self.stream_retry_attempts <= 10_000:
            raise DeploymentConfigError("stream_retry_attempts must be 0..10000")
        if self.read_capacity > self.max_read_capacity or self.write_capacity > self.max_write_capacity:
            raise DeploymentConfigError("provisioned capacity must not exceed its maximum")

    def _check_callers(self) -> None:
        """A verifying front's callers (roles and their operations) and session rule; behind
        Lattice, the callers' VPCs and Lattice's prefix list too. Every front that tells the API
        who calls enforces the map: without one, any principal the front verified would be served."""
        if not self.api_callers:
            raise DeploymentConfigError(CALLERS_REQUIRED)
        try:
            permissions = CallerPermissions.parse(",".join(self.api_callers))
        except CallerPermissionsError as error:
            raise DeploymentConfigError(f"api_callers: {error}") from None
        if permissions.subjects and not (self.api_front == "lambda" and self.api_auth == "jwt"):
            raise DeploymentConfigError(SUBJECTS_NEED_JWT)
        try:
            re.compile(self.caller_session_pattern)
        except re.error as error:
            raise DeploymentConfigError(f"caller_session_pattern is no regular expression: {error}") from None
        if self.api_front != "lattice":
            return
        if not self.caller_vpc_ids:
            raise DeploymentConfigError(CALLER_VPCS_REQUIRED)
        for vpc in self.caller_vpc_ids:
            if not _VPC_ID.fullmatch(vpc):
                raise DeploymentConfigError(f"caller_vpc_ids must be VPC ids (vpc-...), not {vpc!r}")
        for name in ("lattice_prefix_list_id", "dynamodb_prefix_list_id", "s3_prefix_list_id"):
            value = getattr(self, name)
            if value is not None and not _PREFIX_LIST_ID.fullmatch(value):
                raise DeploymentConfigError(f"{name} must be a prefix list id (pl-...), not {value!r}")

    @property
    def caller_permissions(self) -> CallerPermissions:
        """``api_callers`` read as the caller → operations map (Lattice's and Lambda's; checked at init)."""
        return CallerPermissions.parse(",".join(self.api_callers))

    def _check_iceberg(self) -> None:
        """The Iceberg lake's knobs (``lake_format=iceberg``)."""
        if self.stream_parallelization != 1:
            raise DeploymentConfigError(
                "stream_parallelization must be 1 with lake_format=iceberg: the committer's progress "
                "per shard needs a shard's batches landed in order (walletlake_cdk.stream_consumer)"
            )
        if not 1 <= self.stream_tumbling_window_seconds <= 900:
            raise DeploymentConfigError(
                "stream_tumbling_window_seconds must be 1..900 with lake_format=iceberg"
            )
        if not 5 <= self.commit_interval_seconds <= 50:
            raise DeploymentConfigError(
                "commit_interval_seconds must be 5..50: the committer commits within one scheduled minute"
            )
        if self.orphan_file_retention_days < 1:
            raise DeploymentConfigError(
                "orphan_file_retention_days must be at least 1 (a landed file waits for its commit)"
            )

    @property
    def lake_format(self) -> LakeFormat:
        """``iceberg`` or ``parquet``: how the stream's tables are kept (from the settings)."""
        return self.settings.lake_format

    @property
    def iceberg(self) -> bool:
        """Whether the stream's tables are Iceberg tables."""
        return self.settings.lake_format == "iceberg"

    @property
    def stream_max_record_age_seconds(self) -> int:
        """``MaximumRecordAgeInSeconds`` of the event source mapping."""
        return self.stream_max_record_age_hours * 3600

    @classmethod
    def from_context(cls, get: Callable[[str], Any]) -> DeploymentConfig:
        """Build the config from a context lookup (``node.try_get_context``); unknown keys are ignored.

        Examples
        --------
        >>> context = {"stream_batch_size": "500", "api_callers": "arn:aws:iam::123456789012:role/payments"}
        >>> DeploymentConfig.from_context(context.get).stream_batch_size
        500
        """
        # The fields' defaults, read without building a config (the default front needs callers).
        defaults = {
            field.name: field.default
            for field in dataclasses.fields(cls)
            if field.default is not dataclasses.MISSING
        }
        settings = _deployed_settings()
        names = {
            "table": get("table_name") or settings.table,
            "idempotency_table": get("idempotency_table_name") or settings.idempotency_table,
            "owners_table": get("owners_table_name") or settings.owners_table,
            "lake_prefix": (get("lake_prefix") or settings.lake_prefix).strip("/"),
            "glue_database": get("glue_database") or settings.glue_database,
            "athena_workgroup": get("athena_workgroup") or settings.athena_workgroup,
            "lake_format": str(get("lake_format") or settings.lake_format).strip().lower(),
            # how long the nightly tags keep their snapshots (docs/operations.md)
            "audit_tag_retention_days": _coerce(
                "audit_tag_retention_days",
                get("audit_tag_retention_days") or settings.audit_tag_retention_days,
                settings.audit_tag_retention_days,
            ),
        }
        values: dict[str, Any] = {"settings": settings.replace(query_engine="athena", **names)}
        for field in dataclasses.fields(cls):
            if field.name == "settings":
                continue
            raw = get(field.name)
            if raw is None or raw == "":
                continue
            values[field.name] = _coerce(field.name, raw, defaults[field.name])
        return cls(**values)


def _coerce(name: str, raw: Any, default: Any) -> Any:
    """Turn a context value (string from ``-c``, or JSON-typed from ``cdk.json``) into the field's type."""
    if isinstance(default, bool):
        if isinstance(raw, bool):
            return raw
        return str(raw).strip().lower() in ("1", "true", "yes")
    if isinstance(default, int):
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise DeploymentConfigError(f"context {name} must be an integer, not {raw!r}") from None
    if isinstance(default, tuple):
        items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
        return tuple(str(item).strip() for item in items if str(item).strip())
    return str(raw)
