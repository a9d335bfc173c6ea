"""Random histories of an outage and its recovery (hypothesis, pyiceberg's SQL catalog): every
entry ends in the ledger exactly once, and no commit ever holds one twice.

A history draws, in any order: stream batches the consumer lands (in the stream's order), records
the stream loses (trimmed past 24 hours), a switch to a new stream (the table's stream disabled
and enabled again: new shards whose sequence numbers start again; the old stream drained first,
or its unread records lost), export chunks over any range of what was written (full
or incremental: before, across or after what the stream delivered, overlapping one another),
range replays of earlier batches (``replay --stream-range``/``--left-out``), reruns, and commits.
It ends as the runbook's backfill does: an export of everything written, then a commit. Rows carry
their entry's own time, so the replay horizon's shortcut (stream files past it are not read) is
exercised as in production.
"""

from __future__ import annotations

import collections
import datetime as dt
import itertools
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.sql_lake import NAMESPACE, ledger_rows, sql_catalog, write_file

from lake.committer import commit_table
from lake.iceberg_tables import identifier
from lake.landing_log import LandingRecord

ENTRIES = 24
BASE = dt.datetime(2026, 3, 1, 1, tzinfo=dt.UTC)
COUNTS: collections.Counter[str] = collections.Counter()

steps = st.lists(
    st.one_of(
        st.tuples(st.just("stream"), st.integers(1, 6)),
        st.tuples(st.just("trim"), st.integers(1, 4)),
        st.tuples(st.just("export"), st.integers(0, ENTRIES - 1), st.integers(1, ENTRIES)),
        st.tuples(st.just("range"), st.integers(0, 8)),
        st.tuples(st.just("rerun"), st.integers(0, 8)),
        st.tuples(st.just("switch"), st.booleans()),
        st.just(("commit",)),
    ),
    max_size=18,
)


def rows(indexes: list[int]) -> pa.Table:
    """Ledger rows of these entries, each at its own time (entry i written at BASE + i s)."""
    table = ledger_rows([f"e{i:03d}" for i in indexes])
    times = pa.array([BASE + dt.timedelta(seconds=i) for i in indexes], table.schema.field("created_at").type)
    return table.set_column(table.schema.get_field_index("created_at"), "created_at", times)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=steps)
@example(history=[("stream", 1), ("stream", 2), ("switch", False), ("stream", 2)])
def test_any_outage_and_replays_end_with_every_entry_once(
    tmp_path_factory: object, history: list[tuple]
) -> None:
    folder = Path(tmp_path_factory.mktemp("lake"))  # type: ignore[attr-defined]
    catalog = sql_catalog(folder)
    table_id = identifier(NAMESPACE, "ledger")
    names = itertools.count(1)
    log: list[LandingRecord] = []
    batches: list[tuple[str, int, int]] = []  # (shard, first, end): ranges delivered or lost
    cursor = 0
    # the current stream's shard and the entry its sequence 1 is; a new stream's shards are named
    # from the counter (s1, s2, …), never the first stream's s0: DynamoDB never gives a new stream
    # an old shard's id (a history naming two streams' shards alike restarted one shard's sequence)
    shard, base = "s0", 0

    def land(stream: str, shard: str, indexes: list[int], first: int, last: int) -> None:
        if indexes:
            file = write_file(folder, "ledger", rows(indexes))
            key = f"_landed/{stream}/{shard}/{first:0>40}-{last:0>40}.json"
            log.append(LandingRecord(stream, shard, first, last, (file,), 0.0, key))

    def commit() -> None:
        commit_table(
            catalog, table_id, list(log), live_sources={r.source for r in log}, clock=lambda: 1_000.0
        )
        held = catalog.load_table(table_id).scan().to_arrow().column("entry_id").to_pylist()
        assert len(held) == len(set(held)), "a commit holds an entry twice"

    for step in history:
        kind = step[0]
        COUNTS[kind] += 1
        if kind in ("stream", "trim") and cursor < ENTRIES:
            end = min(ENTRIES, cursor + step[1])
            batches.append((shard, cursor, end))
            if kind == "stream":  # sequence numbers: from 1 at the stream's first entry
                land("stream", shard, list(range(cursor, end)), cursor - base + 1, end - base)
            cursor = end
        elif kind == "switch":
            drained = step[1]
            if not drained and cursor < ENTRIES:  # the old stream's unread records are lost
                lost = min(ENTRIES, cursor + 3)
                batches.append((shard, cursor, lost))
                cursor = lost
            shard, base = f"s{next(names)}", cursor
        elif kind == "export":
            start, size = step[1], step[2]
            land("export", f"x{next(names)}", list(range(start, min(ENTRIES, start + size))), 1, 1)
        elif kind in ("range", "rerun") and batches:
            of, first, end = batches[step[1] % len(batches)]
            again = "" if kind == "range" else f"-again{next(names)}"
            land("replay", f"range~{of}~{first + 1}{again}", list(range(first, end)), first + 1, end)
        elif kind == "commit":
            commit()
    # the runbook's recovery: an export of everything written, replayed, then committed
    land("export", "final", list(range(ENTRIES)), 1, 1)
    commit()
    held = sorted(catalog.load_table(table_id).scan().to_arrow().column("entry_id").to_pylist())
    assert held == [f"e{i:03d}" for i in range(ENTRIES)]


def teardown_module() -> None:
    print(f"\nreplay histories: {dict(sorted(COUNTS.items()))}")
