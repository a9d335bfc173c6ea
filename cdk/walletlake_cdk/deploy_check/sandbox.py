"""A Lambda function's execution environment, rebuilt from the files it deploys, on this machine.

:func:`assemble` lays the function out as Lambda does: its code asset is ``/var/task``; its layers
are extracted in order into one ``/opt`` (a later layer's file replaces an earlier one's, as on
Lambda), here a tree of hard links so that no byte is copied; the runtime's own boto3 comes last.
:class:`FunctionRunner` keeps warm execution environments of one function (one process each,
``python -I -S``: no site-packages, no ``PYTHONPATH``, nothing of the development environment),
invokes them with events, and answers what Lambda would: the handler's result, or an error payload
with the ``errorType`` Lambda reports (``Runtime.ImportModuleError``, ``Runtime.ExitError`` for a
process that died, ``Sandbox.Timedout``), plus what the check reports (cold import time, peak
memory).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any, Final

from walletlake_cdk.deploy_check.assembly import DeployedFunction

_logger = logging.getLogger(__name__)

BOOTSTRAP: Final = Path(__file__).with_name("bootstrap.py")

#: Lambda's limit on a function's code plus all its layers, unzipped
#: (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
UNZIPPED_LIMIT_BYTES: Final = 250 * 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class Filesystem:
    """The folders standing in for ``/var/task``, ``/opt`` and the runtime's SDK."""

    task: Path
    opt: Path
    runtime: Path
    unzipped_bytes: int


def folder_bytes(folder: Path) -> int:
    """Bytes of every file under ``folder`` (what counts against the unzipped limit)."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


def assemble(
    function: DeployedFunction, layer_folders: Iterable[Path], runtime: Path, cache: Path
) -> Filesystem:
    """The function's filesystem: its code, its layers merged in order into one ``/opt``."""
    folders = list(layer_folders)
    digest = hashlib.sha256("\n".join(str(folder.resolve()) for folder in folders).encode()).hexdigest()[:16]
    opt = cache / "opt" / digest
    if not opt.is_dir():
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=_parent(opt)))
        for folder in folders:
            _merge_into(folder, staging)
        try:
            staging.rename(opt)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    size = folder_bytes(function.code) + sum(folder_bytes(folder) for folder in folders)
    return Filesystem(task=function.code, opt=opt, runtime=runtime, unzipped_bytes=size)


def _parent(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.parent


def _merge_into(source: Path, target: Path) -> None:
    """Extract one layer over ``target``: files replace files, as unzipping into ``/opt`` does."""
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        destination = target / relative
        if path.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        if destination.exists():
            destination.unlink()
        try:
            os.link(path, destination)
        except OSError:
            shutil.copy2(path, destination)


def lambda_environment(
    function: DeployedFunction, filesystem: Filesystem, overrides: Mapping[str, str]
) -> dict[str, str]:
    """The variables Lambda defines for the function, then the template's, then local overrides.

    https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime
    """
    name = function.logical_id
    defined = {
        "AWS_LAMBDA_FUNCTION_NAME": name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_mb),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}",
        "AWS_LAMBDA_LOG_STREAM_NAME": "deploy-check",
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
        "AWS_EXECUTION_ENV": f"AWS_Lambda_{function.runtime}",
        "AWS_REGION": overrides.get("AWS_DEFAULT_REGION", "us-east-1"),
        "AWS_DEFAULT_REGION": overrides.get("AWS_DEFAULT_REGION", "us-east-1"),
        "LAMBDA_TASK_ROOT": str(filesystem.task),
        "LAMBDA_RUNTIME_DIR": str(filesystem.runtime),
        "LANG": "en_US.UTF-8",
        "TZ": ":UTC",
        "PATH": f"/usr/local/bin:/usr/bin:/bin:{filesystem.opt}/bin",
        "LD_LIBRARY_PATH": f"{filesystem.opt}/lib",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return {**defined, **function.environment, **overrides}


@dataclasses.dataclass(frozen=True, slots=True)
class Invocation:
    """One invocation's outcome as the caller sees it, and what the check measures."""

    function: str
    payload: Any
    error: str | None
    cold: bool
    import_seconds: float | None
    seconds: float
    max_rss_mb: float

    @property
    def ok(self) -> bool:
        """True when the handler returned (Lambda answers without ``FunctionError``)."""
        return self.error is None


class _Environment:
    """One execution environment: a process that imported the handler and serves invocations."""

    def __init__(self, argv: list[str], environment: dict[str, str], log: IO[str]) -> None:
        read_fd, write_fd = os.pipe()
        self.process = subprocess.Popen(
            [*argv[:4], str(write_fd), *argv[4:]],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=log,
            env=environment,
            pass_fds=(write_fd,),
            text=True,
        )
        os.close(write_fd)
        self._results = os.fdopen(read_fd, "r")
        self._answers: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self._results:
            self._answers.put(json.loads(line))
        self._answers.put(None)

    def answer(self, timeout: float) -> dict[str, Any] | None:
        """The next answer; None when the process died first. :class:`TimeoutError` when time ran out."""
        try:
            return self._answers.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None

    def send(self, request: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


class FunctionRunner:
    """Invokes one deployed function in warm execution environments, as Lambda would.

    Environments are reused one invocation at a time; concurrent invocations get more
    environments (a Distributed Map's units run side by side). An environment whose process dies
    is discarded and the next invocation cold-starts, as on Lambda.
    """

    def __init__(
        self,
        function: DeployedFunction,
        filesystem: Filesystem,
        environment: Mapping[str, str],
        *,
        log_dir: Path,
        python: str = sys.executable,
        concurrency: int = 4,
    ) -> None:
        self.function = function
        self.filesystem = filesystem
        self._environment = dict(environment)
        self._python = python
        self._idle: list[_Environment] = []
        self._lock = threading.Lock()
        # At most this many environments at once (Lambda's reserved concurrency, in effect): a
        # Distributed Map of 200 segments must not start 200 interpreters on one machine.
        self._slots = threading.BoundedSemaphore(concurrency)
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{function.logical_id}.log"
        self._log = self.log_path.open("a")
        self.invocations: list[Invocation] = []
        self.fault: Callable[[dict[str, str]], None] | None = None

    def _start(self) -> tuple[_Environment | None, dict[str, Any]]:
        environment = dict(self._environment)
        if self.fault is not None:
            self.fault(environment)
        argv = [
            self._python,
            "-I",
            "-S",
            str(BOOTSTRAP),
            str(self.filesystem.task),
            str(self.filesystem.opt),
            str(self.filesystem.runtime),
            self.function.handler,
        ]
        started = _Environment(argv, environment, self._log)
        try:
            ready = started.answer(timeout=120)
        except TimeoutError:
            ready = None
        if ready is None or not ready.get("ready"):
            started.stop()
            detail = ready or {
                "errorType": "Runtime.ExitError",
                "errorMessage": "the runtime exited during init",
            }
            module = f" (while importing {detail['module']})" if "module" in detail else ""
            return None, {
                "errorType": "Runtime.ImportModuleError",
                "errorMessage": f"Unable to import module '{self.function.handler}'{module}: "
                f"{detail.get('errorType')}: {detail.get('errorMessage')}",
            }
        return started, ready

    def invoke(self, event: Any) -> Invocation:
        """Run the handler on ``event``; never raises for the function's own failures."""
        with self._slots:
            return self._invoke(event)

    def _invoke(self, event: Any) -> Invocation:
        with self._lock:
            environment = self._idle.pop() if self._idle else None
        cold = environment is None
        import_seconds = None
        if environment is None:
            environment, ready = self._start()
            if environment is None:
                return self._record(ready, cold=True, import_seconds=None, seconds=0.0, rss_kb=0)
            import_seconds = float(ready["import_seconds"])
        request_id = str(uuid.uuid4())
        started = time.perf_counter()
        environment.send(
            {
                "event": event,
                "timeout_seconds": self.function.timeout_seconds,
                "context": {
                    "function_name": self.function.logical_id,
                    "invoked_function_arn": self.function.arn,
                    "memory_limit_in_mb": self.function.memory_mb,
                    "aws_request_id": request_id,
                },
            }
        )
        try:
            answer = environment.answer(timeout=self.function.timeout_seconds)
            timed_out = False
        except TimeoutError:
            answer, timed_out = None, True
        seconds = time.perf_counter() - started
        if answer is None:
            environment.stop()
            error = (
                {
                    "errorType": "Sandbox.Timedout",
                    "errorMessage": f"RequestId: {request_id} Error: Task timed out after "
                    f"{self.function.timeout_seconds:.2f} seconds",
                }
                if timed_out
                else {
                    "errorType": "Runtime.ExitError",
                    "errorMessage": f"RequestId: {request_id} Error: Runtime exited with error: "
                    f"signal {-(environment.process.returncode or 0)}",
                }
            )
            return self._record(error, cold=cold, import_seconds=import_seconds, seconds=seconds, rss_kb=0)
        with self._lock:
            self._idle.append(environment)
        return self._record(
            answer,
            cold=cold,
            import_seconds=import_seconds,
            seconds=seconds,
            rss_kb=int(answer["max_rss_kb"]),
        )

    def _record(
        self, answer: dict[str, Any], *, cold: bool, import_seconds: float | None, seconds: float, rss_kb: int
    ) -> Invocation:
        if answer.get("ok"):
            payload, error = answer["result"], None
        else:
            payload = {
                key: answer[key] for key in ("errorType", "errorMessage", "stackTrace") if key in answer
            }
            error = str(answer.get("errorType"))
        invocation = Invocation(
            function=self.function.logical_id,
            payload=payload,
            error=error,
            cold=cold,
            import_seconds=import_seconds,
            seconds=seconds,
            max_rss_mb=rss_kb / 1024,
        )
        with self._lock:
            self.invocations.append(invocation)
        if error:
            _logger.warning("%s failed: %s", self.function.logical_id, json.dumps(payload)[:2000])
        return invocation

    def recycle(self) -> None:
        """Stop the warm environments: the next invocation cold-starts (with :attr:`fault`, if set)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for environment in idle:
            environment.stop()

    def close(self) -> None:
        """Stop every environment."""
        with self._lock:
            idle, self._idle = self._idle, []
        for environment in idle:
            environment.stop()
        self._log.close()
