"""The tables the API writes beside ``wallets``: its idempotency records and its owners' index.

Built and granted together because every front (the tasks or the function) writes both in its
transactions: a wallet's creation puts its owner's entry, a movement its record.
"""

from __future__ import annotations

import dataclasses

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.idempotency_table import build_idempotency_table, grant_write_path
from walletlake_cdk.owners_table import build_owners_table, grant_owners


@dataclasses.dataclass(frozen=True)
class ApiTables:
    """The idempotency records' table and the owners' table."""

    idempotency: dynamodb.Table
    owners: dynamodb.Table


def build_api_tables(scope: Construct, config: DeploymentConfig, key: kms.IKey) -> ApiTables:
    """Both tables, encrypted with the wallets table's key."""
    return ApiTables(build_idempotency_table(scope, config, key), build_owners_table(scope, config, key))


def grant_api_tables(tables: ApiTables, role: iam.IRole) -> None:
    """Let the API's role do what the write path does on each, nothing else."""
    grant_write_path(tables.idempotency, role)
    grant_owners(tables.owners, role)
