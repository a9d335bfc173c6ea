"""The history's lake metadata: loaded once, reloaded off the request's path once it is old."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from contracts.settings import Settings
from lake import ledger_history
from lake.ledger_history import LakeLedger


class _Catalog:
    """A catalog whose every load is a new table object, counted; a load can be held back."""

    loads = 0
    release = threading.Event()

    def load_table(self, identifier: Any) -> object:
        type(self).loads += 1
        if type(self).loads > 1:
            assert type(self).release.wait(10)
        return object()


@pytest.fixture
def catalog(monkeypatch: pytest.MonkeyPatch) -> type[_Catalog]:
    _Catalog.loads, _Catalog.release = 0, threading.Event()
    monkeypatch.setattr(ledger_history, "open_catalog", lambda settings: _Catalog())
    return _Catalog


def test_an_old_snapshot_keeps_serving_while_the_next_loads_then_the_next_serves(
    catalog: type[_Catalog],
) -> None:
    now = [0.0]
    lake = LakeLedger(Settings(), metadata_seconds=30, clock=lambda: now[0])
    first = lake.table()
    assert lake.table() is first
    assert catalog.loads == 1
    # WHEN it is 31 seconds old: the request gets it at once, while a thread loads the next
    now[0] = 31.0
    assert lake.table() is first
    assert lake.table() is first  # one reload at a time, however many requests
    catalog.release.set()
    assert lake._reloading is not None
    lake._reloading.join(10)
    # THEN the next request reads the new snapshot, and only one load was made
    assert lake.table() is not first
    assert catalog.loads == 2


def test_fresh_and_zero_seconds_load_now(catalog: type[_Catalog]) -> None:
    catalog.release.set()
    lake = LakeLedger(Settings(), metadata_seconds=0)
    first = lake.table()
    assert lake.table() is not first
    assert lake.table(fresh=True) is not first
    assert catalog.loads == 3
