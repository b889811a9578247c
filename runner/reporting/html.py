"""``trialgrid report OUT… --html FILE``: one self-contained page with the plots people would rather look at.

Everything is inline — CSS, SVG charts (``runner.reporting.svgplot``), a dozen lines of script
— so the file opens offline, attaches to an email, and prints. Sections are driven by
the data: every probe gets rates by condition with cluster intervals, a per-prompt
heat map of its headline rate (a rate concentrated in a few prompts is the finding
prompt clustering exists for) and detail tables; a forest plot of arm differences
appears when the probe declares contrasts, field-level precision / recall when the
probe returns a ``fields`` view (phantom audits), and stage-reach
funnels from its ``stages`` view (propagation). A probe without those views
simply has no such section. Every view a probe returns (``runner.core.views``:
kappas, calibration, hop rates, field scores...) is also drawn as one escaped table
(section ``view``), the same cells the terminal prints.

Each section is a ``<section data-section="...">``. The script records any error
in ``body[data-errors]`` and, once the page has laid out, counts the sections and
the SVG plots that have a non-empty box into ``body[data-rendered]`` — what the
headless-browser test reads.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from html import escape
from pathlib import Path

import polars as pl

from runner.analysis.cells import SUCCESS_RATES, firing_event, interval_name, with_interval
from runner.analysis.completeness import incomplete_lines
from runner.analysis.leaderboard import HEADLINE_LEVEL, Summary, needs_run_label
from runner.analysis.scorecard import ALPHA, scorecard_table
from runner.analysis.scorecard import KIND as SCORECARD_KIND
from runner.core.calls import RecordedCall
from runner.core.constants import CONFIDENCE, INTERVAL_METHOD
from runner.core.formatting import fmt_usd
from runner.core.formatting import pct as _pct
from runner.core.formatting import pp as _pp
from runner.core.formatting import pvalue as _p
from runner.core.version import trialgrid_version
from runner.core.views import ProbeView
from runner.probes import PROBES
from runner.reporting import svgplot as S
from runner.reporting.comparisons import comparison_html
from runner.reporting.examples import MAX_CELLS, PER_CELL, Example, sample_examples, shorten
from runner.reporting.outcomes import definition
from runner.reporting.viewformat import cell_parts, is_numeric

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
main{max-width:1100px;margin:0 auto;padding:24px 28px 60px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:34px 0 8px;border-bottom:2px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:22px 0 6px}
p.note,.tg-legend{color:#555;font-size:12.5px;margin:4px 0 8px}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0 12px;background:#fff;max-width:100%}
th,td{padding:4px 6px;border-bottom:1px solid #e6e6e6;text-align:right;vertical-align:top}
td{white-space:nowrap}td.l{white-space:normal;overflow-wrap:anywhere}td.l:first-child{white-space:nowrap}
th{background:#f2f2f2;font-weight:600;overflow-wrap:normal}td.l,th.l{text-align:left}
td small{color:#777;display:block;white-space:normal}
section{background:#fff;border:1px solid #e4e4e4;border-radius:6px;padding:10px 16px;margin:12px 0;min-width:0}
td .w{white-space:normal;overflow-wrap:anywhere;text-align:left;min-width:6em}
svg.tg-plot{display:block;max-width:100%;height:auto}
details.tg-ex{border-top:1px solid #eee;padding:4px 0;font-size:12.5px}details.tg-ex summary{cursor:pointer}
details.tg-ex pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f7f7f7;padding:4px 6px;margin:2px 0 6px;
font-size:12px}dl.tg-set{font-size:12.5px;margin:4px 0}dl.tg-set dt{font-weight:600}dl.tg-set dd{margin:0 0 4px 12px}
.tg-key{margin-right:14px;white-space:nowrap}.tg-swatch{display:inline-block;width:10px;height:10px;border-radius:50%;
margin-right:4px;vertical-align:middle}.tg-heat{display:inline-block;width:18px;height:10px;border:1px solid #ddd}
nav a{margin-right:12px;font-size:13px}code{background:#f2f2f2;padding:0 3px;border-radius:3px}
@media print{section{break-inside:avoid}body{background:#fff}main{max-width:none;padding:0}
details.tg-ex{display:none}}
"""

_SCRIPT = """
(function(){
  var errors=[];
  window.addEventListener('error',function(e){errors.push(String(e.message));
    document.body.setAttribute('data-errors',errors.join(' | '));});
  window.addEventListener('load',function(){
    var sections=document.querySelectorAll('section[data-section]');
    var plots=document.querySelectorAll('svg.tg-plot'),drawn=0;
    for(var i=0;i<plots.length;i++){var b=plots[i].getBoundingClientRect();if(b.width>0&&b.height>0){drawn++;}}
    document.body.setAttribute('data-rendered',sections.length+' sections, '+drawn+'/'+plots.length+' plots');
    // layout check the browser test reads: tables wider than their container, SVG text outside its plot
    var bad=[],tables=document.querySelectorAll('table');
    for(var t=0;t<tables.length;t++){var c=tables[t].parentElement,cs=getComputedStyle(c);
      var room=c.clientWidth-parseFloat(cs.paddingLeft)-parseFloat(cs.paddingRight);
      if(tables[t].getBoundingClientRect().width>room+1){bad.push('table in '+(tables[t].closest('section')||c).id);}}
    var texts=document.querySelectorAll('svg.tg-plot text');
    for(var k=0;k<texts.length;k++){var sv=texts[k].ownerSVGElement.getBoundingClientRect(),tb=texts[k].getBoundingClientRect();
      if(tb.left<sv.left-1||tb.right>sv.right+1||tb.top<sv.top-1||tb.bottom>sv.bottom+1){
        bad.push('text "'+texts[k].textContent.slice(0,40)+'"');}}
    document.body.setAttribute('data-overflow',bad.length+(bad.length?': '+bad.slice(0,12).join(' | '):''));
    document.body.setAttribute('data-errors',errors.join(' | '));
  });
})();
"""


def _slug(*parts: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")


def _section(kind: str, key: str, title: str, body: str) -> str:
    return (f'<section data-section="{escape(kind)}" id="{escape(_slug(kind, key))}">'
            f"<h3>{escape(title)}</h3>{body}</section>")


def _breakable(name: str) -> str:
    """An escaped name with line-break opportunities after ``._+`` (condition names are long and spaceless)."""
    return re.sub(r"([._+])", r"\1<wbr>", escape(name))


def _chunks(items: list[str], size: int = 5) -> list[list[str]]:
    """``items`` in runs of at most ``size``: a table with many conditions becomes several that each fit."""
    return [items[i:i + size] for i in range(0, len(items), size)] or [[]]


def _table(head: list[str], rows: list[list[str]], left: int = 1) -> str:
    """An HTML table; cells are already-escaped HTML; the first ``left`` columns align left."""
    th = "".join(f'<th class="{"l" if i < left else ""}">{h}</th>' for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{c}</td>' for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _conditions_order(kind: str, seen: list[str]) -> list[str]:
    order = list(PROBES[kind].all_conditions) if kind in PROBES else []
    return [c for c in order if c in seen] + [c for c in seen if c not in order]


def _runs_section(summary: Summary) -> str:
    rows = []
    for r in summary.run_table.iter_rows(named=True):
        budget = f" of {fmt_usd(r['budget_usd'])}" if r["budget_usd"] else ""
        rows.append([escape(r["run"]), escape(str(r["status"])), f"{r['trials']:,}", f"{r['errors']:,}",
                     f"{r['input_tokens'] + r['output_tokens']:,}", fmt_usd(r["cost_usd"]) + budget,
                     escape("; ".join(r["remedies"]) or "none"),
                     f"<code>{escape(str(r['sweep_id']))}</code>" + (f"<small>imported from {escape(r['imported_from'])}"
                                                                       "</small>" if r["imported_from"] else "")])
    return _section("runs", "all", "Runs", _table(["run", "status", "trials", "errors", "tokens", "cost",
                                                   "remedies", "sweep id"], rows, left=2))


def _leaderboard_section(summary: Summary, probe: str, kind: str) -> str:
    """Two tables, as in the terminal: the headline rate by condition (conditions in runs of five), then the test."""
    board = summary.leaderboard.filter((pl.col("probe") == probe) & (pl.col("kind") == kind))
    head = board["headline"][0]
    conds = summary.conditions.filter((pl.col("probe") == probe) & (pl.col("kind") == kind) & (pl.col("rate") == head))
    conditions = _conditions_order(kind, conds["condition"].unique(maintain_order=True).to_list())
    has_test = board["p"].drop_nulls().len() > 0
    many = needs_run_label(board)
    names = [([escape(r["run"])] if many else []) + [escape(r["model"])] for r in board.iter_rows(named=True)]
    keys = (["run"] if many else []) + ["model"]
    parts = []
    chunks = _chunks(conditions)
    for i, chunk in enumerate(chunks):
        rows = []
        for name, r in zip(names, board.iter_rows(named=True), strict=True):
            sub = {c["condition"]: c for c in conds.filter((pl.col("run") == r["run"]) & (pl.col("model") == r["model"]))
                   .iter_rows(named=True)}
            row = name + [f"{_pct(sub[c]['value'])}<small>{_pct(sub[c]['cluster_lo'])}–{_pct(sub[c]['cluster_hi'])}"
                          "</small>" if c in sub else "" for c in chunk]
            if i == len(chunks) - 1:
                row += [f"{r['firing']}/{r['prompts']}", _pct(r["error_rate"])]
            rows.append(row)
        header = keys + [_breakable(c) for c in chunk] + (["firing", "errors"] if i == len(chunks) - 1 else [])
        parts.append(_table(header, rows, left=len(keys)))
    header = list(keys)
    if has_test:
        header += ["A", "B", "A − B pp [95% CI]", f"p {HEADLINE_LEVEL} (floor)"]
    header += ["tokens", "cost", "cost / trial", "remedies"]
    rows = []
    for name, r in zip(names, board.iter_rows(named=True), strict=True):
        row = list(name)
        if has_test:
            row += ([_pct(r["rate_a"]), _pct(r["rate_b"]),
                     f"{_pp(r['difference'])}<small>[{_pp(r['ci_lo'])}, {_pp(r['ci_hi'])}]</small>",
                     f"{_p(r['p'])}<small>({_p(r['floor'])})</small>"] if r["p"] is not None else ["", "", "", ""])
        row += [f"{r['input_tokens'] + r['output_tokens']:,}", fmt_usd(r["cost_usd"]), fmt_usd(r["cost_per_trial_usd"]),
                f'<div style="text-align:left">{escape("; ".join(r["remedies"]) or "none")}</div>']
        rows.append(row)
    parts.append(_table(header, rows, left=len(keys)))
    first = board.row(0, named=True)
    methods = with_interval(conds["interval_method"].drop_nulls().to_list())
    note = (f'<p class="note">Headline rate <code>{escape(head)}</code> by condition {escape(methods)} '
            f"(prompts as clusters). Firing: prompts with at least one "
            f"{escape(first['firing_event'])} in {escape(first['firing_scope'])}.")
    if has_test:
        note += (f" A − B: <code>{escape(first['contrast'])}</code> on <code>{escape(first['outcome'])}</code>, "
                 f"A = {escape(', '.join(first['arm_a']))}, B = {escape(', '.join(first['arm_b']))}; "
                 f"{CONFIDENCE:.0%} CI: {escape(interval_name(first['interval_method']))}; "
                 f"p: {escape(first['method'])}; floor: the smallest p this design can produce.")
    return _section("leaderboard", probe, f"{probe} · leaderboard", "".join(parts) + note + "</p>")


def _scorecard_section(card: pl.DataFrame, probe: str) -> str:
    from runner.reporting.badges import verdict_badge

    sub = card.filter(pl.col("probe") == probe)
    many = needs_run_label(sub)
    rows = [([escape(r["run"])] if many else []) + [escape(r["model"]), verdict_badge(r["model"], r["verdict"],
                                                                                        r["retention"], r["reason"]),
            _pct(r["retention"]), f'<div style="text-align:left">{escape(r["reason"])}</div>']
            for r in sub.iter_rows(named=True)]
    head = (["run"] if many else []) + ["model", "verdict", "kept", "why"]
    note = ('<p class="note">kept: retention of decoy-free trials, (1 − decoy A) / (1 − decoy B), graded when the '
            f"decoy test's p {HEADLINE_LEVEL} ≤ {ALPHA:g}; the rules are in docs/reports.md (Scorecard).</p>")
    return _section("scorecard", probe, f"{probe} · scorecard", _table(head, rows, left=len(head) - 2) + note)


def _models_in(frame: pl.DataFrame) -> list[tuple[str, str]]:
    return list(dict.fromkeys(zip(frame["run"].to_list(), frame["model"].to_list(), strict=True)))


def _rates_section(summary: Summary, probe: str, kind: str, rates: list[str]) -> str:
    conds = summary.conditions.filter((pl.col("probe") == probe) & (pl.col("kind") == kind))
    conditions = _conditions_order(kind, conds["condition"].unique(maintain_order=True).to_list())
    many = needs_run_label(conds)
    parts = [S.legend(conditions)]
    for rate in rates:
        sub = conds.filter(pl.col("rate") == rate)
        rows = []
        for run, model in _models_in(sub):
            m = sub.filter((pl.col("run") == run) & (pl.col("model") == model))
            by = {r["condition"]: r for r in m.iter_rows(named=True)}
            pts = tuple(S.Point(i, by[c]["value"], by[c]["cluster_lo"], by[c]["cluster_hi"],
                                f"{model} · {c}: {_pct(by[c]['value'])} [{_pct(by[c]['cluster_lo'])}, "
                                f"{_pct(by[c]['cluster_hi'])}], {by[c]['hits']}/{by[c]['ok']} trials, "
                                f"{by[c]['firing']}/{by[c]['prompts']} prompts firing ({firing_event(rate)})")
                        for i, c in enumerate(conditions) if c in by)
            rows.append(S.Row(f"{model} ({run})" if many else model, pts))
        parts.append(f"<h4>{escape(rate)}</h4>" + S.dot_interval_plot(rows, label=f"{probe} {rate} by condition"))
    methods = interval_name(conds["interval_method"].drop_nulls().to_list())
    note = (f'<p class="note">Dots: pooled rate; lines: {CONFIDENCE:.0%} {escape(methods)} (prompts as '
            "clusters). Hover for counts.</p>")
    return _section("rates", probe, f"{probe} · rates by condition", "".join(parts) + note)


def _heatmap_section(summary: Summary, probe: str, kind: str, rate: str) -> str:
    cells = summary.cells.filter((pl.col("probe") == probe) & (pl.col("kind") == kind) & (pl.col("rate") == rate))
    conditions = _conditions_order(kind, cells["condition"].unique(maintain_order=True).to_list())
    many = needs_run_label(cells)
    groups = _models_in(cells)
    # prompts that fire most first, so concentration in a few prompts is visible at a glance
    success = rate in SUCCESS_RATES  # there a prompt fires on a failure: the lightest rows fire most
    order = (cells.group_by("case_id").agg((pl.col("hits").sum() / pl.col("n").sum().clip(1)).alias("r"))
             .sort(["r", "case_id"], descending=[not success, False]))
    prompts = order["case_id"].to_list()
    lookup = {(r["run"], r["model"], r["case_id"], r["condition"]): (r["hits"], r["n"])
              for r in cells.iter_rows(named=True)}
    col_groups = [(f"{m} ({r})" if many else m, list(conditions)) for r, m in groups]
    values = [[lookup.get((r, m, p, c)) for r, m in groups for c in conditions] for p in prompts]
    svg = S.heatmap(prompts, col_groups, values, label=f"{probe} {rate} per prompt")
    note = (f'<p class="note">One row per prompt (case), one column per model × condition; shade = share of ok '
            f"trials with <code>{escape(rate)}</code>. A prompt fires on a trial with "
            f"<code>{escape(firing_event(rate))}</code>"
            + (", so the lightest rows fire most; rows sorted by overall rate, lowest first" if success else
               "; rows sorted by overall rate, highest first")
            + ": a rate carried by a few rows is a different finding from the same rate spread evenly.</p>")
    return _section("heatmap", probe, f"{probe} · which prompts fire ({firing_event(rate)})",
                    S.heat_legend() + svg + note)


def _forest_section(summary: Summary, probe: str, kind: str) -> str | None:
    con = summary.contrasts.filter((pl.col("probe") == probe) & (pl.col("kind") == kind))
    if con.height == 0:
        return None
    many = needs_run_label(con)
    labels = con["contrast"].unique(maintain_order=True).to_list()
    rows, notes = [], []
    for label_i, contrast in enumerate(labels):
        sub = con.filter(pl.col("contrast") == contrast)
        first = sub.row(0, named=True)
        rows.append(S.Row(f"{contrast} ({first['outcome']}): A − B", (), header=True))
        notes.append(f"p {HEADLINE_LEVEL} (floor)")
        for r in sub.iter_rows(named=True):
            tip = (f"{r['model']} · {contrast}: A {_pct(r['rate_a'])} − B {_pct(r['rate_b'])} = {_pp(r['difference'])} pp "
                   f"[{_pp(r['ci_lo'])}, {_pp(r['ci_hi'])}]; p trial {_p(r['p_trial'])}, p cell {_p(r['p_cell'])}")
            rows.append(S.Row(f"{r['model']} ({r['run']})" if many else r["model"],
                              (S.Point(label_i, r["difference"], r["ci_lo"], r["ci_hi"], tip),)))
            notes.append(f"{_p(r[f'p_{HEADLINE_LEVEL}'])} ({_p(r[f'floor_{HEADLINE_LEVEL}'])})")
    lo = min([-0.1] + [x for x in con["ci_lo"].drop_nans().drop_nulls().to_list()])
    hi = max([0.1] + [x for x in con["ci_hi"].drop_nans().drop_nulls().to_list()])
    pad = 0.05 * (hi - lo)
    svg = S.dot_interval_plot(rows, lo=max(-1.0, lo - pad), hi=min(1.0, hi + pad), pct=False, zero_line=True,
                              right_notes=notes, note_width=130, width=820, label=f"{probe} arm differences")
    arms = "; ".join(f"{escape(r['contrast'])}: A = {escape(', '.join(r['arm_a']))}, "
                     f"B = {escape(', '.join(r['arm_b']))}"
                     for r in con.unique("contrast", maintain_order=True).iter_rows(named=True))
    methods = interval_name(con["interval_method"].drop_nulls().to_list())
    note = (f'<p class="note">Difference of pooled rates, A − B, in percentage points, with its {CONFIDENCE:.0%} '
            f"{escape(methods)} (prompts as clusters, pairing kept). {arms}. p: two-sided cluster "
            f"permutation test, {HEADLINE_LEVEL} level; (floor): the smallest p the design could produce.</p>")
    return _section("forest", probe, f"{probe} · arm differences", svg + note)


def _fields_section(summary: Summary, probe: str, kind: str) -> str | None:
    f = summary.fields.filter((pl.col("probe") == probe) & (pl.col("kind") == kind))
    if f.height == 0:
        return None
    scorers = f["scorer"].unique(maintain_order=True).to_list()
    many = needs_run_label(f)
    parts = [S.legend(scorers)]
    for metric in ("precision", "recall"):
        rows = []
        for (run, model, condition), sub in f.group_by("run", "model", "condition", maintain_order=True):
            by = {r["scorer"]: r for r in sub.iter_rows(named=True)}
            pts = tuple(S.Point(i, by[s][metric], by[s][f"{metric}_lo"], by[s][f"{metric}_hi"],
                                f"{model} · {condition} · {s}: {metric} {by[s][metric]:.2f} "
                                f"[{by[s][f'{metric}_lo']:.2f}, {by[s][f'{metric}_hi']:.2f}]; "
                                f"tp {by[s]['tp']} fp {by[s]['fp']} fn {by[s]['fn']}")
                        for i, s in enumerate(scorers) if s in by)
            rows.append(S.Row(f"{model}{f' ({run})' if many else ''} · {condition}", pts))
        parts.append(f"<h4>{metric}</h4>" + S.dot_interval_plot(rows, label=f"{probe} field {metric}",
                                                                label_width=280))
    note = ('<p class="note">Field-level scores pooled over (trace, run, field) units, on the trials every scorer '
            f"scored (an auditor error is not an empty prediction). Intervals: {escape(interval_name(INTERVAL_METHOD))}s "
            "over traces. "
            "Nothing predicted counts as precision 1; nothing to find as recall 1. The numbers are in the "
            "field-level scores table below.</p>")
    return _section("fields", probe, f"{probe} · field-level precision and recall", "".join(parts) + note)


def _stages_section(summary: Summary, probe: str, kind: str) -> str | None:
    st = summary.stages.filter((pl.col("probe") == probe) & (pl.col("kind") == kind))
    if st.height == 0:
        return None
    many = needs_run_label(st)
    groups = []
    for (run, model, condition), sub in st.group_by("run", "model", "condition", maintain_order=True):
        stages = [(r["stage"], r["reached"], r["trials"]) for r in sub.sort("order").iter_rows(named=True)]
        groups.append((f"{model}{f' ({run})' if many else ''} · {condition}", stages))
    note = ('<p class="note">Share of ok trials whose injected error reached each stage or a later one '
            "(S1 entered a call, S2 executed unrejected, S3 a wrong final answer).</p>")
    return _section("stages", probe, f"{probe} · stage reach", S.funnel(groups, label=f"{probe} stage funnel") + note)


#: rows of a listing view drawn on the page (the JSON, the CSV and the terminal's JSONL file have every row)
_LISTING_ROWS = 40


def _view_html(view: ProbeView) -> str:
    """A probe view as HTML tables (every cell escaped), its caption and notes; a listing folds away.

    The leading text columns (model, condition...) are the keys; the other columns come in runs of five,
    each run a table of its own with the keys repeated, so a wide view fits a narrow page.
    """
    keys = next((i for i, c in enumerate(view.columns) if is_numeric(c)), len(view.columns))
    keys = max(min(keys, 3), 1)
    rows = []
    shown = view.table.head(_LISTING_ROWS) if view.listing else view.table
    for row in shown.iter_rows(named=True):
        cells = []
        for col in view.columns:
            value, interval = cell_parts(row, col)
            text = escape(value) + (f"<small>{escape(interval)}</small>" if interval is not None else "")
            cells.append(text if is_numeric(col) else f'<div class="w">{text}</div>')
        rows.append(cells)
    labels = [_breakable(c.label) for c in view.columns]
    tables = []
    rest = list(range(keys, len(view.columns)))
    for chunk in [rest[i:i + 5] for i in range(0, len(rest), 5)] or [[]]:
        idx = list(range(keys)) + chunk
        left = [i for i in idx if not is_numeric(view.columns[i])]
        body = [[r[i] for i in idx] for r in rows]
        tables.append(_table([labels[i] for i in idx], body, left=len([i for i in left if i < keys])))
    table = "".join(tables) if rows else ""
    if view.listing and rows:
        more = view.table.height - len(rows)
        table = (f"<details><summary>{view.table.height:,} rows" + (f" (first {len(rows)} shown)" if more else "")
                 + f"</summary>{table}</details>")
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in (view.caption, *view.notes) if n)
    return table + notes


def _view_sections(summary: Summary, probe: str, kind: str) -> list[str]:
    runs = [r for r in summary.runs if any(a.probe == probe and a.kind == kind for a in r.probes)]
    out = []
    for run in runs:
        for view in summary.probe_views(run, probe):
            title = view.title + (f" ({run.label})" if len(runs) > 1 else "")
            out.append(_section("view", f"{probe}-{view.key}-{run.label}", title, _view_html(view)))
    return out


def _firing_label(rate: str) -> str:
    """"firing", naming its event only where it is not the row's own rate (``passed`` fires on a failure): the
    row label already names it, and a long rate name repeated in every cell widened the table past its page."""
    event = firing_event(rate)
    return "firing" if event == rate else f"firing ({escape(event)})"


def _details_section(summary: Summary, probe: str, kind: str, rates: list[str]) -> str:
    conds = summary.conditions.filter((pl.col("probe") == probe) & (pl.col("kind") == kind))
    conditions = _conditions_order(kind, conds["condition"].unique(maintain_order=True).to_list())
    many = needs_run_label(conds)
    parts = []
    for run, model in _models_in(conds):
        m = conds.filter((pl.col("run") == run) & (pl.col("model") == model))
        by = {(r["rate"], r["condition"]): r for r in m.iter_rows(named=True)}
        any_rate = {c: by.get((rates[0], c)) for c in conditions}
        rows = [["trials (errors)"] + [f"{r['trials']:,} ({r['errors']:,})" if r else "" for r in any_rate.values()]]
        for rate in rates:
            cells = []
            for c in conditions:
                r = by.get((rate, c))
                cells.append("" if r is None else
                             f"{_pct(r['value'])}<small>{escape(interval_name(r['interval_method']))} "
                             f"{_pct(r['cluster_lo'])}–{_pct(r['cluster_hi'])}</small>"
                             f"<small>Wilson {_pct(r['wilson_lo'])}–{_pct(r['wilson_hi'])}</small>"
                             f"<small>{_firing_label(rate)} {r['firing']}/{r['prompts']}</small>")
            rows.append([f"<code>{escape(rate)}</code>", *cells])
        title = f"{model} ({run})" if many else model
        parts.append(f"<h4>{escape(title)}</h4>")
        for chunk in _chunks(conditions):
            idx = [conditions.index(c) + 1 for c in chunk]
            parts.append(_table([""] + [_breakable(c) for c in chunk], [[r[0]] + [r[i] for i in idx] for r in rows]))
    note = ('<p class="note">Wilson intervals treat trials as independent and are visibly too narrow when prompts '
            "differ; quote the cluster interval. <i>firing</i> n/N: prompts with at least one trial of the row's rate, of "
            "N prompts (for a success rate such as <code>passed</code>, at least one trial without it).</p>")
    return _section("details", probe, f"{probe} · detail tables", "".join(parts) + note)


def _definitions(kind: str, rates: list[str]) -> str:
    """One line per outcome: what a hit of each rate means (runner/reporting/outcomes.py, from docs/probes.md)."""
    items = "".join(f"<dt><code>{escape(r)}</code></dt><dd>{escape(definition(kind, r) or 'no definition recorded')}</dd>"
                    for r in rates)
    return f'<dl class="tg-set">{items}</dl>'


def _settings_section(summary: Summary) -> str:
    """Each run's sweep settings: seed, models, and per probe its kind, runs per cell and conditions."""
    parts = []
    for run in summary.runs:
        sweep = run.manifest.sweep
        models = ", ".join(f"{m.name} ({m.provider}:{m.model_id})" for m in sweep.models)
        probes = "; ".join(f"{p.get('name') or p.get('kind')}: kind {p.get('kind')}, {p.get('runs', '?')} run(s) per "
                           f"cell" + (f", conditions {', '.join(p['conditions'])}" if p.get("conditions") else "")
                           for p in sweep.probes or [])
        parts.append(f"<dt>{escape(run.label)}</dt><dd>seed {escape(str(run.manifest.seed))} · "
                     f"models: {escape(models or '—')} · probes: {escape(probes or '—')} · sweep file "
                     f"<code>{escape(str(run.manifest.sweep_file))}</code></dd>")
    return _section("settings", "all", "Sweep settings", f'<dl class="tg-set">{"".join(parts)}</dl>')


def _call_html(i: int, call: RecordedCall) -> str:
    """One recorded model call: the request as sent (messages, tools in the order offered, params), the answer."""
    req = call.request
    lines = [f"{m.role}{f' ({m.name})' if m.name else ''}: {shorten(m.content, 400)}"
             + "".join(f"\n  → {c.name}({shorten(c.raw_arguments, 200)})" for c in m.tool_calls)
             for m in req.messages]
    tools = ", ".join(t.name for t in req.tools) or "(none)"
    params = json.dumps(dict(req.params), ensure_ascii=False) if req.params else "{}"
    if call.response is not None:
        answer = shorten(call.response.text) or "(no text)"
        answer += "".join(f"\n→ {c.name}({shorten(c.raw_arguments, 400)})" for c in call.response.tool_calls)
    else:
        answer = f"failed: {call.error_kind or 'no answer'}: {call.error or ''}"
    return (f"<b>call {i + 1}</b> · {call.attempts} attempt(s) · {call.latency_ms:,.0f} ms"
            f"<pre>{escape(chr(10).join(lines))}</pre><b>tools offered</b><pre>{escape(tools)}</pre>"
            f"<b>params</b><pre>{escape(params)}</pre><b>answer</b><pre>{escape(answer)}</pre>")


def _example_html(e: Example) -> str:
    calls = "".join(f"<pre>{escape(name)}({escape(shorten(args, 400))})</pre>" for name, args in e.tool_calls)
    outcome = "".join(f"<dt><code>{escape(k)}</code></dt><dd>{escape(shorten(v, 300))}</dd>" for k, v in e.outcome)
    exchange = "".join(_call_html(i, c) for i, c in enumerate(e.calls))
    request = escape(shorten(e.request)) if e.request else "(not recorded: these trials were imported without their calls)"
    return (f'<details class="tg-ex"><summary><b>{escape(e.case_id)}</b> · {escape(e.condition)} · '
            f"{escape(e.model)} · run {e.run} · {'event' if e.event else 'no event'}</summary>"
            f"<div><b>request</b><pre>{request}</pre>"
            f"<b>tool calls</b>{calls or '<pre>(none)</pre>'}"
            f"<b>reply</b><pre>{escape(shorten(e.reply)) or '(empty)'}</pre>"
            f'<b>outcome</b><dl class="tg-set">{outcome}</dl>'
            + (f'<details class="tg-calls"><summary>every model call ({len(e.calls)})</summary>{exchange}</details>'
               if e.calls else "")
            + "</div></details>")


def _examples_section(summary: Summary, probe: str, kind: str, head: str) -> str | None:
    parts = []
    runs = [r for r in summary.runs if any(a.probe == probe and a.kind == kind for a in r.probes)]
    for run in runs:
        examples = sample_examples(run, probe, kind, head)
        if examples:
            if len(runs) > 1:
                parts.append(f"<h4>{escape(run.label)}</h4>")
            parts.extend(_example_html(e) for e in examples)
    if not parts:
        return None
    note = (f'<p class="note">A reproducible sample (fixed seed) of at most {MAX_CELLS} case × condition cells and '
            f"{PER_CELL} trials each, cells and trials with the headline event first (event: "
            f"{escape('a failure' if head == 'passed' else head)}). Click a line to open it; every trial is in the "
            "run's trial files.</p>")
    return _section("examples", probe, f"{probe} · example trials", note + "".join(parts))


def _cost_section(summary: Summary) -> str:
    rows = [[escape(r["run"]), escape(r["model"]), escape(str(r["provider"])), f"{r['trials']:,}",
             _pct(r["error_rate"]), f"{r['input_tokens']:,}", f"{r['output_tokens']:,}", fmt_usd(r["cost_usd"]),
             fmt_usd(r["cost_per_trial_usd"]), escape("; ".join(r["remedies"]) or "none")]
            for r in summary.models.iter_rows(named=True)]
    note = ('<p class="note">Cost = input and output tokens × the sweep\'s <code>prices</code> (USD per million '
            "tokens); — where a model has no price.</p>")
    return _section("cost", "all", "Models: errors, tokens, cost, remedies",
                    _table(["run", "model", "provider", "trials", "errors", "input tokens", "output tokens", "cost",
                            "cost / trial", "remedies"], rows, left=3) + note)


def render_html(summary: Summary, title: str = "trialgrid report") -> str:
    version = trialgrid_version()
    body = [f'<p class="note"><b>{escape(line)}</b></p>' for line in incomplete_lines(summary)]
    body += [_runs_section(summary), _settings_section(summary)]
    card = scorecard_table(summary)
    nav = ['<a href="#runs-all">runs</a>']
    for probe, kind in summary.probe_keys():
        rates = next(list(a.rates) for r in summary.runs for a in r.probes if a.probe == probe and a.kind == kind)
        nav.append(f'<a href="#{_slug("leaderboard", probe)}">{escape(probe)}</a>')
        body.append(f"<h2>{escape(probe)} <small>({escape(kind)})</small></h2>")
        body.append(_leaderboard_section(summary, probe, kind))
        body.append(_section("outcomes", probe, f"{probe} · outcomes", _definitions(kind, rates)))
        if kind == SCORECARD_KIND:
            body.append(_scorecard_section(card, probe))
        body.append(_rates_section(summary, probe, kind, rates))
        body.append(_heatmap_section(summary, probe, kind, rates[0]))
        for extra in (_forest_section(summary, probe, kind), _fields_section(summary, probe, kind),
                      _stages_section(summary, probe, kind)):
            if extra is not None:
                body.append(extra)
        body.extend(_view_sections(summary, probe, kind))
        body.append(_details_section(summary, probe, kind, rates))
        examples = _examples_section(summary, probe, kind, rates[0])
        if examples is not None:
            body.append(examples)
    if summary.comparisons.height:  # model against model, paired on the case (runner.reporting.comparisons)
        body.append("<h2>Model against model</h2>" + comparison_html(summary))
        nav.append('<a href="#comparisons-all">models compared</a>')
    body.append("<h2>Cost</h2>" + _cost_section(summary))
    nav.append(f'<a href="#{_slug("cost", "all")}">cost</a>')
    methods = sorted(set(summary.contrasts["method_trial"].to_list() + summary.contrasts["method_cell"].to_list()))
    body.append(_section("methods", "all", "Methods", (
        f'<p class="note">The unit of inference is the prompt (case): trials of one prompt share its difficulty. '
        f"Intervals ({CONFIDENCE:.0%}), prompts as clusters: rates — "
        f"{escape(interval_name(summary.conditions['interval_method'].drop_nulls().to_list()))}; A − B — "
        f"{escape(interval_name(summary.contrasts['interval_method'].drop_nulls().to_list()))}. "
        "Tests permute labels within prompts, two-sided on the difference of pooled rates: "
        "<b>trial</b> level permutes trial labels within a prompt, <b>cell</b> level permutes whole (prompt, "
        "condition) cells and is the conservative one the leaderboard quotes. Methods used: "
        + (escape("; ".join(methods)) if methods else "none (no contrasts)") + ".</p>")))
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        # no network: nothing may load from anywhere, not even a favicon
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">"
        "<link rel=\"icon\" href=\"data:,\">"
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>"
        f"<h1>{escape(title)}</h1><p class=\"note\">{len(summary.runs)} run(s) · generated {generated} by trialgrid "
        f"{escape(version)} · the trials behind every number: <code>trialgrid view OUT</code> (docs/viewer.md)"
        f"</p><nav>{''.join(nav)}</nav>"
        + "".join(body)
        + f"</main><script>{_SCRIPT}</script></body></html>\n"
    )


def write_html(summary: Summary, path: Path, title: str = "trialgrid report") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(summary, title), encoding="utf-8")
    return path
