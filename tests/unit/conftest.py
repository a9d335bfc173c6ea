"""Unit tests: no server, no Java, no node; the whole folder runs alone in seconds.

The root conftest's ``stack`` fixture (and ``settings``/``make_settings``, which need it) is
replaced here by one that fails, so a test that reaches for the embedded stack from this folder
fails at once, naming the folder it belongs in, instead of quietly starting servers.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def stack() -> None:
    pytest.fail("tests/unit runs without servers: a test that needs the embedded stack goes in tests/stack")
