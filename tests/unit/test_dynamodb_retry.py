"""What the write path makes of DynamoDB's errors: botocore's retry data, not a hand-kept list."""

from __future__ import annotations

import random

import pytest
from botocore.retries import standard

from contracts.settings import Settings
from wallet.dynamodb import DynamoDBClient
from wallet.dynamodb_retry import Verdict, classify, retry_after_seconds, throttle_backoff
from wallet.store import RetryPolicy, WalletStore


@pytest.mark.parametrize(
    ("status", "code", "verdict"),
    [
        (400, "ProvisionedThroughputExceededException", Verdict.THROTTLED),
        (400, "ThrottlingException", Verdict.THROTTLED),
        (400, "RequestLimitExceeded", Verdict.THROTTLED),
        (429, "SomethingNew", Verdict.THROTTLED),
        (500, "InternalServerError", Verdict.TRANSIENT),
        (503, "ServiceUnavailable", Verdict.TRANSIENT),
        (400, "TransactionInProgressException", Verdict.TRANSIENT),
        (400, "TransactionCanceledException", Verdict.CANCELLED),
        (400, "ConditionalCheckFailedException", Verdict.CANCELLED),
        (400, "ValidationException", Verdict.REFUSED),
        (400, "ExpiredTokenException", Verdict.REFUSED),
        (403, "InvalidSignatureException", Verdict.REFUSED),
        (400, "UnrecognizedClientException", Verdict.REFUSED),
        (400, "AccessDeniedException", Verdict.REFUSED),
        (400, "ResourceNotFoundException", Verdict.REFUSED),
    ],
)
def test_each_error_gets_the_verdict_botocores_retry_data_gives_it(
    status: int, code: str, verdict: Verdict
) -> None:
    assert classify(status, code) is verdict


def test_every_code_botocore_throttles_on_is_a_throttle_here() -> None:
    # GIVEN botocore's standard-mode throttling codes (its own list, not ours)
    codes = standard.ThrottledRetryableChecker._THROTTLED_ERROR_CODES
    # THEN each is backed off here, except DynamoDB's "still processing" a request token, which may
    # commit and so is an unknown outcome rather than a capacity refusal
    assert {code for code in codes if classify(400, code) is not Verdict.THROTTLED} == {
        "TransactionInProgressException"
    }


def test_the_backoff_is_dynamodbs_doubling_50_ms_with_full_jitter() -> None:
    rng = random.Random(7)
    for attempt in range(6):
        delays = [throttle_backoff(attempt, rng) for _ in range(200)]
        assert min(delays) >= 0
        assert max(delays) <= 0.05 * 2**attempt
        assert max(delays) > 0.05 * 2**attempt * 0.8  # jittered over the whole range


def test_retry_after_is_jittered_over_whole_seconds() -> None:
    rng = random.Random(3)
    assert {retry_after_seconds(rng) for _ in range(200)} == {1, 2, 3}


def test_a_calls_deadline_is_the_policys_within_half_the_drain() -> None:
    # GIVEN the default drain (25 s) and a short one (4 s)  THEN 10 s, and 2 s
    client = DynamoDBClient("us-east-1")
    assert WalletStore(Settings(), dynamodb=client).call_deadline == 10.0
    assert WalletStore(Settings(drain_seconds=4), dynamodb=client).call_deadline == 2.0
    # AND the attempts fit in it: three of them at the per-attempt timeout
    assert 3 * RetryPolicy().attempt_timeout < RetryPolicy().deadline < 25
