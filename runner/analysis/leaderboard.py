"""One or many runs → the tables every report format is drawn from.

The terminal report, the JSON summary, the CSV files and the HTML page all present
the same ``Summary``, so they never disagree. It is built from ``runner.analysis.cells``
(per-cell counts → ``stats``) for each run, plus what only the trial table and the
manifest know: tokens and cost (``runner.output.Output.usage``, priced by ``runner.config.cost``), remedies applied to a model, and
the probe-specific views that exist only when their columns do — field-level
precision / recall (``<x>_tp/_fp/_fn`` columns, e.g. the phantom auditor and its
baseline) and stage reach (a ``stage_reached`` column, e.g. propagation).

All tables are long (one row per run × probe × model × ...) so probes with different
outcome columns stack into one frame, and every table carries the ``run`` label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

import stats
from runner.analysis import warmup
from runner.analysis.cells import SUCCESS_RATES, ProbeAnalysis, analyze, firing_event
from runner.analysis.compare import COMPARISON_SCHEMA, model_comparisons
from runner.analysis.consistency import CONSISTENCY_SCHEMA, consistency_table
from runner.analysis.replies import replies_view
from runner.analysis.windows import usage as windowed_usage
from runner.analysis.windows import windows_of
from runner.config.cost import ModelPrice
from runner.core.errors import UserError
from runner.core.manifest import Manifest
from runner.core.views import FIELD_SCHEMA, FIELDS, STAGE_SCHEMA, STAGES, ProbeView, view_of
from runner.output.reader import Output, as_output
from runner.probes import PROBES

#: the test the leaderboard quotes: whole cells permuted within prompt, the conservative one
HEADLINE_LEVEL = "cell"


@dataclass(frozen=True)
class RunAnalysis:
    """One output directory, analysed."""

    output: Output
    label: str
    manifest: Manifest
    trials: pl.LazyFrame
    probes: list[ProbeAnalysis]
    prices: dict[str, ModelPrice]
    views: dict[str, tuple[ProbeView, ...]]  # probe name → what its ``Probe.views`` returned

    @property
    def out(self) -> Path:
        return self.output.path


@dataclass(frozen=True)
class Summary:
    """Everything a report shows, as DataFrames (see the module docstring)."""

    runs: list[RunAnalysis]
    run_table: pl.DataFrame    # one row per run
    models: pl.DataFrame       # run × model: trials, errors, tokens, cost, remedies
    leaderboard: pl.DataFrame  # run × probe × model: headline rate, test, floor, firing, errors, cost
    conditions: pl.DataFrame   # run × probe × model × condition × rate: rate, intervals, firing
    contrasts: pl.DataFrame    # run × probe × model × contrast: difference, interval, both tests
    cells: pl.DataFrame        # run × probe × model × case × condition × rate: hits of n
    fields: pl.DataFrame       # run × probe × model × condition × scorer: field precision / recall (a probe view)
    stages: pl.DataFrame       # run × probe × model × condition × stage: trials reaching it (a probe view)
    #: probe × rate × pair of (run, model) sides sharing cases: paired A − B, interval, p, Holm (analysis.compare)
    comparisons: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=COMPARISON_SCHEMA))
    #: run × probe × model × condition × k: pass^k of the headline's success, cases as the unit (analysis.consistency)
    consistency: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=CONSISTENCY_SCHEMA))

    def probe_keys(self) -> list[tuple[str, str]]:
        """(probe, kind) in first-seen order across runs."""
        seen: dict[tuple[str, str], None] = {}
        for r in self.runs:
            for a in r.probes:
                seen.setdefault((a.probe, a.kind), None)
        return list(seen)

    def probe_views(self, run: RunAnalysis, probe: str) -> tuple[ProbeView, ...]:
        """The views one probe returned for one run (empty for probes without any)."""
        return run.views.get(probe, ())


def needs_run_label(frame: pl.DataFrame) -> bool:
    """True when a model label occurs in more than one run of ``frame`` (then rows must say which run)."""
    pairs = frame.select("run", "model").unique()
    return pairs.height > pairs["model"].n_unique()


def _model_rows(usage: pl.DataFrame, manifest: Manifest, remedies: dict[str, list[str]]) -> pl.DataFrame:
    """The per-model usage table with each model's provider, model id, remedies and error rate."""
    providers = {m.name: m.provider for m in manifest.sweep.models}
    model_ids = {m.name: m.model_id for m in manifest.sweep.models}
    return usage.with_columns(
        pl.col("model").map_elements(lambda m: providers.get(m), return_dtype=pl.String).alias("provider"),
        pl.col("model").map_elements(lambda m: model_ids.get(m, m), return_dtype=pl.String).alias("model_id"),
        pl.col("model").map_elements(lambda m: remedies.get(m, []), return_dtype=pl.List(pl.String)).alias("remedies"),
        (pl.col("errors") / pl.col("trials")).alias("error_rate"),
    )


def _labels(outs: Sequence[Path], manifests: Sequence[Manifest]) -> list[str]:
    names = [m.sweep_name or o.name for o, m in zip(outs, manifests, strict=True)]
    return [n if names.count(n) == 1 else f"{n} ({o})" for n, o in zip(names, outs, strict=True)]


def _remedies_by_model(manifest: Manifest) -> dict[str, list[str]]:
    """Remedies the run applied, per model label (matched on provider and model id)."""
    return {m.name: [e.remedy or e.action for e in manifest.remedies_of(m)] for m in manifest.sweep.models}


def _long_conditions(a: ProbeAnalysis) -> pl.DataFrame:
    rows = []
    for r in a.conditions.iter_rows(named=True):
        for rate in a.rates:
            rows.append({"model": r["model"], "condition": r["condition"], "rate": rate,
                         "trials": r["trials"], "ok": r["ok"], "errors": r["errors"], "prompts": r["prompts"],
                         "hits": r[f"{rate}_hits"], "value": r[f"{rate}_rate"],
                         "cluster_lo": r[f"{rate}_cluster_lo"], "cluster_hi": r[f"{rate}_cluster_hi"],
                         "interval_method": r[f"{rate}_interval_method"],
                         "wilson_lo": r[f"{rate}_wilson_lo"], "wilson_hi": r[f"{rate}_wilson_hi"],
                         "firing": r[f"{rate}_firing"]})
    return pl.DataFrame(rows, schema=_CONDITION_SCHEMA)


_CONDITION_SCHEMA = pl.Schema({"model": pl.String, "condition": pl.String, "rate": pl.String, "trials": pl.Int64,
                     "ok": pl.Int64, "errors": pl.Int64, "prompts": pl.Int64, "hits": pl.Int64,
                     "value": pl.Float64, "cluster_lo": pl.Float64, "cluster_hi": pl.Float64,
                     "interval_method": pl.String, "wilson_lo": pl.Float64, "wilson_hi": pl.Float64, "firing": pl.Int64})
_CONTRAST_SCHEMA = pl.Schema({"model": pl.String(), "contrast": pl.String(), "outcome": pl.String(), "arm_a": pl.List(pl.String()),
                    "arm_b": pl.List(pl.String()), "rate_a": pl.Float64(), "rate_b": pl.Float64(), "difference": pl.Float64(),
                    "ci_lo": pl.Float64(), "ci_hi": pl.Float64(), "interval_method": pl.String(), "p_trial": pl.Float64(), "floor_trial": pl.Float64(),
                    "floor_log10_trial": pl.Float64(), "method_trial": pl.String(), "mc_se_trial": pl.Float64(),
                    "p_cell": pl.Float64(), "floor_cell": pl.Float64(), "floor_log10_cell": pl.Float64(), "method_cell": pl.String(), "mc_se_cell": pl.Float64(),
                    "prompts": pl.Int64(), "firing_a": pl.Int64()})
_CELL_SCHEMA = pl.Schema({"model": pl.String, "case_id": pl.String, "condition": pl.String, "rate": pl.String,
                "n": pl.Int64, "errors": pl.Int64, "hits": pl.Int64})


def _long_cells(a: ProbeAnalysis) -> pl.DataFrame:
    frames = [a.cells.select("model", "case_id", "condition", pl.lit(r).alias("rate"), "n", "errors",
                             pl.col(r).cast(pl.Int64).alias("hits")) for r in a.rates]
    return pl.concat(frames).cast(_CELL_SCHEMA) if frames else pl.DataFrame(schema=_CELL_SCHEMA)


def _headline_contrast(a: ProbeAnalysis, model: str) -> dict[str, Any] | None:
    """The contrast a leaderboard quotes: the first one on the headline rate, else the first."""
    if a.contrasts.height == 0:
        return None
    rows = a.contrasts.filter(pl.col("model") == model).to_dicts()
    return next((r for r in rows if r["outcome"] == a.rates[0]), rows[0] if rows else None)


def _firing(a: ProbeAnalysis, model: str, contrast: dict[str, Any] | None) -> tuple[int, int, str]:
    """(prompts firing, prompts, scope) on the headline rate.

    A prompt fires when it has at least one trial with the headline event (``firing_event``) in the
    scope: arm A of the quoted contrast when that contrast is on the headline rate, else every condition.
    Never another outcome's count: a contrast on a different outcome says nothing about the headline.
    """
    head = a.rates[0]
    cells = a.cells.filter((pl.col("model") == model) & (pl.col(f"n_{head}") > 0))
    scope = "any condition"
    if contrast is not None and contrast["outcome"] == head:
        cells = cells.filter(pl.col("condition").is_in(list(contrast["arm_a"])))
        scope = f"arm A ({', '.join(contrast['arm_a'])})"
    hits = cells[head].to_numpy()
    if head in SUCCESS_RATES:
        hits = cells[f"n_{head}"].to_numpy() - hits
    f = stats.prompts_firing(cells["case_id"].to_numpy(), hits)
    return f.firing, f.clusters, scope


def _leaderboard_rows(run: str, a: ProbeAnalysis, usage: pl.DataFrame,
                      remedies: dict[str, list[str]]) -> list[dict[str, Any]]:
    head = a.rates[0]
    out = []
    for model in a.conditions["model"].unique(maintain_order=True).to_list():
        conds = a.conditions.filter(pl.col("model") == model)
        c = _headline_contrast(a, model)
        trials, errors = int(conds["trials"].sum()), int(conds["errors"].sum())
        firing, prompts, firing_scope = _firing(a, model, c)
        u = usage.filter(pl.col("model") == model).to_dicts()
        u0 = u[0] if u else {}
        out.append({
            "run": run, "probe": a.probe, "kind": a.kind, "model": model, "headline": head,
            "trials": trials, "errors": errors, "error_rate": errors / trials if trials else None,
            "prompts": prompts, "firing": firing, "firing_event": firing_event(head), "firing_scope": firing_scope,
            "contrast": c["contrast"] if c else None, "outcome": c["outcome"] if c else None,
            "arm_a": c["arm_a"] if c else None, "arm_b": c["arm_b"] if c else None,
            "rate_a": c["rate_a"] if c else None, "rate_b": c["rate_b"] if c else None,
            "difference": c["difference"] if c else None, "ci_lo": c["ci_lo"] if c else None,
            "ci_hi": c["ci_hi"] if c else None, "interval_method": c["interval_method"] if c else None,
            "p": c[f"p_{HEADLINE_LEVEL}"] if c else None, "floor": c[f"floor_{HEADLINE_LEVEL}"] if c else None,
            "floor_log10": c[f"floor_log10_{HEADLINE_LEVEL}"] if c else None,
            "method": c[f"method_{HEADLINE_LEVEL}"] if c else None,
            "p_trial": c["p_trial"] if c else None, "floor_trial": c["floor_trial"] if c else None,
            "floor_log10_trial": c["floor_log10_trial"] if c else None,
            "method_trial": c["method_trial"] if c else None,
            "input_tokens": u0.get("input_tokens", 0), "output_tokens": u0.get("output_tokens", 0),
            "cost_usd": u0.get("cost_usd"), "cost_per_trial_usd": u0.get("cost_per_trial_usd"),
            "remedies": remedies.get(model, []),
        })
    return out


_LEADERBOARD_SCHEMA = pl.Schema({
    "run": pl.String(), "probe": pl.String(), "kind": pl.String(), "model": pl.String(), "headline": pl.String(),
    "trials": pl.Int64(), "errors": pl.Int64(), "error_rate": pl.Float64(), "prompts": pl.Int64(), "firing": pl.Int64(),
    "firing_event": pl.String(), "firing_scope": pl.String(), "contrast": pl.String(), "outcome": pl.String(),
    "arm_a": pl.List(pl.String()), "arm_b": pl.List(pl.String()), "rate_a": pl.Float64(), "rate_b": pl.Float64(),
    "difference": pl.Float64(), "ci_lo": pl.Float64(), "ci_hi": pl.Float64(), "interval_method": pl.String(),
    "p": pl.Float64(), "floor": pl.Float64(), "floor_log10": pl.Float64(), "method": pl.String(), "p_trial": pl.Float64(),
    "floor_trial": pl.Float64(), "floor_log10_trial": pl.Float64(), "method_trial": pl.String(), "input_tokens": pl.Int64(), "output_tokens": pl.Int64(), "cost_usd": pl.Float64(),
    "cost_per_trial_usd": pl.Float64(), "remedies": pl.List(pl.String()),
})

_RUN_SCHEMA = pl.Schema({"run": pl.String(), "out": pl.String(), "sweep_name": pl.String(), "sweep_id": pl.String(),
               "status": pl.String(), "trials_total": pl.Int64(), "trials": pl.Int64(), "errors": pl.Int64(),
               "input_tokens": pl.Int64(), "output_tokens": pl.Int64(), "cost_usd": pl.Float64(),
               "priced_models": pl.Int64(), "budget_usd": pl.Float64(), "budget_tokens": pl.Int64(),
               "remedies": pl.List(pl.String()), "imported_from": pl.String()})


def _with(frame: pl.DataFrame, **cols: str) -> pl.DataFrame:
    return frame.with_columns([pl.lit(v, dtype=pl.String).alias(k) for k, v in cols.items()]).select(
        list(cols) + [c for c in frame.columns if c not in cols])


def summarize(outputs: Sequence[Output | Path]) -> Summary:
    """Analyse every output in ``outputs`` (each a run of one sweep; the command line opens each once, a path is
    opened here). Reads, never writes. Raises ``UserError``."""
    if not outputs:
        raise UserError("no output directory given")
    opened = [as_output(o) for o in outputs]
    warmup.say_if_compiling()  # a fresh install's first summary compiles the statistics' kernels
    outs = [o.path for o in opened]
    manifests = [o.manifest for o in opened]
    labels = _labels(outs, manifests)
    runs, run_rows, model_frames, board, conds, contrasts, cells = [], [], [], [], [], [], []
    fields: list[pl.DataFrame] = []
    stages: list[pl.DataFrame] = []
    for output, out, manifest, label in zip(opened, outs, manifests, labels, strict=True):
        trials = output.scan()
        windows = windows_of(output, trials)  # per-cell sums one window of rows at a time (analysis.windows)
        prices = output.prices
        probes = analyze(output)
        seed = manifest.seed % (2**32)
        views = {a.probe: (tuple(PROBES[a.kind].views(output, a.probe, seed=seed)) if a.kind in PROBES else ())
                 + tuple(replies_view(trials, a.probe, multi_turn=a.kind in PROBES and not PROBES[a.kind].single_turn,
                                      windows=windows))
                 for a in probes}
        runs.append(RunAnalysis(output, label, manifest, trials, probes, prices, views))
        remedies = _remedies_by_model(manifest)
        usage = windowed_usage(output, prices, windows)
        model_frames.append(_with(_model_rows(usage, manifest, remedies), run=label))
        total = usage["cost_usd"]
        run_rows.append({
            "run": label, "out": str(out), "sweep_name": manifest.sweep_name,
            "sweep_id": manifest.sweep_id, "status": manifest.status,
            "trials_total": manifest.trials_total, "trials": int(usage["trials"].sum()),
            "errors": int(usage["errors"].sum()),
            "input_tokens": int(usage["input_tokens"].sum()), "output_tokens": int(usage["output_tokens"].sum()),
            "cost_usd": float(total.sum()) if total.null_count() < len(total) else None,
            "priced_models": len(prices),
            "budget_usd": manifest.sweep.budget.usd if manifest.sweep.budget else None,
            "budget_tokens": manifest.sweep.budget.tokens if manifest.sweep.budget else None,
            "remedies": [e.remedy for e in manifest.remedies],
            "imported_from": manifest.imported.source if manifest.imported else None,
        })
        for a in probes:
            probe_usage = windowed_usage(output, prices, windows, a.probe)
            board.extend(_leaderboard_rows(label, a, probe_usage, remedies))
            conds.append(_with(_long_conditions(a), run=label, probe=a.probe, kind=a.kind))
            if a.contrasts.height:
                contrasts.append(_with(a.contrasts.cast({k: v for k, v in _CONTRAST_SCHEMA.items()
                                                         if k in a.contrasts.columns}),
                                       run=label, probe=a.probe, kind=a.kind))
            cells.append(_with(_long_cells(a), run=label, probe=a.probe, kind=a.kind))
            for key, into in ((FIELDS, fields), (STAGES, stages)):
                view = view_of(views[a.probe], key)
                if view is not None:
                    into.append(_with(view.table, run=label, probe=a.probe, kind=a.kind))

    def stack(frames: list[pl.DataFrame], schema: pl.Schema) -> pl.DataFrame:
        full = pl.Schema([("run", pl.String()), ("probe", pl.String()), ("kind", pl.String()), *schema.items()])
        frames = [f for f in frames if f.height]
        return pl.concat([f.select(list(full)).cast(full) for f in frames]) if frames else pl.DataFrame(schema=full)

    return Summary(
        runs=runs,
        run_table=pl.DataFrame(run_rows, schema=_RUN_SCHEMA),
        models=pl.concat(model_frames, how="diagonal_relaxed"),
        leaderboard=pl.DataFrame(board, schema=_LEADERBOARD_SCHEMA),
        conditions=stack(conds, _CONDITION_SCHEMA),
        contrasts=stack(contrasts, _CONTRAST_SCHEMA),
        cells=stack(cells, _CELL_SCHEMA),
        fields=stack(fields, FIELD_SCHEMA),
        stages=stack(stages, STAGE_SCHEMA),
        comparisons=model_comparisons(runs, seed=manifests[0].seed % (2**32)),
        consistency=consistency_table(runs, SUCCESS_RATES),
    )
