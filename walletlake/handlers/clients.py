"""The boto3 clients of the Lambda handlers: one per service and region per execution environment.

Making a client costs tens of milliseconds (it loads the service model); a warm invocation reuses
the one the first made.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import boto3

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_glue import GlueClient
    from mypy_boto3_s3 import S3Client


@functools.cache
def s3(region: str) -> S3Client:
    """The S3 client of this execution environment."""
    return boto3.client("s3", region_name=region)


@functools.cache
def dynamodb(region: str) -> DynamoDBClient:
    """The DynamoDB client of this execution environment."""
    return boto3.client("dynamodb", region_name=region)


@functools.cache
def glue(region: str) -> GlueClient:
    """The Glue client of this execution environment."""
    return boto3.client("glue", region_name=region)
