"""The compaction lease's Lambda entry point (:mod:`lake.compaction_lease`) for the state machines.

Event ``{"action": "acquire", "owner": <execution id>, "ttl_seconds": N}`` or
``{"action": "release", "owner": <execution id>}``. A busy lease raises
:class:`~lake.compaction_lease.LeaseBusyError`, which Lambda reports as the error type
``LeaseBusyError``: the state machines match it in ``Retry`` and ``Catch``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from contracts import lambda_metrics as names
from contracts.settings import DEPLOYED_VARIABLES, LEASE_TABLE_VARIABLE, HandlerSettings
from lake.compaction_lease import LeaseBusyError, acquire, release
from walletlake.handlers import clients

REQUIRED_VARIABLES: Final = (*DEPLOYED_VARIABLES, LEASE_TABLE_VARIABLE)
SETTINGS: Final = HandlerSettings(REQUIRED_VARIABLES)

logger = Logger(service=names.LEASE_SERVICE)
metrics = Metrics(namespace=names.NAMESPACE, service=names.LEASE_SERVICE)


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Take or give back the compaction lease for the execution named in the event."""
    settings = SETTINGS()
    dynamodb = clients.dynamodb(settings.region)
    owner = str(event["owner"])
    action = event.get("action")
    if action == "acquire":
        try:
            lease = acquire(
                dynamodb,
                settings.lease_table,
                owner=owner,
                ttl_seconds=int(event["ttl_seconds"]),
                now=dt.datetime.now(dt.UTC),
            )
        except LeaseBusyError:
            metrics.add_metric(name=names.LEASE_BUSY, unit=MetricUnit.Count, value=1)
            raise
        metrics.add_metric(name=names.LEASE_BUSY, unit=MetricUnit.Count, value=0)
        logger.info("lease taken", extra=lease.to_dict())
        return lease.to_dict()
    if action == "release":
        released = release(dynamodb, settings.lease_table, owner=owner)
        # 0 when the lease had expired and been taken by another execution before this release.
        metrics.add_metric(name=names.LEASE_RELEASED, unit=MetricUnit.Count, value=int(released))
        logger.info("lease released", extra={"owner": owner, "released": released})
        return {"owner": owner, "released": released}
    raise ValueError(f'action must be "acquire" or "release", not {action!r}')
