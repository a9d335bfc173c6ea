"""The demo's lines agree with its tables on their face."""

from __future__ import annotations

import pytest

from walletlake.demo import stage_line


@pytest.mark.parametrize(
    ("done", "total", "line"),
    [
        # TTL: every item is expected to expire, 1,200 did while watched: the line says both
        (1_200, 1_339, "TTL expiry of hot items: 1,200 of 1,339 done in 15.0 s"),
        (0, 1_339, "TTL expiry of hot items: 0 of 1,339 done in 15.0 s"),
        (1_339, 1_339, "TTL expiry of hot items: 1,339 done in 15.0 s"),
        # a stage that counted nothing along the way: what it was to do
        (None, 1_339, "TTL expiry of hot items: 1,339 done in 15.0 s"),
    ],
)
def test_a_stage_line_says_what_was_done_of_what_was_expected(
    done: int | None, total: int, line: str
) -> None:
    assert stage_line("TTL expiry of hot items", done, total, 15.0) == line
