"""``trialgrid report OUT``: what a run found, per probe and model, with prompt-level inference.

Presentation only: the numbers come from ``runner.analysis`` (polars → per-cell
counts → ``stats``). Tables keep conditions as columns so they fit an 80-column
terminal; every p-value is printed beside the smallest p its design could produce.
"""

from __future__ import annotations

import math
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from runner.analysis import CONFIDENCE, N_RESAMPLES, ProbeAnalysis, analyze


def _pct(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def _pp(x: float) -> str:
    return "—" if math.isnan(x) else f"{100 * x:+.1f}"


def _p(x: float | None) -> str:
    if x is None or math.isnan(x):
        return "—"
    return f"{x:.3f}" if x >= 0.001 else f"{x:.1e}"


def _conditions_table(a: ProbeAnalysis, model: str) -> Table:
    records = list(a.conditions.filter(a.conditions["model"] == model).iter_rows(named=True))
    table = Table(title=f"{a.probe} · {model}", title_justify="left", header_style="bold")
    table.add_column("")
    for r in records:
        table.add_column(r["condition"], justify="right")
    table.add_row("trials (errors)", *(f"{r['trials']:,} ({r['errors']:,})" for r in records))
    for rate in a.rates:
        table.add_row(f"{rate}", *(_pct(r[f"{rate}_rate"]) for r in records))
        table.add_row("  95% cluster CI", *(f"{_pct(r[f'{rate}_cluster_lo'])}–{_pct(r[f'{rate}_cluster_hi'])}"
                                            for r in records))
        table.add_row("  95% Wilson", *(f"{_pct(r[f'{rate}_wilson_lo'])}–{_pct(r[f'{rate}_wilson_hi'])}"
                                        for r in records), style="dim")
    head = a.rates[0]
    table.add_row(f"prompts firing ({head})", *(f"{r[f'{head}_firing']}/{r['prompts']}" for r in records))
    return table


def _contrasts_table(a: ProbeAnalysis, model: str) -> Table | None:
    if a.contrasts.height == 0:
        return None
    records = list(a.contrasts.filter(a.contrasts["model"] == model).iter_rows(named=True))
    if not records:
        return None
    arms = {(r["arm_a"], r["arm_b"]) for r in records}
    caption = "; ".join(f"A = {x.replace('+', ' + ')}, B = {y.replace('+', ' + ')}" for x, y in sorted(arms))
    table = Table(header_style="bold", title=f"{a.probe} · {model} · A − B", title_justify="left",
                  caption=caption, caption_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("", "A", "B", "A − B pp", "95% CI", "p trial", "p cell"):
        table.add_column(col, justify="left" if not col else "right", no_wrap=True)
    for r in records:
        table.add_row(r["contrast"], _pct(r["rate_a"]), _pct(r["rate_b"]), _pp(r["difference"]),
                      f"[{_pp(r['ci_lo'])}, {_pp(r['ci_hi'])}]", _p(r["p_trial"]), _p(r["p_cell"]))
        table.add_row("  floor", "", "", "", "", _p(r["floor_trial"]), _p(r["floor_cell"]), style="dim")
    return table


def print_report(out: Path, console: Console | None = None) -> list[ProbeAnalysis]:
    console = console or Console()
    analyses = analyze(out)
    methods: set[str] = set()
    for a in analyses:
        for model in a.conditions["model"].unique(maintain_order=True):
            console.print(_conditions_table(a, model))
            contrasts = _contrasts_table(a, model)
            if contrasts is not None:
                console.print(contrasts)
        if a.contrasts.height:
            methods.update(a.contrasts["method_trial"].unique().to_list() + a.contrasts["method_cell"].unique().to_list())
    console.print(
        f"[dim]Cluster CI: percentile bootstrap over prompts ({N_RESAMPLES:,} resamples, {CONFIDENCE:.0%}). "
        "Wilson treats trials as independent and is shown only for comparison. "
        "p trial: trial labels permuted within prompt; p cell: whole (prompt, condition) cells permuted within "
        "prompt; both two-sided on the pooled-rate difference; (floor) = smallest p this design can produce. "
        f"Methods: {'; '.join(sorted(methods))}.[/dim]")
    return analyses
