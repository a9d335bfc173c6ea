"""Provisioning tells a missing DynamoDB table by the error's code, whichever class carries it."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from walletlake.local._provision import table_exists


def _client() -> Any:
    return boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")


def test_a_missing_table_raised_as_another_class_than_the_clients_is_still_missing() -> None:
    # GIVEN what a thread racing botocore's first build of a client's exception classes gets: the
    # error of a class other than the one `client.exceptions` now holds (here plain ClientError)
    client = _client()
    missing = ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "no"}}, "DescribeTable")
    assert not isinstance(missing, client.exceptions.ResourceNotFoundException)

    def describe_table(**_: object) -> None:
        raise missing

    client.describe_table = describe_table
    # THEN the table is missing, not an error
    assert table_exists(client, "wallets") is False


def test_a_table_that_answers_exists_and_any_other_error_is_raised() -> None:
    client = _client()
    with Stubber(client) as stub:
        stub.add_response("describe_table", {"Table": {"TableName": "wallets"}}, {"TableName": "wallets"})
        stub.add_client_error("describe_table", service_error_code="ResourceNotFoundException")
        stub.add_client_error(
            "describe_table", service_error_code="AccessDeniedException", http_status_code=403
        )
        assert table_exists(client, "wallets") is True
        assert table_exists(client, "wallets") is False
        with pytest.raises(ClientError, match="AccessDeniedException"):
            table_exists(client, "wallets")
