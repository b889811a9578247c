"""The report's numbers that count trials, each with the filter that lists those trials, and one case across models.

Why a module of its own: every count here comes from the report's analysis (``runner.analysis.summarize``,
``scorecard_table``), never recounted; this module only pairs each count with the trial-list filter that selects
exactly the trials it counts, which is what lets the viewer link every number to its trials.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from runner.viewer.listing import list_columns
from runner.viewer.snapshot import Snapshot
from runner.viewer.values import plain

if TYPE_CHECKING:
    from runner.analysis.leaderboard import Summary

__all__ = ["compare", "rates", "summary_of"]


def summary_of(snap: Snapshot) -> Summary | None:
    """The report's analysis of this output (``runner.analysis.summarize``), once per snapshot."""
    from runner.analysis.leaderboard import summarize  # the statistics' imports: only once rates are asked

    if snap.output is None or not snap.output.parts:
        return None
    output = snap.output
    return snap.cached("summary", lambda: summarize([output]))


def rates(snap: Snapshot) -> dict[str, Any]:
    """Every number of the report that counts trials, each with the filter that lists them: the leaderboard,
    the condition tables (hits and their denominator), the contrasts (each arm's hits of its trials), the
    scorecard and the probes' views (stage reach, field scores). Counts come from the report's analysis
    (``summarize``, ``scorecard_table``), never recounted here; the filters select exactly those trials
    (the browser tests click through and compare)."""
    from runner.analysis.scorecard import scorecard_table

    summary = summary_of(snap)
    if summary is None:
        return {"probes": []}
    scorecard = scorecard_table(summary)
    probes = []
    for run in summary.runs:
        for a in run.probes:
            probes.append(_probe_numbers(snap, summary, scorecard, run.label, a))
    return {"probes": probes}


def _probe_numbers(snap: Snapshot, summary: Summary, scorecard: pl.DataFrame, label: str,
                   a: Any) -> dict[str, Any]:
    probe = a.probe
    ok = {"f.probe": [probe], "f.status": ["ok"]}
    counted = {(r["model"], r["condition"]): r for r in a.conditions.iter_rows(named=True)}

    def arm(model: str, conditions: Sequence[str], rate: str) -> dict[str, Any]:
        """The hits of ``rate`` over ``conditions`` and their denominator, as the analysis counted them."""
        rows = [counted[(model, c)] for c in conditions if (model, c) in counted]
        base = {**ok, "f.model": [model], "f.condition": list(conditions)}
        return {"hits": sum(int(r[f"{rate}_hits"]) for r in rows), "n": sum(int(r[f"{rate}_n"]) for r in rows),
                "hits_filter": {**base, f"f.{rate}": ["true"]}, "n_filter": {**base, f"n.{rate}": ["1"]}}

    mine = (pl.col("run") == label) & (pl.col("probe") == probe)
    cells = []
    #: each (model, condition, rate)'s prompt-clustered interval, as the report prints it
    interval: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in summary.conditions.filter(mine).iter_rows(named=True):
        interval[(r["model"], r["condition"], r["rate"])] = {"lo": plain(r["cluster_lo"]), "hi": plain(r["cluster_hi"])}
        cells.append({"model": r["model"], "condition": r["condition"], "rate": r["rate"],
                      "value": plain(r["value"]), "trials": r["trials"],
                      **interval[(r["model"], r["condition"], r["rate"])],
                      **arm(r["model"], [r["condition"]], r["rate"])})
    board = []
    for r in summary.leaderboard.filter(mine).iter_rows(named=True):
        arms = {}
        for side in ("a", "b"):
            if r[f"arm_{side}"]:
                conditions, rate = list(r[f"arm_{side}"]), r["outcome"] or r["headline"]
                # an arm of one condition has that condition's interval; a pooled arm's is not computed
                one = interval.get((r["model"], conditions[0], rate), {}) if len(conditions) == 1 else {}
                arms[side] = {"rate": plain(r[f"rate_{side}"]), "lo": one.get("lo"), "hi": one.get("hi"),
                              **arm(r["model"], conditions, rate)}
        board.append({"model": r["model"], "headline": r["headline"], "trials": r["trials"],
                      "errors": r["errors"], "contrast": r["contrast"], "arms": arms,
                      "difference": plain(r["difference"]), "ci_lo": plain(r["ci_lo"]), "ci_hi": plain(r["ci_hi"]),
                      "trials_filter": {"f.probe": [probe], "f.model": [r["model"]]},
                      "errors_filter": {"f.probe": [probe], "f.model": [r["model"]], "x.status": ["ok"]}})
    contrasts = []
    for r in summary.contrasts.filter(mine).iter_rows(named=True):
        contrasts.append({"model": r["model"], "contrast": r["contrast"], "outcome": r["outcome"],
                          "difference": plain(r["difference"]), "ci_lo": plain(r["ci_lo"]),
                          "ci_hi": plain(r["ci_hi"]), "p_cell": plain(r["p_cell"]),
                          "arms": {side: {"conditions": list(r[f"arm_{side}"]), "rate": plain(r[f"rate_{side}"]),
                                          **arm(r["model"], list(r[f"arm_{side}"]), r["outcome"])}
                                   for side in ("a", "b")}})
    cards = []
    for r in scorecard.filter(mine).iter_rows(named=True):
        decoy = next((c for c in contrasts if c["model"] == r["model"] and c["contrast"] == "decoy"), None)
        grounded = next((c for c in cells if c["model"] == r["model"] and c["condition"] == "groundable_known"
                         and c["rate"] == "expected_called"), None)
        errors = next((b for b in board if b["model"] == r["model"]), None)
        cards.append({"model": r["model"], "verdict": r["verdict"], "retention": plain(r["retention"]),
                      "reason": r["reason"], "p": plain(r["p"]),
                      "decoy_a": None if decoy is None else {"rate": r["decoy_rate_a"], **decoy["arms"]["a"]},
                      "decoy_b": None if decoy is None else {"rate": r["decoy_rate_b"], **decoy["arms"]["b"]},
                      "grounded": None if grounded is None else {"rate": plain(r["grounded_correct"]),
                                                                 **{k: grounded[k] for k in
                                                                    ("hits", "n", "hits_filter", "n_filter")}},
                      "errors": None if errors is None else {"rate": plain(r["error_share"]),
                                                             "hits": errors["errors"], "n": errors["trials"],
                                                             "hits_filter": errors["errors_filter"],
                                                             "n_filter": errors["trials_filter"]}})
    return {"probe": probe, "kind": a.kind, "rates": list(a.rates), "cells": cells, "leaderboard": board,
            "contrasts": contrasts, "scorecard": cards, "stages": _stages(snap, summary, label, probe),
            "fields": _fields(summary, label, probe)}


def _stages(snap: Snapshot, summary: Summary, label: str, probe: str) -> list[dict[str, Any]]:
    """The stage-reach view (``Summary.stages``): trials reaching each stage, as ``stage_table`` counts them
    (that stage or a later one), each leading to them."""
    from runner.probes.propagation.report import stage_order

    table = summary.stages.filter((pl.col("run") == label) & (pl.col("probe") == probe))
    if table.height == 0 or snap.frame is None or "stage_reached" not in snap.schema:
        return []
    is_int = snap.schema["stage_reached"].is_integer()
    seen = (snap.frame.filter(pl.col("probe") == probe).select(pl.col("stage_reached").drop_nulls().unique())
            .collect()["stage_reached"].to_list())
    out = []
    for r in table.iter_rows(named=True):
        values = sorted(str(v) for v in seen if stage_order(v, is_int) >= r["order"])
        base = {"f.probe": [probe], "f.status": ["ok"], "f.model": [r["model"]], "f.condition": [r["condition"]]}
        out.append({"model": r["model"], "condition": r["condition"], "stage": r["stage"], "hits": r["reached"],
                    "n": r["trials"], "hits_filter": {**base, "f.stage_reached": values}, "n_filter": base})
    return out


def _fields(summary: Summary, label: str, probe: str) -> list[dict[str, Any]]:
    """The field-score view (``Summary.fields``): the trials each score is pooled over (every scorer scored),
    each leading to them."""
    table = summary.fields.filter((pl.col("run") == label) & (pl.col("probe") == probe))
    scorers = table["scorer"].unique(maintain_order=True).to_list()
    scored = {f"n.{s}_{k}": ["1"] for s in scorers for k in ("tp", "fp", "fn")}
    out = []
    for r in table.iter_rows(named=True):
        out.append({"model": r["model"], "condition": r["condition"], "scorer": r["scorer"], "n": r["trials"],
                    "tp": r["tp"], "fp": r["fp"], "fn": r["fn"], "precision": plain(r["precision"]),
                    "recall": plain(r["recall"]),
                    "n_filter": {"f.probe": [probe], "f.status": ["ok"], "f.model": [r["model"]],
                                 "f.condition": [r["condition"]], **scored}})
    return out


def compare(snap: Snapshot, probe: str, case_id: str, condition: str, per_model: int = 5) -> dict[str, Any]:
    """The same case and condition across every model: up to ``per_model`` trials of each, side by side."""
    if snap.frame is None:
        return {"models": []}
    outcomes = snap.outcomes()
    cols = list_columns(snap)
    rows = (snap.frame.filter((pl.col("probe") == probe) & (pl.col("case_id") == case_id)
                              & (pl.col("condition") == condition))
            .sort("model", "run", maintain_order=True).select(cols)
            .group_by("model", maintain_order=True).head(per_model).collect())
    models: dict[str, list[dict[str, Any]]] = {}
    for r in rows.iter_rows(named=True):
        models.setdefault(r["model"], []).append(plain(r))
    return {"outcomes": outcomes, "models": [{"model": m, "trials": t} for m, t in models.items()]}
