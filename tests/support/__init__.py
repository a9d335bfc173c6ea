"""What tests share: builders of ledgers, lakes and stream records, an HTTP client of the API, fakes.

Imported as ``support.<module>`` by the tests of ``tests/unit``, ``tests/stack`` and ``tests/cdk``
(``tests/`` is on ``sys.path`` through the root ``conftest.py``); no test module imports another.
"""
