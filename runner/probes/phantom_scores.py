"""Field-level scores of the phantom probe: auditor and containment baseline side by side.

Units are (trace, run, field) tuples, so the same field of two traces (or of two
audits of one trace) counts separately; precision / recall / F1 and their empty-set
conventions come from ``stats.field_scores``. Auditor errors are counted in their
own column and left out of the auditor's scores — an unparsable reply is not an
empty prediction — and the baseline is scored on the same trials, so the two
columns compare like with like. The disagreement file lists every audit where the
auditor and the baseline flagged different fields (or the auditor errored).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl
from rich.console import Console
from rich.table import Table

from stats import field_scores

_COLUMNS = ("model", "condition", "case_id", "run", "pred_fields", "baseline_fields", "gold_fields",
            "auditor_error", "auditor_error_detail")


def _tuples(rows: Iterable[dict[str, Any]], column: str) -> set[tuple]:
    return {(r["case_id"], r["run"], f) for r in rows for f in (r[column] or [])}


def score_table(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per model × condition: trials, auditor errors, auditor and baseline P / R / F1."""
    out = []
    for (model, condition), group in rows.group_by(["model", "condition"], maintain_order=True):
        records = group.to_dicts()
        valid = [r for r in records if r["auditor_error"] is None]
        gold = _tuples(valid, "gold_fields")
        auditor = field_scores(_tuples(valid, "pred_fields"), gold)
        baseline = field_scores(_tuples(valid, "baseline_fields"), gold)
        out.append({
            "model": model, "condition": condition, "trials": len(records),
            "auditor_errors": len(records) - len(valid),
            "parse_errors": sum(1 for r in records if r["auditor_error"] == "parse"),
            "transport_errors": sum(1 for r in records if r["auditor_error"] == "transport"),
            "scored": len(valid),
            "auditor_precision": auditor.precision, "auditor_recall": auditor.recall, "auditor_f1": auditor.f1,
            "baseline_precision": baseline.precision, "baseline_recall": baseline.recall, "baseline_f1": baseline.f1,
            "auditor_tp": auditor.true_positives, "auditor_fp": auditor.false_positives, "auditor_fn": auditor.false_negatives,
            "baseline_tp": baseline.true_positives, "baseline_fp": baseline.false_positives,
            "baseline_fn": baseline.false_negatives,
        })
    return pl.DataFrame(out)


def disagreements(rows: pl.DataFrame) -> list[dict[str, Any]]:
    """Every audit where auditor and baseline differ, with who flagged what against gold."""
    out = []
    for r in rows.sort("model", "condition", "case_id", "run").to_dicts():
        base, gold = set(r["baseline_fields"] or []), set(r["gold_fields"] or [])
        if r["auditor_error"] is not None:
            out.append({"model": r["model"], "trace": r["case_id"], "condition": r["condition"], "run": r["run"],
                        "auditor_error": r["auditor_error"], "detail": r["auditor_error_detail"],
                        "baseline": sorted(base), "gold": sorted(gold)})
            continue
        pred = set(r["pred_fields"] or [])
        if pred == base:
            continue
        out.append({"model": r["model"], "trace": r["case_id"], "condition": r["condition"], "run": r["run"],
                    "auditor_only": sorted(pred - base), "baseline_only": sorted(base - pred),
                    "auditor": sorted(pred), "baseline": sorted(base), "gold": sorted(gold)})
    return out


def phantom_rows(frame: pl.LazyFrame, probe_name: str) -> pl.DataFrame:
    return frame.filter((pl.col("probe") == probe_name) & (pl.col("status") == "ok")).select(_COLUMNS).collect()


def write_disagreements(out: Path, probe_name: str, rows: pl.DataFrame) -> tuple[Path, int]:
    path = out / f"{probe_name}.disagreements.jsonl"
    items = disagreements(rows)
    with path.open("w", encoding="utf-8") as fh:
        for item in items:
            fh.write(json.dumps(item, ensure_ascii=False) + "\n")
    return path, len(items)


def _f(x: float) -> str:
    return f"{x:.2f}"


def print_phantom_scores(out: Path, probe_name: str, frame: pl.LazyFrame, console: Console) -> None:
    rows = phantom_rows(frame, probe_name)
    if rows.height == 0:
        return
    table = Table(title=f"{probe_name} — field-level scores, auditor vs containment baseline (same trials)",
                  title_justify="left", header_style="bold")
    for col in ("model", "condition", "trials", "auditor errors (parse/transport)",
                "auditor P", "auditor R", "auditor F1", "baseline P", "baseline R", "baseline F1"):
        table.add_column(col, justify="left" if col in ("model", "condition") else "right")
    previous = None
    for r in score_table(rows).iter_rows(named=True):
        table.add_row(r["model"] if r["model"] != previous else "", r["condition"], f"{r['trials']:,}",
                      f"{r['auditor_errors']} ({r['parse_errors']}/{r['transport_errors']})",
                      _f(r["auditor_precision"]), _f(r["auditor_recall"]), _f(r["auditor_f1"]),
                      _f(r["baseline_precision"]), _f(r["baseline_recall"]), _f(r["baseline_f1"]))
        previous = r["model"]
    console.print(table)
    path, n = write_disagreements(out, probe_name, rows)
    console.print(f"[dim]{n} audit(s) where auditor and baseline differ (or the auditor errored): {path}[/dim]")
