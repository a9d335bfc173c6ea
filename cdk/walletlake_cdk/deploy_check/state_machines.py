"""The synthesized state machines, executed by an existing Amazon States Language interpreter.

moto ships LocalStack's ASL interpreter (``execute_state_machine``); it runs the definition as the
template holds it: Task, Map (Distributed Map's ``ItemProcessor`` included), Parallel, Choice, Fail,
Retry and Catch, SNS publishes. What it would hand to AWS services is served here instead:

* **Lambda tasks** go to the deploy check's :class:`~walletlake_cdk.deploy_check.sandbox.FunctionRunner`
  of the function the state names, so every task runs the deployed files with the payload the
  definition builds; a function error comes back as Lambda's ``FunctionError`` payload, which the
  interpreter turns into the state's error (``Runtime.ExitError`` …) for ``Retry``/``Catch``.
* **Athena tasks** (``athena:startQueryExecution.sync``): the interpreter has no ``.sync`` support for
  Athena; unaided it stops the state with ``RuntimeError: Unsupported sync callback procedure in
  resource arn:aws:states:::athena:startQueryExecution.sync`` (and the Parallel around it then with
  ``ValueError: Custom Error Names MUST NOT begin with the prefix 'States.', got
  'States.Runtime'``). The check plugs a service integration into the interpreter that hands the
  state's ``QueryString`` to :class:`LocalAthena` and waits for it, so the statement the definition
  sends is the one that runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import boto3

from walletlake_cdk.deploy_check.assembly import ACCOUNT, REGION
from walletlake_cdk.deploy_check.local_athena import LocalAthena
from walletlake_cdk.deploy_check.sandbox import FunctionRunner

#: How often an execution's status is read while waiting for it to end.
_POLL_SECONDS: Final = 0.2


@dataclasses.dataclass(frozen=True, slots=True)
class Execution:
    """How an execution ended, with its history (state names entered, in order)."""

    status: str
    output: Any
    error: str | None
    cause: str | None
    states_entered: tuple[str, ...]
    events: tuple[dict[str, Any], ...]


def _athena_service(athena: LocalAthena) -> Any:
    """A service integration of the interpreter that runs ``athena:startQueryExecution[.sync]`` locally."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import (
        ResourceCondition,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_unsupported import (  # noqa: E501
        StateTaskServiceUnsupported,
    )

    class LocalAthenaService(StateTaskServiceUnsupported):
        def __init__(self) -> None:
            super().__init__()
            patterns: Any = {ResourceCondition.WaitForTaskToken, ResourceCondition.Sync}
            self._supported_integration_patterns = patterns  # type: ignore[misc]

        def _log_unsupported_warning(self) -> None:
            """Silent: this integration is supported here (by :class:`LocalAthena`)."""

        def _eval_service_task(
            self,
            env: Any,
            resource_runtime_part: Any,
            normalised_parameters: dict[str, Any],
            state_credentials: Any,
        ) -> None:
            env.stack.append(athena.start_query_execution(normalised_parameters))

        def _build_sync_resolver(
            self,
            env: Any,
            resource_runtime_part: Any,
            normalised_parameters: dict[str, Any],
            state_credentials: Any,
        ) -> Callable[[], Any]:
            query_id = env.stack[-1]["QueryExecutionId"]

            def resolve() -> Any:
                execution = athena.get_query_execution(query_id)["QueryExecution"]
                state = execution["Status"]["State"]
                if state == "SUCCEEDED":
                    return execution
                if state in ("FAILED", "CANCELLED"):
                    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
                        FailureEventException,
                    )

                    raise FailureEventException(
                        failure_event=self._get_athena_failure(
                            env, execution["Status"].get("StateChangeReason", state)
                        )
                    )
                return None

            return resolve

        def _get_athena_failure(self, env: Any, reason: str) -> Any:
            from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
            from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import (
                CustomErrorName,
            )
            from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import FailureEvent
            from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

            return FailureEvent(
                env=env,
                error_name=CustomErrorName("Athena.AmazonAthenaException"),
                event_type=HistoryEventType.TaskFailed,
                event_details=EventDetails(  # type: ignore[typeddict-item]
                    taskFailedEventDetails=TaskFailedEventDetails(
                        error="Athena.AmazonAthenaException",
                        cause=reason,
                        resource="startQueryExecution.sync",
                        resourceType="athena",
                    )
                ),
            )

    return LocalAthenaService()


class LocalStepFunctions:
    """Runs state machine definitions with moto's interpreter, Lambda and Athena served locally."""

    def __init__(self, runners: Mapping[str, FunctionRunner], athena: LocalAthena, topics: list[str]) -> None:
        self._runners = {runner.function.arn: runner for runner in runners.values()}
        self._runners.update({runner.function.logical_id: runner for runner in runners.values()})
        self.athena = athena
        self._topics = topics
        self._stack = contextlib.ExitStack()
        self.published: list[dict[str, Any]] = []

    def __enter__(self) -> LocalStepFunctions:
        from unittest import mock

        import moto.awslambda.models as lambda_models
        import moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task_factory as factory
        from moto import mock_aws

        original_factory = factory.state_task_service_for
        athena_service = self.athena

        def service_for(service_name: str) -> Any:
            if service_name == "athena":
                return _athena_service(athena_service)
            return original_factory(service_name)

        self._stack.enter_context(mock.patch.object(factory, "state_task_service_for", service_for))
        self._stack.enter_context(
            mock.patch.object(lambda_models.LambdaBackend, "invoke", self._lambda_backend_invoke())
        )
        self._stack.enter_context(mock_aws(config={"stepfunctions": {"execute_state_machine": True}}))
        sns = boto3.client("sns", region_name=REGION)
        for topic in self._topics:
            sns.create_topic(Name=topic.rsplit(":", 1)[-1])
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()

    def _lambda_backend_invoke(self) -> Callable[..., bytes]:
        """moto's ``LambdaBackend.invoke``, answering from the function runners."""
        runners = self._runners

        def invoke(
            backend: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any
        ) -> bytes:
            runner = runners.get(function_name) or runners.get(function_name.rsplit(":", 1)[-1])
            if runner is None:
                raise KeyError(f"no deployed function {function_name}")
            invocation = runner.invoke(json.loads(body) if body else {})
            if invocation.error:
                response_headers["x-amz-function-error"] = "Unhandled"
            payload = json.dumps(invocation.payload).encode()
            response_headers["Content-Length"] = str(len(payload))
            return payload

        return invoke

    def run(
        self, name: str, definition: Mapping[str, Any], payload: Mapping[str, Any], *, timeout: float = 900
    ) -> Execution:
        """Create the state machine, start one execution with ``payload`` and wait for its end."""
        client = boto3.client("stepfunctions", region_name=REGION)
        machine = client.create_state_machine(
            name=name, definition=json.dumps(definition), roleArn=f"arn:aws:iam::{ACCOUNT}:role/{name}"
        )["stateMachineArn"]
        execution_arn = client.start_execution(
            stateMachineArn=machine, name=f"{name}-run", input=json.dumps(payload)
        )["executionArn"]
        deadline = time.monotonic() + timeout
        while True:
            described = client.describe_execution(executionArn=execution_arn)
            if described["status"] != "RUNNING":
                break
            if time.monotonic() > deadline:
                client.stop_execution(executionArn=execution_arn, error="DeployCheck.Timeout")
                raise TimeoutError(f"{name} still running after {timeout:.0f} s")
            time.sleep(_POLL_SECONDS)
        events = tuple(_history(client, execution_arn))
        entered = tuple(
            event[key]["name"] for event in events for key in ("stateEnteredEventDetails",) if key in event
        )
        output = described.get("output")
        return Execution(
            status=described["status"],
            output=json.loads(output) if output else None,
            error=described.get("error"),
            cause=described.get("cause"),
            states_entered=entered,
            events=events,
        )


def _history(client: Any, execution_arn: str) -> Iterator[dict[str, Any]]:
    token = None
    while True:
        page = client.get_execution_history(
            executionArn=execution_arn, **({"nextToken": token} if token else {})
        )
        yield from page["events"]
        token = page.get("nextToken")
        if not token:
            return
