"""Thin S3 adapter for lake objects: put, get, list and delete, with pagination and batching."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, BinaryIO, Final

import pyarrow as pa
from botocore.exceptions import ClientError

from lake import parquet

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_DELETE_BATCH: Final = 1000  # DeleteObjects' limit per call


def put_table(
    s3: S3Client,
    bucket: str,
    key: str,
    table: pa.Table,
    *,
    row_group_size: int | None = None,
    text_statistics: bool = True,
) -> int:
    """Write ``table`` as one Parquet object; returns the object's size in bytes.

    A PUT of the same key replaces the object whole, which is what makes retried batches
    idempotent: readers never see a half-written file. ``text_statistics``: see
    :func:`lake.parquet.encode`.
    """
    body = parquet.encode(table, row_group_size=row_group_size, text_statistics=text_statistics)
    s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/vnd.apache.parquet")
    return len(body)


def put_if_absent(s3: S3Client, bucket: str, key: str, body: bytes | BinaryIO, *, content_type: str) -> bool:
    """PUT ``body`` (bytes, or a file read as it is sent) unless ``key`` exists (``If-None-Match: *``);
    False when it existed.

    S3 (since 2024) and SeaweedFS answer 412 ``PreconditionFailed`` to a conditional PUT of an
    existing key, so an object written this way is never replaced, even by a concurrent writer.
    """
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type, IfNoneMatch="*")
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("PreconditionFailed", "412"):
            return False
        raise
    return True


def get_table(s3: S3Client, bucket: str, key: str, schema: pa.Schema | None = None) -> pa.Table:
    """Read one Parquet object (cast to ``schema`` when given)."""
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return parquet.decode(body, schema)


def iter_objects(s3: S3Client, bucket: str, prefix: str) -> Iterator[tuple[str, int]]:
    """``(key, size)`` of every object under ``prefix``, in key order."""
    paginator = s3.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            yield item["Key"], item["Size"]


def list_keys(s3: S3Client, bucket: str, prefix: str, suffix: str = "") -> list[str]:
    """Keys under ``prefix`` ending in ``suffix``, in key order."""
    return [key for key, _ in iter_objects(s3, bucket, prefix) if key.endswith(suffix)]


def delete_keys(s3: S3Client, bucket: str, keys: Iterable[str]) -> int:
    """Delete objects in batches of 1,000; returns how many were asked to go. Raises on any error."""
    pending = list(keys)
    for start in range(0, len(pending), _DELETE_BATCH):
        batch = pending[start : start + _DELETE_BATCH]
        response = s3.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True}
        )
        if response.get("Errors"):
            first = response["Errors"][0]
            raise RuntimeError(f"could not delete {first.get('Key')}: {first.get('Message')}")
    return len(pending)
