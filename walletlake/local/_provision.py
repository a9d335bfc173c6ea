"""Create every resource the pipeline needs, idempotently, from the shared definitions.

The same definitions (``contracts.wallets_table``, ``contracts.checkpoint_table``, ``lake.glue``) feed
the CDK app, so the embedded stack and AWS cannot drift apart.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import boto3
from botocore.exceptions import ClientError

from contracts.checkpoint_table import CHECKPOINT_TABLE
from contracts.idempotency_table import IDEMPOTENCY_TABLE
from contracts.lease_table import LEASE_TABLE
from contracts.owners_table import OWNERS_TABLE
from contracts.settings import Settings
from contracts.wallets_table import WALLETS_TABLE, TableSpec
from lake.glue import all_table_inputs
from lake.iceberg_catalog import open_catalog
from lake.iceberg_tables import ensure_tables

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_glue import GlueClient
    from mypy_boto3_s3 import S3Client

_logger = logging.getLogger(__name__)


def provision(settings: Settings, session: boto3.Session | None = None) -> list[str]:
    """Create what is missing and return one line per resource saying what was done.

    The DynamoDB tables are made side by side, beside the lake: each is a few round trips that
    wait on the server, and a test, `walletlake local up` and the demo all provision before their
    first step. The lake stays one chain (bucket, Glue database, Iceberg tables), since the
    catalog writes each table's metadata into the bucket and may keep its namespace in Glue.
    """
    session = session or boto3.Session(region_name=settings.region)
    dynamodb: DynamoDBClient = session.client("dynamodb")
    s3: S3Client = session.client("s3")
    glue: GlueClient = session.client("glue")
    tables = (
        (settings.table, WALLETS_TABLE),
        (settings.idempotency_table, IDEMPOTENCY_TABLE),
        (settings.owners_table, OWNERS_TABLE),
        (settings.checkpoint_table, CHECKPOINT_TABLE),
        (settings.lease_table, LEASE_TABLE),
    )

    def lake() -> list[str]:
        return [
            ensure_bucket(s3, settings.bucket, settings.region),
            *ensure_glue(glue, settings),
            *ensure_tables(open_catalog(settings, session), settings.glue_database),
        ]

    with ThreadPoolExecutor(max_workers=len(tables) + 1, thread_name_prefix="provision") as pool:
        made = [pool.submit(ensure_table, dynamodb, name, spec) for name, spec in tables]
        lake_lines = pool.submit(lake)
        return [*(table.result() for table in made), *lake_lines.result()]


def table_exists(dynamodb: DynamoDBClient, name: str) -> bool:
    """Whether DynamoDB has the table, told by the error's code, not by its class.

    botocore builds a client's exception classes on their first use, unguarded, and
    :func:`provision` asks from threads sharing one fresh client: threads racing that first use
    raised one ``ResourceNotFoundException`` class and tested for another, so a missing table
    escaped ``except dynamodb.exceptions.ResourceNotFoundException`` (seen in a clean-clone suite).
    """
    try:
        dynamodb.describe_table(TableName=name)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise
        return False
    return True


def ensure_table(dynamodb: DynamoDBClient, name: str, spec: TableSpec) -> str:
    """Create an on-demand table with ``spec``'s keys, indexes, stream and TTL unless it exists."""
    created = False
    if not table_exists(dynamodb, name):
        kwargs: dict[str, object] = {
            "TableName": name,
            "AttributeDefinitions": [
                {"AttributeName": key.name, "AttributeType": key.type} for key in spec.key_attributes
            ],
            "KeySchema": [
                {"AttributeName": spec.partition_key, "KeyType": "HASH"},
                *([{"AttributeName": spec.sort_key.name, "KeyType": "RANGE"}] if spec.sort_key else []),
            ],
            "BillingMode": "PAY_PER_REQUEST",
        }
        if spec.indexes:
            kwargs["GlobalSecondaryIndexes"] = [
                {
                    "IndexName": index.name,
                    "KeySchema": [
                        {"AttributeName": index.partition_key.name, "KeyType": "HASH"},
                        {"AttributeName": index.sort_key.name, "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(index.projected)},
                }
                for index in spec.indexes
            ]
        if spec.stream_view_type:
            kwargs["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": spec.stream_view_type}
        dynamodb.create_table(**kwargs)  # type: ignore[arg-type]
        wait_for_table_active(dynamodb, name)
        created = True
    if spec.ttl_attribute:
        ttl = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        if ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
            dynamodb.update_time_to_live(
                TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": spec.ttl_attribute}
            )
    return f"dynamodb table {name}: {'created' if created else 'exists'}"


def ensure_bucket(s3: S3Client, name: str, region: str) -> str:
    """Create the lake bucket unless it exists."""
    try:
        s3.head_bucket(Bucket=name)
        return f"s3 bucket {name}: exists"
    except ClientError:
        pass
    if region == "us-east-1":
        s3.create_bucket(Bucket=name)
    else:
        s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": region})  # type: ignore[typeddict-item]
    return f"s3 bucket {name}: created"


def ensure_glue(glue: GlueClient, settings: Settings) -> list[str]:
    """Create the Glue database and bring every lake table to its current definition."""
    lines = []
    try:
        glue.get_database(Name=settings.glue_database)
        lines.append(f"glue database {settings.glue_database}: exists")
    except glue.exceptions.EntityNotFoundException:
        glue.create_database(DatabaseInput={"Name": settings.glue_database})
        lines.append(f"glue database {settings.glue_database}: created")
    for table_input in all_table_inputs(settings.bucket, settings.lake_prefix):
        name = table_input["Name"]
        try:
            glue.get_table(DatabaseName=settings.glue_database, Name=name)
            glue.update_table(DatabaseName=settings.glue_database, TableInput=table_input)  # type: ignore[arg-type]
            lines.append(f"glue table {settings.glue_database}.{name}: updated")
        except glue.exceptions.EntityNotFoundException:
            glue.create_table(DatabaseName=settings.glue_database, TableInput=table_input)  # type: ignore[arg-type]
            lines.append(f"glue table {settings.glue_database}.{name}: created")
    return lines


def wait_for_table_active(dynamodb: DynamoDBClient, name: str, timeout: float = 30.0) -> None:
    """Poll until a table is ACTIVE (DynamoDB Local answers at once; AWS takes seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if dynamodb.describe_table(TableName=name)["Table"]["TableStatus"] == "ACTIVE":
            return
        time.sleep(0.2)
    raise TimeoutError(f"table {name} not ACTIVE after {timeout:.0f} s")
