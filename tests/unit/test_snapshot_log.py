"""Expiry and the snapshot log (pyiceberg's SQL catalog): why the history before a removed entry is
cleared when the log is read, not when it is written, and that it reads as Iceberg's Java library
keeps it.

Two facts of the libraries hold the design (``lake/snapshot_log.py``): no table update of the REST
protocol writes the snapshot log, so a client cannot clear it; and pyiceberg's own application of
``remove-snapshots`` keeps the surviving entries before a removed one. If either changes, these
tests say so.
"""

from __future__ import annotations

import time
import typing
from pathlib import Path
from typing import Any

import pytest
from support.sql_lake import NAMESPACE, record, sql_catalog

from lake.committer import commit_table
from lake.iceberg_tables import identifier
from lake.snapshot_log import NotRetainedError, retained_log, snapshot_at

LEDGER = identifier(NAMESPACE, "ledger")


def committed(tmp_path: Path, count: int) -> tuple[Any, list[int], dict[int, int]]:
    catalog = sql_catalog(tmp_path)
    for index in range(count):
        listed = [record(tmp_path, entries=[f"t{index}:credit"])]
        commit_table(catalog, LEDGER, listed, live_sources={r.source for r in listed})
    table = catalog.load_table(LEDGER)
    history = [entry.snapshot_id for entry in table.metadata.snapshot_log]
    return catalog, history, {s.snapshot_id: s.timestamp_ms for s in table.snapshots()}


def answer(metadata: Any, at_ms: int) -> int | str | None:
    try:
        return snapshot_at(metadata, at_ms)
    except NotRetainedError:
        return "refused"


def test_no_table_update_of_the_rest_protocol_writes_the_snapshot_log() -> None:
    from pyiceberg.table.update import TableUpdate

    # GIVEN every update a pyiceberg client can send a catalog (the REST spec's TableUpdate)
    (union, *_) = typing.get_args(TableUpdate)
    actions = {member.model_fields["action"].default for member in typing.get_args(union)}
    # THEN snapshots can be removed, but nothing sets or clears the snapshot log: that is the
    # catalog's to keep when it applies remove-snapshots
    assert "remove-snapshots" in actions
    assert not [action for action in actions if "log" in action or "history" in action]


def test_pyiceberg_leaves_a_gap_that_the_reader_clears_as_the_java_library_does(tmp_path: Path) -> None:
    # GIVEN four commits, the first tagged, and the second expired (by pyiceberg's own update)
    catalog, (s1, s2, s3, s4), stamps = committed(tmp_path, 4)
    table = catalog.load_table(LEDGER)
    with table.manage_snapshots() as manage:
        manage.create_tag(s1, "reconciled-2026-03-01")
    catalog.load_table(LEDGER).maintenance.expire_snapshots().by_ids([s2]).commit()
    table = catalog.load_table(LEDGER)

    # THEN pyiceberg kept the entry before the removed one: a gap, where its own lookup answers
    # the second's instant with the first (another snapshot than the one current then)
    assert [entry.snapshot_id for entry in table.metadata.snapshot_log] == [s1, s3, s4]
    wrong = table.snapshot_as_of_timestamp(stamps[s2])
    assert wrong is not None
    assert wrong.snapshot_id == s1
    # AND the log read as the Java library keeps it starts after the gap
    assert [entry.snapshot_id for entry in retained_log(table.metadata)] == [s3, s4]
    # AND every instant before it is refused (the tag is read by its id), every one after is exact
    instants = [stamps[s1] - 1, stamps[s1], stamps[s2], stamps[s3] - 1, stamps[s3], stamps[s4] + 1]
    assert [answer(table.metadata, at) for at in instants] == [*["refused"] * 4, s3, s4]
    with pytest.raises(NotRetainedError, match=r"nearest tags: reconciled-2026-03-01 \("):
        snapshot_at(table.metadata, stamps[s2], table="ledger")


def test_a_catalog_that_clears_the_log_and_one_that_leaves_gaps_answer_alike(tmp_path: Path) -> None:
    # GIVEN ten commits, two of them tagged, and every other one but the last two expired
    catalog, history, stamps = committed(tmp_path, 10)
    table = catalog.load_table(LEDGER)
    with table.manage_snapshots() as manage:
        manage.create_tag(history[2], "night-a")
        manage.create_tag(history[3], "night-b")
    doomed = [s for s in history[:-2] if s not in (history[2], history[3])]
    catalog.load_table(LEDGER).maintenance.expire_snapshots().by_ids(doomed).commit()
    gappy = catalog.load_table(LEDGER).metadata
    # AND the same table as a catalog applying Iceberg's Java rule would have written it
    cleared = gappy.model_copy(update={"snapshot_log": retained_log(gappy)})
    assert [entry.snapshot_id for entry in cleared.snapshot_log] == history[-2:]

    # THEN every instant of the history reads the same on both: exact after the last removed
    # stretch, refused before it (the tagged pair's own stretch included, as Java clears it)
    instants = sorted(
        {stamps[s] + delta for s in history for delta in (-1, 0, 1)} | {int(time.time() * 1000)}
    )
    assert [answer(gappy, at) for at in instants] == [answer(cleared, at) for at in instants]
    assert answer(gappy, stamps[history[3]]) == "refused"
    assert answer(gappy, stamps[history[-1]]) == history[-1]
    # AND a table whose history is whole answers every instant, and before its first commit: nothing
    (tmp_path / "whole").mkdir()
    catalog, history, stamps = committed(tmp_path / "whole", 3)
    whole = catalog.load_table(LEDGER).metadata
    assert [answer(whole, stamps[s]) for s in history] == history
    assert answer(whole, stamps[history[0]] - 1) is None
