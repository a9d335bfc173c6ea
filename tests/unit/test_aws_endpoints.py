"""The endpoint read without a client is the one a boto3 client would use, from every source."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from contracts.aws_endpoints import configured_endpoint_url, is_aws_host

_SDK_VARIABLES = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL_GLUE",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_PROFILE",
)

#: (environment, shared config file, the service's expected configured endpoint per service)
CASES = {
    "nothing configured": ({}, "", {"s3": None, "glue": None}),
    "a service's own variable": (
        {"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:8333"},
        "",
        {"s3": "http://127.0.0.1:8333", "glue": None},
    ),
    "the global variable, a service's own first": (
        {"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:8333"},
        "",
        {"s3": "http://127.0.0.1:8333", "glue": "http://127.0.0.1:5000"},
    ),
    "the shared config file's services section": (
        {"AWS_PROFILE": "lake"},
        "[profile lake]\nservices = local\n[services local]\nglue =\n  endpoint_url = http://127.0.0.1:5001\n",
        {"s3": None, "glue": "http://127.0.0.1:5001"},
    ),
    "configured endpoints ignored": (
        {"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:8333", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"},
        "",
        {"s3": None, "glue": None},
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_the_configured_endpoint_is_the_one_a_client_uses(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environment, config, expected = CASES[case]
    for name in _SDK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "config").write_text(config)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    session = boto3.Session(region_name="eu-west-1", aws_access_key_id="a", aws_secret_access_key="b")
    for service, wanted in expected.items():
        found = configured_endpoint_url(session, service)
        client_url = session.client(service).meta.endpoint_url
        assert found == wanted
        # None is the SDK's default: the client then goes to AWS itself, in the session's region
        if wanted is None:
            assert is_aws_host(client_url)
            assert "eu-west-1" in client_url
        else:
            assert client_url == wanted


@pytest.mark.parametrize(
    ("url", "aws"),
    [
        ("https://s3.us-east-1.amazonaws.com", True),
        ("https://glue.cn-north-1.amazonaws.com.cn/iceberg", True),
        ("http://127.0.0.1:8333", False),
        ("https://vpce-0abc.s3.us-east-1.vpce.amazonaws.com.example.org", False),
        ("", False),
    ],
)
def test_aws_hosts_are_told_from_custom_endpoints(url: str, aws: bool) -> None:
    assert is_aws_host(url) is aws
