"""Reading CloudWatch embedded-metric-format lines back in tests: checked against the specification.

A line is valid EMF when ``_aws.CloudWatchMetrics[0]`` names the namespace, the dimension set and every
metric, and each named metric and dimension is a top-level member of the document holding its value
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html).
"""

from __future__ import annotations

import json
from typing import Any


def assert_valid_emf(document: dict[str, Any]) -> dict[str, int]:
    """Check ``document`` against the EMF specification and our conventions; its metric values by name."""
    directive = document["_aws"]
    assert isinstance(directive["Timestamp"], int)
    assert directive["Timestamp"] > 0
    [metric_directive] = directive["CloudWatchMetrics"]
    assert metric_directive["Namespace"] == "walletlake"
    assert metric_directive["Dimensions"] == [["service"]]
    assert document["service"] == "wallet-api"
    names = [metric["Name"] for metric in metric_directive["Metrics"]]
    assert len(names) == len(set(names)) <= 100  # EMF's limit per directive
    assert all(metric["Unit"] == "Count" for metric in metric_directive["Metrics"])
    values = {name: document[name] for name in names}
    assert all(isinstance(value, int) and value >= 0 for value in values.values())
    return values


def emf_documents(output: str) -> list[dict[str, Any]]:
    """Every EMF document among a process's output lines (log lines and others skipped), checked."""
    documents = [json.loads(line) for line in output.splitlines() if line.startswith('{"_aws":')]
    for document in documents:
        assert_valid_emf(document)
    return documents
