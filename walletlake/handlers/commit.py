"""The Iceberg committer's Lambda entry point: every minute, a commit every interval.

An EventBridge schedule invokes :func:`handler` once a minute (EventBridge's finest rate); the
invocation commits, waits, and commits again until the minute is over, so with the default
30-second interval the lake is at most about 30 s behind what landed. Reserved concurrency 1 keeps
one committer at a time, though correctness does not need it: a second one's commit is refused by
the catalog and decided again (:mod:`lake.committer`). At the top of each hour it also deletes
landing records past the stream's retention and, on AWS, the tables' archived Glue versions past
the newest few (:mod:`lake.glue_versions`: Glue's quota is 100,000 per table). At cold start it
creates any missing table
(:func:`lake.iceberg_tables.ensure_tables`), so a fresh deployment needs no manual step.
"""

from __future__ import annotations

import datetime as dt
import functools
import time
from typing import TYPE_CHECKING, Any, Final

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from contracts import lambda_metrics as names
from contracts.aws_endpoints import is_aws_host
from contracts.lake_layout import table_location_root
from contracts.lake_tables import STREAM_TABLES
from contracts.settings import (
    COMMIT_INTERVAL_SECONDS_VARIABLE,
    DEPLOYED_VARIABLES,
    ICEBERG_WAREHOUSE_VARIABLE,
    LAKE_FORMAT_VARIABLE,
    HandlerSettings,
    Settings,
)
from lake.committer import commit_landed
from lake.glue_versions import prune_table_versions
from lake.iceberg_catalog import open_catalog
from lake.iceberg_tables import ensure_tables
from walletlake.handlers import clients

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from pyiceberg.catalog.rest import RestCatalog

#: What the CDK app sets for the committer; on Lambda a missing one fails the cold start.
REQUIRED_VARIABLES: Final = (
    *DEPLOYED_VARIABLES,
    LAKE_FORMAT_VARIABLE,
    ICEBERG_WAREHOUSE_VARIABLE,
    COMMIT_INTERVAL_SECONDS_VARIABLE,
)
SETTINGS: Final = HandlerSettings(REQUIRED_VARIABLES)

logger = Logger(service=names.COMMITTER_SERVICE)
metrics = Metrics(namespace=names.NAMESPACE, service=names.COMMITTER_SERVICE)

#: Seconds kept free at the end of the minute, so the next invocation never overlaps this one.
_MARGIN_SECONDS: Final = 5


@functools.cache
def _resources(settings: Settings) -> tuple[S3Client, RestCatalog]:
    catalog = open_catalog(settings)
    for line in ensure_tables(
        catalog,
        settings.glue_database,
        location_root=table_location_root(settings.bucket, settings.lake_prefix),
    ):
        # a refused type change is an error line at cold start; every cycle then holds the table
        # (and publishes BlockedTables), so the other tables keep committing
        (logger.error if "REFUSED" in line else logger.info)(line)
    return clients.s3(settings.region), catalog


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any] | None, context: LambdaContext) -> dict[str, Any]:
    """Commit every interval until the minute (or the invocation's time) is nearly over.

    ``{"cycles": N}`` stops after N commits; ``{"tidy": true}`` tidies the landing log first.
    """
    settings = SETTINGS()
    s3, catalog = _resources(settings)
    started = time.monotonic()
    budget = min(60 - _MARGIN_SECONDS, context.get_remaining_time_in_millis() / 1000 - _MARGIN_SECONDS)
    event = event or {}
    tidy = dt.datetime.now(dt.UTC).minute == 0 or bool(event.get("tidy"))
    max_cycles = int(event.get("cycles", 0)) or None  # an operator's (or the deploy check's) single run
    cycles: list[dict[str, Any]] = []
    while True:
        report = commit_landed(settings, s3, catalog, tidy=tidy and not cycles)
        cycles.append(report.as_dict())
        metrics.add_metric(name=names.COMMITTED_ROWS, unit=MetricUnit.Count, value=report.rows)
        metrics.add_metric(name=names.COMMIT_SECONDS, unit=MetricUnit.Seconds, value=report.seconds)
        metrics.add_metric(name=names.MISFIT_FILES, unit=MetricUnit.Count, value=report.misfit_files)
        metrics.add_metric(name=names.MISSING_FILES, unit=MetricUnit.Count, value=report.missing_files)
        metrics.add_metric(name=names.TIDY_BEHIND, unit=MetricUnit.Count, value=report.tidy_behind)
        metrics.add_metric(name=names.BLOCKED_TABLES, unit=MetricUnit.Count, value=report.blocked_tables)
        logger.info("commit cycle", extra=report.as_dict())
        elapsed = time.monotonic() - started
        if max_cycles is not None and len(cycles) >= max_cycles:
            break
        if elapsed + settings.commit_interval_seconds + report.seconds > budget:
            break
        time.sleep(settings.commit_interval_seconds)
    if tidy and _on_glue(settings):
        glue = clients.glue(settings.region)
        for name in STREAM_TABLES:
            try:
                prune_table_versions(glue, settings.glue_database, name)
            except Exception:  # the next hour tries again; commits never depend on it
                logger.warning("could not prune the Glue versions of %s", name, exc_info=True)
    return {"cycles": len(cycles), "rows": sum(cycle["rows"] for cycle in cycles)}


def _on_glue(settings: Settings) -> bool:
    """True when the catalog is Glue's Iceberg endpoint (not the embedded stack's)."""
    return is_aws_host(settings.catalog_uri)
