"""The model-against-model section of a report: terminal table, JSON records, CSV file and an HTML forest plot.

Why a module of its own: the comparisons (``runner.analysis.compare.model_comparisons``,
``Summary.comparisons``) are one table drawn four ways; keeping the four here means the
existing renderers only call in (one line each) and a caption change is made once.
Labels come from run directories: terminal text goes through ``textgrid`` (never
markup), CSV cells through ``csv_cell`` (in ``summary_csv``), HTML through ``html.escape``.
"""

from __future__ import annotations

import html
from typing import Any

import polars as pl

from runner.analysis.cells import interval_name
from runner.analysis.compare import RULE
from runner.analysis.leaderboard import Summary
from runner.core.constants import CONFIDENCE
from runner.core.formatting import pct as _pct
from runner.core.formatting import pp as _pp_signed
from runner.core.formatting import pvalue as _p
from runner.reporting import svgplot as S
from runner.reporting.textgrid import Col, Grid


def _side(model: str, run: str, many_runs: bool) -> str:
    return f"{model} ({run})" if many_runs else model


def _many_runs(frame: pl.DataFrame) -> bool:
    return frame.height > 0 and bool((frame["run_a"] != frame["run_b"]).any())


def comparison_grids(summary: Summary) -> list[Grid]:
    """One grid per probe: every pair of models × rate, A − B with its interval, p, floor, Holm p, verdict."""
    frame = summary.comparisons
    if frame.height == 0:
        return []
    many = _many_runs(frame)
    methods = frame["interval_method"].drop_nulls().unique(maintain_order=True).to_list()
    grids = []
    for (probe,), sub in frame.group_by("probe", maintain_order=True):
        grid = Grid(f"{probe} · model against model (paired on the case)",
                    [Col("A", "left", wrap=True), Col("B", "left", wrap=True), Col("rate", "left"), Col("A"),
                     Col("B"), Col("A − B pp"), Col(f"{CONFIDENCE:.0%} CI"), Col("p"), Col("floor"), Col("Holm p"),
                     Col("cases"), Col("verdict", "left")], keys=3)
        for r in sub.iter_rows(named=True):
            grid.add_row(_side(r["model_a"], r["run_a"], many), _side(r["model_b"], r["run_b"], many), r["rate"],
                         _pct(r["rate_a"]), _pct(r["rate_b"]), _pp_signed(r["difference"]),
                         f"[{_pp_signed(r['ci_lo'])}, {_pp_signed(r['ci_hi'])}]", _p(r["p"]), _p(r["floor"]),
                         _p(r["p_holm"]), str(r["cases"]), r["verdict"])
        family = int(sub["family"][0])
        grid.caption = f"{RULE} Family: {family} test(s). {CONFIDENCE:.0%} CI: {interval_name(methods)}."
        grids.append(grid)
    return grids


def comparison_records(summary: Summary) -> list[dict[str, Any]]:
    """The JSON ``model_comparisons`` list: one record per pair × rate (numbers raw, intervals as [low, high])."""
    out = []
    for r in summary.comparisons.iter_rows(named=True):
        out.append({k: r[k] for k in ("probe", "kind", "rate", "model_a", "run_a", "model_b", "run_b", "cases",
                                      "cells", "rate_a", "rate_b", "difference", "interval_method", "p", "floor",
                                      "floor_log10", "method", "mc_se", "p_holm", "family", "detectable", "verdict")}
                   | {"ci": [r["ci_lo"], r["ci_hi"]]})
    return out


def forest_plot_svg(frame: pl.DataFrame) -> str:
    """The forest plot (``svgplot.dot_interval_plot``): per probe × rate a heading, one row per pair, A − B with its
    interval on a zero line, the Holm-adjusted p and the verdict on the right. Labels are escaped by the plot."""
    if frame.height == 0:
        return ""
    many = _many_runs(frame)
    rows: list[S.Row] = []
    notes: list[str] = []
    for (probe, rate), sub in frame.group_by("probe", "rate", maintain_order=True):
        rows.append(S.Row(f"{probe} · {rate}: A − B", (), header=True))
        notes.append("Holm p · verdict")
        for r in sub.iter_rows(named=True):
            label = f"{_side(r['model_a'], r['run_a'], many)} − {_side(r['model_b'], r['run_b'], many)}"
            tip = (f"{label} · {rate}: {_pct(r['rate_a'])} − {_pct(r['rate_b'])} = {_pp_signed(r['difference'])} pp "
                   f"[{_pp_signed(r['ci_lo'])}, {_pp_signed(r['ci_hi'])}]; p {_p(r['p'])} (floor {_p(r['floor'])}), "
                   f"Holm {_p(r['p_holm'])}; {r['cases']} cases")
            rows.append(S.Row(label, (S.Point(0 if r["verdict"] == "no evidence" else 1, r["difference"], r["ci_lo"],
                                              r["ci_hi"], tip),)))
            notes.append(f"{_p(r['p_holm'])} · {r['verdict']}")
    lo = min([-0.1, *frame["ci_lo"].drop_nans().drop_nulls().to_list()])
    hi = max([0.1, *frame["ci_hi"].drop_nans().drop_nulls().to_list()])
    pad = 0.05 * (hi - lo)
    return S.dot_interval_plot(rows, lo=max(-1.0, lo - pad), hi=min(1.0, hi + pad), pct=False, zero_line=True,
                               right_notes=notes, note_width=150, width=820, label="model against model")


def comparison_html(summary: Summary) -> str:
    """The HTML section: the forest plot and its caption (empty when no two models share cases)."""
    frame = summary.comparisons
    if frame.height == 0:
        return ""
    methods = frame["interval_method"].drop_nulls().unique(maintain_order=True).to_list()
    caption = f"{RULE} Family: {int(frame['family'][0])} test(s). {CONFIDENCE:.0%} CI: {interval_name(methods)}."
    return ('<section data-section="comparisons" id="comparisons-all"><h3>Model against model (paired on the '
            f'case)</h3>{forest_plot_svg(frame)}<p class="note">{html.escape(caption)}</p></section>')
