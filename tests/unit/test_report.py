"""The HTML report: self-contained, exact about money, honest about the verdict, and renders in Chromium."""

from __future__ import annotations

import base64
import datetime as dt
import importlib.util
import io
import re
import subprocess
import sys
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from PIL import Image

from walletlake.report import (
    MAX_TABLE_ROWS,
    PlotSpec,
    flatten,
    format_value,
    guess_plot,
    plot_png,
    render_report,
    stage_rows,
    verdict,
)

_IMAGE = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def _frames() -> dict[str, pd.DataFrame]:
    days = [dt.date(2026, 3, 1) + dt.timedelta(days=offset) for offset in range(4)]
    return {
        "daily_volume": pd.DataFrame(
            {
                "day": days,
                "money_in": [1_000_000_000_000_001, 2_000_000, 3_000_000, 4_000_000],
                "money_out": [0, 0, 1_000, 0],
                "transfer_amount": [500_000, 0, 250_000, 1_000_000],
            }
        ),
        "top_wallets": pd.DataFrame({"wallet_id": ["w-a", "w-b"], "total_amount": [9_000_000, 4_000_000]}),
    }


def _reconciliation(ok: bool = True) -> dict[str, Any]:
    findings = [
        {"wallet_id": "w-a", "status": "ok", "expected": 4, "actual": 4, "detail": ""},
        {"wallet_id": "w-b", "status": "lagging", "expected": 3, "actual": 2, "detail": "1 version behind"},
    ]
    if not ok:
        findings.append(
            {"wallet_id": "w-<c>", "status": "missing", "expected": 7, "actual": 5, "detail": "versions 6..7"}
        )
    counts: dict[str, int] = {}
    for finding in findings:
        counts[finding["status"]] = counts.get(finding["status"], 0) + 1
    return {"ok": ok, "day": "2026-03-04", "counts": counts, "findings": findings}


def _render(tmp_path: Path, **overrides: Any) -> str:
    arguments: dict[str, Any] = {
        "summary": {
            "title": "walletlake demo",
            "stages": [
                {"name": "wallets", "count": 2, "unit": "wallets"},
                {"name": "ledger rows", "count": 6, "seconds": 1.5},
            ],
            "throughput": {"requests_per_s": 812.5},
            "lake": "s3://lake-bucket/lake/",
        },
        "frames": _frames(),
        "reconciliation": _reconciliation(),
    }
    arguments.update(overrides)
    path = render_report(tmp_path / "out", **arguments)
    assert path == tmp_path / "out" / "report.html"
    return path.read_text(encoding="utf-8")


def test_report_is_self_contained_and_every_embedded_plot_is_a_png(tmp_path: Path) -> None:
    # WHEN a report is rendered
    text = _render(tmp_path)
    # THEN it references nothing outside itself
    assert not re.search(r'(src|href)="(?!data:)', text)
    assert "<script" not in text
    # AND it embeds one plot per frame with a fitting spec, plus stages and findings by class
    images = _IMAGE.findall(text)
    assert len(images) == 4
    for encoded in images:
        with Image.open(io.BytesIO(base64.b64decode(encoded))) as image:
            assert image.format == "PNG"
            assert image.size == (750, 340)


def test_money_is_shown_in_usd_exactly_and_labelled(tmp_path: Path) -> None:
    text = _render(tmp_path)
    # THEN a value beyond float precision keeps every digit, in USD like the plots beside it
    assert "<td class=num>1,000,000,000.000001</td>" in text
    assert "<td class=num>9.00</td>" in text
    assert "<th>money_in (USD)</th>" in text
    assert "1,000,000,000,000,001" not in text


def _statement() -> pd.DataFrame:
    ids = [f"{n:08x}-7c1e-4a59-9d2e-5b0c8f3a6d1{n}" for n in range(3)]
    return pd.DataFrame(
        {
            "created_at": pd.to_datetime(["2026-03-01 09:00:00.123"] * 3),
            "wallet_version": pd.array([1, 2, 3], dtype="Int64"),
            "txn_id": ids,
            "txn_type": ["deposit", "transfer", "transfer"],
            "direction": ["credit", "debit", "credit"],
            "counterparty_wallet_id": pd.array([None, ids[1], ids[2]], dtype="string"),
            "amount": pd.array([5_000_000, 1_250_000, 10], dtype="Int64"),
            "delta": pd.array([5_000_000, -1_250_000, 10], dtype="Int64"),
            "running_balance": pd.array([5_000_000, 3_750_000, 3_750_010], dtype="Int64"),
            "balance_after": pd.array([5_000_000, 3_750_000, 3_750_010], dtype="Int64"),
            "amount_usd": [Decimal("5.000000"), Decimal("1.250000"), Decimal("0.000010")],
            "balance_after_usd": [Decimal("5.000000"), Decimal("3.750000"), Decimal("3.750010")],
        }
    )


def _conservation() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "day": ["2026-03-01"],
            "money_in_entries": pd.array([400], dtype="Int64"),
            "money_in": pd.array([1_234_567_890_123], dtype="Int64"),
            "transfer_debits": pd.array([1000], dtype="Int64"),
            "debit_amount": pd.array([987_654_321_000], dtype="Int64"),
            "transfer_credits": pd.array([1000], dtype="Int64"),
            "credit_amount": pd.array([987_654_321_000], dtype="Int64"),
            "net_change": pd.array([1_234_567_890_123], dtype="Int64"),
            "unbalanced_transfers": pd.array([0], dtype="Int64"),
            "conserved": [True],
        }
    )


def test_statement_ids_are_short_nulls_empty_and_usd_twins_not_repeated(tmp_path: Path) -> None:
    text = _render(tmp_path, frames={"wallet_statement": _statement(), "money_conservation": _conservation()})
    section = text[text.index('<section id="query-wallet_statement">') :]
    assert "&lt;NA&gt;" not in text
    assert "<NA>" not in text
    # THEN ids show their first 8 characters, the full id in the tooltip
    assert '<td class=id title="00000001-7c1e-4a59-9d2e-5b0c8f3a6d11">00000001…</td>' in section
    # AND the deposit's counterparty is an empty cell
    assert "<td></td>" in section
    # AND amounts are USD once: amount (USD) from the micro-USD column, no amount_usd beside it
    assert "<th>amount (USD)</th>" in section
    assert "amount_usd" not in section
    assert "<td class=num>0.000010</td>" in section
    # AND a one-row result is a key/value table
    conservation = text[text.index('<section id="query-money_conservation">') :]
    assert "<tr><th>money_in (USD)</th><td>1,234,567.890123</td></tr>" in conservation


def test_verdict_badge_and_failing_findings_are_shown(tmp_path: Path) -> None:
    # GIVEN a reconciliation with a missing wallet
    text = _render(tmp_path, reconciliation=_reconciliation(ok=False))
    # THEN the badge says FAILED and the failing finding is listed, escaped
    assert '<span class="verdict fail">FAILED</span>' in text
    assert "w-&lt;c&gt;" in text
    assert "versions 6..7" in text
    # AND a passing one says PASSED
    assert '<span class="verdict pass">PASSED</span>' in _render(tmp_path)


def test_long_results_are_cut_with_a_note(tmp_path: Path) -> None:
    frame = pd.DataFrame({"wallet_version": range(1, 201), "balance_after": range(1, 201)})
    text = _render(tmp_path, frames={"wallet_statement": frame})
    assert f"showing {MAX_TABLE_ROWS} of 200 rows" in text
    assert f"<td class=num>{MAX_TABLE_ROWS}</td>" in text
    assert f"<td class=num>{MAX_TABLE_ROWS + 1}</td>" not in text


def test_empty_frame_says_no_rows(tmp_path: Path) -> None:
    text = _render(tmp_path, frames={"daily_volume": pd.DataFrame({"day": [], "money_in": []})})
    assert '<section id="query-daily_volume"><h2>daily_volume</h2>\n<p class="note">no rows</p>' in text


def test_render_to_an_explicit_file_name(tmp_path: Path) -> None:
    target = tmp_path / "nested" / "run.html"
    written = render_report(target, summary={}, frames={}, reconciliation={"ok": True})
    assert written == target
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


@pytest.mark.parametrize(
    ("reconciliation", "passed"),
    [
        ({"ok": False, "counts": {"ok": 3}}, False),
        ({"counts": {"ok": 3, "lagging": 1}}, True),
        ({"counts": {"ok": 3, "mismatch": 1}}, False),
        ({"counts": {"ok": 3, "duplicate": 0}}, True),
        ({}, True),
    ],
)
def test_verdict_prefers_ok_and_else_reads_counts(reconciliation: dict[str, Any], passed: bool) -> None:
    assert verdict(reconciliation) is passed


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (9_000_000_000_000_000_000 - 1, "8,999,999,999,999,999,999"),
        (True, "yes"),
        (None, ""),
        (float("nan"), ""),
        (2.5, "2.5"),
        (dt.date(2026, 1, 2), "2026-01-02"),
        (dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC), "2026-01-02 03:04:05+00:00"),
        ("a<b", "a<b"),
    ],
)
def test_format_value(value: Any, text: str) -> None:
    assert format_value(value) == text


def test_stage_rows_accepts_a_mapping_or_rows() -> None:
    assert stage_rows({"wallets": 2, "ledger rows": 6}) == [
        {"name": "wallets", "count": 2},
        {"name": "ledger rows", "count": 6},
    ]
    assert stage_rows([{"name": "x", "count": 1, "seconds": 0.5}]) == [
        {"name": "x", "count": 1, "seconds": 0.5}
    ]
    assert stage_rows(None) == []


def test_flatten_nests_with_dots() -> None:
    assert flatten({"a": 1, "b": {"c": 2, "d": {"e": 3}}}) == [("a", 1), ("b.c", 2), ("b.d.e", 3)]


def test_guess_plot_skips_counters_and_single_rows() -> None:
    frame = pd.DataFrame({"wallet_id": ["a", "b"], "wallet_version": [1, 2], "balance": [5, 6]})
    assert guess_plot("balances", frame) == PlotSpec(x="wallet_id", y=("balance",), title="balances")
    assert guess_plot("one", frame.head(1)) is None
    assert guess_plot("versions", frame[["wallet_id", "wallet_version"]]) is None


@pytest.mark.parametrize("kind", ["bar", "barh", "line", "pie"])
def test_every_plot_kind_draws(kind: str) -> None:
    frame = pd.DataFrame({"label": ["a", "b", "c"], "value": [1_000_000, 3_000_000, 2_000_000]})
    png = plot_png(frame, PlotSpec(x="label", y=("value",), kind=kind, money=True))  # type: ignore[arg-type]
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_report_renders_in_headless_chromium(tmp_path: Path, project_root: Path) -> None:
    script = project_root / "scripts" / "check_report_renders.py"
    spec = importlib.util.spec_from_file_location("check_report_renders", script)
    assert spec is not None
    assert spec.loader is not None
    check_report_renders = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check_report_renders)
    if check_report_renders.find_chromium() is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium); render check not run")
    # GIVEN a failing report, so both the plots and the red badge must be painted
    _render(tmp_path, reconciliation=_reconciliation(ok=False))
    report = tmp_path / "out" / "report.html"
    # WHEN the check script renders it in headless Chromium
    completed = subprocess.run(
        [sys.executable, str(script), str(report), "--screenshot", str(tmp_path / "shot.png")],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    # THEN Chromium painted the page, its plots and its FAILED verdict
    assert completed.returncode == 0, completed.stderr
    assert "verdict FAILED painted" in completed.stdout
    with Image.open(tmp_path / "shot.png") as shot:
        assert shot.size == check_report_renders.WINDOW


def test_demo_summary_shows_checks_counts_and_timings(tmp_path: Path) -> None:
    # GIVEN the summary the demo passes: checks, counts per stage, timings
    summary = {
        "checks": {"every wallet reached the lake": True, "nothing quarantined": False},
        "counts": {"api": {"wallets": 200, "requests/s": 812}, "consume": {"ledger_rows": 4_400}},
        "timings": {"consume": 6.25, "render report": 1.0},
        "lake": "s3://b/lake/",
    }
    # WHEN rendered
    text = _render(tmp_path, summary=summary, frames={})
    # THEN the failed check is marked, every stage's counts and the timings are shown
    assert '<span class="verdict fail">a check FAILED</span>' in text
    assert '<span class="mark fail">FAILED</span></td><td>nothing quarantined</td>' in text
    assert "<h3>consume</h3><table><tr><th>ledger_rows</th><td class=num>4,400</td></tr></table>" in text
    assert "<td class=num>6.25</td>" in text
    assert "<tr><th>lake</th><td>s3://b/lake/</td></tr>" in text
    # AND the timings plot is embedded (findings by class + seconds per stage)
    assert len(_IMAGE.findall(text)) == 2


#: Injected into a copy of the report (the report itself has no script): marks every table wider
#: than the card or section holding it, then the DOM is dumped.
_MEASURE = """<script>
window.addEventListener("load", () => {
  const wide = [];
  for (const table of document.querySelectorAll("table")) {
    const box = table.closest(".card") || table.closest("section");
    const inner = box.clientWidth - parseFloat(getComputedStyle(box).paddingLeft)
      - parseFloat(getComputedStyle(box).paddingRight);
    const width = Math.max(table.scrollWidth, table.getBoundingClientRect().width);
    if (width > inner + 1 || box.scrollWidth > box.clientWidth + 1) {
      const name = box.id || box.querySelector("h3, h2").textContent;
      wide.push(name + ":" + Math.round(width) + ">" + Math.round(inner));
    }
  }
  const mark = document.createElement("pre");
  mark.id = "measured";
  const count = document.querySelectorAll("table").length;
  mark.textContent = "TABLES " + count + " WIDE [" + wide.join(", ") + "]";
  document.body.appendChild(mark);
});
</script>"""


def test_no_table_is_wider_than_its_card_at_1400_px(tmp_path: Path, project_root: Path) -> None:
    script = project_root / "scripts" / "check_report_renders.py"
    spec = importlib.util.spec_from_file_location("check_report_renders", script)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    browser = module.find_chromium()
    if browser is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium); width check not run")
    # GIVEN the demo's report: long stage names in the count cards, the statement with its ids and
    # the one-row money conservation with its ten columns
    summary = {
        "checks": {"every ledger entry reached the lake once": True},
        "counts": {
            "ttl": {
                "expired from DynamoDB by TTL while watched": 1_234,
                "TTL deletions seen on the stream": 9,
            },
            "commit": {"ledger snapshot after the last commit": 6_844_087_072_380_450_424},
            "nightly": {"reconciled as of Iceberg snapshots": "ledger 6844087072380450424, wallets 81237"},
        },
        "lake": "Iceberg tables walletlake.{ledger,wallets,quarantine} in http://127.0.0.1:8181",
    }
    frames = {"money_conservation": _conservation(), "wallet_statement": _statement(), **_frames()}
    _render(tmp_path, summary=summary, frames=frames)
    page = tmp_path / "measured.html"
    page.write_text(
        (tmp_path / "out" / "report.html")
        .read_text(encoding="utf-8")
        .replace("</body>", _MEASURE + "</body>"),
        encoding="utf-8",
    )
    # WHEN Chromium lays it out in a 1,400 px window
    with tempfile.TemporaryDirectory(prefix="walletlake-chromium-") as profile:
        dumped = subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                f"--user-data-dir={profile}",
                "--window-size=1400,3000",
                "--virtual-time-budget=5000",
                "--dump-dom",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    # THEN it measured every table and none is wider than the card (or section) that holds it
    found = re.search(r"TABLES (\d+) WIDE \[(.*?)\]", dumped.stdout)
    assert found is not None, dumped.stderr[-2000:]
    assert int(found.group(1)) >= 8
    assert found.group(2) == ""


def _big_statement() -> pd.DataFrame:
    """A statement of large amounts: the widest figures a wallet's table holds (10^15 micro-USD)."""
    frame = _statement()
    for column in ("amount", "delta", "running_balance", "balance_after"):
        frame[column] = pd.array(
            [999_999_999_999_999, -999_999_999_999_999, 999_999_999_999_991], dtype="Int64"
        )
    return frame


#: Injected into a copy of the report: every table cell whose text the layout split over lines,
#: and whether the page scrolls sideways.
_MEASURE_BROKEN = """<script>
window.addEventListener("load", () => {
  const broken = [];
  for (const cell of document.querySelectorAll("td")) {
    const range = document.createRange();
    range.selectNodeContents(cell);
    const lines = new Set(Array.from(range.getClientRects(), (rect) => Math.round(rect.top)));
    if (lines.size > 1 && /[0-9]/.test(cell.textContent)) broken.push(cell.textContent);
  }
  const mark = document.createElement("pre");
  mark.id = "measured";
  const wide = document.documentElement.scrollWidth > window.innerWidth + 1;
  mark.textContent = "CELLS " + document.querySelectorAll("td").length + " BROKEN [" + broken.join(" | ")
    + "] PAGE_WIDE " + wide;
  document.body.appendChild(mark);
});
</script>"""


@pytest.mark.parametrize("width", [1400, 800])
def test_no_number_is_broken_and_the_statement_says_whose_it_is(
    tmp_path: Path, project_root: Path, width: int
) -> None:
    script = project_root / "scripts" / "check_report_renders.py"
    spec = importlib.util.spec_from_file_location("check_report_renders", script)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    browser = module.find_chromium()
    if browser is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium); render check not run")
    # GIVEN the demo's report: a statement of large amounts (named by its wallet), the counts with a
    # snapshot id, the other results
    wallet = "5b0c8f3a-7c1e-4a59-9d2e-00000000beef"
    summary = {
        "counts": {
            "commit": {"ledger snapshot id after the last commit": 6_844_087_072_380_450_424, "rows": 12_345},
        },
    }
    frames = {"wallet_statement": _big_statement(), **_frames()}
    captions = {"wallet_statement": f"wallet {wallet}, 2026-03-01 00:00 to 2026-03-02 00:00 UTC"}
    target = render_report(
        tmp_path / "out", summary=summary, frames=frames, reconciliation=_reconciliation(), captions=captions
    )
    text = target.read_text(encoding="utf-8")
    # THEN the statement says whose it is, and the snapshot id is digits, not a number with separators
    assert f'<p class="caption">wallet {wallet}, 2026-03-01 00:00 to 2026-03-02 00:00 UTC</p>' in text
    assert "<td class=num>6844087072380450424</td>" in text
    assert "6,844,087" not in text
    assert "<td class=num>12,345</td>" in text
    page = tmp_path / "measured.html"
    page.write_text(text.replace("</body>", _MEASURE_BROKEN + "</body>"), encoding="utf-8")
    # WHEN Chromium lays it out at the window's width
    with tempfile.TemporaryDirectory(prefix="walletlake-chromium-") as profile:
        dumped = subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                f"--user-data-dir={profile}",
                f"--window-size={width},3000",
                "--virtual-time-budget=5000",
                "--dump-dom",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    # THEN no cell holding a figure is split over two lines, and the page does not scroll sideways
    found = re.search(r"CELLS (\d+) BROKEN \[(.*?)\] PAGE_WIDE (\w+)", dumped.stdout)
    assert found is not None, dumped.stderr[-2000:]
    assert int(found.group(1)) >= 30
    assert found.group(2) == ""
    assert found.group(3) == "false"
