"""The night protected before it is used (pyiceberg's SQL catalog): the snapshots a night pins are
tagged at planning, so no expiry removes them while it runs or before a rerun; the tags' retention
is the setting's; planners and expiries running at once never crash each other."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.sql_lake import NAMESPACE, record, sql_catalog

from contracts.settings import Settings
from lake.committer import commit_table
from lake.iceberg_tables import SNAPSHOT_RETENTION_HOURS, identifier
from lake.snapshot_expiry import expire_snapshots, expired_tags
from lake.snapshot_tags import DAY_MS, SnapshotGoneError, keep_tag, night_tag
from lake.snapshots import SnapshotRef
from queries import reconciliation_runs
from queries.reconciliation_rules import DayOutcome
from queries.reconciliation_runs import ReconciliationError, record_day
from queries.time_travel import gone_versions, pin_night, tag_versions

NIGHT = dt.date(2026, 3, 1)
SETTINGS = Settings(glue_database=NAMESPACE)
PAST_RETENTION = (SNAPSHOT_RETENTION_HOURS + 1) * 3600


def commit_entries(catalog: Any, folder: Path, count: int) -> None:
    for _ in range(count):
        listed = [record(folder, entries=[f"t{time.monotonic_ns()}:credit"])]
        commit_table(
            catalog, identifier(NAMESPACE, "ledger"), listed, live_sources={r.source for r in listed}
        )


def ledger(catalog: Any) -> Any:
    return catalog.load_table(identifier(NAMESPACE, "ledger"))


def entries_at(catalog: Any, snapshot_id: int) -> list[str]:
    return sorted(ledger(catalog).scan(snapshot_id=snapshot_id).to_arrow().column("entry_id").to_pylist())


def expire_all(catalog: Any, later: float, **options: Any) -> None:
    for name in ("ledger", "wallets", "quarantine"):
        expire_snapshots(catalog.load_table(identifier(NAMESPACE, name)), later, keep=1, **options)


def test_a_night_pinned_at_planning_survives_expiry_and_replays_identically(tmp_path: Path) -> None:
    # GIVEN a ledger of 3 commits, and a night planned on it (its snapshots pinned)
    catalog = sql_catalog(tmp_path)
    commit_entries(catalog, tmp_path, 3)
    versions = pin_night(SETTINGS, NIGHT, catalog)
    pinned = versions["ledger"]
    assert pinned is not None
    read_at_planning = entries_at(catalog, pinned)
    assert len(read_at_planning) == 3

    # THEN the pinned snapshot is tagged before anything reads it, with the audit retention
    tag = ledger(catalog).metadata.refs[night_tag(NIGHT, pinned)]
    assert (tag.snapshot_id, tag.max_ref_age_ms) == (pinned, 400 * DAY_MS)
    assert versions["wallets"] is None  # a table never committed to: nothing to tag, read as empty
    # AND planning the night again (a retried step) changes nothing
    location = ledger(catalog).metadata_location
    assert pin_night(SETTINGS, NIGHT, catalog) == versions
    assert ledger(catalog).metadata_location == location

    # WHEN the committer commits on and expires every untagged snapshot past retention, hours
    # before the night classifies (and again before a rerun of it)
    commit_entries(catalog, tmp_path, 4)
    expire_all(
        catalog, time.time() + PAST_RETENTION, tag_retention_ms=SETTINGS.audit_tag_retention_days * DAY_MS
    )

    # THEN the pinned snapshot is still there and reads exactly what planning pinned
    assert gone_versions(SETTINGS, versions, catalog) == []
    assert entries_at(catalog, pinned) == read_at_planning
    # AND classification's own tag names the same snapshot; a rerun reads it identically again
    tag_versions(SETTINGS, versions, f"reconciled-{NIGHT.isoformat()}", catalog)
    assert ledger(catalog).metadata.refs[f"reconciled-{NIGHT.isoformat()}"].snapshot_id == pinned
    expire_all(catalog, time.time() + PAST_RETENTION)
    assert entries_at(catalog, pinned) == read_at_planning


def test_without_the_planning_tag_the_pinned_snapshot_expires_before_classification(tmp_path: Path) -> None:
    # GIVEN a night that pinned the current snapshot without tagging it (the night before this change)
    catalog = sql_catalog(tmp_path)
    commit_entries(catalog, tmp_path, 3)
    pinned = ledger(catalog).current_snapshot().snapshot_id

    # WHEN the committer commits on and expires past retention before the night classifies
    commit_entries(catalog, tmp_path, 2)
    expire_all(catalog, time.time() + PAST_RETENTION)

    # THEN the snapshot it pinned is gone: what planning tags prevents
    assert gone_versions(SETTINGS, {"ledger": pinned}, catalog) == ["ledger"]


@pytest.mark.parametrize(("retention_days", "kept"), [(400, True), (30, False)])
def test_the_retention_setting_decides_how_long_a_nights_snapshots_are_kept(
    tmp_path: Path, retention_days: int, kept: bool
) -> None:
    # GIVEN a night planned and classified under the default retention (tags of 400 days)
    catalog = sql_catalog(tmp_path)
    commit_entries(catalog, tmp_path, 3)
    versions = pin_night(SETTINGS, NIGHT, catalog)
    tag_versions(SETTINGS, versions, f"reconciled-{NIGHT.isoformat()}", catalog)
    commit_entries(catalog, tmp_path, 2)
    pinned = versions["ledger"]
    assert pinned is not None

    # WHEN the committer's expiry runs 31 days later under the setting
    settings = SETTINGS.replace(audit_tag_retention_days=retention_days)
    later = time.time() + 31 * 86_400
    expire_all(catalog, later, tag_retention_ms=settings.audit_tag_retention_days * DAY_MS)

    # THEN under 400 days the night's tags and snapshot stay; under 30 both tags go, then the snapshot
    tags = {name for name, ref in ledger(catalog).metadata.refs.items() if ref.snapshot_ref_type == "tag"}
    expected = {night_tag(NIGHT, pinned), f"reconciled-{NIGHT.isoformat()}"} if kept else set()
    assert tags == expected
    assert (gone_versions(settings, versions, catalog) == []) is kept
    # AND a tag someone made by hand, without a max-ref-age, is never removed by the setting
    table = ledger(catalog)
    with table.manage_snapshots() as manage:
        manage.create_tag(table.current_snapshot().snapshot_id, "by-hand")
    assert expired_tags(ledger(catalog).metadata, later + 10**9, tag_retention_ms=DAY_MS) == sorted(expected)


def test_new_tags_carry_the_setting_as_their_max_ref_age(tmp_path: Path) -> None:
    catalog = sql_catalog(tmp_path)
    commit_entries(catalog, tmp_path, 1)
    versions = pin_night(SETTINGS.replace(audit_tag_retention_days=90), NIGHT, catalog)
    tag = ledger(catalog).metadata.refs[night_tag(NIGHT, versions["ledger"])]  # type: ignore[arg-type]
    assert tag.max_ref_age_ms == 90 * DAY_MS


def test_two_planners_tagging_the_same_night_at_once_both_succeed(tmp_path: Path) -> None:
    # GIVEN two planners that loaded the table before either tagged it
    catalog = sql_catalog(tmp_path)
    commit_entries(catalog, tmp_path, 2)
    first, second = ledger(catalog), ledger(catalog)
    snapshot_id = first.current_snapshot().snapshot_id
    name = night_tag(NIGHT, snapshot_id)

    # WHEN both tag it (the second's commit is refused: the tag exists now)
    made = keep_tag(first, snapshot_id, name, max_ref_age_ms=DAY_MS)
    again = keep_tag(second, snapshot_id, name, max_ref_age_ms=DAY_MS)

    # THEN the first made it, the second read it back and found it there
    assert (made, again) == (True, False)
    assert ledger(catalog).metadata.refs[name].snapshot_id == snapshot_id


def test_two_expiries_of_the_same_tags_and_snapshots_at_once_do_not_crash(tmp_path: Path) -> None:
    # GIVEN a night's tags past their retention, and two committers that loaded the table before
    # either expired anything
    catalog = sql_catalog(tmp_path)
    commit_entries(catalog, tmp_path, 14)
    versions = pin_night(SETTINGS, NIGHT, catalog)
    commit_entries(catalog, tmp_path, 2)
    first, second = ledger(catalog), ledger(catalog)
    later = time.time() + 401 * 86_400

    # WHEN both expire them, one after the other from the same metadata
    done = expire_snapshots(first, later, keep=1, tag_retention_ms=400 * DAY_MS)
    again = expire_snapshots(second, later, keep=1, tag_retention_ms=400 * DAY_MS)

    # THEN the first removed the tag and the snapshots, the second left it to the next run
    assert done > 0
    assert again == 0
    assert ledger(catalog).metadata.refs.keys() == {"main"}
    assert gone_versions(SETTINGS, versions, catalog) == ["ledger"]


def test_tagging_a_snapshot_expiry_removed_is_refused_and_tags_nothing(tmp_path: Path) -> None:
    # GIVEN a night planned, then an expiry past its tags' retention (its snapshot went with them)
    catalog = sql_catalog(tmp_path)
    commit_entries(catalog, tmp_path, 2)
    versions = pin_night(SETTINGS, NIGHT, catalog)
    commit_entries(catalog, tmp_path, 2)
    expire_all(catalog, time.time() + 401 * 86_400, tag_retention_ms=400 * DAY_MS)
    assert gone_versions(SETTINGS, versions, catalog) == ["ledger"]

    # WHEN its classification tags what it read
    with pytest.raises(SnapshotGoneError, match=rf"snapshot {versions['ledger']} of ledger is gone"):
        tag_versions(SETTINGS, versions, f"reconciled-{NIGHT.isoformat()}", catalog)

    # THEN nothing was tagged: no tag moved onto another snapshot in its place
    assert ledger(catalog).metadata.refs.keys() == {"main"}


def test_a_snapshot_expired_between_loading_and_tagging_is_refused(tmp_path: Path) -> None:
    # GIVEN a tagger that loaded the table while an untagged snapshot was still there
    catalog = sql_catalog(tmp_path)
    commit_entries(catalog, tmp_path, 3)
    old = ledger(catalog).snapshots()[0].snapshot_id
    tagger = ledger(catalog)

    # WHEN an expiry removes it before the tag is committed
    expire_all(catalog, time.time() + PAST_RETENTION)

    # THEN the catalog's refusal reads as the snapshot gone, and no tag was made
    with pytest.raises(SnapshotGoneError, match=f"snapshot {old} of ledger is gone") as refused:
        keep_tag(tagger, old, night_tag(NIGHT, old), max_ref_age_ms=DAY_MS)
    assert "unknown snapshot" in str(refused.value.__cause__)  # the catalog's own refusal, read back
    assert ledger(catalog).metadata.refs.keys() == {"main"}


def test_a_run_whose_snapshots_expired_records_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a classified day whose lake snapshots are gone when it is recorded
    def gone(*_: Any, **__: Any) -> None:
        raise SnapshotGoneError(
            "snapshot 7 of ledger is gone (expired): it cannot be tagged reconciled-2026-03-01"
        )

    monkeypatch.setattr(reconciliation_runs, "tag_versions", gone)

    class NoWrites:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"S3 called: {name}")

    outcome = DayOutcome([], {}, {}, 0, pa.table({}), {}, 0)
    moment = dt.datetime(2026, 3, 2, 1, tzinfo=dt.UTC)

    # WHEN it is recorded, THEN it is refused in one line that says what to do, before any write
    with pytest.raises(ReconciliationError) as refused:
        record_day(
            NoWrites(),  # type: ignore[arg-type]
            SETTINGS,
            NIGHT,
            outcome,
            snapshot=SnapshotRef(NIGHT, moment, ()),
            now=moment,
            max_lag_seconds=60,
            lake_snapshots={"ledger": 7},
        )
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("the reconciliation of 2026-03-01 cannot be recorded: snapshot 7 of ledger")
    assert message.endswith("(night tags are kept 400 days); nothing was recorded, reconcile the day again")
