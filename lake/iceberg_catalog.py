"""The Iceberg REST catalog the lake's tables live in, reached as the AWS SDK reaches everything else.

One configuration for every place: pyiceberg's REST catalog, its requests signed with SigV4 from
boto3's credentials (a query, which needs only a table's metadata file and snapshots, asks the same
catalog from the same properties without pyiceberg: :mod:`lake.iceberg_table_heads`). On AWS the
catalog is Glue's Iceberg REST endpoint (``https://glue.{region}.amazonaws.com/iceberg``,
signing name ``glue``, warehouse the account id), whose tables live in the lake bucket; on the
embedded stack it is SeaweedFS's catalog (it speaks the S3 Tables flavour of the same protocol and
checks the same signatures). Data files are read and written through pyiceberg's S3 file IO at the
endpoint boto3 resolved for S3 (``AWS_ENDPOINT_URL_S3``), with the session's credentials, so no
second configuration exists.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import boto3

from contracts.aws_endpoints import configured_endpoint_url, is_aws_host
from contracts.settings import Settings

if TYPE_CHECKING:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.table import Table

#: SigV4's service name for Glue's Iceberg endpoint; SeaweedFS's catalog checks signatures made so.
SIGNING_NAME = "glue"


def catalog_properties(settings: Settings, session: boto3.Session | None = None) -> dict[str, str]:
    """pyiceberg's properties for the catalog and its file IO, from the SDK's configuration."""
    session = session or boto3.Session(region_name=settings.region)
    region = session.region_name or settings.region
    properties = {
        "type": "rest",
        "uri": settings.catalog_uri,
        "warehouse": settings.iceberg_warehouse,
        "rest.sigv4-enabled": "true",
        "rest.signing-name": SIGNING_NAME,
        "rest.signing-region": region,
        "client.region": region,
        "s3.region": region,
        # pyarrow's S3 file system, not fsspec: the one pyiceberg reads and writes Parquet through.
        "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
    }
    credentials = session.get_credentials()
    if credentials is not None:
        frozen = credentials.get_frozen_credentials()
        properties.update(
            {
                "client.access-key-id": frozen.access_key or "",
                "client.secret-access-key": frozen.secret_key or "",
                "s3.access-key-id": frozen.access_key or "",
                "s3.secret-access-key": frozen.secret_key or "",
            }
        )
        if frozen.token:
            properties["client.session-token"] = frozen.token
            properties["s3.session-token"] = frozen.token
    endpoint = configured_endpoint_url(session, "s3")
    if endpoint is not None and not is_aws_host(endpoint):
        properties["s3.endpoint"] = endpoint
        properties["s3.force-virtual-addressing"] = "false"
    return properties


def open_catalog(settings: Settings, session: boto3.Session | None = None) -> RestCatalog:
    """The lake's Iceberg catalog (one REST round trip: its ``/v1/config``)."""
    from pyiceberg.catalog.rest import RestCatalog

    properties = catalog_properties(settings, session)
    return RestCatalog("walletlake", **properties)


@functools.lru_cache(maxsize=8)
def _cached(settings: Settings) -> RestCatalog:
    return open_catalog(settings)


def cached_catalog(settings: Settings) -> RestCatalog:
    """One catalog per settings per process: what a warm Lambda function reuses between events."""
    return _cached(settings)


def load_table(settings: Settings, table: str, catalog: RestCatalog | None = None) -> Table:
    """A lake table, freshly loaded (its current metadata)."""
    from lake.iceberg_tables import identifier

    return (catalog or cached_catalog(settings)).load_table(identifier(settings.glue_database, table))


def strict_commits(table: Table) -> Table:
    """The same table with pyiceberg's commit retry off, so a refused commit comes back to the caller.

    pyiceberg retries a refused commit by rebasing the same changes onto the new head. For an
    append of landed files that may already be committed (by another committer), or a rewrite
    whose inputs another rewrite took, that rebase is wrong: walletlake's writers decide again
    from the refreshed table instead (:mod:`lake.committer`, :mod:`lake.iceberg_maintenance`).
    """
    from pyiceberg.table import Table as IcebergTable

    return IcebergTable(
        table.name(),
        table.metadata.model_copy(
            update={"properties": {**table.metadata.properties, "commit.retry.num-retries": "0"}}
        ),
        table.metadata_location,
        table.io,
        table.catalog,
    )
