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

import re
from datetime import UTC, datetime
from html import escape
from importlib import metadata
from pathlib import Path

import polars as pl

from runner.analysis.leaderboard import HEADLINE_LEVEL, Summary, needs_run_label
from runner.analysis.scorecard import ALPHA, scorecard_table
from runner.analysis.scorecard import KIND as SCORECARD_KIND
from runner.core.constants import CONFIDENCE, N_RESAMPLES
from runner.core.formatting import fmt_usd
from runner.core.formatting import pct as _pct
from runner.core.formatting import pp as _pp
from runner.core.formatting import pvalue as _p
from runner.core.views import ProbeView
from runner.probes import PROBES
from runner.reporting import svgplot as S
from runner.reporting.viewformat import cell_parts, is_numeric

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
main{max-width:1100px;margin:0 auto;padding:24px 28px 60px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:34px 0 8px;border-bottom:2px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:22px 0 6px}
p.note,.tg-legend{color:#555;font-size:12.5px;margin:4px 0 8px}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0 12px;background:#fff}
th,td{padding:4px 8px;border-bottom:1px solid #e6e6e6;text-align:right;vertical-align:top}
th{background:#f2f2f2;font-weight:600}td.l,th.l{text-align:left}
td small{color:#777;display:block}
section{background:#fff;border:1px solid #e4e4e4;border-radius:6px;padding:10px 16px;margin:12px 0;overflow-x:auto}
.tg-key{margin-right:14px;white-space:nowrap}.tg-swatch{display:inline-block;width:10px;height:10px;border-radius:50%;
margin-right:4px;vertical-align:middle}.tg-heat{display:inline-block;width:18px;height:10px;border:1px solid #ddd}
nav a{margin-right:12px;font-size:13px}code{background:#f2f2f2;padding:0 3px;border-radius:3px}
@media print{section{break-inside:avoid}body{background:#fff}}
"""

SCRIPT = """
(function(){
  var errors=[];
  window.addEventListener('error',function(e){errors.push(String(e.message));
    document.body.setAttribute('data-errors',errors.join(' | '));});
  window.addEventListener('load',function(){
    var sections=document.querySelectorAll('section[data-section]');
    var plots=document.querySelectorAll('svg.tg-plot'),drawn=0;
    for(var i=0;i<plots.length;i++){var b=plots[i].getBoundingClientRect();if(b.width>0&&b.height>0){drawn++;}}
    document.body.setAttribute('data-rendered',sections.length+' sections, '+drawn+'/'+plots.length+' plots');
    document.body.setAttribute('data-errors',errors.join(' | '));
  });
})();
"""


def _slug(*parts: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")


def _section(kind: str, key: str, title: str, body: str) -> str:
    return (f'<section data-section="{escape(kind)}" id="{escape(_slug(kind, key))}">'
            f"<h3>{escape(title)}</h3>{body}</section>")


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
    board = summary.leaderboard.filter((pl.col("probe") == probe) & (pl.col("kind") == kind))
    head = board["headline"][0]
    conds = summary.conditions.filter((pl.col("probe") == probe) & (pl.col("kind") == kind) & (pl.col("rate") == head))
    conditions = _conditions_order(kind, conds["condition"].unique(maintain_order=True).to_list())
    has_test = board["p"].drop_nulls().len() > 0
    many = needs_run_label(board)
    header = (["run"] if many else []) + ["model"] + [escape(c) for c in conditions]
    if has_test:
        header += ["A − B pp [95% CI]", f"p {HEADLINE_LEVEL}", "floor"]
    header += ["firing", "errors", "tokens", "cost", "cost / trial", "remedies"]
    rows = []
    for r in board.iter_rows(named=True):
        sub = {c["condition"]: c for c in conds.filter((pl.col("run") == r["run"]) & (pl.col("model") == r["model"]))
               .iter_rows(named=True)}
        row = ([escape(r["run"])] if many else []) + [escape(r["model"])]
        row += [f"{_pct(sub[c]['value'])}<small>{_pct(sub[c]['cluster_lo'])}–{_pct(sub[c]['cluster_hi'])}</small>"
                if c in sub else "" for c in conditions]
        if has_test:
            row += ([f"{_pp(r['difference'])}<small>[{_pp(r['ci_lo'])}, {_pp(r['ci_hi'])}]</small>", _p(r["p"]),
                     _p(r["floor"])] if r["p"] is not None else ["", "", ""])
        row += [f"{r['firing']}/{r['prompts']}", _pct(r["error_rate"]),
                f"{r['input_tokens'] + r['output_tokens']:,}", fmt_usd(r["cost_usd"]),
                fmt_usd(r["cost_per_trial_usd"]), escape("; ".join(r["remedies"]) or "none")]
        rows.append(row)
    first = board.row(0, named=True)
    note = (f'<p class="note">Headline rate <code>{escape(head)}</code> by condition with its {CONFIDENCE:.0%} '
            f"cluster bootstrap interval (prompts resampled). Firing: prompts with at least one {escape(head)} in "
            f"{escape(first['firing_scope'])}.")
    if has_test:
        note += (f" A − B: <code>{escape(first['contrast'])}</code>, A = {escape(first['arm_a'])}, "
                 f"B = {escape(first['arm_b'])}; p: {escape(first['method'])}; floor: the smallest p this design "
                 "can produce.")
    return _section("leaderboard", probe, f"{probe} · leaderboard", _table(header, rows, left=2 if many else 1)
                    + note + "</p>")


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
            f"decoy test's p {HEADLINE_LEVEL} ≤ {ALPHA:g}; the rules are in the README (Scorecard).</p>")
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
                                f"{by[c]['firing']}/{by[c]['prompts']} prompts firing")
                        for i, c in enumerate(conditions) if c in by)
            rows.append(S.Row(f"{model} ({run})" if many else model, pts))
        parts.append(f"<h4>{escape(rate)}</h4>" + S.dot_interval_plot(rows, label=f"{probe} {rate} by condition"))
    note = (f'<p class="note">Dots: pooled rate; lines: {CONFIDENCE:.0%} cluster bootstrap interval '
            f"({N_RESAMPLES:,} resamples of prompts). Hover for counts.</p>")
    return _section("rates", probe, f"{probe} · rates by condition", "".join(parts) + note)


def _heatmap_section(summary: Summary, probe: str, kind: str, rate: str) -> str:
    cells = summary.cells.filter((pl.col("probe") == probe) & (pl.col("kind") == kind) & (pl.col("rate") == rate))
    conditions = _conditions_order(kind, cells["condition"].unique(maintain_order=True).to_list())
    many = needs_run_label(cells)
    groups = _models_in(cells)
    # prompts that fire most first, so concentration in a few prompts is visible at a glance
    order = (cells.group_by("case_id").agg((pl.col("hits").sum() / pl.col("n").sum().clip(1)).alias("r"))
             .sort(["r", "case_id"], descending=[True, False]))
    prompts = order["case_id"].to_list()
    lookup = {(r["run"], r["model"], r["case_id"], r["condition"]): (r["hits"], r["n"])
              for r in cells.iter_rows(named=True)}
    col_groups = [(f"{m} ({r})" if many else m, list(conditions)) for r, m in groups]
    values = [[lookup.get((r, m, p, c)) for r, m in groups for c in conditions] for p in prompts]
    svg = S.heatmap(prompts, col_groups, values, label=f"{probe} {rate} per prompt")
    note = (f'<p class="note">One row per prompt (case), one column per model × condition; shade = share of ok '
            f"trials with <code>{escape(rate)}</code>. Rows sorted by overall rate: a rate carried by a few dark "
            "rows is a different finding from the same rate spread evenly.</p>")
    return _section("heatmap", probe, f"{probe} · which prompts fire ({rate})", S.heat_legend() + svg + note)


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
    arms = "; ".join(f"{escape(r['contrast'])}: A = {escape(r['arm_a'])}, B = {escape(r['arm_b'])}"
                     for r in con.unique("contrast", maintain_order=True).iter_rows(named=True))
    note = (f'<p class="note">Difference of pooled rates, A − B, in percentage points, with its {CONFIDENCE:.0%} '
            f"cluster bootstrap interval (prompts resampled once for both arms). {arms}. p: two-sided cluster "
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
            "scored (an auditor error is not an empty prediction). Intervals: cluster bootstrap over traces. "
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


def view_html(view: ProbeView) -> str:
    """A probe view as an HTML table (every cell escaped), its caption and notes; a listing folds away."""
    left = next((i for i, c in enumerate(view.columns) if is_numeric(c)), len(view.columns))
    rows = []
    for row in view.table.iter_rows(named=True):
        cells = []
        for col in view.columns:
            value, interval = cell_parts(row, col)
            cells.append(escape(value) + (f"<small>{escape(interval)}</small>" if interval is not None else ""))
        rows.append(cells)
    table = _table([escape(c.label) for c in view.columns], rows, left=left) if rows else ""
    if view.listing and rows:
        table = f"<details><summary>{len(rows):,} rows</summary>{table}</details>"
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in (view.caption, *view.notes) if n)
    return table + notes


def _view_sections(summary: Summary, probe: str, kind: str) -> list[str]:
    runs = [r for r in summary.runs if any(a.probe == probe and a.kind == kind for a in r.probes)]
    out = []
    for run in runs:
        for view in summary.probe_views(run, probe):
            title = view.title + (f" ({run.label})" if len(runs) > 1 else "")
            out.append(_section("view", f"{probe}-{view.key}-{run.label}", title, view_html(view)))
    return out


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
                             f"{_pct(r['value'])}<small>cluster {_pct(r['cluster_lo'])}–{_pct(r['cluster_hi'])}</small>"
                             f"<small>Wilson {_pct(r['wilson_lo'])}–{_pct(r['wilson_hi'])}</small>"
                             f"<small>firing {r['firing']}/{r['prompts']}</small>")
            rows.append([f"<code>{escape(rate)}</code>"] + cells)
        title = f"{model} ({run})" if many else model
        parts.append(f"<h4>{escape(title)}</h4>" + _table([""] + [escape(c) for c in conditions], rows))
    note = ('<p class="note">Wilson intervals treat trials as independent and are visibly too narrow when prompts '
            "differ; quote the cluster interval.</p>")
    return _section("details", probe, f"{probe} · detail tables", "".join(parts) + note)


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
    try:
        version = metadata.version("trialgrid")
    except metadata.PackageNotFoundError:
        version = "unknown"
    body = [_runs_section(summary)]
    card = scorecard_table(summary)
    nav = ['<a href="#runs-all">runs</a>']
    for probe, kind in summary.probe_keys():
        rates = next(list(a.rates) for r in summary.runs for a in r.probes if a.probe == probe and a.kind == kind)
        nav.append(f'<a href="#{_slug("leaderboard", probe)}">{escape(probe)}</a>')
        body.append(f"<h2>{escape(probe)} <small>({escape(kind)})</small></h2>")
        body.append(_leaderboard_section(summary, probe, kind))
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
    body.append("<h2>Cost</h2>" + _cost_section(summary))
    nav.append(f'<a href="#{_slug("cost", "all")}">cost</a>')
    methods = sorted(set(summary.contrasts["method_trial"].to_list() + summary.contrasts["method_cell"].to_list()))
    body.append(_section("methods", "all", "Methods", (
        f'<p class="note">The unit of inference is the prompt (case): trials of one prompt share its difficulty. '
        f"Cluster intervals are percentile bootstraps over prompts ({N_RESAMPLES:,} resamples, {CONFIDENCE:.0%}). "
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
        f"{escape(version)}</p><nav>{''.join(nav)}</nav>"
        + "".join(body)
        + f"</main><script>{SCRIPT}</script></body></html>\n"
    )


def write_html(summary: Summary, path: Path, title: str = "trialgrid report") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(summary, title), encoding="utf-8")
    return path
