"""Captions name the interval each table holds, and quote a resample count only where resamples were drawn.

The rate intervals are tilted Korn–Graubard (analytic); only the propagation probe's paired
difference (and the judge's kappas) are percentile bootstraps. Built on small in-memory trial
frames, so no sweep is run.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

import runner.reporting.summary_json as summary_json
from runner.core.constants import INTERVAL_METHOD, N_RESAMPLES
from runner.probes.phantom.scores import phantom_views
from runner.probes.propagation.report import propagation_views


def _propagation_frame() -> pl.DataFrame:
    rows = []
    for case in range(6):
        for condition in ("injected", "injected+interceptor"):
            for run in range(2):
                hit = (case + run) % 3 == 0
                rows.append({"probe": "prop", "status": "ok", "model": "m", "case_id": f"c{case}",
                             "condition": condition, "run": run, "reached_s1": True, "reached_s2": hit or case % 2 == 0,
                             "wrong_answer": hit, "correct": not hit, "hallucinated": hit and condition == "injected",
                             "abstained": condition != "injected" and case == 1, "fabricated": False,
                             "tool_called": True, "fabrication_rules": []})
    return pl.DataFrame(rows)


def _phantom_frame() -> pl.DataFrame:
    rows = []
    for case in range(5):
        for run in range(2):
            rows.append({"probe": "ph", "status": "ok", "model": "m", "condition": "audit", "case_id": f"t{case}",
                         "run": run, "pred_fields": ["a"], "baseline_fields": ["a", "b"] if case % 2 else ["a"],
                         "gold_fields": ["a"], "auditor_error": None, "auditor_error_detail": None,
                         "auditor_tp": 1, "auditor_fp": case % 2, "auditor_fn": 0,
                         "baseline_tp": 1, "baseline_fp": 1, "baseline_fn": run})
    return pl.DataFrame(rows, schema_overrides={"auditor_error": pl.String, "auditor_error_detail": pl.String})


def test_propagation_captions_name_the_interval_and_count_only_real_resamples(tmp_path: Path) -> None:
    views = {v.key: v for v in propagation_views("prop", _propagation_frame())}
    assert {"hop_rates", "fabrication", "interceptor"} <= set(views)
    for key in ("hop_rates", "fabrication"):
        caption = views[key].caption
        assert "tilted Korn–Graubard cluster interval" in caption, caption
        assert "resamples]" not in caption and f"{N_RESAMPLES:,} resamples" not in caption, caption
        assert "cluster bootstrap" not in caption, caption
    interceptor = views["interceptor"].caption
    # the paired difference really is a bootstrap: it says so, with its resamples; the unpaired one is MOVER
    assert f"cluster bootstrap percentile interval over tasks with both arms kept together ({N_RESAMPLES:,} " \
           "resamples)" in interceptor, interceptor
    assert "Unpaired CI: MOVER interval from the arms' tilted Korn–Graubard intervals" in interceptor, interceptor


def test_phantom_field_caption_names_the_interval(tmp_path: Path) -> None:
    views = {v.key: v for v in phantom_views("ph", _phantom_frame(), seed=1)}
    caption = views["fields"].caption
    assert "tilted Korn–Graubard cluster interval over traces" in caption and "bootstrap" not in caption, caption
    assert views["fields"].table.height == 2  # auditor and baseline were scored


def test_the_json_summary_publishes_the_interval_method_not_a_resample_count() -> None:
    import json

    schema = json.loads(summary_json.schema_path().read_text())
    settings = schema["properties"]["settings"]
    assert "interval_method" in settings["required"] and "bootstrap_resamples" not in settings["properties"]
    assert INTERVAL_METHOD in settings["properties"]["interval_method"]["enum"]
    assert schema["properties"]["format_version"]["const"] == summary_json.FORMAT_VERSION == 3
