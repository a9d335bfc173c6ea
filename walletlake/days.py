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


def unreconcilable_reason(
    day: dt.date, *, today: dt.date, first_day: dt.date | None, provisional: bool = False
) -> str | None:
    """Why ``day`` cannot be reconciled now, or None when it can.

    A reconciliation closes a day: its daily_balances are the opening of the next, which
    ``balance_as_of`` and the next night read. An open day (today) closed early would miss the
    entries still to come, so it runs only when asked for provisionally; a day before the lake's
    first wallet has nothing to close, and "CLEAN, 200 wallets" for it would be a made-up answer.

    Examples
    --------
    >>> day = dt.date(2026, 11, 22)
    >>> unreconcilable_reason(day, today=day, first_day=None)
    'the lake holds no wallet yet: there is no day to reconcile'
    """
    if day > today:
        return f"{day} has not started yet (today is {today}, UTC)"
    if first_day is None:
        return "the lake holds no wallet yet: there is no day to reconcile"
    if day < first_day:
        return f"{day} is before the lake's first day ({first_day}): there is nothing to reconcile"
    if day == today and not provisional:
        return (
            f"{day} is not over yet (UTC): reconcile a closed day, or pass --provisional to reconcile it as "
            "it stands"
        )
    return None
