"""The Lambda runtime's part, run by ``python -I -S`` inside the deploy check's sandbox.

Standard library only: this file is the one thing on the interpreter's path that Lambda would not
ship, and it must not lend the function anything. It puts on ``sys.path`` exactly what the Python
3.11 runtime does (``/var/task``, then the merged layers under ``/opt``, then the runtime's own
SDK), imports the handler the template names (timed: the cold start), then serves invocations:
one JSON request per line on stdin, one JSON answer per line on the result pipe. The function's
own prints and logs go to stdout/stderr as on Lambda.

Usage: ``python -I -S bootstrap.py RESULT_FD TASK_ROOT OPT_ROOT RUNTIME_ROOT HANDLER``.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import traceback
from typing import Any


class _Context:
    """What Lambda passes as ``context`` (the attributes Powertools and handlers read)."""

    def __init__(self, fields: dict[str, Any], deadline: float) -> None:
        self.function_name = fields["function_name"]
        self.function_version = "$LATEST"
        self.invoked_function_arn = fields["invoked_function_arn"]
        self.memory_limit_in_mb = fields["memory_limit_in_mb"]
        self.aws_request_id = fields["aws_request_id"]
        self.log_group_name = "/aws/lambda/" + self.function_name
        self.log_stream_name = "deploy-check"
        self._deadline = deadline

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _kill_before(operation: str) -> None:
    """Fault injection: SIGKILL this process the first time the SDK is about to call ``operation``."""
    import botocore.client

    client_class: Any = botocore.client.BaseClient
    original = client_class._make_api_call
    marker = os.environ["DEPLOY_CHECK_KILL_MARKER"]

    def make_api_call(self: Any, operation_name: str, api_params: Any) -> Any:
        if operation_name == operation and not os.path.exists(marker):
            with open(marker, "w") as flag:
                flag.write(operation_name)
            os.kill(os.getpid(), 9)
        return original(self, operation_name, api_params)

    client_class._make_api_call = make_api_call


def main() -> int:
    result_fd, task_root, opt_root, runtime_root, handler_name = sys.argv[1:6]
    results = os.fdopen(int(result_fd), "w", buffering=1)
    stdlib = [path for path in sys.path if path and not path.endswith("bootstrap")]
    sys.path[:] = [
        task_root,
        os.path.join(opt_root, "python", "lib", "python3.11", "site-packages"),
        os.path.join(opt_root, "python"),
        *stdlib,
        runtime_root,
    ]
    os.chdir(task_root)
    started = time.perf_counter()
    try:
        module_name, _, function_name = handler_name.rpartition(".")
        module = __import__(module_name, fromlist=[function_name])
        handler = getattr(module, function_name)
    except BaseException as error:  # what Lambda reports as Runtime.ImportModuleError / init error
        results.write(json.dumps({"ready": False, **_error(error)}) + "\n")
        return 1
    import_seconds = time.perf_counter() - started
    # Every module the handler can reach, imported too: a module imported only inside a function
    # (the Athena engine's awswrangler, say) must load on Lambda although this run never calls it.
    for name in filter(None, os.environ.get("DEPLOY_CHECK_ALSO_IMPORT", "").split(",")):
        try:
            __import__(name)
        except BaseException as error:
            results.write(json.dumps({"ready": False, **_error(error), "module": name}) + "\n")
            return 1
    if os.environ.get("DEPLOY_CHECK_KILL_BEFORE"):
        _kill_before(os.environ["DEPLOY_CHECK_KILL_BEFORE"])
    results.write(
        json.dumps({"ready": True, "import_seconds": import_seconds, "max_rss_kb": _max_rss_kb()}) + "\n"
    )
    for line in sys.stdin:
        request = json.loads(line)
        context = _Context(request["context"], time.monotonic() + request["timeout_seconds"])
        started = time.perf_counter()
        try:
            answer = {"ok": True, "result": handler(request["event"], context)}
        except Exception as error:
            answer = {"ok": False, **_error(error)}
        answer["seconds"] = time.perf_counter() - started
        answer["max_rss_kb"] = _max_rss_kb()
        results.write(json.dumps(answer, default=str) + "\n")
    return 0


def _error(error: BaseException) -> dict[str, Any]:
    return {
        "errorType": type(error).__name__,
        "errorMessage": str(error),
        "stackTrace": traceback.format_exception(error),
    }


def _max_rss_kb() -> int:
    """Peak resident memory of this process image (``VmHWM``).

    Not ``getrusage``'s ``ru_maxrss``: Linux carries that over ``fork`` and ``execve``, so it would
    report the parent's size; the high-water mark belongs to the address space ``execve`` made.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


if __name__ == "__main__":
    sys.exit(main())
