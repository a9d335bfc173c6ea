"""What ``/metrics`` counts as a server error: only faults, not the designed 501 of ``/me/``."""

from __future__ import annotations

from contracts.api_metrics import FAILED, SERVER_ERRORS, SUCCEEDED
from wallet.telemetry import Telemetry


def test_a_501_is_failed_but_not_a_server_error() -> None:
    # GIVEN a fresh counter set
    telemetry = Telemetry()
    # WHEN the designed 501, a real 500 and a 503 are answered, and one success
    telemetry.response(501, "not_implemented")
    telemetry.response(500, "internal_error")
    telemetry.response(503, "unavailable")
    telemetry.response(204)
    # THEN only the 500 and the 503 are server errors; the 501 is failed and visible by status
    totals = telemetry.totals()
    assert totals[SERVER_ERRORS] == 2
    assert totals[FAILED] == 3
    assert totals[SUCCEEDED] == 1
    assert telemetry.snapshot()["responses_by_status"] == {"204": 1, "500": 1, "501": 1, "503": 1}
