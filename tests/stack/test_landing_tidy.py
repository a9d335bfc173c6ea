"""The landing log's tidy: its key limit holds per pass, not per page of the listing, and the
committer tidies at every cycle until a pass reaches the end of the log."""

from __future__ import annotations

import time
from collections.abc import Callable

import boto3
import pytest

from contracts.settings import Settings
from lake.committer import RECORD_RETENTION_SECONDS, commit_landed
from lake.iceberg_catalog import open_catalog
from lake.landing_log import LandingRecord, log_prefix, put_record
from lake.landing_tidy import tidy_pass, tidy_pending
from lake.objects import list_keys

pytestmark = pytest.mark.stack


def test_a_tidy_pass_examines_exactly_its_limit_and_the_committer_goes_on_until_caught_up(
    make_settings: Callable[..., Settings],
) -> None:
    # GIVEN 25 landing records of one shard, every table committed past them, past retention
    settings = make_settings(lake_format="iceberg")
    s3 = boto3.client("s3", region_name=settings.region)
    for index in range(25):
        first = index * 10 + 1
        put_record(
            s3,
            settings.bucket,
            settings.lake_prefix,
            "arn:aws:dynamodb:r:1:table/t/stream/S",
            LandingRecord("S", "shard-1", first, first + 5, (), landed_at=0.0),
        )
    catalog = open_catalog(settings)
    commit_landed(settings, s3, catalog, empty_after_seconds=0)
    later = time.time() + RECORD_RETENTION_SECONDS + 60

    # WHEN tidy passes of 10 keys run (the listing's pages hold 1,000)
    first_pass = tidy_pass(settings, s3, catalog, clock=lambda: later, max_keys=10)
    pending = tidy_pending(s3, settings)
    second_pass = tidy_pass(settings, s3, catalog, clock=lambda: later, max_keys=10)

    # THEN each examined and deleted exactly 10, and the log is not yet caught up
    assert (first_pass.examined, first_pass.deleted, first_pass.caught_up, first_pass.behind) == (
        10,
        10,
        False,
        1,
    )
    assert (second_pass.examined, second_pass.deleted, second_pass.behind) == (10, 10, 2)
    assert pending
    assert len(list_keys(s3, settings.bucket, log_prefix(settings.lake_prefix), ".json")) == 5

    # WHEN the committer's next cycle runs, not at the hour (no tidy asked)
    report = commit_landed(settings, s3, catalog, clock=lambda: later)

    # THEN it tidied anyway, since the last pass was behind, and caught up
    assert (report.records_deleted, report.tidy_behind) == (5, 0)
    assert list_keys(s3, settings.bucket, log_prefix(settings.lake_prefix), ".json") == []
    assert not tidy_pending(s3, settings)
    # AND the cycle after does not tidy (one GET of the cursor, nothing listed)
    assert commit_landed(settings, s3, catalog, clock=lambda: later).records_deleted == 0
