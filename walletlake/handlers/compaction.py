"""Compaction's Lambda entry points (plain-Parquet lake): plan the units, then one unit per invocation.

The hourly and nightly state machines (``cdk/walletlake_cdk/nightly.py``) call
:func:`plan_handler`, then run :func:`unit_handler` once per planned unit in a Distributed Map, so
compaction scales out with the number of units and no invocation depends on the day's volume
(:mod:`lake.compaction_units`). Locally, ``walletlake compact`` and the nightly job run the same
units with :func:`lake.compaction_units.run_units`.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any, Final

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from contracts import lambda_metrics as names
from contracts.settings import (
    COMPACTION_UNIT_MINUTES_VARIABLE,
    DEPLOYED_VARIABLES,
    HandlerSettings,
    Settings,
)
from lake.compaction_units import (
    CompactionUnit,
    closed_units,
    compact_unit,
    plan_units,
    unit_summary,
)

#: What the CDK app sets for the plan and unit functions (``cdk/walletlake_cdk/nightly.py``); on
#: Lambda, a function missing one or holding one it cannot use fails at cold start.
REQUIRED_VARIABLES: Final = (*DEPLOYED_VARIABLES, COMPACTION_UNIT_MINUTES_VARIABLE)

#: The functions' settings, read once (at import on Lambda).
SETTINGS: Final = HandlerSettings(REQUIRED_VARIABLES)

logger = Logger(service=names.COMPACTION_SERVICE)
metrics = Metrics(namespace=names.NAMESPACE, service=names.COMPACTION_SERVICE)


def plan(
    event: dict[str, Any], settings: Settings, *, unit_minutes: int | None = None, now: dt.datetime
) -> dict[str, Any]:
    """The units to compact, as Map items.

    ``{"date": "YYYY-MM-DD"}`` plans every unit of that day with work left (the nightly job);
    ``{"closed_hours_of": "today"}`` plans the units closed by now (the hourly schedule),
    yesterday's last hour included. ``"hours": [..]`` narrows a dated plan to those hours.
    Units are ``unit_minutes`` long, ``settings.compaction_unit_minutes`` unless given.
    """
    unit_minutes = unit_minutes or settings.compaction_unit_minutes
    if event.get("date"):
        day = dt.date.fromisoformat(str(event["date"]))
        hours = [int(hour) for hour in event["hours"]] if event.get("hours") else None
        units = plan_units(settings, day, hours=hours, unit_minutes=unit_minutes)
        label = day.isoformat()
    elif event.get("closed_hours_of") == "today":
        units = closed_units(settings, now, unit_minutes=unit_minutes)
        label = now.astimezone(dt.UTC).date().isoformat()
    else:
        raise ValueError('plan needs {"date": "YYYY-MM-DD"} or {"closed_hours_of": "today"}')
    return {"date": label, "units": [unit.to_dict() for unit in units]}


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def plan_handler(event: dict[str, Any] | None, context: LambdaContext) -> dict[str, Any]:
    """Plan the units (one S3 listing per table and day)."""
    planned = plan(event or {}, SETTINGS(), now=dt.datetime.now(dt.UTC))
    units = len(planned["units"])
    metrics.add_metric(name=names.COMPACTION_UNITS_PLANNED, unit=MetricUnit.Count, value=units)
    logger.info("compaction planned", extra={"date": planned["date"], "units": units})
    return planned


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def unit_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Compact one unit; returns its summary (rows, files, seconds)."""
    unit = CompactionUnit.from_dict(event)
    started = time.perf_counter()
    done = compact_unit(SETTINGS(), unit)
    summary = unit_summary(unit, done, time.perf_counter() - started)
    metrics.add_metric(name=names.COMPACTED_ROWS, unit=MetricUnit.Count, value=done.rows_out)
    metrics.add_metric(name=names.COMPACTION_SECONDS, unit=MetricUnit.Seconds, value=summary["seconds"])
    logger.info("compaction unit done", extra=summary)
    return summary
