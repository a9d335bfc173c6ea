"""One copy of botocore's service models per test process, whatever number of sessions it makes.

Every ``boto3.Session()`` builds a botocore session with a data loader of its own, and a loader
caches what it parsed for itself only: each new session parses the JSON models of the services it
makes clients for again (DynamoDB, S3, Glue, their endpoint rules), 50 to 100 ms a client. The
code under test makes a session per call (``provision``, ``drain``, ``open_catalog``, the query
engines), dozens per test: on three stack modules (44 tests) that was half of the run's CPU and a
third of its time (126 s → 79 s, 120 s → 69 s with one loader).

:func:`share_one_loader` gives every botocore session of the process the same loader. Sessions
already shared a loader among their own clients (a model is parsed once per session and read by
each client), so nothing is parsed or handled differently, only not again.
"""

from __future__ import annotations

import os
from typing import Any

import boto3
import botocore.loaders
import botocore.session


class _SearchPaths(list[str]):
    """A loader's search paths; adding one it holds already is a no-op.

    ``boto3.Session`` appends boto3's own data folder to its loader's paths: with one loader for
    every session the list would otherwise grow by one copy per session.
    """

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


def share_one_loader() -> None:
    """Make every botocore session created from now on in this process use one data loader."""
    loader = botocore.loaders.create_loader(os.environ.get("AWS_DATA_PATH"))
    # The list boto3 appends to (``search_paths`` returns it; the loader has no setter).
    loader._search_paths = _SearchPaths(loader.search_paths)
    loader.search_paths.append(os.path.join(os.path.dirname(boto3.__file__), "data"))

    def create_loader(search_path_string: Any = None) -> botocore.loaders.Loader:
        return loader

    botocore.session.create_loader = create_loader
