"""``trialgrid report OUT…``: what one or many runs found, with prompt-level inference.

Presentation only: the numbers come from ``runner.analysis.leaderboard.summarize`` (polars →
per-cell counts → ``stats``), which the JSON, CSV and HTML outputs share. First a
leaderboard per probe (models as rows: headline rate per condition with its cluster
interval, the headline test with its attainable floor, prompts firing, errors,
tokens, cost, remedies), then the per-model detail tables. Every interval is named by
its method (``interval_method`` of the stats core: Korn–Graubard for rates, MOVER for
differences); every p-value is printed beside the smallest p its design could produce.
Every table is drawn by ``runner.reporting.textgrid.emit``: never cut, full width
when piped, split into parts on a narrow terminal. Each probe's own views (``runner.core.views``:
kappas, hop rates, field scores...) follow its detail tables, drawn generically by
``view_table``; a listing view is counted in one line, and written where the user asks
(``runner.reporting.listings``: ``--listings DIR`` or beside ``--csv``) — never into the run's directory, so
a report on a read-only output works.

Every label here comes from a run directory, possibly someone else's: it is printed
through ``_t`` (control characters escaped, rich markup inert); this module writes no file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
from rich.console import Console
from rich.text import Text

from runner.analysis.advice import width_advice
from runner.analysis.cells import ProbeAnalysis, firing_event, interval_name, with_interval
from runner.analysis.completeness import incomplete_lines
from runner.analysis.leaderboard import HEADLINE_LEVEL, Summary, needs_run_label, summarize
from runner.analysis.scorecard import ALPHA, scorecard_table
from runner.analysis.scorecard import KIND as SCORECARD_KIND
from runner.core.constants import CONFIDENCE
from runner.core.formatting import fmt_usd
from runner.core.formatting import pct as _pct
from runner.core.formatting import pp as _pp
from runner.core.formatting import pvalue as _p
from runner.core.safety import term_text
from runner.core.views import Format, ProbeView
from runner.output.reader import Output
from runner.probes import PROBES
from runner.reporting.comparisons import comparison_grids
from runner.reporting.consistency import consistency_grids
from runner.reporting.textgrid import Col, Grid, cell, emit, fit_width, say
from runner.reporting.viewformat import cell_parts, is_numeric

#: short names of interval methods for a row label of the detail tables
_INTERVAL_SHORT = {"korn-graubard-tilted": "Korn–Graubard", "mover-korn-graubard-tilted": "MOVER–KG",
                  "korn-graubard": "Korn–Graubard", "mover-korn-graubard": "MOVER–KG", "t": "cluster t",
                  "percentile": "bootstrap"}


def _arms_text(arms: Sequence[str] | None) -> str:
    """An arm's conditions for a caption: listed with commas (a condition name may itself hold "+")."""
    return ", ".join(arms or []) or "—"


def _scorecard_grid(card: pl.DataFrame, probe: str, many_runs: bool) -> Grid:
    """The verdict per model (rules: runner/analysis/scorecard.py and docs/reports.md, Scorecard)."""
    grid = Grid(f"{probe} · scorecard", [Col("run · model" if many_runs else "model", "left"),
                                         Col("verdict", "left"), Col("kept"), Col("why", "left", wrap=True)],
                caption=("kept: retention of decoy-free trials, (1 − decoy A) / (1 − decoy B), graded when the decoy "
                         f"test's p {HEADLINE_LEVEL} ≤ {ALPHA:g}; rules in docs/reports.md (Scorecard)."))
    for r in card.filter(pl.col("probe") == probe).iter_rows(named=True):
        name = f"{r['run']} · {r['model']}" if many_runs else r["model"]
        grid.add_row(name, r["verdict"], _pct(r["retention"]), r["reason"])
    return grid


def _view_grid(view: ProbeView) -> Grid:
    """A probe view as a grid: its displayed columns, an interval under its value, dimmed.

    The leading text columns (model, condition, scorer...) are the keys a split table repeats.
    """
    keys = next((i for i, c in enumerate(view.columns) if c.format is not Format.TEXT or c.name is None),
                len(view.columns))
    cols = [Col(c.label, "right" if is_numeric(c) else "left", wrap=i >= keys and not is_numeric(c))
            for i, c in enumerate(view.columns)]
    grid = Grid(view.title, cols, caption=view.caption, keys=max(keys, 1))
    for row in view.table.iter_rows(named=True):
        grid.add_row(*(cell(*cell_parts(row, col)) for col in view.columns))
    return grid


def _print_views(views: Sequence[ProbeView], run: str, probe: str, console: Console,
                 listings: Mapping[tuple[str, str, str], Path], width: int | None = None) -> None:
    """Every view of one probe's run: tables, then notes; a listing in one line (and where it was written)."""
    for view in views:
        if view.listing:
            path = listings.get((run, probe, view.key))
            where = f": {path}" if path is not None else " (write them with `trialgrid report --listings DIR`)"
            say(console, f"{view.table.height} {view.caption}{where}", width, "dim")
        elif view.table.height:
            emit(console, _view_grid(view), width)
        for note in view.notes:
            say(console, note, width, "dim")


def _conditions_grid(a: ProbeAnalysis, model: str) -> Grid:
    records = list(a.conditions.filter(a.conditions["model"] == model).iter_rows(named=True))
    grid = Grid(f"{a.probe} · {model}", [Col("", "left")] + [Col(r["condition"]) for r in records], boxed=True)
    grid.add_row("trials (errors)", *(f"{r['trials']:,} ({r['errors']:,})" for r in records))
    for rate in a.rates:
        grid.add_row(rate, *(_pct(r[f"{rate}_rate"]) for r in records))
        methods = [r[f"{rate}_interval_method"] for r in records if r[f"{rate}_interval_method"]]
        label = " / ".join(dict.fromkeys(_INTERVAL_SHORT.get(m, m) for m in methods)) or "cluster"
        grid.add_row(f"  {CONFIDENCE:.0%} {label}", *(f"{_pct(r[f'{rate}_cluster_lo'])}–{_pct(r[f'{rate}_cluster_hi'])}"
                                                     for r in records))
        grid.add_row(f"  {CONFIDENCE:.0%} Wilson", *(f"{_pct(r[f'{rate}_wilson_lo'])}–{_pct(r[f'{rate}_wilson_hi'])}"
                                                 for r in records), style="dim")
    head = a.rates[0]
    grid.add_row(f"prompts firing ({firing_event(head)})", *(f"{r[f'{head}_firing']}/{r['prompts']}" for r in records))
    return grid


def _contrasts_grid(a: ProbeAnalysis, model: str) -> Grid | None:
    if a.contrasts.height == 0:
        return None
    records = list(a.contrasts.filter(a.contrasts["model"] == model).iter_rows(named=True))
    if not records:
        return None
    arms = list(dict.fromkeys((tuple(r["arm_a"]), tuple(r["arm_b"])) for r in records))
    caption = "; ".join(f"A = {_arms_text(x)}, B = {_arms_text(y)}" for x, y in arms)
    caption += f"; {CONFIDENCE:.0%} CI: {interval_name([r['interval_method'] for r in records])}."
    grid = Grid(f"{a.probe} · {model} · A − B",
                [Col("", "left", wrap=True)] + [Col(c) for c in ("A", "B", "A − B pp", f"{CONFIDENCE:.0%} CI",
                                                                 "p trial", "p cell")], caption=caption)
    for r in records:
        grid.add_row(r["contrast"], _pct(r["rate_a"]), _pct(r["rate_b"]), _pp(r["difference"]),
                     f"[{_pp(r['ci_lo'])}, {_pp(r['ci_hi'])}]", _p(r["p_trial"]), _p(r["p_cell"]))
        grid.add_row("  floor", "", "", "", "", _p(r["floor_trial"]), _p(r["floor_cell"]), style="dim")
    return grid


def _num(x: float | None) -> str:
    """A percentage without its sign, for interval ends under a percentage."""
    return "—" if x is None or math.isnan(x) else f"{100 * x:.1f}"


def _tokens(n: int | None) -> str:
    if n is None:
        return "—"
    return f"{n / 1e6:.2f}M" if n >= 1e6 else (f"{n / 1e3:.0f}k" if n >= 1e3 else str(n))


def _firing_caption(row: dict[str, Any]) -> str:
    """What "firing" counts for a leaderboard row: prompts with ≥ 1 headline event (a failure for pass/fail)."""
    return f"firing: prompts with ≥ 1 {row['firing_event']} in {row['firing_scope']}."


def _leaderboard_grids(summary: Summary, probe: str, kind: str) -> list[Grid]:
    """Models as rows, in two tables.

    The first has the probe's headline rate per condition with its interval, prompts
    firing and the error rate; the second the headline test (difference, interval,
    p with its floor), tokens, cost and remedies.
    """
    board = summary.leaderboard.filter((pl.col("probe") == probe) & (pl.col("kind") == kind))
    rows = board.to_dicts()
    head = rows[0]["headline"]
    conds = summary.conditions.filter((pl.col("probe") == probe) & (pl.col("kind") == kind)
                                      & (pl.col("rate") == head))
    order = list(PROBES[kind].all_conditions) if kind in PROBES else []
    seen = conds["condition"].unique(maintain_order=True).to_list()
    conditions = [c for c in order if c in seen] + [c for c in seen if c not in order]
    many_runs = needs_run_label(board)
    has_test = board["p"].drop_nulls().len() > 0
    has_cost = board["cost_usd"].drop_nulls().len() > 0
    has_remedies = any(r["remedies"] for r in rows)
    name_col = Col("run · model" if many_runs else "model", "left")

    rate_methods = conds["interval_method"].drop_nulls().to_list()
    rates = Grid(f"{probe} · leaderboard · {head}", [name_col] + [Col(c) for c in conditions]
                 + [Col("firing"), Col("errors")],
                 caption=(f"{head} {with_interval(rate_methods)} (%); "
                          + _firing_caption(rows[0])))
    cols = [name_col]
    if has_test:
        cols += [Col("A"), Col("B"), Col("A − B pp"), Col(f"p {HEADLINE_LEVEL}\n(floor)")]
    cols.append(Col("tokens"))
    if has_cost:
        cols.append(Col("cost"))
    if has_remedies:
        cols.append(Col("remedies", "left", wrap=True))
    tests = Grid(f"{probe} · leaderboard · test and cost", cols)
    previous_run = None
    for r in rows:
        if many_runs and r["run"] != previous_run:
            rates.add_row(Text(term_text(r["run"]), style="bold"))
            tests.add_row(Text(term_text(r["run"]), style="bold"))
            previous_run = r["run"]
        name = ("  " if many_runs else "") + r["model"]
        sub = {c["condition"]: c for c in conds.filter((pl.col("run") == r["run"]) & (pl.col("model") == r["model"]))
               .to_dicts()}
        cells = [cell(_pct(sub[c]["value"]), f"{_num(sub[c]['cluster_lo'])}–{_num(sub[c]['cluster_hi'])}")
                 if c in sub else Text("") for c in conditions]
        rates.add_row(name, *cells, f"{r['firing']}/{r['prompts']}", _pct(r["error_rate"]))
        row: list[str | Text] = [name]
        if has_test:
            row += ([_pct(r["rate_a"]), _pct(r["rate_b"]),
                     cell(_pp(r["difference"]), f"[{_pp(r['ci_lo'])}, {_pp(r['ci_hi'])}]"),
                     cell(_p(r["p"]), f"({_p(r['floor'])})")] if r["p"] is not None else ["", "", "", ""])
        row.append(_tokens(r["input_tokens"] + r["output_tokens"]))
        if has_cost:
            row.append(fmt_usd(r["cost_usd"]))
        if has_remedies:
            row.append("; ".join(r["remedies"]) or "none")
        tests.add_row(*row)
    caption = []
    if has_test:
        c = rows[0]
        caption.append(f"{c['contrast']}: A = {_arms_text(c['arm_a'])}, B = {_arms_text(c['arm_b'])}, "
                       f"on {c['outcome']}; {CONFIDENCE:.0%} CI: {interval_name(c['interval_method'])}; "
                       f"p {HEADLINE_LEVEL}: {c['method']}; (floor) = the smallest p this design can produce.")
    caption.append("Tokens" + (" and cost" if has_cost else "") + " of this probe's trials. "
                   + ("remedies: parameter changes applied to the model's requests (see the manifest)." if has_remedies
                      else "No parameter remedies were applied."))
    tests.caption = " ".join(caption)
    return [rates, tests]


def print_report(outs: Output | Path | Sequence[Output | Path], console: Console | None = None, *,
                 details: bool = True) -> Summary:
    """Print the leaderboards of ``outs`` (one or many runs), then the per-model tables. Writes nothing."""
    summary = summarize([outs] if isinstance(outs, Output | Path) else list(outs))
    print_summary(summary, console, details=details)
    return summary


def print_summary(summary: Summary, console: Console | None = None, *, details: bool = True,
                  listings: Mapping[tuple[str, str, str], Path] | None = None) -> None:
    """Print a summary: leaderboards, then (``details``) the per-model tables and each probe's views;
    ``listings``: where ``runner.reporting.listings.write_listings`` put the listing views, to say so."""
    console = console or Console()
    width = fit_width(console)
    listings = listings or {}
    card = scorecard_table(summary)
    for line in incomplete_lines(summary):  # above the first table: what the numbers below are of
        say(console, line, width, "bold yellow")
    for probe, kind in summary.probe_keys():
        for grid in _leaderboard_grids(summary, probe, kind):
            emit(console, grid, width)
        if kind == SCORECARD_KIND:
            emit(console, _scorecard_grid(card, probe, needs_run_label(card)), width)
    for grid in comparison_grids(summary):  # model against model, paired on the case
        emit(console, grid, width)
    if summary.models["cost_usd"].drop_nulls().len():
        emit(console, _cost_grid(summary), width)
    advice = width_advice(summary.conditions)  # intervals too wide to read: what would narrow them
    if advice is not None:
        say(console, advice, width, "yellow")
    methods: set[str] = set()
    if details:
        for run in summary.runs:
            for a in run.probes:
                for model in a.conditions["model"].unique(maintain_order=True):
                    emit(console, _conditions_grid(a, model), width)
                    contrasts = _contrasts_grid(a, model)
                    if contrasts is not None:
                        emit(console, contrasts, width)
                _print_views(summary.probe_views(run, a.probe), run.label, a.probe, console, listings, width)
                if a.contrasts.height:
                    methods.update(a.contrasts["method_trial"].unique().to_list()
                                   + a.contrasts["method_cell"].unique().to_list())
        for grid in consistency_grids(summary):  # pass^k (runner.reporting.consistency)
            emit(console, grid, width)
    if not details:  # the compact report: one screen; the rest is a flag away
        say(console, "Per-model tables, each probe's views and the methods: add --details.", width, "dim")
        return
    rate_methods = summary.conditions["interval_method"].drop_nulls().unique(maintain_order=True).to_list()
    diff_methods = summary.contrasts["interval_method"].drop_nulls().unique(maintain_order=True).to_list()
    say(console,
        f"Intervals ({CONFIDENCE:.0%}, prompts as clusters): rates — {interval_name(rate_methods)}"
        + (f"; A − B — {interval_name(diff_methods)}" if diff_methods else "") + ". "
        "Wilson treats trials as independent and is shown only for comparison. "
        "p trial: trial labels permuted within prompt; p cell: whole (prompt, condition) cells permuted within "
        "prompt; both two-sided on the pooled-rate difference; (floor) = smallest p this design can produce. "
        + (f"Methods: {'; '.join(sorted(methods))}." if methods else ""), width, "dim")


def _cost_grid(summary: Summary) -> Grid:
    grid = Grid("cost", [Col("run", "left"), Col("model", "left"), Col("trials"), Col("input tok"),
                         Col("output tok"), Col("cost"), Col("per trial")], keys=2)
    for r in summary.models.iter_rows(named=True):
        grid.add_row(r["run"], r["model"], f"{r['trials']:,}", f"{r['input_tokens']:,}", f"{r['output_tokens']:,}",
                     fmt_usd(r["cost_usd"]), fmt_usd(r["cost_per_trial_usd"]))
    budgets = []
    for r in summary.run_table.iter_rows(named=True):
        if r["cost_usd"] is not None:
            grid.add_row(r["run"], Text("all", style="bold"), f"{r['trials']:,}", f"{r['input_tokens']:,}",
                         f"{r['output_tokens']:,}", fmt_usd(r["cost_usd"]), "")
            if r["budget_usd"]:
                budgets.append(f"{r['run']}: {fmt_usd(r['cost_usd'])} of a {fmt_usd(r['budget_usd'])} budget")
    grid.caption = "Cost = tokens × the sweep's `prices` (USD per million tokens); — = no price. " + "; ".join(budgets)
    return grid


def print_views(views: Sequence[ProbeView], console: Console | None = None,
                listings: Mapping[str, Path] | None = None) -> None:
    """Print probe views outside a run's report (``trialgrid audit``): tables, and a listing as one line saying
    where it was written (``listings``: view key → file)."""
    console = console or Console()
    width = fit_width(console)
    _print_views(views, "", "", console, {("", "", k): p for k, p in (listings or {}).items()}, width)
