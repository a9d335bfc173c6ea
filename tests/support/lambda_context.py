"""A stand-in for the ``context`` Lambda passes a handler, for tests that call handlers directly."""

from __future__ import annotations

import dataclasses
import time


@dataclasses.dataclass
class FakeLambdaContext:
    """The attributes Powertools' ``inject_lambda_context`` and the handlers read."""

    function_name: str = "walletlake-test-function"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:walletlake-test-function"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"
    #: Seconds the invocation may still run, as Lambda counts them from the call.
    timeout_seconds: float = 60.0
    _started: float = dataclasses.field(default_factory=time.monotonic)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._started + self.timeout_seconds - time.monotonic()) * 1000))
