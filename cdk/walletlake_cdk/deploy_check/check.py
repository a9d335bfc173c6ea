"""The deploy check's run: every function of the assembly invoked with what its real callers send.

On the embedded stack, in the order production runs them:

1. the **API** function gets API Gateway HTTP API (payload 2.0) events that create wallets, make
   deposits and a transfer, and read a balance, and writes them to DynamoDB Local;
2. the **stream consumer** gets those writes as DynamoDB Streams events, read from DynamoDB
   Local's stream and shaped as Lambda delivers them (one per shard; for the Iceberg lake a
   tumbling-window event, with ``shardId`` and ``window``), and lands the batch in the lake;
3. the **committer** (Iceberg lake) is invoked as an operator would, with ``{"cycles": 1}``, and
   must commit every row the consumer landed;
4. the **hourly** (plain-Parquet lake only) and **nightly** state machines run from their
   synthesized definitions
   (:mod:`~walletlake_cdk.deploy_check.state_machines`); every Lambda task among them is an
   invocation of the deployed function with the payload the definition builds.

Every function of the template must have been invoked at least once, without an error, for the
check to pass; a function no step reached is reported as such.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import logging
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import boto3

from contracts.settings import (
    BUCKET_VARIABLE,
    GLUE_DATABASE_VARIABLE,
    ICEBERG_CATALOG_URI_VARIABLE,
    ICEBERG_WAREHOUSE_VARIABLE,
    LAKE_FORMAT_VARIABLE,
    LAKE_PREFIX_VARIABLE,
    TABLE_VARIABLE,
)
from walletlake_cdk.deploy_check.assembly import CloudAssembly, DeployedFunction
from walletlake_cdk.deploy_check.athena_api import AthenaApiServer
from walletlake_cdk.deploy_check.container import ContainerProcess, build_image_root, missing_arm64_wheels
from walletlake_cdk.deploy_check.events import http_api_event, stream_event
from walletlake_cdk.deploy_check.lattice import LatticeStandIn
from walletlake_cdk.deploy_check.lattice_step import WRITER, LatticeStepError, run_lattice_step, stand_in_for
from walletlake_cdk.deploy_check.local_athena import LocalAthena
from walletlake_cdk.deploy_check.reports import ContainerReport, FunctionReport
from walletlake_cdk.deploy_check.runtime import runtime_folder
from walletlake_cdk.deploy_check.sandbox import (
    FunctionRunner,
    Invocation,
    assemble,
    lambda_environment,
)
from walletlake_cdk.deploy_check.state_machines import Execution, LocalStepFunctions
from walletlake_cdk.lambda_code import PROJECT_ROOT

__all__ = [
    "API_HANDLER",
    "COMMITTER_HANDLER",
    "CONSUMER_HANDLER",
    "ContainerReport",
    "DeployCheck",
    "DeployCheckError",
    "FunctionReport",
    "http_api_event",
    "run_scenario",
    "stream_event",
]

_logger = logging.getLogger(__name__)

#: Variables of the template that name AWS endpoints or credentials are the embedded stack's.
_STACK_VARIABLES: Final = (
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL_GLUE",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    # The embedded stack's Iceberg REST catalog (SeaweedFS) stands in for Glue's endpoint, whose
    # URI the deployed functions derive from their region (no variable in the template).
    ICEBERG_CATALOG_URI_VARIABLE,
)


#: The variables naming resources every function must agree on.
_NAME_VARIABLES: Final = (
    TABLE_VARIABLE,
    BUCKET_VARIABLE,
    LAKE_PREFIX_VARIABLE,
    GLUE_DATABASE_VARIABLE,
    LAKE_FORMAT_VARIABLE,
)


class DeployCheckError(AssertionError):
    """A deployed function or state machine did not do what production needs of it."""


class DeployCheck:
    """The assembly's functions on the embedded stack; steps are methods, the report comes last.

    Parameters
    ----------
    assembly:
        The synthesized app (built with ``lambda_deps=install``: real layers).
    stack_environment:
        The embedded stack's SDK variables (endpoints, credentials, region).
    work:
        Where the merged ``/opt`` trees and the functions' logs go.
    cache:
        What outlives a run: the API image's root folder and the ARM64 wheel check's verdict.
        By default the project's ``.cache/deploy-check``, which is
        also ``make deploy-check``'s ``work``.
    """

    def __init__(
        self,
        assembly: CloudAssembly,
        stack_environment: Mapping[str, str],
        work: Path,
        *,
        concurrency: int = 4,
        cache: Path | None = None,
    ) -> None:
        self.assembly = assembly
        self.functions = assembly.functions()
        self.stack_environment = {
            key: stack_environment[key] for key in _STACK_VARIABLES if key in stack_environment
        }
        self.work = work
        self.cache = cache or PROJECT_ROOT / ".cache" / "deploy-check"
        self._concurrency = concurrency
        self._runners: dict[str, FunctionRunner] = {}
        self.executions: dict[str, Execution] = {}
        self.athena = LocalAthena(
            self.local_settings(),
            self._session(),
            s3_endpoint=self.stack_environment.get("AWS_ENDPOINT_URL_S3"),
        )
        self.athena_api = AthenaApiServer(self.athena, self._workgroups()).start()
        self._container: ContainerProcess | None = None
        self._front: LatticeStandIn | None = None
        self.container_report: ContainerReport | None = None
        # Per shard, the last sequence number delivered: like Lambda, each record goes out once.
        self._delivered: dict[str, int] = {}

    # --- functions ---------------------------------------------------------------------------

    def function(self, handler: str) -> DeployedFunction:
        """The one function of the template whose ``Handler`` is ``handler``."""
        found = [function for function in self.functions if function.handler == handler]
        if len(found) != 1:
            raise DeployCheckError(f"expected one function with handler {handler}, found {len(found)}")
        return found[0]

    def runner(self, function: DeployedFunction) -> FunctionRunner:
        """The function's execution environments (assembled on first use)."""
        if function.logical_id not in self._runners:
            layers = []
            for layer in function.layers:
                if layer.folder is None:
                    raise DeployCheckError(
                        f"{function.logical_id}: layer {layer.arn} is not in the assembly; an AWS-published "
                        "layer must be reconstructed before the check can run it"
                    )
                layers.append(layer.folder)
            filesystem = assemble(function, layers, runtime_folder(), self.work)
            overrides = {**self.stack_environment, "AWS_ENDPOINT_URL_ATHENA": self.athena_api.url}
            if ICEBERG_WAREHOUSE_VARIABLE in function.environment:
                # The template's warehouse is the account id (Glue's catalog); the embedded stack's
                # catalog is its table bucket, as its endpoints stand in for AWS's.
                overrides[ICEBERG_WAREHOUSE_VARIABLE] = self.local_settings().iceberg_warehouse
            environment = lambda_environment(function, filesystem, overrides)
            environment["DEPLOY_CHECK_ALSO_IMPORT"] = ",".join(reachable_modules(function.handler))
            self._runners[function.logical_id] = FunctionRunner(
                function,
                filesystem,
                environment,
                log_dir=self.work / "logs",
                concurrency=self._concurrency,
            )
        return self._runners[function.logical_id]

    def invoke(self, handler: str, event: Any) -> Invocation:
        """Invoke the function of ``handler`` once."""
        return self.runner(self.function(handler)).invoke(event)

    def settings_environment(self) -> dict[str, str]:
        """The ``WALLETLAKE_*`` names every function is deployed with (they must agree)."""
        names: dict[str, str] = {}
        for function in self.functions:
            for key, value in function.environment.items():
                if key in _NAME_VARIABLES and names.setdefault(key, value) != value:
                    raise DeployCheckError(f"functions disagree on {key}: {names[key]!r} and {value!r}")
        return names

    def local_settings(self) -> Any:
        """:class:`contracts.settings.Settings` naming the deployed resources, on DuckDB."""
        from contracts.settings import Settings

        return Settings.from_env({**self.settings_environment(), **self.stack_environment}).replace(
            query_engine="duckdb"
        )

    @property
    def iceberg(self) -> bool:
        """Whether the template deploys the Iceberg lake."""
        return bool(self.local_settings().lake_format == "iceberg")

    def has_handler(self, handler: str) -> bool:
        """Whether the template deploys a function on ``handler``."""
        return any(function.handler == handler for function in self.functions)

    def provision(self) -> list[str]:
        """The table, bucket and Glue tables the template names, created fresh on the embedded stack."""
        from walletlake.local import provision

        settings = self.local_settings()
        session = self._session()
        with contextlib.suppress(Exception):
            session.client("dynamodb").delete_table(TableName=settings.table)
            session.client("dynamodb").get_waiter("table_not_exists").wait(TableName=settings.table)
        with contextlib.suppress(Exception):
            bucket = session.resource("s3").Bucket(settings.bucket)
            bucket.objects.all().delete()
        return provision(settings, session)

    def _session(self) -> boto3.Session:
        """A session with the stack's credentials (independent of whatever the process has set)."""
        return boto3.Session(
            aws_access_key_id=self.stack_environment.get("AWS_ACCESS_KEY_ID"),
            aws_secret_access_key=self.stack_environment.get("AWS_SECRET_ACCESS_KEY"),
            region_name=self.stack_environment.get("AWS_DEFAULT_REGION", "us-east-1"),
        )

    def client(self, service: str) -> Any:
        """A client of the embedded stack (endpoint from the stack's variables)."""
        variable = {"dynamodbstreams": "AWS_ENDPOINT_URL_DYNAMODB_STREAMS"}.get(
            service, f"AWS_ENDPOINT_URL_{service.upper()}"
        )
        session: Any = self._session()
        return session.client(service, endpoint_url=self.stack_environment.get(variable))

    # --- the steps ---------------------------------------------------------------------------

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One API request to whatever front the template deploys: ``{"statusCode", "body"}``.

        The API function (``api_front=lambda``) gets an API Gateway v2 event; the fleet's task runs
        from its image's files (:mod:`~walletlake_cdk.deploy_check.container`) and gets HTTP.
        """
        handlers = {function.handler for function in self.functions}
        if API_HANDLER in handlers:
            # signed as the check's named caller, as the function's caller map requires
            invocation = self.invoke(API_HANDLER, http_api_event(method, path, body, WRITER.principal))
            if not invocation.ok:
                raise DeployCheckError(f"{method} {path}: the API function failed: {invocation.payload}")
            answer: dict[str, Any] = invocation.payload
            return answer
        front = self.front()
        if front is None:
            status, text = self.container().request(method, path, body)
        else:
            # As the task is deployed: behind Lattice, signed as the check's named caller.
            signed = front.request(WRITER, method, path, body)
            status, text = signed.status, signed.body
        return {"statusCode": status, "body": text.decode()}

    def front(self) -> LatticeStandIn | None:
        """The stand-in for the template's Lattice service, in front of the task (None: no Lattice)."""
        if self._front is None and self.assembly.resources("AWS::VpcLattice::Service"):
            self._front = stand_in_for(self.assembly, f"127.0.0.1:{self.container().port}")
        return self._front

    def api_step(self) -> dict[str, Any]:
        """Wallets, deposits, a transfer, its replay and a balance through the deployed API."""
        wallets = []
        for index in range(2):
            created = self.call("POST", "/api/v1/wallets/", {"user_id": str(uuid.uuid4())})
            _expect(created, 201, f"create wallet {index}")
            wallets.append(json.loads(created["body"])["id"])
        payer, payee = wallets
        for index, wallet in enumerate(wallets):
            deposited = self.call(
                "PUT", f"/api/v1/wallets/{wallet}/deposit/", {"amount": "5000000", "nonce": f"d{index}"}
            )
            _expect(deposited, 204, "deposit")
        transfer = {"amount": "1250000", "nonce": "t1"}
        _expect(self.call("PUT", f"/api/v1/wallets/{payer}/transfer/{payee}/", transfer), 204, "transfer")
        _expect(self.call("PUT", f"/api/v1/wallets/{payer}/transfer/{payee}/", transfer), 204, "replay")
        balance = self.call("GET", f"/api/v1/wallets/{payee}/balance")
        _expect(balance, 200, "balance")
        return {"wallets": wallets, "payee_balance": json.loads(balance["body"])}

    def task_containers(self) -> list[tuple[str, dict[str, Any]]]:
        """Every container of every ECS task definition of the template (logical id, definition)."""
        found = []
        for logical_id, resource in self.assembly.resources("AWS::ECS::TaskDefinition").items():
            for container in resource["Properties"].get("ContainerDefinitions", []):
                found.append((logical_id, self.assembly.resolver.resolve(container)))
        return found

    def container(self) -> ContainerProcess:
        """The API task's container, built from its image's files, started once (:meth:`stop_container`)."""
        if self._container is None:
            containers = self.task_containers()
            if len(containers) != 1:
                raise DeployCheckError(f"expected one task container, found {len(containers)}")
            logical_id, definition = containers[0]
            context, dockerfile = self.assembly.image_context(definition["Image"])
            image = build_image_root(context, dockerfile, self.cache)
            variables = {item["Name"]: str(item["Value"]) for item in definition.get("Environment", [])}
            environment = {**variables, **self.stack_environment, "LANG": "C.UTF-8"}
            process = ContainerProcess(
                image, list(definition["Command"]), environment, self.work / "container.log"
            )
            process.start()
            self._container = process
            self.container_report = ContainerReport(
                logical_id=logical_id,
                image_bytes=image.size_bytes,
                start_seconds=process.started_seconds or 0.0,
                memory_mb=int(
                    self.assembly.resources("AWS::ECS::TaskDefinition")[logical_id]["Properties"]["Memory"]
                ),
                missing_arm64=tuple(
                    name
                    for lock in image.requirement_files
                    for name in missing_arm64_wheels(lock, self.cache)
                ),
            )
        return self._container

    def stop_container(self) -> int | None:
        """SIGTERM the container as ECS stops a task; its exit code (None: it never ran)."""
        if self._front is not None:
            self._front.stop()
            self._front = None
        if self._container is None:
            return None
        self.container_report = (
            dataclasses.replace(self.container_report, peak_rss_mb=self._container.peak_memory_mb())
            if self.container_report
            else None
        )
        code = self._container.stop()
        if self.container_report is not None:
            self.container_report = dataclasses.replace(self.container_report, exit_code=code)
        self._container = None
        return code

    def stream_step(self, handler: str) -> dict[str, Any]:
        """What the stream holds beyond the last delivery, one Lambda batch per shard, to the consumer."""
        settings = self.local_settings()
        stream_arn, shards = self._stream_records(settings.table)
        if not any(shards.values()):
            raise DeployCheckError("the table's stream holds no record after the API step")
        answers = []
        for shard_id, records in shards.items():
            if not records:
                continue
            event = stream_event(stream_arn, shard_id, records, windowed=self.iceberg)
            invocation = self.invoke(handler, json.loads(json.dumps(event, default=str)))
            if not invocation.ok or invocation.payload.get("batchItemFailures"):
                raise DeployCheckError(f"the stream consumer did not land the batch: {invocation.payload}")
            if self.iceberg and "state" not in invocation.payload:
                raise DeployCheckError(f"a tumbling window's answer needs its state: {invocation.payload}")
            answers.append(invocation.payload)
        landed = [
            item["Key"]
            for item in self.client("s3")
            .list_objects_v2(Bucket=settings.bucket, Prefix=settings.lake_prefix + "/")
            .get("Contents", [])
        ]
        return {
            "records": sum(len(records) for records in shards.values()),
            "shards": [shard for shard, records in shards.items() if records],
            "landed": landed,
            "answers": answers,
        }

    def commit_step(self, handler: str) -> dict[str, Any]:
        """One committer cycle (``{"cycles": 1}``), as an operator runs it; what it committed."""
        invocation = self.invoke(handler, {"cycles": 1})
        if not invocation.ok:
            raise DeployCheckError(f"the committer failed: {invocation.payload}")
        answer: dict[str, Any] = invocation.payload
        return answer

    def _stream_records(self, table: str) -> tuple[str, dict[str, list[dict[str, Any]]]]:
        streams = self.client("dynamodbstreams")
        stream_arn = self.client("dynamodb").describe_table(TableName=table)["Table"]["LatestStreamArn"]
        by_shard: dict[str, list[dict[str, Any]]] = {}
        for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
            shard_id = shard["ShardId"]
            records = by_shard.setdefault(shard_id, [])
            iterator = streams.get_shard_iterator(
                StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
            ).get("ShardIterator")
            empty = 0
            while iterator and empty < 3:
                page = streams.get_records(ShardIterator=iterator, Limit=1000)
                for record in page["Records"]:
                    sequence = int(record["dynamodb"]["SequenceNumber"])
                    if sequence > self._delivered.get(shard_id, -1):
                        records.append(record)
                        self._delivered[shard_id] = sequence
                empty = 0 if page["Records"] else empty + 1
                iterator = page.get("NextShardIterator")
        return stream_arn, by_shard

    @contextlib.contextmanager
    def step_functions(self) -> Iterator[LocalStepFunctions]:
        """The ASL interpreter with every function of the template behind its Lambda tasks."""
        runners = {function.logical_id: self.runner(function) for function in self.functions}
        topics = [self.assembly.resolver.ref(name) for name in self.assembly.resources("AWS::SNS::Topic")]
        with LocalStepFunctions(runners, self.athena, topics) as machines:
            yield machines

    def run_machine(self, machines: LocalStepFunctions, prefix: str, payload: Mapping[str, Any]) -> Execution:
        """Execute the state machine whose logical id starts with ``prefix``."""
        definitions = {
            logical_id: definition
            for logical_id, definition in self.assembly.state_machines().items()
            if logical_id.startswith(prefix)
        }
        if len(definitions) != 1:
            raise DeployCheckError(f"expected one {prefix} state machine, found {sorted(definitions)}")
        ((logical_id, definition),) = definitions.items()
        execution = machines.run(f"{logical_id}-{uuid.uuid4().hex[:8]}", definition, payload)
        self.executions[logical_id] = execution
        return execution

    # --- the report --------------------------------------------------------------------------

    def reports(self) -> list[FunctionReport]:
        """One report per function of the template, invoked or not."""
        found = []
        for function in self.functions:
            runner = self._runners.get(function.logical_id)
            invocations = runner.invocations if runner else []
            cold = [each.import_seconds for each in invocations if each.import_seconds is not None]
            failures = [each for each in invocations if not each.ok]
            size = runner.filesystem.unzipped_bytes if runner else 0
            found.append(
                FunctionReport(
                    logical_id=function.logical_id,
                    handler=function.handler,
                    memory_mb=function.memory_mb,
                    unzipped_bytes=size,
                    import_seconds=cold[0] if cold else None,
                    max_rss_mb=max((each.max_rss_mb for each in invocations), default=0.0),
                    invocations=len(invocations),
                    failures=len(failures),
                    last_error=_describe(failures[-1]) if failures else None,
                )
            )
        return found

    def _workgroups(self) -> dict[str, dict[str, Any]]:
        """Each Athena workgroup of the template: its name and resolved configuration."""
        found = {}
        for resource in self.assembly.resources("AWS::Athena::WorkGroup").values():
            properties = self.assembly.resolver.resolve(resource["Properties"])
            found[properties["Name"]] = properties.get("WorkGroupConfiguration", {})
        return found

    def close(self) -> None:
        """Stop every execution environment, the container and the Athena API."""
        self.stop_container()
        for runner in self._runners.values():
            runner.close()
        self.athena_api.stop()


def reachable_modules(handler: str) -> list[str]:
    """Every project and third-party module the handler's import closure holds (what must load)."""
    from walletlake_cdk.handler_imports import ProjectSource, handler_closure
    from walletlake_cdk.lambda_code import LOCAL_ONLY_MODULES, PROJECT_PACKAGES

    closure = handler_closure(
        handler, ProjectSource(PROJECT_ROOT, PROJECT_PACKAGES), excluded=frozenset(LOCAL_ONLY_MODULES)
    )
    return sorted(closure.modules) + sorted(closure.third_party)


def _describe(invocation: Invocation) -> str:
    payload = invocation.payload if isinstance(invocation.payload, dict) else {}
    return f"{invocation.error}: {str(payload.get('errorMessage', ''))[:160]}"


def _expect(answer: Mapping[str, Any], status: int, what: str) -> None:
    if answer.get("statusCode") != status:
        raise DeployCheckError(
            f"{what}: expected {status}, got {answer.get('statusCode')}: {answer.get('body')}"
        )


#: The handlers of the deployed functions, by the step that calls them.
API_HANDLER: Final = "walletlake.handlers.api.handler"
CONSUMER_HANDLER: Final = "walletlake.handlers.stream.handler"
COMMITTER_HANDLER: Final = "walletlake.handlers.commit.handler"


def run_scenario(check: DeployCheck, *, today: dt.date | None = None) -> dict[str, Any]:
    """Provision, then the API, the consumer, the committer (Iceberg lake), the hourly (plain-Parquet
    lake) and the nightly state machine, in order.

    Raises :class:`DeployCheckError` at the first step that does not do its job; the function
    reports say which function failed and why.
    """
    day = today or dt.datetime.now(dt.UTC).date()
    outcome: dict[str, Any] = {"provisioned": check.provision()}
    outcome["api"] = check.api_step()
    front = check.front() if check.task_containers() else None
    if front is not None:
        try:
            outcome["lattice"] = run_lattice_step(front, check.container())
        except LatticeStepError as error:
            raise DeployCheckError(f"the Lattice front: {error}") from error
    outcome["stream"] = check.stream_step(CONSUMER_HANDLER)
    if check.has_handler(COMMITTER_HANDLER):
        outcome["commit"] = check.commit_step(COMMITTER_HANDLER)
        landed = _landed_rows(check, outcome["stream"])
        outcome["landed_rows"] = landed
        if outcome["commit"].get("rows", 0) < landed:
            raise DeployCheckError(
                f"the committer committed {outcome['commit'].get('rows')} rows of the {landed} landed"
            )
    with check.step_functions() as machines:
        if any(logical_id.startswith("Hourly") for logical_id in check.assembly.state_machines()):
            hourly = check.run_machine(machines, "Hourly", {"closed_hours_of": "today"})
            outcome["hourly"] = hourly
            if hourly.status != "SUCCEEDED":
                raise DeployCheckError(
                    f"the hourly state machine ended {hourly.status}: {hourly.error} {hourly.cause}"
                )
        nightly = check.run_machine(machines, "Nightly", {"date": day.isoformat()})
        outcome["nightly"] = nightly
        if nightly.status != "SUCCEEDED":
            cause = str(nightly.cause)[:600]
            raise DeployCheckError(
                f"the nightly state machine ended {nightly.status}: {nightly.error} {cause}"
            )
        outcome["athena_statements"] = list(machines.athena.statements)
    return outcome


def _landed_rows(check: DeployCheck, stream: dict[str, Any]) -> int:
    """Rows the consumer's landing records of this run name (ledger, wallets and quarantine)."""
    from lake.landing_log import log_prefix, read_record

    settings = check.local_settings()
    s3 = check.client("s3")
    rows = 0
    for key in stream["landed"]:
        if key.startswith(log_prefix(settings.lake_prefix)):
            rows += sum(file.rows for file in read_record(s3, settings.bucket, key).files)
    return rows
