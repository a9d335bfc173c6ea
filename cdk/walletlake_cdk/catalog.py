"""Glue catalog and Athena: how analysts (and the nightly reconciliation) read the lake.

The Glue tables are :func:`lake.glue.table_input` verbatim (columns from ``lake.schemas``, partition
projection on ``dt``), written into the template as a property override so nothing is re-typed
through CDK's structs. The Athena workgroup enforces its settings (clients cannot turn off result
encryption or the scan cutoff), and every ``queries/sql/*.sql`` file becomes a named query, read
through the ``queries`` catalogue (the same names and descriptions as ``walletlake query --list``).
"""

from __future__ import annotations

import dataclasses
from typing import Final

from aws_cdk import Aws, Stack
from aws_cdk import aws_athena as athena
from aws_cdk import aws_glue as glue
from constructs import Construct

from lake.glue import table_input
from lake.schemas import TABLES
from queries import list_queries
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.storage import Storage

_BYTES_PER_GB: Final = 1024**3


@dataclasses.dataclass(frozen=True)
class Catalog:
    """The Glue database and tables, the Athena workgroup and its named queries."""

    database: glue.CfnDatabase
    tables: dict[str, glue.CfnTable]
    workgroup: athena.CfnWorkGroup
    named_queries: dict[str, athena.CfnNamedQuery]


#: Athena's limit on a named query's description.
DESCRIPTION_LIMIT: Final = 1024


def build_catalog(scope: Construct, config: DeploymentConfig, storage: Storage) -> Catalog:
    """Glue database, one projected table per lake table, the workgroup and the named queries."""
    settings = config.settings
    account = Stack.of(scope).account
    database = glue.CfnDatabase(
        scope,
        "GlueDatabase",
        catalog_id=account,
        database_input=glue.CfnDatabase.DatabaseInputProperty(
            name=settings.glue_database,
            description="walletlake: the ledger lake (partition projection on dt)",
        ),
    )
    tables: dict[str, glue.CfnTable] = {}
    for name in TABLES:
        definition = table_input(name, storage.bucket_name, settings.lake_prefix)
        table = glue.CfnTable(
            scope,
            f"GlueTable{_pascal(name)}",
            catalog_id=account,
            database_name=settings.glue_database,
            table_input=glue.CfnTable.TableInputProperty(name=name),
        )
        table.add_property_override("TableInput", definition)
        table.node.add_dependency(database)
        tables[name] = table

    workgroup = athena.CfnWorkGroup(
        scope,
        "AthenaWorkgroup",
        name=settings.athena_workgroup,
        description="walletlake: enforced result encryption and per-query scan cutoff",
        recursive_delete_option=False,
        work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
            enforce_work_group_configuration=True,
            publish_cloud_watch_metrics_enabled=True,
            bytes_scanned_cutoff_per_query=config.athena_bytes_scanned_cutoff_gb * _BYTES_PER_GB,
            engine_version=athena.CfnWorkGroup.EngineVersionProperty(
                selected_engine_version="Athena engine version 3"
            ),
            result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                output_location=storage.athena_results_uri,
                expected_bucket_owner=Aws.ACCOUNT_ID,
                encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                    encryption_option="SSE_KMS", kms_key=storage.data_key.key_arn
                ),
            ),
        ),
    )
    named_queries: dict[str, athena.CfnNamedQuery] = {}
    for query in list_queries():
        named = athena.CfnNamedQuery(
            scope,
            f"NamedQuery{_pascal(query.name)}",
            name=query.name,
            database=settings.glue_database,
            work_group=workgroup.ref,
            query_string=query.sql,
            description=query.description[:DESCRIPTION_LIMIT] or f"walletlake query {query.name}",
        )
        named.node.add_dependency(database)
        named_queries[query.name] = named
    return Catalog(database=database, tables=tables, workgroup=workgroup, named_queries=named_queries)


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("-", "_").split("_"))
