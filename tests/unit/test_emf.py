"""Seed 000's telemetry as CloudWatch embedded-metric-format lines: the formatter and the publisher, purely.

Every line is checked against the EMF specification by :func:`emf_lines.assert_valid_emf`, as the lines
a served process prints are (tests/stack/test_server_fleet.py).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from support.emf_lines import assert_valid_emf

from contracts import api_metrics as metrics
from contracts.api_metrics import PUBLISHED
from wallet import emf
from wallet.telemetry import Telemetry


def test_a_line_is_one_valid_emf_document_with_every_published_counter() -> None:
    # GIVEN counts of every published counter
    counts = {name: index for index, name in enumerate(PUBLISHED)}
    # WHEN they are formatted
    text = emf.line(counts, timestamp_ms=1_700_000_000_123, properties={"pid": 42})
    # THEN it is one line of JSON (one log event), and valid EMF in namespace walletlake with
    # dimension service=wallet-api, one Count metric per counter under its CloudWatch name
    assert text.endswith("\n")
    assert "\n" not in text[:-1]
    assert text.startswith('{"_aws":')
    document = json.loads(text)
    values = assert_valid_emf(document)
    assert document["_aws"]["Timestamp"] == 1_700_000_000_123
    assert values == {PUBLISHED[name]: value for name, value in counts.items()}
    assert list(values) == list(PUBLISHED.values())
    # AND the properties ride along as fields, not metrics
    assert document["pid"] == 42
    assert "pid" not in values


def test_the_published_names_cover_seed_000s_telemetry_list() -> None:
    # Seed 000: failed and successful requests, DynamoDB conflicts, internal errors, throughput exceeded
    assert PUBLISHED[metrics.FAILED] == "RequestsFailed"
    assert PUBLISHED[metrics.SUCCEEDED] == "RequestsSucceeded"
    assert PUBLISHED[metrics.TRANSACTION_CONFLICTS] == "DynamoDBTransactionConflicts"
    assert PUBLISHED[metrics.INTERNAL_ERRORS] == "DynamoDBInternalErrors"
    assert PUBLISHED[metrics.THROTTLES] == "DynamoDBThrottles"
    # and what the fleet adds: shed load, 5xx, conflict retries of whole groups
    assert PUBLISHED[metrics.SHED] == "RequestsShed"
    assert PUBLISHED[metrics.SERVER_ERRORS] == "RequestsServerErrors"
    assert PUBLISHED[metrics.GROUP_CONFLICT_RETRIES] == "GroupConflictRetries"
    assert len(set(PUBLISHED.values())) == len(PUBLISHED)


def test_answers_are_counted_by_kind() -> None:
    telemetry = Telemetry()
    for status in (204, 201, 404, 409, 429, 429, 503, 500):
        telemetry.response(status)
    telemetry.count(metrics.SHED)
    totals = telemetry.totals()
    assert (totals[metrics.SUCCEEDED], totals[metrics.FAILED]) == (2, 6)
    assert (totals[metrics.THROTTLED], totals[metrics.SHED], totals[metrics.SERVER_ERRORS]) == (2, 1, 2)
    # and GET /metrics shows the same counters
    snapshot = telemetry.snapshot()
    assert {name: snapshot[name] for name in PUBLISHED} == totals


class Lines:
    """Where the publisher writes, and a clock the test moves."""

    def __init__(self) -> None:
        self.written: list[str] = []
        self.now_ms = 1_000

    def write(self, text: str) -> None:
        self.written.append(text)

    def values(self) -> list[dict[str, int]]:
        return [assert_valid_emf(json.loads(text)) for text in self.written]


def test_each_line_carries_what_was_counted_since_the_previous_one_so_sums_are_totals() -> None:
    # GIVEN a publisher over a process's counters
    telemetry = Telemetry()
    lines = Lines()
    publisher = emf.EmfPublisher(telemetry, 60, write=lines.write, clock_ms=lambda: lines.now_ms)

    # WHEN requests are counted between three publications
    for _ in range(3):
        telemetry.response(204)
    telemetry.count(metrics.TRANSACTION_CONFLICTS, 2)
    publisher.publish()
    lines.now_ms = 61_000
    telemetry.response(204)
    telemetry.response(429)
    telemetry.count(metrics.SHED)
    publisher.publish()
    lines.now_ms = 121_000
    publisher.publish()

    # THEN the first line equals the counters, the next ones what came since, and a quiet interval
    # is a line of zeros (an alarm's "no data" then means no process, not no event)
    first, second, third = lines.values()
    assert (first["RequestsSucceeded"], first["DynamoDBTransactionConflicts"]) == (3, 2)
    assert first["RequestsShed"] == 0
    assert (second["RequestsSucceeded"], second["RequestsFailed"], second["RequestsThrottled"]) == (1, 1, 1)
    assert second["RequestsShed"] == 1
    assert set(third.values()) == {0}
    assert [json.loads(text)["_aws"]["Timestamp"] for text in lines.written] == [1_000, 61_000, 121_000]
    # AND over the lines, every metric sums to its counter
    totals = telemetry.totals()
    for name, metric in PUBLISHED.items():
        assert sum(line[metric] for line in (first, second, third)) == totals[name]


def test_stop_publishes_what_was_counted_since_the_last_line_once() -> None:
    async def scenario() -> Lines:
        telemetry = Telemetry()
        lines = Lines()
        publisher = emf.EmfPublisher(telemetry, 3600, write=lines.write, clock_ms=lambda: lines.now_ms)
        # GIVEN a started publisher whose interval has not come yet
        publisher.start()
        telemetry.response(204)
        # WHEN it stops (the server shuts down)
        await publisher.stop()
        await publisher.stop()  # a second stop has nothing new: a line of zeros, no error
        return lines

    lines = asyncio.run(scenario())
    # THEN the counts reached stdout at shutdown
    assert [values["RequestsSucceeded"] for values in lines.values()] == [1, 0]


def test_an_interval_of_zero_publishes_nothing() -> None:
    async def scenario() -> Lines:
        lines = Lines()
        publisher = emf.EmfPublisher(Telemetry(), 0, write=lines.write)
        publisher.start()
        await publisher.stop()
        return lines

    assert asyncio.run(scenario()).written == []


def test_a_failed_write_keeps_the_counts_for_the_next_line() -> None:
    telemetry = Telemetry()
    lines = Lines()
    failing = [True]

    def write(text: str) -> None:
        if failing[0]:
            raise OSError("stdout closed")
        lines.write(text)

    publisher = emf.EmfPublisher(telemetry, 60, write=write)
    telemetry.response(204)
    publisher.publish()  # lost, logged, not raised
    failing[0] = False
    telemetry.response(204)
    publisher.publish()
    assert [values["RequestsSucceeded"] for values in lines.values()] == [2]


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_every_published_counter_reaches_its_metric(name: str) -> None:
    telemetry = Telemetry()
    telemetry.count(name, 5)
    lines = Lines()
    emf.EmfPublisher(telemetry, 60, write=lines.write).publish()
    [values] = lines.values()
    assert values[PUBLISHED[name]] == 5
    assert sum(values.values()) == 5
