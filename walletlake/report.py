"""A self-contained HTML report of one pipeline run: what the demo leaves for a person to open.

The report is one file with no outside references (no scripts, no stylesheets, no image files):
plots are PNGs embedded as ``data:`` URIs, so it can be mailed, attached to a ticket or opened
from a CI artefact and look the same everywhere. Rendering is pure apart from writing the file:
everything shown comes from the arguments, so the demo (or anyone) decides what goes in.

Money in query results is integer micro-USD. Tables show it in USD, the unit of the plots beside
them, converted exactly (a decimal, never a float: ``1,000,000,000.000001``) and labelled in the
column's header; the exact USD columns a query adds (``*_usd``) are then not shown twice. Ids are
shortened to their first characters (the full id in the cell's tooltip), a one-row result is shown
as a two-column table, and null cells are empty, so every table fits its card at a laptop's width;
a number is never broken across lines (:mod:`walletlake.report_tables`). A result may carry a
caption (``captions``: the statement says whose it is).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import io
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import pandas as pd
from matplotlib.figure import Figure

from contracts.money import MICRO_USD_PER_USD
from walletlake.report_tables import (
    MAX_TABLE_ROWS,
    display_frame,
    escape,
    format_value,
    html_table,
    key_value_table,
    result_table,
    usd_text,
)

__all__ = [
    "DEFAULT_PLOTS",
    "MAX_TABLE_ROWS",
    "PASSING_STATUSES",
    "PlotSpec",
    "display_frame",
    "flatten",
    "format_value",
    "guess_plot",
    "plot_png",
    "render_report",
    "stage_rows",
    "usd_text",
    "verdict",
]

_logger = logging.getLogger(__name__)

#: Statuses reconciliation accepts; anything else fails the nightly job (docs/architecture.md, invariant 4).
PASSING_STATUSES: Final = frozenset({"ok", "lagging"})

PlotKind = Literal["bar", "barh", "line", "pie"]


@dataclasses.dataclass(frozen=True, slots=True)
class PlotSpec:
    """How one result frame becomes a picture.

    Attributes
    ----------
    x:
        Column on the category / time axis (for ``pie``: the slice labels).
    y:
        Numeric columns plotted against ``x`` (for ``pie``: the first one gives the slice sizes).
    kind:
        ``bar``, ``barh``, ``line`` or ``pie``.
    title:
        Caption above the plot.
    money:
        The ``y`` columns are micro-USD; the axis shows USD.
    """

    x: str
    y: tuple[str, ...]
    kind: PlotKind = "bar"
    title: str = ""
    money: bool = False

    def fits(self, frame: pd.DataFrame) -> bool:
        """Whether ``frame`` has every column this plot needs and something to draw."""
        return not frame.empty and all(column in frame.columns for column in (self.x, *self.y))


#: Plots for the named queries the demo and notebooks run, by frame name. A frame whose name is
#: not here (or whose columns differ) gets :func:`guess_plot`'s choice.
DEFAULT_PLOTS: Final[dict[str, PlotSpec]] = {
    "daily_volume": PlotSpec(
        x="day", y=("money_in", "money_out", "transfer_amount"), title="Daily volume (USD)", money=True
    ),
    "top_wallets": PlotSpec(x="wallet_id", y=("total_amount",), kind="barh", title="Top wallets", money=True),
    "wallet_statement": PlotSpec(
        x="wallet_version",
        y=("balance_after",),
        kind="line",
        title="Balance after each entry (USD)",
        money=True,
    ),
    "balance_distribution": PlotSpec(
        x="bucket", y=("wallets",), title="Wallets by balance (USD bucket)", kind="bar"
    ),
    "ingest_lag": PlotSpec(
        x="day", y=("p50_lag_seconds", "p99_lag_seconds", "max_lag_seconds"), kind="line", title="Ingest lag"
    ),
}


def render_report(
    path: Path,
    *,
    summary: Mapping[str, Any],
    frames: Mapping[str, pd.DataFrame],
    reconciliation: Mapping[str, Any],
    plots: Mapping[str, PlotSpec] | None = None,
    captions: Mapping[str, str] | None = None,
) -> Path:
    """Write a self-contained ``report.html`` and return its path.

    Parameters
    ----------
    path:
        The file to write, or a directory to write ``report.html`` into. Parent folders are made.
    summary:
        Facts of the run. These keys are understood specially (all optional):

        - ``"title"`` (str): the page title (default "walletlake report").
        - ``"generated_at"`` (datetime or str): when the run ended (default: now, UTC).
        - ``"checks"``: ``{check: bool}``, the cross-stage checks; shown as a pass/fail list.
        - ``"counts"``: ``{stage: {what: value}}``, what each stage counted (the demo's
          ``DemoResult.counts``); one small table per stage, in order.
        - ``"stages"``: the counts along the pipeline as a sequence of mappings with ``name``
          (str), ``count`` (int) and optionally ``unit``, ``seconds`` and ``detail``, or a plain
          ``{name: count}`` mapping; shown as a table and a bar chart.
        - ``"timings"``: ``{stage: seconds}``; a table and a bar chart of where the time went.

        Every other key is shown in a "Run" table; nested mappings are flattened to ``a.b`` keys,
        so figures can be passed as ``{"throughput": {"requests_per_s": 812.5}}``.
    frames:
        Query results by name (the ``.sql`` query's name is the natural choice), in the order to
        show them. Each is shown as a table (first :data:`MAX_TABLE_ROWS` rows) and, when a
        :class:`PlotSpec` fits it (``plots``, else :data:`DEFAULT_PLOTS`, else
        :func:`guess_plot`), a plot.
    reconciliation:
        The reconciliation run, as ``ReconciliationReport.to_dict()`` gives it: ``ok`` (bool, the
        verdict), ``counts`` (status → number of findings), ``findings`` (sequence of mappings
        with ``wallet_id``, ``status``, ``expected``, ``actual``, ``detail``); any other scalar keys
        (``day``, ``run_at``, ...) are shown as facts. When ``ok`` is absent the verdict is derived
        from ``counts``: passing means every status is ``ok`` or ``lagging``.
    plots:
        Plot choices by frame name, overriding :data:`DEFAULT_PLOTS` (the demo knows its frames
        best; the defaults cover the project's named queries).
    captions:
        A line under a frame's title, by frame name: what the result is of (the statement's wallet
        and window), which the frame's rows do not say.

    Returns
    -------
    Path
        The written file.

    Examples
    --------
    >>> render_report(Path("demo-output"), summary={"stages": {"wallets": 10}},
    ...               frames={}, reconciliation={"ok": True, "counts": {"ok": 10}})  # doctest: +SKIP
    PosixPath('demo-output/report.html')
    """
    target = path / "report.html" if path.is_dir() or path.suffix == "" else path
    target.parent.mkdir(parents=True, exist_ok=True)
    specs = {**DEFAULT_PLOTS, **(plots or {})}
    document = _document(summary, frames, reconciliation, specs, captions or {})
    target.write_text(document, encoding="utf-8")
    _logger.info("report written to %s (%d bytes)", target, len(document))
    return target


# --------------------------------------------------------------------------------------------- pure parts


def stage_rows(stages: Any) -> list[dict[str, Any]]:
    """Normalise ``summary["stages"]`` (sequence of mappings, or ``{name: count}``) to a list of rows."""
    if stages is None:
        return []
    if isinstance(stages, Mapping):
        return [{"name": str(name), "count": count} for name, count in stages.items()]
    rows = []
    for stage in stages:
        row = dict(stage)
        row["name"] = str(row.get("name", ""))
        rows.append(row)
    return rows


def flatten(facts: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``(dotted key, value)`` pairs of a nested mapping, in insertion order."""
    pairs: list[tuple[str, Any]] = []
    for key, value in facts.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            pairs.extend(flatten(value, f"{name}."))
        else:
            pairs.append((name, value))
    return pairs


def verdict(reconciliation: Mapping[str, Any]) -> bool:
    """Whether the reconciliation passed: its ``ok``, else no status outside ok/lagging."""
    if "ok" in reconciliation:
        return bool(reconciliation["ok"])
    counts = reconciliation.get("counts") or {}
    return all(status in PASSING_STATUSES or not number for status, number in counts.items())


def guess_plot(name: str, frame: pd.DataFrame) -> PlotSpec | None:
    """A bar chart of the first numeric column against the first column, when that makes sense.

    Frames with one row, more than 60 rows, or nothing numeric beside the first column get no plot:
    a table says it better. Version and sequence columns are never plotted (they are counters, not
    quantities).
    """
    if len(frame) < 2 or len(frame) > 60 or len(frame.columns) < 2:
        return None
    x = str(frame.columns[0])
    numeric = [
        str(column)
        for column in frame.columns[1:]
        if pd.api.types.is_numeric_dtype(frame[column])
        and not pd.api.types.is_bool_dtype(frame[column])
        and not any(part in str(column) for part in ("version", "sequence"))
    ]
    if not numeric:
        return None
    return PlotSpec(x=x, y=(numeric[0],), kind="bar", title=name.replace("_", " "))


# --------------------------------------------------------------------------------------------- plots


def plot_png(frame: pd.DataFrame, spec: PlotSpec) -> bytes:
    """The plot of ``frame`` as PNG bytes (no pyplot: no global state, no display needed)."""
    height = max(3.4, 0.28 * len(frame) + 1.0) if spec.kind == "barh" else 3.4
    figure = Figure(figsize=(7.5, height), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    labels = [format_value(value) for value in frame[spec.x]]
    scale = MICRO_USD_PER_USD if spec.money else 1
    values = {column: [_number(value) / scale for value in frame[column]] for column in spec.y}
    if spec.kind == "pie":
        first = values[spec.y[0]]
        axes.pie(first, labels=labels, autopct="%1.0f%%", startangle=90, counterclock=False)
        axes.set_aspect("equal")
    elif spec.kind == "line":
        points = list(range(len(labels)))
        for column, series in values.items():
            axes.plot(points, series, marker="o" if len(labels) <= 60 else "", label=column)
        shown = _thinned(points)
        axes.set_xticks(shown, [_shorten(labels[index]) for index in shown])
        _tilt(axes, [labels[index] for index in shown])
    elif spec.kind == "barh":
        rows = list(reversed(labels))
        for offset, (column, series) in enumerate(values.items()):
            positions = [index + offset * 0.8 / len(values) for index in range(len(rows))]
            axes.barh(positions, list(reversed(series)), height=0.8 / len(values), label=column)
        axes.set_yticks(range(len(rows)), [_shorten(label, 28) for label in rows], fontsize=8)
    else:
        width = 0.8 / len(values)
        for offset, (column, series) in enumerate(values.items()):
            positions = [index + offset * width for index in range(len(labels))]
            axes.bar(positions, series, width=width, label=column)
        shown = _thinned(list(range(len(labels))))
        axes.set_xticks(
            [index + width * (len(values) - 1) / 2 for index in shown],
            [_shorten(labels[index]) for index in shown],
        )
        _tilt(axes, [labels[index] for index in shown])
    if spec.kind != "pie":
        unit = "USD" if spec.money else ""
        (axes.set_xlabel if spec.kind == "barh" else axes.set_ylabel)(unit)
        axes.grid(axis="x" if spec.kind == "barh" else "y", alpha=0.3)
        if len(values) > 1:
            axes.legend(fontsize=8)
    axes.set_title(spec.title or ", ".join(spec.y), fontsize=11)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _number(value: Any) -> float:
    """A plottable number (plots only; tables keep the exact integers)."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return 0.0
    return float(value)


def _thinned(positions: list[int], most: int = 16) -> list[int]:
    """At most ``most`` evenly spaced tick positions, so long series keep readable axes."""
    step = max(1, math.ceil(len(positions) / most))
    return positions[::step]


def _shorten(label: str, keep: int = 14) -> str:
    return label if len(label) <= keep else f"{label[: keep - 1]}…"


def _tilt(axes: Any, labels: Sequence[str]) -> None:
    if len(labels) > 6 or any(len(label) > 8 for label in labels):
        for tick in axes.get_xticklabels():
            tick.set_rotation(35)
            tick.set_horizontalalignment("right")


# --------------------------------------------------------------------------------------------- HTML

_STYLE: Final = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d2433;
       background: #f4f6fa; }
header { background: #1d2433; color: #fff; padding: 18px 32px; }
header h1 { margin: 0; font-size: 22px; }
header p { margin: 4px 0 0; color: #c5cbd8; }
main { padding: 8px 32px 32px; max-width: 1100px; }
section { background: #fff; border-radius: 8px; padding: 16px 20px; margin: 16px 0;
          box-shadow: 0 1px 3px rgba(0, 0, 0, .08); }
h2 { font-size: 17px; margin: 0 0 10px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0; max-width: 100%; }
th, td { border-bottom: 1px solid #e3e7ef; padding: 4px 10px; text-align: left; vertical-align: top;
         overflow-wrap: anywhere; }
td.id { white-space: nowrap; font-family: ui-monospace, monospace; font-size: 12px; }
td.num, td.time { white-space: nowrap; overflow-wrap: normal; }
.scroll { overflow-x: auto; max-width: 100%; }
th { background: #f0f3f8; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.verdict { display: inline-block; padding: 6px 14px; border-radius: 6px; font-weight: 700; font-size: 16px; }
.pass { background: #dff5e3; color: #146c2e; }
.fail { background: #fde2e1; color: #a4161a; }
.mark { display: inline-block; min-width: 52px; text-align: center; padding: 1px 6px; border-radius: 4px;
        font-weight: 600; font-size: 12px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px 28px; }
.card { min-width: 0; max-width: 100%; }
.card h3 { margin-top: 4px; }
.note { color: #5b6475; font-size: 12px; }
.caption { margin: -4px 0 8px; color: #3a4254; }
img { max-width: 100%; height: auto; display: block; margin: 8px 0; }
"""


def _document(
    summary: Mapping[str, Any],
    frames: Mapping[str, pd.DataFrame],
    reconciliation: Mapping[str, Any],
    specs: Mapping[str, PlotSpec],
    captions: Mapping[str, str],
) -> str:
    title = str(summary.get("title") or "walletlake report")
    generated = format_value(summary.get("generated_at") or dt.datetime.now(dt.UTC).replace(microsecond=0))
    special = ("title", "generated_at", "checks", "counts", "stages", "timings")
    facts = {key: value for key, value in summary.items() if key not in special}
    sections = [
        _checks_section(summary.get("checks") or {}),
        _reconciliation_section(reconciliation),
        _counts_section(summary.get("counts") or {}),
        _stages_section(stage_rows(summary.get("stages"))),
        _timings_section(summary.get("timings") or {}),
        _facts_section("Run", flatten(facts)),
        *(
            _frame_section(name, frame, specs.get(name), captions.get(name, ""))
            for name, frame in frames.items()
        ),
    ]
    body = "\n".join(section for section in sections if section)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>\n<body>\n"
        f"<header><h1>{escape(title)}</h1><p>generated {escape(generated)}</p></header>\n"
        f"<main>\n{body}\n</main>\n</body></html>\n"
    )


def _reconciliation_section(reconciliation: Mapping[str, Any]) -> str:
    passed = verdict(reconciliation)
    label = "PASSED" if passed else "FAILED"
    parts = [
        '<section id="reconciliation"><h2>Reconciliation</h2>',
        f'<p><span class="verdict {"pass" if passed else "fail"}">{label}</span></p>',
    ]
    facts = [
        (key, value)
        for key, value in reconciliation.items()
        if key not in ("ok", "counts", "findings") and not isinstance(value, Mapping | list | tuple)
    ]
    if facts:
        parts.append(key_value_table(facts))
    counts = reconciliation.get("counts") or {}
    if counts:
        count_frame = pd.DataFrame({"status": list(counts), "findings": list(counts.values())})
        parts.append("<h3>Findings by class</h3>")
        parts.append(html_table(count_frame, numeric_columns={"findings"}))
        if len(count_frame) > 1 or not passed:
            spec = PlotSpec(x="status", y=("findings",), kind="bar", title="Findings by class")
            parts.append(_image(plot_png(count_frame, spec), "findings by class"))
    findings = [dict(finding) for finding in reconciliation.get("findings") or ()]
    failing = [finding for finding in findings if finding.get("status") not in PASSING_STATUSES]
    shown = failing or [finding for finding in findings if finding.get("status") != "ok"]
    if shown:
        parts.append("<h3>Findings to look at</h3>")
        parts.append(html_table(pd.DataFrame(shown)))
    elif findings:
        parts.append(f'<p class="note">all {len(findings):,} findings are ok</p>')
    parts.append("</section>")
    return "\n".join(parts)


def _checks_section(checks: Mapping[str, Any]) -> str:
    if not checks:
        return ""
    passed = all(bool(value) for value in checks.values())
    rows = "".join(
        f'<tr><td><span class="mark {"pass" if value else "fail"}">{"ok" if value else "FAILED"}</span></td>'
        f"<td>{escape(str(name))}</td></tr>"
        for name, value in checks.items()
    )
    label = "every check held" if passed else "a check FAILED"
    return (
        f'<section id="checks"><h2>Checks</h2><p><span class="verdict {"pass" if passed else "fail"}">'
        f"{label}</span></p><table>{rows}</table></section>"
    )


def _counts_section(counts: Mapping[str, Any]) -> str:
    if not counts:
        return ""
    cards = []
    for stage, values in counts.items():
        pairs = flatten(values) if isinstance(values, Mapping) else [("", values)]
        cards.append(f'<div class="card"><h3>{escape(str(stage))}</h3>{key_value_table(pairs)}</div>')
    return (
        '<section id="counts"><h2>Counts at each stage</h2>'
        f'<div class="cards">{"".join(cards)}</div></section>'
    )


def _timings_section(timings: Mapping[str, Any]) -> str:
    if not timings:
        return ""
    frame = pd.DataFrame({"stage": [str(name) for name in timings], "seconds": list(timings.values())})
    spec = PlotSpec(x="stage", y=("seconds",), kind="barh", title="Seconds per stage")
    return "\n".join(
        [
            '<section id="timings"><h2>Timings</h2>',
            _image(plot_png(frame, spec), "seconds per stage"),
            html_table(frame, numeric_columns={"seconds"}),
            "</section>",
        ]
    )


def _stages_section(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    frame = pd.DataFrame(rows)
    ordered = ["name", "count", *(c for c in ("unit", "seconds", "detail") if c in frame.columns)]
    frame = frame[ordered + [c for c in frame.columns if c not in ordered]]
    spec = PlotSpec(x="name", y=("count",), kind="barh", title="Counts per stage")
    return "\n".join(
        [
            '<section id="stages"><h2>Pipeline stages</h2>',
            html_table(frame, numeric_columns={"count", "seconds"}),
            _image(plot_png(frame, spec), "counts per stage"),
            "</section>",
        ]
    )


def _facts_section(title: str, pairs: list[tuple[str, Any]]) -> str:
    if not pairs:
        return ""
    return f'<section id="run"><h2>{escape(title)}</h2>{key_value_table(pairs)}</section>'


def _frame_section(name: str, frame: pd.DataFrame, spec: PlotSpec | None, caption: str = "") -> str:
    chosen = spec if spec is not None and spec.fits(frame) else guess_plot(name, frame)
    parts = [f'<section id="query-{escape(name)}"><h2>{escape(name)}</h2>']
    if caption:
        parts.append(f'<p class="caption">{escape(caption)}</p>')
    if frame.empty:
        parts.append('<p class="note">no rows</p>')
    else:
        if chosen is not None:
            try:
                parts.append(_image(plot_png(frame, chosen), name))
            except (TypeError, ValueError) as error:  # a column that cannot be drawn: keep the table
                _logger.warning("no plot for %s: %s", name, error)
        parts.append(result_table(frame))
    parts.append("</section>")
    return "\n".join(parts)


def _image(png: bytes, alt: str) -> str:
    encoded = base64.b64encode(png).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{encoded}">'
