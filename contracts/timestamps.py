"""How an instant is written in the lake's JSON (snapshot manifests, run summaries, Map items).

UTC, ISO 8601, to the millisecond (the precision the lake's timestamp columns hold), with ``Z``:
one spelling, so a text written by one step compares equal to the same instant written by another.
"""

from __future__ import annotations

import datetime as dt


def utc_text(moment: dt.datetime) -> str:
    """``2026-11-20T23:59:59.123Z``; a naive ``moment`` is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_utc_text(text: str) -> dt.datetime:
    """The aware instant :func:`utc_text` wrote (any ISO 8601 text with an offset is accepted)."""
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} names no time zone")
    return moment
