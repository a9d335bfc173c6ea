"""The embedded stack: DynamoDB Local, SeaweedFS (S3) and a moto server (Glue) on loopback.

Clients reach it only through the AWS SDK's standard per-service endpoint variables, so the code
under test talks to it exactly as it would talk to AWS. DynamoDB Local and SeaweedFS keep their
data under the data dir, so a restart keeps the table, the consumer's checkpoints and the lake in
agreement; moto serves only what has no real local stand-in (Glue's metadata, and SQS for the
replay tests), rebuilt by provisioning at every start.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import boto3

from contracts.checkpoint_table import LEASE_KEY
from contracts.settings import AUDIT_LOG_VARIABLE, ICEBERG_CATALOG_URI_VARIABLE, Settings
from walletlake.local._provision import provision
from walletlake.local._seaweedfs import (
    SeaweedPorts,
    find_weed,
    remove_stale_sockets,
    table_bucket_found,
    weed_argv,
    write_identities,
)
from walletlake.local._servers import (
    ManagedProcess,
    ServerExitedError,
    StackError,
    disk_bytes,
    ensure_port_free,
    free_port,
    resident_bytes,
    wait_until,
)
from walletlake.local._tools import (
    DYNAMODB_LOCAL_LAUNCHER,
    compiled_launcher,
    dynamodb_local_argv,
    dynamodb_local_dir,
    find_java,
)

_logger = logging.getLogger(__name__)

#: Credentials the local servers accept (any would do); never real ones.
#: DynamoDB Local accepts only letters and digits in the access key id.
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "walletlakelocal", "AWS_SECRET_ACCESS_KEY": "walletlakelocal"}

#: Starts on newly chosen ports before a server's death while starting is reported.
_START_ATTEMPTS = 3


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoints:
    """Where the embedded stack listens."""

    dynamodb: str
    s3: str
    #: moto: Glue (and SQS, for the replay tests).
    aws: str
    #: SeaweedFS's Iceberg REST catalog.
    iceberg: str = ""

    def environment(self, region: str = "us-east-1") -> dict[str, str]:
        """The variables that point the AWS SDK (boto3, awswrangler, the CLI) at the stack."""
        return {
            "AWS_ENDPOINT_URL_DYNAMODB": self.dynamodb,
            "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": self.dynamodb,
            "AWS_ENDPOINT_URL_S3": self.s3,
            "AWS_ENDPOINT_URL_GLUE": self.aws,
            "AWS_DEFAULT_REGION": region,
            **({ICEBERG_CATALOG_URI_VARIABLE: self.iceberg} if self.iceberg else {}),
            **LOCAL_CREDENTIALS,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class StackFootprint:
    """What the stack cost to start: seconds to ready, resident memory per server, data on disk."""

    startup_seconds: float
    resident_bytes: dict[str, int]
    disk_bytes: int

    def describe(self) -> str:
        """One line for ``walletlake local up``'s readiness message."""
        memory = ", ".join(f"{name} {size / 2**20:,.0f} MiB" for name, size in self.resident_bytes.items())
        total = sum(self.resident_bytes.values()) / 2**20
        return (
            f"ready in {self.startup_seconds:.1f} s; resident memory {total:,.0f} MiB ({memory}); "
            f"data dir {self.disk_bytes / 2**20:,.1f} MiB"
        )


class EmbeddedStack:
    """Start, provision and stop the local stand-ins for DynamoDB, Streams, S3 and Glue.

    Examples
    --------
    >>> with EmbeddedStack(data_dir=Path(".walletlake")) as stack:  # doctest: +SKIP
    ...     os.environ.update(stack.environment())

    ``dynamodb_in_memory`` keeps DynamoDB Local's tables in memory, for a stack whose data need not
    survive it (a test session's); `walletlake local up` keeps them on disk under ``data_dir``.
    ``dynamodb_quick_jit`` compiles DynamoDB Local's Java with C1 only, for a stack of light load
    (a test session's): less CPU, lower peak throughput (:func:`dynamodb_local_argv`).
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        host: str = "127.0.0.1",
        dynamodb_port: int | None = None,
        aws_port: int | None = None,
        s3_port: int | None = None,
        seaweedfs_port_base: int | None = None,
        iceberg_port: int | None = None,
        settings: Settings | None = None,
        dynamodb_in_memory: bool = False,
        dynamodb_quick_jit: bool = False,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.dynamodb_in_memory = dynamodb_in_memory
        self.dynamodb_quick_jit = dynamodb_quick_jit
        self.host = host
        self.dynamodb_port = dynamodb_port
        self.aws_port = aws_port
        self.s3_port = s3_port
        self.seaweedfs_port_base = seaweedfs_port_base
        self.iceberg_port = iceberg_port
        self.footprint: StackFootprint | None = None
        self.settings = settings or Settings()
        self.provisioned: list[str] = []
        self._processes: list[ManagedProcess] = []
        self._readiness: dict[str, Callable[[], bool]] = {}
        self.endpoints: Endpoints | None = None

    def environment(self) -> dict[str, str]:
        """SDK variables for this stack (only valid once started), and where the API's audit goes.

        ``WALLETLAKE_AUDIT_LOG``: an API started in a shell with these exports writes its audit
        lines under the stack's logs folder, where the local ``api_access_log`` reads them.
        """
        if self.endpoints is None:
            raise StackError("the embedded stack is not started")
        return {
            **self.endpoints.environment(self.settings.region),
            AUDIT_LOG_VARIABLE: str(self.audit_log_path),
        }

    @property
    def audit_log_path(self) -> Path:
        """The file the stack's API processes write their audit lines to."""
        return self.data_dir / "logs" / "api-audit.jsonl"

    def start(self) -> Endpoints:
        """Start the servers, wait until they answer, and provision every resource.

        A server that dies while starting on ports this stack chose itself is started again, with
        every server, on newly chosen ones (at most :data:`_START_ATTEMPTS` times in all): between
        choosing a free port and the server binding it, another process may take it. A port the
        caller gave is checked before the start, so a death there is reported at once.
        """
        started = time.monotonic()
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                return self._start_once(started)
            except ServerExitedError as error:
                if attempt == _START_ATTEMPTS or not self._chose_ports_of(error.what):
                    raise
                _logger.warning(
                    "%s; starting the stack again on other free ports (attempt %d of %d)",
                    error,
                    attempt + 1,
                    _START_ATTEMPTS,
                )
        raise AssertionError("unreachable")  # pragma: no cover

    def _chose_ports_of(self, server: str) -> bool:
        """Whether every port of ``server`` that could be taken under it was chosen by the stack."""
        chosen = {
            "DynamoDB Local": self.dynamodb_port is None,
            "moto server": self.aws_port is None,
            "SeaweedFS": self.seaweedfs_port_base is None,
        }
        return chosen.get(server, False)

    def _start_once(self, started: float) -> Endpoints:
        java = find_java()
        jar_dir = dynamodb_local_dir()
        launcher_classes = compiled_launcher(java, jar_dir, DYNAMODB_LOCAL_LAUNCHER)
        weed = find_weed()
        dynamodb_port = self._port(self.dynamodb_port, "--dynamodb-port")
        aws_port = self._port(self.aws_port, "--aws-port")
        seaweed_ports = SeaweedPorts.choose(
            self.host, self.s3_port, self.seaweedfs_port_base, self.iceberg_port
        )
        db_path = self.data_dir / "dynamodb"
        db_path.mkdir(parents=True, exist_ok=True)
        s3_path = self.data_dir / "s3"
        s3_path.mkdir(parents=True, exist_ok=True)
        remove_stale_sockets(s3_path)
        identities = write_identities(
            self.data_dir / "s3-identities.json",
            LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )
        logs = self.data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        servers: dict[str, ManagedProcess] = {}
        try:
            servers["DynamoDB Local"] = ManagedProcess(
                "DynamoDB Local",
                dynamodb_local_argv(
                    java,
                    jar_dir,
                    dynamodb_port,
                    db_path,
                    self.host,
                    DYNAMODB_LOCAL_LAUNCHER,
                    launcher_classes,
                    in_memory=self.dynamodb_in_memory,
                    quick_jit=self.dynamodb_quick_jit,
                ),
                logs / "dynamodb-local.log",
                cwd=jar_dir,
            )
            self._processes.append(servers["DynamoDB Local"])
            servers["SeaweedFS"] = ManagedProcess(
                "SeaweedFS",
                weed_argv(
                    weed,
                    self.host,
                    s3_path,
                    seaweed_ports,
                    identities,
                    self.settings.iceberg_warehouse,
                    log_dir=logs,
                ),
                logs / "seaweedfs.log",
                cwd=s3_path,
            )
            self._processes.append(servers["SeaweedFS"])
            servers["moto server"] = ManagedProcess(
                "moto server",
                [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(aws_port)],
                logs / "moto-server.log",
            )
            self._processes.append(servers["moto server"])
            endpoints = Endpoints(
                dynamodb=f"http://{self.host}:{dynamodb_port}",
                s3=f"http://{self.host}:{seaweed_ports.s3}",
                aws=f"http://{self.host}:{aws_port}",
                iceberg=f"http://{self.host}:{seaweed_ports.iceberg}",
            )
            self.endpoints = endpoints
            catalog = self.settings.replace(iceberg_catalog_uri=endpoints.iceberg)
            self._readiness = {
                "DynamoDB Local": lambda: _answers(endpoints.dynamodb),
                # Its catalog answers before its table bucket exists: ready once the bucket is found.
                "SeaweedFS": lambda: (
                    _s3_answers(endpoints.s3, self.settings.region)
                    and _answers(endpoints.iceberg + "/v1/config")
                    and _table_bucket_found(catalog, endpoints)
                ),
                "moto server": lambda: _answers(endpoints.aws + "/moto-api/"),
            }
            for name, server in servers.items():
                wait_until(self._readiness[name], timeout=60, what=name, process=server.process)
            # The stack's settings name its own catalog, as Settings.from_env() does under environment().
            self.settings = self.settings.replace(iceberg_catalog_uri=endpoints.iceberg)
            with patched_environ(self.environment()):
                self.provisioned = provision(self.settings)
                if f"s3 bucket {self.settings.bucket}: created" in self.provisioned:
                    self.provisioned.append(forget_checkpoints(self.settings))
        except BaseException:
            self.stop()
            raise
        self.footprint = StackFootprint(
            startup_seconds=time.monotonic() - started,
            resident_bytes={name: resident_bytes(server.process.pid) for name, server in servers.items()},
            disk_bytes=disk_bytes(self.data_dir),
        )
        _logger.info("embedded stack %s", self.footprint.describe())
        return endpoints

    def stop(self) -> None:
        """Stop every server, last started first (moto holds no state; SeaweedFS flushes its index)."""
        for process in reversed(self._processes):
            process.stop()
        self._processes.clear()

    def server(self, name: str) -> ManagedProcess:
        """One of the running servers, by name ("DynamoDB Local", "SeaweedFS", "moto server")."""
        for process in self._processes:
            if process.name == name:
                return process
        raise StackError(f"no server named {name!r} in this stack")

    def restart_server(self, name: str) -> None:
        """Start a server that died (or was killed) again, on the same ports and data; wait for it.

        For fault-injection tests: the S3 server killed under a running consumer, then back.
        """
        server = self.server(name)
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait(10)
        if name == "SeaweedFS":
            remove_stale_sockets(self.data_dir / "s3")
        server.restart()
        wait_until(self._readiness[name], timeout=60, what=name, process=server.process)

    def _port(self, wanted: int | None, flag: str) -> int:
        if wanted is None:
            return free_port(self.host)
        ensure_port_free(self.host, wanted, flag)
        return wanted

    def __enter__(self) -> EmbeddedStack:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@contextlib.contextmanager
def patched_environ(environment: dict[str, str]) -> Iterator[None]:
    """Set variables for the duration of a block (botocore reads endpoints when a client is made)."""
    saved = {key: os.environ.get(key) for key in environment}
    os.environ.update(environment)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def forget_checkpoints(settings: Settings) -> str:
    """Delete the consumer's checkpoints when the lake is new but the table is not.

    The lake (SeaweedFS) and the table (DynamoDB Local) both live under the data dir and survive a
    restart together, so this runs only when the lake's bucket had to be created: a new data dir
    (no checkpoints yet, nothing to do) or one whose ``s3/`` folder was removed by hand. Then the
    checkpoints would say the history is in a lake that no longer holds it; rereading the stream
    from its trim horizon (24 hours kept) refills what it still has.
    """
    table = boto3.resource("dynamodb", region_name=settings.region).Table(settings.checkpoint_table)
    deleted = 0
    with table.batch_writer() as batch:
        for page in _scan_keys(table):
            for item in page:
                batch.delete_item(Key={LEASE_KEY: item[LEASE_KEY]})
                deleted += 1
    return f"dynamodb table {settings.checkpoint_table}: {deleted} checkpoint(s) reset for the empty lake"


def _scan_keys(table: Any) -> Iterator[list[dict[str, Any]]]:
    kwargs: dict[str, Any] = {"ProjectionExpression": LEASE_KEY}
    while True:
        page = table.scan(**kwargs)
        yield page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _s3_answers(url: str, region: str) -> bool:
    """True when the S3 gateway serves data: a signed ListBuckets answers (filer up, identity loaded)
    and, in every bucket that holds an object, its first byte can be read.

    After a restart the gateway answers listings before the volume server has registered its
    volumes with the master; a read then fails with InternalError. Ready means readable.
    """
    client = boto3.client(
        "s3",
        endpoint_url=url,
        region_name=region,
        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    for bucket in client.list_buckets().get("Buckets", []):
        listed = client.list_objects_v2(Bucket=bucket["Name"], MaxKeys=1).get("Contents", [])
        if listed:
            client.get_object(Bucket=bucket["Name"], Key=listed[0]["Key"], Range="bytes=0-0")["Body"].read()
    return True


def _table_bucket_found(settings: Settings, endpoints: Endpoints) -> bool:
    with patched_environ(endpoints.environment(settings.region)):
        return table_bucket_found(settings)


def _answers(url: str) -> bool:
    """True when an HTTP server answers at ``url`` (any status: DynamoDB answers GET / with 400)."""
    try:
        with urllib.request.urlopen(url, timeout=1):  # noqa: S310 - loopback URL we built
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
