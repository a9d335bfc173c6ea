"""The API against its own OpenAPI document: schemathesis (every check) on the embedded stack.

The fuzzer reads ``/openapi.json`` from the running server and sends what the document allows (and
what it forbids), in every phase: the documented examples, the coverage phase's boundary values,
random fuzzing and the stateful phase that follows the document's links from a created wallet to
its deposits and balance. Any disagreement between the document and the server is a finding. Two
findings are the API's intended behaviour and are allowed, by exact status and error code:

- a transfer whose path names the same wallet twice answers 422 ``same_wallet_transfer``;
- a wallet's history refuses 422 ``validation_error`` what the document cannot say: a ``cursor``
  this API did not make for the wallet and range, and a ``from`` not before ``to``.

Afterwards the table is checked as the bank test checks it: no negative balance, money conserved,
and no item outside the contract's key shapes, whatever the fuzzer sent.
"""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.wallet_http import serve
from support.wallet_table import scan

from contracts.movement_types import movement_type
from contracts.settings import Settings
from contracts.wallets_table import ENTITY_TRANSACTION, ENTITY_USER, ENTITY_WALLET, Attr

pytestmark = [pytest.mark.stack, pytest.mark.slow]

#: Fixed, so a finding reproduces with the same command (the CLI prints ``st replay`` ids too).
SEED = 20261123
#: Examples per operation and phase: the whole run takes well under a minute on two cores.
MAX_EXAMPLES = 40

#: (check code, HTTP status, error code, operations) of the intended findings.
INTENDED = (
    (
        "ST202",
        422,
        "same_wallet_transfer",
        re.compile(r"^PUT /api/v1/wallets/\{wallet_id\}/transfer/\{target_wallet_id\}/?$"),
    ),
    ("ST202", 422, "validation_error", re.compile(r"^GET /api/v1/wallets/\{wallet_id\}/transactions/?$")),
)

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
#: The key shapes of contracts/wallets_table.py, as the contract (docs/architecture.md) writes them.
KEY_SHAPES = {
    ENTITY_WALLET: re.compile(rf"^{_UUID}#wallet$"),
    ENTITY_USER: re.compile(rf"^{_UUID}#user$"),
    ENTITY_TRANSACTION: re.compile(rf"^{_UUID}_[0-9A-Za-z_-]{{1,64}}_[0-9a-f]{{32}}#transaction$"),
}


def _schemathesis() -> str:
    return str(Path(sys.executable).with_name("schemathesis"))


def findings(junit: Path) -> list[tuple[str, str, int, str]]:
    """(operation, check code, status, error code) of every failing test case in a JUnit report."""
    found = []
    for case in ET.parse(junit).iter("testcase"):
        for outcome in case:
            if outcome.tag not in ("failure", "error"):
                continue
            text = outcome.text or outcome.get("message") or ""
            if outcome.tag == "error":
                found.append((case.get("name", "?"), "error", 0, text[:200]))
                continue
            # One <failure> lists its test cases ("1. Test Case ID: …"), each with its checks.
            for block in re.split(r"^\d+\. Test Case ID:", text, flags=re.MULTILINE)[1:]:
                status = re.search(r"^\[(\d{3})\]", block, flags=re.MULTILINE)
                code = re.search(r'"error":"([a-z_]+)"', block)
                for check in re.findall(r"^- (ST\d+)", block, flags=re.MULTILINE):
                    found.append(
                        (
                            case.get("name", "?"),
                            check,
                            int(status.group(1)) if status else 0,
                            code.group(1) if code else "",
                        )
                    )
    return found


def is_intended(finding: tuple[str, str, int, str]) -> bool:
    operation, check, status, code = finding
    return any(
        check == c and status == s and code == e and pattern.match(operation) for c, s, e, pattern in INTENDED
    )


def test_the_api_agrees_with_its_openapi_document_under_fuzzing(settings: Settings, tmp_path: Path) -> None:
    # GIVEN the API on the embedded stack, on a table of its own
    with serve(settings) as api:
        url = f"{str(api.http.base_url).rstrip('/')}/openapi.json"
        junit = tmp_path / "schemathesis.xml"
        # WHEN schemathesis runs every check in every phase with a fixed seed
        run = subprocess.run(
            [
                _schemathesis(),
                "run",
                url,
                "--checks",
                "all",
                "--seed",
                str(SEED),
                "--max-examples",
                str(MAX_EXAMPLES),
                "--generation-deterministic",
                "--request-timeout",
                "30",
                "--report",
                "junit",
                "--report-junit-path",
                str(junit),
                "--no-color",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        # THEN it tested every operation and found nothing but the two intended answers
        assert junit.exists(), run.stdout[-3000:] + run.stderr[-3000:]
        found = findings(junit)
        unexpected = [finding for finding in found if not is_intended(finding)]
        assert not unexpected, f"{unexpected}\n{run.stdout[-6000:]}"
        assert {check for _, check, _, _ in found} <= {"ST101", "ST202"}
        assert "Tested: 16" in run.stdout, run.stdout[-3000:]

    # AND the table keeps its invariants after everything the fuzzer sent
    items = scan(settings)
    assert items, "the fuzzer's stateful phase creates wallets"
    for item in items:
        shape = KEY_SHAPES.get(item[Attr.ENTITY])
        assert shape is not None, item
        assert shape.match(item[Attr.PK]), item
    wallets = [item for item in items if item[Attr.ENTITY] == ENTITY_WALLET]
    movements = [item for item in items if item[Attr.ENTITY] == ENTITY_TRANSACTION]
    assert all(wallet[Attr.BALANCE] >= 0 for wallet in wallets)
    # money in less money out, each movement as its registered type says (a transfer moves none)
    assert sum(wallet[Attr.BALANCE] for wallet in wallets) == sum(
        item[Attr.AMOUNT] * movement_type(item[Attr.TYPE]).flow for item in movements
    )


def test_the_finding_parser_reads_schemathesis_junit(tmp_path: Path) -> None:
    # GIVEN a report with one intended and one unexpected finding
    report = tmp_path / "r.xml"
    report.write_text(
        "<testsuites><testsuite>"
        '<testcase name="GET /api/v1/wallets/me"><failure>1. Test Case ID: a\n\n- ST101 Server error\n\n'
        '[501] Not Implemented:\n\n    `{"error":"not_implemented","detail":"x"}`\n</failure></testcase>'
        '<testcase name="PUT /api/v1/wallets/{wallet_id}/deposit/"><failure>1. Test Case ID: b\n\n'
        "- ST202 Schema-valid request rejected\n\n[422] Unprocessable Content:\n\n"
        '    `{"error":"validation_error","detail":"amount"}`\n</failure></testcase>'
        "</testsuite></testsuites>"
    )
    # WHEN it is read THEN each finding is named, and only the first is intended
    found = findings(report)
    assert found == [
        ("GET /api/v1/wallets/me", "ST101", 501, "not_implemented"),
        ("PUT /api/v1/wallets/{wallet_id}/deposit/", "ST202", 422, "validation_error"),
    ]
    assert [is_intended(finding) for finding in found] == [False, False]
