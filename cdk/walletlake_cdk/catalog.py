"""Glue catalog and Athena: how analysts (and the nightly reconciliation) read the lake.

The nightly outputs (balance snapshots, daily balances, reconciliation) are Hive tables:
:func:`lake.glue.table_input` verbatim (columns from ``contracts.lake_tables``, partition projection on
``dt``), written into the template as a property override so nothing is re-typed through CDK's
structs. So are the stream's tables (ledger, wallets, quarantine) with ``-c lake_format=parquet``.

With the Iceberg lake (the default) the stream's tables are **Iceberg tables created by
CloudFormation** (``AWS::Glue::Table`` with ``OpenTableFormatInput.IcebergInput``: schema with its
field ids, ``identity(dt)`` partition spec, write order and properties, all from
:func:`lake.glue.iceberg_table_input`, the same table :func:`lake.iceberg_tables.ensure_tables`
would create), at ``s3://{bucket}/{lake_prefix}/iceberg/{table}``, where the committer's cold
start (``walletlake.handlers.commit``) finds them and creates nothing. Made by the template, they
exist before anything writes, and Glue's **table optimizers** can be declared next to them
(``AWS::Glue::TableOptimizer`` needs its table to exist when it is created; tables made at run
time would leave the optimizers to a second deployment or to the committer). They are retained
when the stack is deleted, as the bucket is.

Table maintenance is Glue's (:func:`_table_optimizers`): compaction and orphan file deletion,
per table, with their own role. Snapshot expiry is the committer's (``lake.snapshot_expiry``).

The Athena workgroup enforces its settings (clients cannot turn off result
encryption or the scan cutoff), and every ``queries/sql/*.sql`` file becomes a named query, read
through the ``queries`` catalogue (the same names and descriptions as ``walletlake query --list``).
"""

from __future__ import annotations

import dataclasses
from typing import Final

from aws_cdk import ArnFormat, Aws, RemovalPolicy, Stack
from aws_cdk import aws_athena as athena
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from constructs import Construct

from contracts.lake_layout import ICEBERG_FOLDER, table_location_root
from contracts.lake_tables import STREAM_TABLES, TABLES
from lake.glue import ICEBERG_TABLE_VERSION, iceberg_table_input, table_input
from queries import list_queries
from walletlake_cdk.config import DeploymentConfig
from walletlake_cdk.storage import S3_WRITE_KEY_ACTIONS, Storage, grant_key_via

_BYTES_PER_GB: Final = 1024**3
Optimizer = glue.CfnTableOptimizer
#: The kinds of Glue table optimizer deployed, one ``AWS::Glue::TableOptimizer`` each per table
#: (not ``retention``: see :func:`_table_optimizers`).
OPTIMIZER_TYPES: Final = ("compaction", "orphan_file_deletion")
#: Glue compaction rewrites files in the table's declared sort order (its write order:
#: ``contracts.lake_tables``, ``sort_order``), so a one-wallet statement reads few row groups.
COMPACTION_STRATEGY: Final = "sort"
#: Log groups the optimizers write (``/aws-glue/iceberg-compaction/logs`` and the like).
OPTIMIZER_LOG_GROUPS: Final = "/aws-glue/iceberg-*"


@dataclasses.dataclass(frozen=True)
class Catalog:
    """The Glue database and tables, the Athena workgroup and its named queries."""

    database: glue.CfnDatabase
    tables: dict[str, glue.CfnTable]
    workgroup: athena.CfnWorkGroup
    #: The analysts' own workgroup (results under ``athena-results/analysts/``): the nightly job's
    #: workgroup writes its results and UNLOADs where analysts cannot.
    analyst_workgroup: athena.CfnWorkGroup
    named_queries: dict[str, athena.CfnNamedQuery]
    #: The Iceberg tables' optimizers by ``{table}/{type}`` and the role they run as (Iceberg lake).
    optimizers: dict[str, glue.CfnTableOptimizer] = dataclasses.field(default_factory=dict)
    optimizer_role: iam.Role | None = None

    @property
    def hive_tables(self) -> tuple[str, ...]:
        """The tables Glue holds as Hive tables (partition projection on ``dt``)."""
        return tuple(name for name, table in self.tables.items() if table.open_table_format_input is None)


def iceberg_location(bucket_name: str, lake_prefix: str, table: str) -> str:
    """Where an Iceberg table of the deployed lake lives (:mod:`contracts.lake_layout`)."""
    return f"{table_location_root(bucket_name, lake_prefix)}/{table}"


def analyst_workgroup(workgroup: str) -> str:
    """The analysts' workgroup's name beside the nightly job's ``workgroup``."""
    return f"{workgroup}-analysts"


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
        if config.iceberg and name in STREAM_TABLES:
            tables[name] = _iceberg_table(scope, config, storage, database, name)
            continue
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
                    encryption_option="SSE_KMS", kms_key=storage.results_key.key_arn
                ),
            ),
        ),
    )
    analysts = athena.CfnWorkGroup(
        scope,
        "AnalystWorkgroup",
        name=analyst_workgroup(settings.athena_workgroup),
        description="walletlake analysts: results in their own prefix, which the nightly job never reads",
        recursive_delete_option=False,
        work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
            enforce_work_group_configuration=True,
            publish_cloud_watch_metrics_enabled=True,
            bytes_scanned_cutoff_per_query=config.athena_bytes_scanned_cutoff_gb * _BYTES_PER_GB,
            engine_version=athena.CfnWorkGroup.EngineVersionProperty(
                selected_engine_version="Athena engine version 3"
            ),
            result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                output_location=storage.analyst_results_uri,
                expected_bucket_owner=Aws.ACCOUNT_ID,
                encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                    encryption_option="SSE_KMS", kms_key=storage.results_key.key_arn
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
    optimizers: dict[str, glue.CfnTableOptimizer] = {}
    optimizer_role = None
    if config.iceberg:
        optimizer_role = _optimizer_role(scope, config, storage)
        optimizers = _table_optimizers(scope, config, storage, tables, optimizer_role)
    return Catalog(
        database=database,
        tables=tables,
        workgroup=workgroup,
        analyst_workgroup=analysts,
        named_queries=named_queries,
        optimizers=optimizers,
        optimizer_role=optimizer_role,
    )


def _iceberg_table(
    scope: Construct, config: DeploymentConfig, storage: Storage, database: glue.CfnDatabase, name: str
) -> glue.CfnTable:
    """One stream table as an Iceberg table Glue creates (its first metadata file included)."""
    settings = config.settings
    table = glue.CfnTable(
        scope,
        f"GlueIcebergTable{_pascal(name)}",
        catalog_id=Stack.of(scope).account,
        database_name=settings.glue_database,
        table_input=glue.CfnTable.TableInputProperty(name=name, table_type="EXTERNAL_TABLE"),
        open_table_format_input=glue.CfnTable.OpenTableFormatInputProperty(
            iceberg_input=glue.CfnTable.IcebergInputProperty(
                metadata_operation="CREATE", version=ICEBERG_TABLE_VERSION
            )
        ),
    )
    location = iceberg_location(storage.bucket_name, settings.lake_prefix, name)
    table.add_property_override(
        "OpenTableFormatInput.IcebergInput.IcebergTableInput", iceberg_table_input(name, location)
    )
    # The table's metadata and data live on in the retained bucket: so does its catalog entry.
    table.apply_removal_policy(RemovalPolicy.RETAIN)
    table.node.add_dependency(database)
    table.node.add_dependency(storage.lake_bucket)
    return table


def _optimizer_role(scope: Construct, config: DeploymentConfig, storage: Storage) -> iam.Role:
    """What Glue's optimizers need (Glue's "Table optimization prerequisites"): read and rewrite the
    tables' files, update the tables, and write their logs."""
    stack = Stack.of(scope)
    settings = config.settings
    role = iam.Role(
        scope,
        "TableOptimizerRole",
        assumed_by=iam.ServicePrincipal("glue.amazonaws.com"),
        description="walletlake: Glue table optimizers of the Iceberg tables",
    )
    prefix = f"{settings.lake_prefix}/{ICEBERG_FOLDER}/"
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            resources=[storage.lake_bucket.arn_for_objects(f"{prefix}*")],
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[storage.lake_bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["glue:GetTable", "glue:UpdateTable"],
            resources=[
                stack.format_arn(service="glue", resource="catalog"),
                stack.format_arn(service="glue", resource="database", resource_name=settings.glue_database),
                *(
                    stack.format_arn(
                        service="glue", resource="table", resource_name=f"{settings.glue_database}/{name}"
                    )
                    for name in STREAM_TABLES
                ),
            ],
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[
                stack.format_arn(
                    service="logs",
                    resource="log-group",
                    resource_name=f"{OPTIMIZER_LOG_GROUPS}:*",
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                )
            ],
        )
    )
    grant_key_via(role, storage.lake_key, "s3", *S3_WRITE_KEY_ACTIONS)
    return role


def _table_optimizers(
    scope: Construct,
    config: DeploymentConfig,
    storage: Storage,
    tables: dict[str, glue.CfnTable],
    role: iam.Role,
) -> dict[str, glue.CfnTableOptimizer]:
    """Compaction and orphan file deletion for each Iceberg table; no Glue snapshot retention.

    Compaction uses the ``sort`` strategy on the table's sort order (the ledger's ``wallet_id``,
    ``wallet_version``: per wallet, versions and ``created_at`` rise together, the write path's
    clock rule, so it is the order of ``wallet_id, created_at``).

    Snapshots are expired by the committer (``lake.snapshot_expiry``: 2 hours, the last 10 and
    every tagged snapshot kept, tested), not by Glue's retention optimizer: its period counts
    days (the metadata must hold hours), and that it keeps tagged snapshots, which
    ``reconcile --replay`` reads, is documented nowhere. With one expiry, ours, the tags are
    kept by construction; the files of expired snapshots become unreferenced and orphan file
    deletion removes them, while every file a tagged snapshot references stays referenced.

    Why none of them can lose a row the committer appended:

    - The committer's commits are appends: they add data files and never remove one, so there is
      nothing of the committer's for a concurrent rewrite to undo.
    - Compaction is an Iceberg rewrite (``RewriteDataFiles``): it commits "replace these files by
      those" against the table's current metadata, and the commit validates that every file it
      replaces is still live; an append between its start and its commit is kept (the tables'
      ``write.delete.isolation-level=snapshot`` lets the rewrite commit around it instead of
      failing). It never touches the committer's progress property (``lake.committer``).
    - Orphan file deletion removes files no snapshot references that are older than
      ``orphan_file_retention_days`` (default 3 days, at least 1: ``config.py``). A batch's data
      files are written before its landing record and committed within the commit interval
      (30 s), so between landing and commit they are unreferenced for seconds, a retention about
      ten thousand times shorter. Only a committer outage longer than the retention could let a
      landed, uncommitted file be deleted, and the landing records would then point at missing
      files: the ``CommitterErrors`` and ``CommitLag`` alarms (``monitoring.py``) fire within
      minutes of such an outage, days before it could cost a row.
    """
    stack = Stack.of(scope)
    settings = config.settings
    optimizers: dict[str, glue.CfnTableOptimizer] = {}
    for name in STREAM_TABLES:
        for kind in OPTIMIZER_TYPES:
            configuration: dict[str, object] = {"enabled": True, "role_arn": role.role_arn}
            if kind == "compaction":
                configuration["compaction_configuration"] = Optimizer.CompactionConfigurationProperty(
                    iceberg_configuration=Optimizer.IcebergCompactionConfigurationProperty(
                        strategy=COMPACTION_STRATEGY
                    )
                )
            else:
                configuration["orphan_file_deletion_configuration"] = (
                    Optimizer.OrphanFileDeletionConfigurationProperty(
                        iceberg_configuration=Optimizer.IcebergConfigurationProperty(
                            orphan_file_retention_period_in_days=config.orphan_file_retention_days,
                            location=iceberg_location(storage.bucket_name, settings.lake_prefix, name),
                        )
                    )
                )
            optimizer = glue.CfnTableOptimizer(
                scope,
                f"TableOptimizer{_pascal(name)}{_pascal(kind)}",
                catalog_id=stack.account,
                database_name=settings.glue_database,
                table_name=name,
                type=kind,
                table_optimizer_configuration=glue.CfnTableOptimizer.TableOptimizerConfigurationProperty(
                    **configuration  # type: ignore[arg-type]
                ),
            )
            optimizer.node.add_dependency(tables[name])
            # The role's policy must exist before Glue checks it (CreateTableOptimizer assumes it);
            # the role itself is already a dependency, through its ARN.
            policy = role.node.try_find_child("DefaultPolicy")
            if policy is not None:
                optimizer.node.add_dependency(policy)
            optimizers[f"{name}/{kind}"] = optimizer
    return optimizers


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("-", "_").split("_"))
