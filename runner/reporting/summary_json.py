"""``trialgrid report --json FILE``: a stable, documented summary for CI and other tools.

The shape is fixed by ``runner/schemas/summary.schema.json`` (shipped in the package;
``schema_path()`` finds it) and versioned by ``format_version``: fields are only ever
added within a version; a rename or a change of meaning bumps it. Numbers that do not
exist (a rate with no ok trials, a cost without a price) are ``null``, never NaN, so
any JSON parser reads the file. Every list is in report order (runs as given; models
in sweep order), so two summaries of the same runs are byte-identical. Each probe
entry's ``views`` holds the probe's own tables (``runner.core.views``) with every
column, including ``fields`` and ``stages``, which are also given in their own keys.
"""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

from runner.analysis.leaderboard import HEADLINE_LEVEL, Summary
from runner.analysis.scorecard import scorecard_table
from runner.analysis.scorecard import settings as scorecard_settings
from runner.core.constants import CONFIDENCE, INTERVAL_METHOD
from runner.core.version import trialgrid_version
from runner.core.views import ProbeView
from runner.reporting.comparisons import comparison_records
from runner.reporting.consistency import consistency_records

_FORMAT = "trialgrid-summary"
#: 3: ``settings.interval_method`` replaces ``settings.bootstrap_resamples`` (the intervals draw no resamples)
FORMAT_VERSION = 3


def schema_path() -> Path:
    """The JSON Schema (draft 2020-12) this module's output validates against."""
    return Path(str(resources.files("runner") / "schemas" / "summary.schema.json"))


def _clean(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return x


def _arms(arms: list[str] | None) -> list[str]:
    """An arm's condition names, as the analysis keeps them (a list: a name may itself hold "+")."""
    return list(arms or [])


def _rows(frame: pl.DataFrame, run: str, probe: str) -> list[dict[str, Any]]:
    return frame.filter((pl.col("run") == run) & (pl.col("probe") == probe)).drop("run", "probe", "kind").to_dicts()


def _test(r: dict[str, Any], level: str) -> dict[str, Any]:
    return {"p": r[f"p_{level}"], "floor": r[f"floor_{level}"], "floor_log10": r[f"floor_log10_{level}"],
            "method": r[f"method_{level}"], "mc_stderr": r.get(f"mc_se_{level}")}


def _view_dict(view: ProbeView) -> dict[str, Any]:
    """A probe view: what it is, how its columns read, and every row with every column (raw numbers)."""
    return {"key": view.key, "title": view.title, "caption": view.caption, "listing": view.listing,
            "columns": [{"name": c.name, "label": c.label, "format": str(c.format), "lo": c.lo, "hi": c.hi}
                        for c in view.columns],
            "notes": list(view.notes), "rows": view.table.to_dicts()}


def summary_dict(summary: Summary) -> dict[str, Any]:
    version = trialgrid_version()
    probes = []
    card = scorecard_table(summary)
    for run in summary.runs:
        for a in run.probes:
            board = []
            for r in _rows(summary.leaderboard, run.label, a.probe):
                test = None
                if r["p"] is not None:
                    test = {"contrast": r["contrast"], "outcome": r["outcome"], "arm_a": _arms(r["arm_a"]),
                            "arm_b": _arms(r["arm_b"]), "rate_a": r["rate_a"], "rate_b": r["rate_b"],
                            "difference": r["difference"], "ci": [r["ci_lo"], r["ci_hi"]],
                            "interval_method": r["interval_method"], "level": HEADLINE_LEVEL,
                            "p": r["p"], "floor": r["floor"], "floor_log10": r["floor_log10"],
                            "method": r["method"]}
                board.append({k: r[k] for k in ("model", "headline", "trials", "errors", "error_rate", "prompts",
                                                "firing", "firing_event", "firing_scope", "input_tokens", "output_tokens",
                                                "cost_usd", "cost_per_trial_usd", "remedies")} | {"test": test})
            conditions = [{k: r[k] for k in ("model", "condition", "rate", "trials", "ok", "errors", "prompts",
                                             "hits", "value", "firing", "interval_method")}
                          | {"cluster_ci": [r["cluster_lo"], r["cluster_hi"]], "wilson_ci": [r["wilson_lo"], r["wilson_hi"]]}
                          for r in _rows(summary.conditions, run.label, a.probe)]
            contrasts = [{k: r[k] for k in ("model", "contrast", "outcome", "rate_a", "rate_b", "difference",
                                            "prompts", "firing_a", "interval_method")}
                         | {"arm_a": _arms(r["arm_a"]), "arm_b": _arms(r["arm_b"]), "ci": [r["ci_lo"], r["ci_hi"]],
                            "tests": {"trial": _test(r, "trial"), "cell": _test(r, "cell")}}
                         for r in _rows(summary.contrasts, run.label, a.probe)]
            fields = [{k: r[k] for k in ("model", "condition", "scorer", "trials", "tp", "fp", "fn", "precision",
                                         "recall", "f1")}
                      | {"precision_ci": [r["precision_lo"], r["precision_hi"]],
                         "recall_ci": [r["recall_lo"], r["recall_hi"]]}
                      for r in _rows(summary.fields, run.label, a.probe)]
            stages = _rows(summary.stages, run.label, a.probe)
            verdicts = card.filter((pl.col("run") == run.label) & (pl.col("probe") == a.probe)).drop("run", "probe")
            probes.append({"run": run.label, "probe": a.probe, "kind": a.kind, "rates": list(a.rates),
                           "leaderboard": board, "conditions": conditions, "contrasts": contrasts,
                           "fields": fields, "stages": stages, "scorecard": verdicts.to_dicts(),
                           "views": [_view_dict(v) for v in summary.probe_views(run, a.probe)]})
    return _clean({
        "format": _FORMAT,
        "format_version": FORMAT_VERSION,
        "generated_by": f"trialgrid {version}",
        "settings": {"confidence": CONFIDENCE, "interval_method": INTERVAL_METHOD, "headline_test": HEADLINE_LEVEL,
                     "scorecard": scorecard_settings()},
        "runs": summary.run_table.to_dicts(),
        "models": summary.models.select("run", "model", "provider", "model_id", "trials", "errors", "error_rate",
                                        "input_tokens", "output_tokens", "cost_usd", "cost_per_trial_usd",
                                        "remedies").to_dicts(),
        "probes": probes,
        "model_comparisons": comparison_records(summary),
        "consistency": consistency_records(summary),
    })


def write_json(summary: Summary, path: Path) -> dict[str, Any]:
    data = summary_dict(summary)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return data
