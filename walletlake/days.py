"""Which UTC day a command or a nightly step works on, and how a user names one.

The lake's partitions, the snapshots and the reconciliation runs are all UTC days; "yesterday"
here is always the last closed UTC day, whatever the machine's time zone.
"""

from __future__ import annotations

import argparse
import datetime as dt


def last_closed_day(now: dt.datetime | None = None) -> dt.date:
    """The last closed UTC day: what the nightly job and the day-taking commands work on by default."""
    return ((now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC) - dt.timedelta(days=1)).date()


def parse_day(text: str) -> dt.date:
    """A ``YYYY-MM-DD`` date, with a one-line error otherwise."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def day_argument(text: str) -> dt.date:
    """``parse_day`` for argparse, whose error message it then shows as is."""
    try:
        return parse_day(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
