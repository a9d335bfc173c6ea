"""The write path's DynamoDB client: endpoint from the SDK's configuration, SigV4 equal to botocore's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from botocore.credentials import ReadOnlyCredentials

from contracts.settings import Settings
from wallet.dynamodb import BotocoreSigner, CrtSigner, DynamoDBClient, DynamoDBError

URL = "https://dynamodb.eu-west-1.amazonaws.com/"
HEADERS = [
    ("Host", "dynamodb.eu-west-1.amazonaws.com"),
    ("Content-Type", "application/x-amz-json-1.0"),
    ("X-Amz-Target", "DynamoDB_20120810.TransactWriteItems"),
]


def _signed_alike(credentials: ReadOnlyCredentials, body: bytes) -> tuple[dict[str, str], dict[str, str]]:
    """Both signers' headers for one request, signed within the same second."""
    for _ in range(5):
        reference = dict(BotocoreSigner(URL, "eu-west-1").sign(credentials, "/", HEADERS, body))
        crt = dict(CrtSigner(URL, "eu-west-1").sign(credentials, "/", HEADERS, body))
        if reference["X-Amz-Date"] == crt["X-Amz-Date"]:
            return reference, crt
    raise AssertionError("could not sign twice within one second")


@pytest.mark.parametrize("token", [None, "session-token/with+odd=chars"])
@pytest.mark.parametrize(
    "body", [b"{}", b'{"TransactItems":[{"Put":{"Item":{"pk":{"S":"a_b#transaction"}}}}]}']
)
def test_the_crt_signer_signs_exactly_like_botocore(token: str | None, body: bytes) -> None:
    # GIVEN credentials (with and without a session token) and a request
    credentials = ReadOnlyCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    # WHEN botocore's SigV4Auth and the CRT sign it at the same second
    reference, crt = _signed_alike(credentials, body)
    # THEN the headers sent are identical, signature included
    assert crt == reference
    assert reference["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert ("X-Amz-Security-Token" in reference) == (token is not None)


def test_the_endpoint_comes_from_the_sdks_own_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:4567")
    assert DynamoDBClient("us-east-1").endpoint_url == "http://127.0.0.1:4567"
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    assert DynamoDBClient("eu-west-1").endpoint_url == "https://dynamodb.eu-west-1.amazonaws.com"


@pytest.mark.stack
@pytest.mark.parametrize("signer", ["crt", "botocore"])
def test_both_signers_talk_to_dynamodb_local(settings: Settings, signer: str) -> None:
    async def call() -> tuple[dict[str, Any], str]:
        client = DynamoDBClient(settings.region, signer=signer)
        try:
            answer = await client.call("GetItem", {"TableName": settings.table, "Key": {"pk": {"S": "none"}}})
            try:
                await client.call("GetItem", {"TableName": "no-such-table", "Key": {"pk": {"S": "x"}}})
            except DynamoDBError as error:
                return answer, error.type
            return answer, ""
        finally:
            client.close()

    answer, error = asyncio.run(call())
    assert answer == {}
    assert error == "ResourceNotFoundException"
