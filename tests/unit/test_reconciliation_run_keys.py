"""Every reconciliation run is kept: each run's objects are named for its run_at, never reused."""

from __future__ import annotations

import datetime as dt

from queries.reconciliation_runs import run_name, run_summary_key, summary_key

DAY = dt.date(2026, 11, 21)


def test_each_run_has_its_own_summary_beside_the_days_latest() -> None:
    first = dt.datetime(2026, 11, 22, 1, 2, 3, 456789, tzinfo=dt.UTC)
    second = first + dt.timedelta(milliseconds=1)
    # THEN the names sort as the runs ran, to the millisecond, and none is the day's latest summary
    assert run_name(first) == "20261122T010203.456Z"
    assert run_name(second) == "20261122T010203.457Z"
    assert run_summary_key("lake", DAY, first) == (
        "lake/_reports/reconciliation/dt=2026-11-21/runs/20261122T010203.456Z.json"
    )
    assert summary_key("lake", DAY) == "lake/_reports/reconciliation/dt=2026-11-21/summary.json"
    # AND a run_at given in another zone names the same instant
    eastern = first.astimezone(dt.timezone(dt.timedelta(hours=-5)))
    assert run_name(eastern) == run_name(first)
