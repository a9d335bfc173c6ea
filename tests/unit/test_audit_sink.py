"""The audit sink's accounting and the line bound: every line written whole, or its loss counted."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
from hypothesis import given
from hypothesis import strategies as st

from contracts import api_metrics
from wallet.audit import MAX_LINE_BYTES, TRUNCATED, bounded_line, open_sink
from wallet.telemetry import Telemetry


def test_a_line_the_sink_cannot_take_is_counted_lost() -> None:
    # GIVEN a sink on a device that refuses every write (ENOSPC), as a full disk would
    telemetry = Telemetry()
    write = open_sink("/dev/full", telemetry)
    # WHEN two lines are written
    write(b'{"a":1}\n')
    write(b'{"b":2}\n')
    # THEN both are counted lost, and nothing raised into the request
    assert telemetry.totals()[api_metrics.AUDIT_LINES_LOST] == 2


def test_a_line_written_whole_is_not_counted(tmp_path: Path) -> None:
    telemetry = Telemetry()
    write = open_sink(str(tmp_path / "audit.jsonl"), telemetry)
    write(b'{"a":1}\n')
    assert (tmp_path / "audit.jsonl").read_bytes() == b'{"a":1}\n'
    assert telemetry.totals()[api_metrics.AUDIT_LINES_LOST] == 0
    assert os.path.getsize(tmp_path / "audit.jsonl") == 8


TEXT = st.text(st.characters(codec="utf-8"), max_size=3_000) | st.text('"\\\x00\x1f\u2028é€𝄞', max_size=3_000)


@given(path=TEXT, agent=TEXT, principal=TEXT, session=TEXT, wallet=TEXT)
def test_every_line_is_under_pipe_buf_after_encoding_and_every_cut_is_marked(
    path: str, agent: str, principal: str, session: str, wallet: str
) -> None:
    record = {
        "startTime": "2026-11-28T14:00:00.000Z",
        "requestPath": path,
        "userAgent": agent,
        "callerPrincipal": principal,
        "sessionName": session,
        "walletId": wallet,
        "responseCode": 200,
        "operation": "read",
    }
    line = bounded_line(dict(record))
    assert len(line) <= MAX_LINE_BYTES
    assert line.endswith(b"\n")
    written = orjson.loads(line)
    for name, value in record.items():
        if written[name] != value:  # a cut field keeps its start and says it was cut
            assert isinstance(value, str)
            assert written[name].endswith(TRUNCATED)
            assert value.startswith(written[name].removesuffix(TRUNCATED))
    if len(orjson.dumps(record)) + 1 <= MAX_LINE_BYTES:
        assert written == record
