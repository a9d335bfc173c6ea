"""What the write path does with a DynamoDB error: back off, retry, hand back, or answer it as it is.

Decided from botocore's own retry data, not a list kept here, so a code AWS adds to botocore's
policies is handled as boto3 handles it:

- **throttled** (back off, retry, then 429): botocore's standard retry mode's throttling checker
  (:class:`botocore.retries.standard.ThrottledRetryableChecker`) and the throttling policies of
  botocore's ``_retry.json`` (``ProvisionedThroughputExceededException``, ``ThrottlingException``,
  HTTP 429...);
- **transient** (retry; a write's outcome is unknown): the standard mode's transient checker (HTTP
  500/502/503/504, ``RequestTimeout``...), the server-error policies of ``_retry.json`` and the
  DynamoDB policies of ``_retry.json`` (``TransactionInProgressException``: the same
  ``ClientRequestToken`` still being processed), and the error shapes DynamoDB's service model marks
  ``retryable``;
- **cancelled** (the caller reads why): ``TransactionCanceledException`` and
  ``ConditionalCheckFailedException``, refusals the store itself asked DynamoDB to make, and
  ``TransactionConflictException`` (a record's put meeting a transaction in flight on it);
- **refused** (answered as it is, never "retry later"): everything else, which botocore does not
  retry either: ``ValidationException``, ``ExpiredTokenException``, ``InvalidSignatureException``,
  ``UnrecognizedClientException``, ``AccessDeniedException``, ``ResourceNotFoundException``... A
  repeat would be refused the same way until someone fixes the deployment.

The backoff between throttled attempts is ``_retry.json``'s DynamoDB delay (base 50 ms, doubling),
with full jitter so that throttled writers spread apart.
"""

from __future__ import annotations

import enum
import functools
import random
from collections.abc import Iterator, Mapping
from typing import Any, Final

import botocore.loaders
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.retries import standard

#: A single-item write's condition failed (its body holds the item, ``ReturnValuesOnConditionCheckFailure``).
CONDITION_FAILED_ERROR: Final = "ConditionalCheckFailedException"
#: A single-item write met a transaction in flight on its item: nothing is decided yet.
TRANSACTION_CONFLICT_ERROR: Final = "TransactionConflictException"
#: Errors the store asks for (conditions) or must read itself (a record's put meeting a transaction
#: in flight: the outcome lookup answers ``outcome_pending``, a refusal's record pauses and retries).
CANCELLATION_ERRORS: Final = frozenset(
    {"TransactionCanceledException", CONDITION_FAILED_ERROR, TRANSACTION_CONFLICT_ERROR}
)


class Verdict(enum.Enum):
    """What one failed attempt calls for."""

    THROTTLED = "throttled"
    TRANSIENT = "transient"
    CANCELLED = "cancelled"
    REFUSED = "refused"


@functools.cache
def _retry_data() -> dict[str, Any]:
    data: dict[str, Any] = botocore.loaders.create_loader().load_data("_retry")
    return data


def _policies() -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every response policy that applies to DynamoDB in ``_retry.json``: (name, response clause)."""
    data = _retry_data()
    definitions = data.get("definitions", {})
    retry = data.get("retry", {})
    for scope in (retry.get("__default__", {}), retry.get("dynamodb", {}).get("__default__", {})):
        for name, policy in scope.get("policies", {}).items():
            resolved = definitions.get(policy["$ref"], {}) if "$ref" in policy else policy
            response = resolved.get("applies_when", {}).get("response")
            if response:
                yield name, response


@functools.cache
def _retry_json_codes() -> tuple[frozenset[str], frozenset[str], frozenset[int]]:
    """``_retry.json``'s (throttling codes, other retried codes, retried HTTP statuses without a code)."""
    throttling: set[str] = set()
    retried: set[str] = set()
    statuses: set[int] = set()
    for name, response in _policies():
        code = response.get("service_error_code")
        if code is None:
            if "http_status_code" in response:
                statuses.add(int(response["http_status_code"]))
            continue
        slow_down = any(word in name for word in ("throttl", "throughput", "too_many", "limit"))
        (throttling if slow_down else retried).add(code)
    return frozenset(throttling), frozenset(retried), frozenset(statuses)


@functools.cache
def _modeled_retryable() -> frozenset[str]:
    """Error shapes DynamoDB's service model marks ``retryable`` (botocore's modeled checker reads them).

    Read from the model's JSON through botocore's loader (a few ms), not through a session's
    ``ServiceModel`` (a few hundred: it would stall whatever else runs in the process).
    """
    model: dict[str, Any] = botocore.loaders.create_loader().load_service_model("dynamodb", "service-2")
    return frozenset(
        name
        for name, shape in model.get("shapes", {}).items()
        if shape.get("exception") and shape.get("retryable") is not None
    )


def _context(status: int, code: str) -> standard.RetryContext:
    response = AWSResponse(url="", status_code=status, headers=HTTPHeaders(), raw=None)
    return standard.RetryContext(
        attempt_number=1, parsed_response={"Error": {"Code": code}}, http_response=response
    )


_THROTTLED_CHECKER: Final = standard.ThrottledRetryableChecker()
_TRANSIENT_CHECKER: Final = standard.TransientRetryableChecker()


@functools.lru_cache(maxsize=256)
def classify(status: int, code: str) -> Verdict:
    """The verdict on DynamoDB's answer ``status`` with error ``code`` (the part after ``#``).

    Examples
    --------
    >>> classify(400, "ProvisionedThroughputExceededException")
    <Verdict.THROTTLED: 'throttled'>
    >>> classify(400, "ExpiredTokenException")
    <Verdict.REFUSED: 'refused'>
    >>> classify(500, "InternalServerError")
    <Verdict.TRANSIENT: 'transient'>
    """
    if code in CANCELLATION_ERRORS:
        return Verdict.CANCELLED
    throttling, retried, statuses = _retry_json_codes()
    # Retried by DynamoDB's own policy ("still processing" a ClientRequestToken): it may commit,
    # so it is an unknown outcome, not a capacity refusal, though botocore backs off on it too.
    if code in retried or code in _modeled_retryable():
        return Verdict.TRANSIENT
    context = _context(status, code)
    if code in throttling or status == 429 or _THROTTLED_CHECKER.is_retryable(context):
        return Verdict.THROTTLED
    if status in statuses or _TRANSIENT_CHECKER.is_retryable(context):
        return Verdict.TRANSIENT
    return Verdict.REFUSED


@functools.cache
def _dynamodb_delay() -> tuple[float, float]:
    delay = _retry_data().get("retry", {}).get("dynamodb", {}).get("__default__", {}).get("delay", {})
    base = delay.get("base", 0.05)
    return (float(base) if base != "rand" else 0.05), float(delay.get("growth_factor", 2))


def throttle_backoff(attempt: int, rng: random.Random | None = None) -> float:
    """Seconds before throttled attempt ``attempt + 1``: full jitter up to base x growth^attempt.

    Examples
    --------
    >>> 0 <= throttle_backoff(0) <= 0.05
    True
    """
    base, growth = _dynamodb_delay()
    return (rng or random).uniform(0.0, base * growth**attempt)


def retry_after_seconds(rng: random.Random | None = None) -> int:
    """A ``Retry-After`` with jitter (1 to 3 seconds): clients refused together come back apart."""
    return 1 + (rng or random).randrange(3)
