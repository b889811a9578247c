"""``trialgrid report OUT…``: what one or many runs found, with prompt-level inference.

Presentation only: the numbers come from ``runner.analysis.leaderboard.summarize`` (polars →
per-cell counts → ``stats``), which the JSON, CSV and HTML outputs share. First a
leaderboard per probe (models as rows: headline rate per condition with its cluster
interval, the headline test with its attainable floor, prompts firing, errors,
tokens, cost, remedies), then the per-model detail tables. Tables keep conditions as
columns so they fit an 80-column terminal; every p-value is printed beside the
smallest p its design could produce. Each probe's own views (``runner.core.views``:
kappas, hop rates, field scores...) follow its detail tables, drawn generically by
``view_table``; a listing view is written to ``<out>/<probe>.<key>.jsonl`` instead.

Every label here comes from a run directory, possibly someone else's: it is printed
through ``_t`` (control characters escaped, rich markup inert) and becomes part of a
file name only through ``safe_filename``, confined to the run directory.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import polars as pl
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from runner.analysis.cells import ProbeAnalysis
from runner.analysis.leaderboard import HEADLINE_LEVEL, Summary, needs_run_label, summarize
from runner.analysis.scorecard import ALPHA, scorecard_table
from runner.analysis.scorecard import KIND as SCORECARD_KIND
from runner.core.constants import CONFIDENCE, N_RESAMPLES
from runner.core.formatting import fmt_usd
from runner.core.formatting import pct as _pct
from runner.core.formatting import pp as _pp
from runner.core.formatting import pvalue as _p
from runner.core.safety import confined, safe_filename, term_text
from runner.core.views import ProbeView
from runner.probes import PROBES
from runner.reporting.viewformat import cell_parts, is_numeric


def _t(text: object) -> str:
    """User text for a rich markup string: control characters shown escaped, brackets inert."""
    return escape(term_text(text))


def scorecard_rich_table(card: pl.DataFrame, probe: str, many_runs: bool) -> Table:
    """The verdict per model (rules: runner/analysis/scorecard.py and the README's Scorecard section)."""
    table = Table(title=f"{_t(probe)} · scorecard", title_justify="left", header_style="bold", box=box.SIMPLE_HEAD,
                  pad_edge=False, caption_justify="left")
    for col in ("run · model" if many_runs else "model", "verdict", "kept", "why"):
        table.add_column(col, justify="right" if col == "kept" else "left", no_wrap=col != "why")
    for r in card.filter(pl.col("probe") == probe).iter_rows(named=True):
        name = f"{r['run']} · {r['model']}" if many_runs else r["model"]
        table.add_row(_t(name), _t(r["verdict"]), _pct(r["retention"]), _t(r["reason"]))
    table.caption = ("kept: retention of decoy-free trials, (1 − decoy A) / (1 − decoy B), graded when the decoy "
                     f"test's p {HEADLINE_LEVEL} ≤ {ALPHA:g}; rules in the README (Scorecard).")
    return table


def view_table(view: ProbeView) -> Table:
    """A probe view as a rich table: its displayed columns, an interval under its value, dimmed."""
    table = Table(title=_t(view.title), title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False,
                  caption=_t(view.caption) if view.caption else view.caption, caption_justify="left")
    for i, col in enumerate(view.columns):
        table.add_column(_t(col.label), justify="right" if is_numeric(col) else "left", no_wrap=i == 0)
    for row in view.table.iter_rows(named=True):
        cells = []
        for col in view.columns:
            value, interval = cell_parts(row, col)
            text = Text(term_text(value))
            if interval is not None:
                text.append(("\n" if value else "") + term_text(interval), style="dim")
            cells.append(text)
        table.add_row(*cells)
    return table


def write_listing(view: ProbeView, path: Path) -> Path:
    """A listing view as JSON lines, one object per row, without the keys a row has no value for."""
    with path.open("w", encoding="utf-8") as fh:
        for row in view.table.iter_rows(named=True):
            fh.write(json.dumps({k: v for k, v in row.items() if v is not None}, ensure_ascii=False) + "\n")
    return path


def print_views(views: Sequence[ProbeView], out: Path, probe: str, console: Console) -> None:
    """Every view of one probe's run: tables, then notes; listings go to a JSONL file beside the run."""
    for view in views:
        if view.listing:
            path = write_listing(view, confined(out, f"{safe_filename(probe)}.{safe_filename(view.key)}.jsonl"))
            console.print(f"[dim]{view.table.height} {_t(view.caption)}: {_t(path)}[/dim]")
        elif view.table.height:
            console.print(view_table(view))
        for note in view.notes:
            console.print(f"[dim]{_t(note)}[/dim]")


def _conditions_table(a: ProbeAnalysis, model: str) -> Table:
    records = list(a.conditions.filter(a.conditions["model"] == model).iter_rows(named=True))
    table = Table(title=f"{_t(a.probe)} · {_t(model)}", title_justify="left", header_style="bold")
    table.add_column("")
    for r in records:
        table.add_column(_t(r["condition"]), justify="right")
    table.add_row("trials (errors)", *(f"{r['trials']:,} ({r['errors']:,})" for r in records))
    for rate in a.rates:
        table.add_row(_t(rate), *(_pct(r[f"{rate}_rate"]) for r in records))
        table.add_row("  95% cluster CI", *(f"{_pct(r[f'{rate}_cluster_lo'])}–{_pct(r[f'{rate}_cluster_hi'])}"
                                            for r in records))
        table.add_row("  95% Wilson", *(f"{_pct(r[f'{rate}_wilson_lo'])}–{_pct(r[f'{rate}_wilson_hi'])}"
                                        for r in records), style="dim")
    head = a.rates[0]
    table.add_row(f"prompts firing ({_t(head)})", *(f"{r[f'{head}_firing']}/{r['prompts']}" for r in records))
    return table


def _contrasts_table(a: ProbeAnalysis, model: str) -> Table | None:
    if a.contrasts.height == 0:
        return None
    records = list(a.contrasts.filter(a.contrasts["model"] == model).iter_rows(named=True))
    if not records:
        return None
    arms = {(r["arm_a"], r["arm_b"]) for r in records}
    caption = "; ".join(f"A = {_t(x.replace('+', ' + '))}, B = {_t(y.replace('+', ' + '))}" for x, y in sorted(arms))
    table = Table(header_style="bold", title=f"{_t(a.probe)} · {_t(model)} · A − B", title_justify="left",
                  caption=caption, caption_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("", "A", "B", "A − B pp", "95% CI", "p trial", "p cell"):
        table.add_column(col, justify="left" if not col else "right", no_wrap=True)
    for r in records:
        table.add_row(_t(r["contrast"]), _pct(r["rate_a"]), _pct(r["rate_b"]), _pp(r["difference"]),
                      f"[{_pp(r['ci_lo'])}, {_pp(r['ci_hi'])}]", _p(r["p_trial"]), _p(r["p_cell"]))
        table.add_row("  floor", "", "", "", "", _p(r["floor_trial"]), _p(r["floor_cell"]), style="dim")
    return table


def _num(x: float | None) -> str:
    """A percentage without its sign, for interval ends under a percentage."""
    return "—" if x is None or math.isnan(x) else f"{100 * x:.1f}"


def _tokens(n: int | None) -> str:
    if n is None:
        return "—"
    return f"{n / 1e6:.2f}M" if n >= 1e6 else (f"{n / 1e3:.0f}k" if n >= 1e3 else str(n))


def leaderboard_tables(summary: Summary, probe: str, kind: str) -> list[Table]:
    """Models as rows, in two tables that each fit 80 columns.

    The first has the probe's headline rate per condition with its cluster interval,
    prompts firing and the error rate; the second the headline test (difference,
    interval, p with its floor), tokens, cost and remedies.
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

    def new_table(title: str) -> Table:
        t = Table(title=f"{_t(probe)} · leaderboard · {_t(title)}", title_justify="left", header_style="bold",
                  box=box.SIMPLE_HEAD, pad_edge=False, caption_justify="left")
        t.add_column("run · model" if many_runs else "model", no_wrap=True)
        return t

    rates = new_table(head)
    for c in conditions:  # underscores → spaces so long condition names wrap in the header
        rates.add_column(_t(c.replace("_", " ")), justify="right", min_width=9)
    rates.add_column("firing", justify="right", no_wrap=True)
    rates.add_column("errors", justify="right", no_wrap=True)
    rates.caption = (f"{_t(head)} with its {CONFIDENCE:.0%} cluster bootstrap interval (%); "
                     f"firing: prompts with ≥ 1 {_t(head)} in {_t(rows[0]['firing_scope'])}.")
    tests = new_table("test and cost")
    if has_test:
        tests.add_column("A", justify="right", no_wrap=True)
        tests.add_column("B", justify="right", no_wrap=True)
        tests.add_column("A − B pp", justify="right", no_wrap=True)
        tests.add_column(f"p {HEADLINE_LEVEL}\n(floor)", justify="right", no_wrap=True)
    tests.add_column("tokens", justify="right", no_wrap=True)
    if has_cost:
        tests.add_column("cost", justify="right", no_wrap=True)
    if has_remedies:
        tests.add_column("remedies")
    previous_run = None
    for r in rows:
        if many_runs and r["run"] != previous_run:
            rates.add_row(f"[bold]{_t(r['run'])}[/bold]")
            tests.add_row(f"[bold]{_t(r['run'])}[/bold]")
            previous_run = r["run"]
        name = ("  " if many_runs else "") + _t(r["model"])
        sub = {c["condition"]: c for c in conds.filter((pl.col("run") == r["run"]) & (pl.col("model") == r["model"]))
               .to_dicts()}
        cells = [f"{_pct(sub[c]['value'])}\n[dim]{_num(sub[c]['cluster_lo'])}–{_num(sub[c]['cluster_hi'])}[/dim]"
                 if c in sub else "" for c in conditions]
        rates.add_row(name, *cells, f"{r['firing']}/{r['prompts']}", _pct(r["error_rate"]))
        row = [name]
        if has_test:
            row += ([_pct(r["rate_a"]), _pct(r["rate_b"]),
                     f"{_pp(r['difference'])}\n[dim][{_pp(r['ci_lo'])}, {_pp(r['ci_hi'])}][/dim]",
                     f"{_p(r['p'])}\n[dim]({_p(r['floor'])})[/dim]"] if r["p"] is not None else ["", "", "", ""])
        row.append(_tokens(r["input_tokens"] + r["output_tokens"]))
        if has_cost:
            row.append(fmt_usd(r["cost_usd"]))
        if has_remedies:
            row.append(_t("; ".join(r["remedies"])) or "none")
        tests.add_row(*row)
    caption = []
    if has_test:
        c = rows[0]
        caption.append(f"{_t(c['contrast'])}: A = {_t(c['arm_a'].replace('+', ' + '))}, "
                       f"B = {_t(c['arm_b'].replace('+', ' + '))}, "
                       f"on {_t(c['outcome'])}; p {HEADLINE_LEVEL}: {_t(c['method'])}; (floor) = the smallest p this design "
                       "can produce.")
    caption.append("Tokens" + (" and cost" if has_cost else "") + " of this probe's trials. "
                   + ("remedies: parameter changes applied to the model's requests (see the manifest)." if has_remedies
                      else "No parameter remedies were applied."))
    tests.caption = " ".join(caption)
    return [rates, tests]


def print_report(outs: Path | Sequence[Path], console: Console | None = None, *,
                 details: bool = True) -> Summary:
    """Print the leaderboards of ``outs`` (one or many run directories), then the per-model tables."""
    console = console or Console()
    summary = summarize([outs] if isinstance(outs, Path) else list(outs))
    card = scorecard_table(summary)
    for probe, kind in summary.probe_keys():
        for table in leaderboard_tables(summary, probe, kind):
            console.print(table)
        if kind == SCORECARD_KIND:
            console.print(scorecard_rich_table(card, probe, needs_run_label(card)))
    if summary.models["cost_usd"].drop_nulls().len():
        _print_costs(summary, console)
    methods: set[str] = set()
    if details:
        for run in summary.runs:
            for a in run.probes:
                for model in a.conditions["model"].unique(maintain_order=True):
                    console.print(_conditions_table(a, model))
                    contrasts = _contrasts_table(a, model)
                    if contrasts is not None:
                        console.print(contrasts)
                print_views(summary.probe_views(run, a.probe), run.out, a.probe, console)
                if a.contrasts.height:
                    methods.update(a.contrasts["method_trial"].unique().to_list()
                                   + a.contrasts["method_cell"].unique().to_list())
    console.print(
        f"[dim]Cluster CI: percentile bootstrap over prompts ({N_RESAMPLES:,} resamples, {CONFIDENCE:.0%}). "
        "Wilson treats trials as independent and is shown only for comparison. "
        "p trial: trial labels permuted within prompt; p cell: whole (prompt, condition) cells permuted within "
        "prompt; both two-sided on the pooled-rate difference; (floor) = smallest p this design can produce. "
        + (f"Methods: {_t('; '.join(sorted(methods)))}." if methods else "") + "[/dim]")
    return summary


def _print_costs(summary: Summary, console: Console) -> None:
    table = Table(title="cost", title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("run", "model", "trials", "input tok", "output tok", "cost", "per trial"):
        table.add_column(col, justify="left" if col in ("run", "model") else "right", no_wrap=True)
    for r in summary.models.iter_rows(named=True):
        table.add_row(_t(r["run"]), _t(r["model"]), f"{r['trials']:,}", f"{r['input_tokens']:,}", f"{r['output_tokens']:,}",
                      fmt_usd(r["cost_usd"]), fmt_usd(r["cost_per_trial_usd"]))
    budgets = []
    for r in summary.run_table.iter_rows(named=True):
        if r["cost_usd"] is not None:
            table.add_row(_t(r["run"]), "[bold]all[/bold]", f"{r['trials']:,}", f"{r['input_tokens']:,}",
                          f"{r['output_tokens']:,}", fmt_usd(r["cost_usd"]), "")
            if r["budget_usd"]:
                budgets.append(f"{_t(r['run'])}: {fmt_usd(r['cost_usd'])} of a {fmt_usd(r['budget_usd'])} budget")
    table.caption = "Cost = tokens × the sweep's `prices` (USD per million tokens); — = no price. " + "; ".join(budgets)
    table.caption_justify = "left"
    console.print(table)
