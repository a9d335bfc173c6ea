"""One DynamoDB call of the write path, retried as botocore's retry data says, within one deadline.

What each failure calls for is :func:`wallet.dynamodb_retry.classify`'s verdict; what the answer
may then *say* follows one rule: once an attempt of a ``TransactWriteItems`` was sent and not
answered, the call's answer is never "nothing was written". Whatever fails after it (a throttle, an
expired token, the deadline, a transaction still in progress) the call ends in
:class:`~wallet.errors.OutcomeUnknownError`, and :class:`CallState` carries the fact to the
request's later calls, so a request whose earlier call lost an answer is never told it wrote
nothing either (:mod:`wallet.store` decides it from the nonce's record instead).

``TransactionInProgressException`` (DynamoDB still processing the same ``ClientRequestToken``) is
retried with the same token, with botocore's DynamoDB backoff (50 ms doubling), up to
:attr:`RetryPolicy.in_progress_attempts` (botocore's DynamoDB retry data allows 10) and the
deadline: the transaction is then finished one way or the other and the same token answers how.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, Final

from contracts import api_metrics as metrics
from wallet.dynamodb import DynamoDBClient, DynamoDBError, DynamoDBTransportError
from wallet.dynamodb_retry import Verdict, retry_after_seconds, throttle_backoff
from wallet.errors import (
    OutcomeUnknownError,
    StoreRejectedError,
    StoreUnavailableError,
    ThrottledError,
)
from wallet.telemetry import Telemetry

_logger = logging.getLogger(__name__)

#: DynamoDB is still processing a TransactWriteItems with this ClientRequestToken.
IN_PROGRESS: Final = "TransactionInProgressException"
_WRITE: Final = "TransactWriteItems"


@dataclasses.dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounds of the store's retries; delays are full-jitter exponential backoff in seconds.

    Attributes
    ----------
    conflict_attempts:
        Writes of one request that may be cancelled by another transaction on a wallet (or by a
        wallet stamped ahead of this server's clock) before it fails with
        :class:`~wallet.errors.ContentionError` (nothing written).
    transient_attempts:
        Tries of one DynamoDB call on a 5xx or a network failure before
        :class:`~wallet.errors.StoreUnavailableError`. Repeating a write is safe: the nonce condition
        turns a repeat of a committed transaction into a recognised replay.
    group_conflict_attempts:
        Writes of one group commit that DynamoDB may cancel only for ``TransactionConflict``
        (another process's transaction on one of its wallets) before the group is split into
        single writes, as a group with a real refusal is at once. Splitting a group that met a
        conflict turns one transaction on a busy wallet into many, each able to conflict again.
    throttle_attempts:
        Tries of one DynamoDB call DynamoDB throttles, with botocore's DynamoDB backoff between
        them (:func:`wallet.dynamodb_retry.throttle_backoff`: 50 ms doubling, jittered), before
        :class:`~wallet.errors.ThrottledError` (429). botocore's legacy DynamoDB policy allows
        10 tries over about 25 s, longer than a client waits for a payment.
    in_progress_attempts:
        Tries of one TransactWriteItems DynamoDB answers ``TransactionInProgressException`` (its
        token still being processed), with the throttle backoff between them, within the deadline:
        botocore's DynamoDB retry data allows 10 from 50 ms.
    attempt_timeout:
        Seconds one attempt may take (credentials, connection, the whole answer): near the latency
        target (DynamoDB answers in milliseconds), so a stalled connection is abandoned and the
        call tried again well within the deadline.
    deadline:
        Seconds one DynamoDB call may take over all its attempts and pauses, and at most half the
        server's drain (``WALLETLAKE_DRAIN_SECONDS``, 25 s: :attr:`WalletStore.call_deadline`), so
        a call in flight at SIGTERM is answered, and its group's turn in the queue taken, before
        the process exits.
    """

    conflict_attempts: int = 10
    transient_attempts: int = 3
    group_conflict_attempts: int = 4
    throttle_attempts: int = 4
    in_progress_attempts: int = 10
    attempt_timeout: float = 2.0
    deadline: float = 10.0
    base_delay: float = 0.005
    max_delay: float = 0.2

    def delay(self, attempt: int) -> float:
        """Full jitter (uniform 0..min(max, base x 2^attempt)): spreads racing retries apart."""
        return random.uniform(0.0, min(self.max_delay, self.base_delay * (2**attempt)))


@dataclasses.dataclass(slots=True)
class CallState:
    """What a request's calls learned that outlives one call: an attempt sent and never answered."""

    unanswered: bool = False


@dataclasses.dataclass(slots=True)
class _Tries:
    """Attempts of one call so far, by what failed them."""

    transient: int = 0
    throttled: int = 0
    in_progress: int = 0


class DynamoDBCalls:
    """The write path's DynamoDB calls: retries, deadline and what a failure may claim.

    Parameters
    ----------
    client:
        The DynamoDB client (:class:`wallet.dynamodb.DynamoDBClient`, or a test's wrapper of it).
    retry:
        The bounds; ``deadline`` is the time one call may take over all its attempts.
    """

    def __init__(
        self,
        client: DynamoDBClient,
        retry: RetryPolicy,
        telemetry: Telemetry,
        *,
        deadline: float,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.client = client
        self.retry = retry
        self.telemetry = telemetry
        self.deadline = deadline
        self._sleep = sleep

    async def get(
        self,
        table: str,
        key: dict[str, Any],
        *,
        projection: str | None = None,
        names: dict[str, str] | None = None,
    ) -> dict[str, Any] | None:
        """One item, read strongly consistently: what is committed (a transaction in flight is not)."""
        payload: dict[str, Any] = {"TableName": table, "Key": key, "ConsistentRead": True}
        if projection:
            payload["ProjectionExpression"] = projection
            payload["ExpressionAttributeNames"] = names or {}
        answer = await self.call("GetItem", payload)
        item: dict[str, Any] | None = answer.get("Item")
        return item or None

    async def call(
        self, operation: str, payload: dict[str, Any], state: CallState | None = None
    ) -> dict[str, Any]:
        """One DynamoDB call, retried as botocore's retry data says, within one deadline.

        Each attempt has :attr:`RetryPolicy.attempt_timeout`, all of them together the deadline.
        Throttling backs off (botocore's DynamoDB delay) and tries again, then answers 429; a
        transient failure (5xx, a lost or garbled answer) tries again, then answers 503; a
        transaction still in progress is asked again with its token; a cancellation goes back to
        the caller, which reads its reasons; a refusal a repeat cannot fix (credentials,
        validation, a missing table) answers 500 ``dynamodb_refused``. Every failure is logged
        with DynamoDB's request id.

        For a TransactWriteItems, once an attempt went out unanswered (in this call or, through
        ``state``, an earlier call of the same request) every failure is
        :class:`OutcomeUnknownError`: it may have committed.
        """
        state = state if state is not None else CallState()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.deadline
        tries = _Tries()
        while True:
            timeout = min(self.retry.attempt_timeout, deadline - loop.time())
            try:
                if timeout <= 0:
                    raise DynamoDBTransportError(
                        f"no time left for {operation} within the {self.deadline:.1f} s deadline", sent=False
                    )
                return await self.client.call(operation, payload, timeout=timeout)
            except DynamoDBError as error:
                delay = self._after_error(operation, error, state, tries, deadline - loop.time())
            except DynamoDBTransportError as error:
                state.unanswered = state.unanswered or error.sent
                _logger.warning(
                    "DynamoDB %s failed in transport (request id %s, sent %s): %s",
                    operation,
                    error.request_id,
                    error.sent,
                    error,
                )
                self.telemetry.event(metrics.NETWORK_ERRORS, operation=operation, error=str(error))
                tries.transient += 1
                if tries.transient >= self.retry.transient_attempts or loop.time() >= deadline:
                    raise self._unknown(operation, error, state) from error
                delay = min(self.retry.delay(tries.transient - 1), max(0.0, deadline - loop.time()))
            self.telemetry.count(metrics.RETRIES)
            await self._sleep(delay)

    def _after_error(
        self, operation: str, error: DynamoDBError, state: CallState, tries: _Tries, time_left: float
    ) -> float:
        """The pause before the next attempt after DynamoDB's error answer, or the error to raise."""
        verdict = error.verdict
        if verdict is Verdict.CANCELLED:
            _logger.debug("DynamoDB %s cancelled (request id %s)", operation, error.request_id)
            raise error  # a cancelled transaction: the caller reads its reasons
        _logger.warning(
            "DynamoDB %s failed: %s %s (%s, request id %s): %s",
            operation,
            error.status,
            error.type,
            verdict.value,
            error.request_id,
            error.message,
        )
        after_unanswered = state.unanswered and operation == _WRITE
        if error.type == IN_PROGRESS:
            state.unanswered = True  # an earlier attempt of this token is still committing
            self.telemetry.event(metrics.INTERNAL_ERRORS, operation=operation, error=error.type)
            delay = throttle_backoff(tries.in_progress)
            tries.in_progress += 1
            if tries.in_progress >= self.retry.in_progress_attempts or delay >= time_left:
                raise self._unknown(operation, error, state) from error
            return delay
        if verdict is Verdict.REFUSED:
            if after_unanswered:
                raise self._unknown(operation, error, state) from error
            raise self._rejected(operation, error) from error
        if verdict is Verdict.THROTTLED:
            self.telemetry.event(metrics.THROTTLES, operation=operation, error=error.type)
            delay = throttle_backoff(tries.throttled)
            tries.throttled += 1
            if tries.throttled < self.retry.throttle_attempts and delay < time_left:
                return delay
            if after_unanswered:
                raise self._unknown(operation, error, state) from error
            raise ThrottledError(
                f"DynamoDB is throttling ({error.type}, request id {error.request_id}); "
                "nothing was written, retry later with the same nonce",
                retry_after_seconds(),
            ) from error
        state.unanswered = True
        self.telemetry.event(metrics.INTERNAL_ERRORS, operation=operation, error=error.type)
        tries.transient += 1
        if tries.transient >= self.retry.transient_attempts:
            raise self._unknown(operation, error, state) from error
        return min(self.retry.delay(tries.transient - 1), max(0.0, time_left))

    def _unknown(self, operation: str, error: Exception, state: CallState) -> StoreUnavailableError:
        """The last failure of a call: outcome unknown for a write that may have committed."""
        if state.unanswered and operation == _WRITE:
            return OutcomeUnknownError("", "", None, retry_after_seconds())  # the store names the request
        if isinstance(error, DynamoDBError):
            return self.unavailable(operation, error)
        return StoreUnavailableError(
            f"DynamoDB unreachable for {operation} ({error}); nothing was written, retry later",
            retry_after_seconds(),
        )

    def unavailable(self, operation: str, error: DynamoDBError) -> StoreUnavailableError:
        """A failure that decided nothing; retrying later with the same nonce is safe."""
        if error.verdict is Verdict.CANCELLED:  # cancelled for reasons the store cannot read
            self.telemetry.event(metrics.UNEXPECTED_ERRORS, operation=operation, error=str(error))
        return StoreUnavailableError(
            f"DynamoDB {operation} failed ({error.type}, request id {error.request_id}); retry later "
            "with the same nonce",
            retry_after_seconds(),
        )

    def _rejected(self, operation: str, error: DynamoDBError) -> StoreRejectedError:
        """A refusal no repeat can fix: counted, and answered as it is."""
        self.telemetry.event(metrics.UNEXPECTED_ERRORS, operation=operation, error=str(error))
        return StoreRejectedError(
            f"DynamoDB refused {operation}: {error.type} (HTTP {error.status}, request id "
            f"{error.request_id}): {error.message}. Nothing was written; repeating will not help "
            "until the deployment is fixed (credentials, permissions, table)"
        )
