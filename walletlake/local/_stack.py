"""The embedded stack: DynamoDB Local and a moto server on loopback, provisioned and ready.

Clients reach it only through the AWS SDK's standard per-service endpoint variables, so the code
under test talks to it exactly as it would talk to AWS.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import boto3

from stream_processor.checkpoint_table import LEASE_KEY
from walletlake.local._provision import provision
from walletlake.local._servers import ManagedProcess, StackError, ensure_port_free, free_port, wait_until
from walletlake.local._tools import dynamodb_local_argv, dynamodb_local_dir, find_java
from walletlake.settings import Settings

_logger = logging.getLogger(__name__)

#: Credentials the local servers accept (any would do); never real ones.
#: DynamoDB Local accepts only letters and digits in the access key id.
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "walletlakelocal", "AWS_SECRET_ACCESS_KEY": "walletlakelocal"}

_LAUNCHER = Path(__file__).with_name("LoopbackDynamoDBLocal.java")


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoints:
    """Where the embedded stack listens."""

    dynamodb: str
    aws: str

    def environment(self, region: str = "us-east-1") -> dict[str, str]:
        """The variables that point the AWS SDK (boto3, awswrangler, the CLI) at the stack."""
        return {
            "AWS_ENDPOINT_URL_DYNAMODB": self.dynamodb,
            "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": self.dynamodb,
            "AWS_ENDPOINT_URL_S3": self.aws,
            "AWS_ENDPOINT_URL_GLUE": self.aws,
            "AWS_DEFAULT_REGION": region,
            **LOCAL_CREDENTIALS,
        }


class EmbeddedStack:
    """Start, provision and stop the local stand-ins for DynamoDB, Streams, S3 and Glue.

    Examples
    --------
    >>> with EmbeddedStack(data_dir=Path(".walletlake")) as stack:  # doctest: +SKIP
    ...     os.environ.update(stack.environment())
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        host: str = "127.0.0.1",
        dynamodb_port: int | None = None,
        aws_port: int | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.host = host
        self.dynamodb_port = dynamodb_port
        self.aws_port = aws_port
        self.settings = settings or Settings()
        self.provisioned: list[str] = []
        self._processes: list[ManagedProcess] = []
        self.endpoints: Endpoints | None = None

    def environment(self) -> dict[str, str]:
        """SDK variables for this stack (only valid once started)."""
        if self.endpoints is None:
            raise StackError("the embedded stack is not started")
        return self.endpoints.environment(self.settings.region)

    def start(self) -> Endpoints:
        """Start both servers, wait until they answer, and provision every resource."""
        java = find_java()
        jar_dir = dynamodb_local_dir()
        dynamodb_port = self._port(self.dynamodb_port, "--dynamodb-port")
        aws_port = self._port(self.aws_port, "--aws-port")
        db_path = self.data_dir / "dynamodb"
        db_path.mkdir(parents=True, exist_ok=True)
        logs = self.data_dir / "logs"
        try:
            dynamodb = ManagedProcess(
                "DynamoDB Local",
                dynamodb_local_argv(java, jar_dir, dynamodb_port, db_path, self.host, _LAUNCHER),
                logs / "dynamodb-local.log",
                cwd=jar_dir,
            )
            self._processes.append(dynamodb)
            moto = ManagedProcess(
                "moto server",
                [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(aws_port)],
                logs / "moto-server.log",
            )
            self._processes.append(moto)
            endpoints = Endpoints(
                dynamodb=f"http://{self.host}:{dynamodb_port}", aws=f"http://{self.host}:{aws_port}"
            )
            self.endpoints = endpoints
            wait_until(
                lambda: _answers(endpoints.dynamodb),
                timeout=60,
                what="DynamoDB Local",
                process=dynamodb.process,
            )
            wait_until(
                lambda: _answers(endpoints.aws + "/moto-api/"),
                timeout=60,
                what="moto server",
                process=moto.process,
            )
            with patched_environ(self.environment()):
                self.provisioned = provision(self.settings)
                if f"s3 bucket {self.settings.bucket}: created" in self.provisioned:
                    self.provisioned.append(forget_checkpoints(self.settings))
        except BaseException:
            self.stop()
            raise
        return endpoints

    def stop(self) -> None:
        """Stop both servers (moto first: it holds no state worth flushing)."""
        for process in reversed(self._processes):
            process.stop()
        self._processes.clear()

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
    """Delete the consumer's checkpoints when the lake starts empty.

    moto keeps S3 in memory, so a restarted stack has an empty lake while DynamoDB Local (on disk)
    still holds the checkpoints of what the old lake contained. Rereading the stream from its trim
    horizon (24 hours kept) refills the new lake; keeping the checkpoints would silently skip it.
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


def _answers(url: str) -> bool:
    """True when an HTTP server answers at ``url`` (any status: DynamoDB answers GET / with 400)."""
    try:
        with urllib.request.urlopen(url, timeout=1):  # noqa: S310 - loopback URL we built
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
