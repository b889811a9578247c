"""The trials behind the numbers: a few sampled trials per case × condition, with what they asked and did.

Why: a rate says how often; only a trial says what happened — which decoy was
called with which arguments, what the reply said, why a negative case failed.
The sample is reproducible (trials ordered by a hash of their id with a fixed
seed, so the same run gives the same page) and bounded (``MAX_CELLS`` cells per
probe and run, ``PER_CELL`` trials each, long texts shortened), preferring cells
and trials where the headline event happened, since those are the ones a reader
asks about. The request is not stored in a trial row; it is looked up, best
effort, in the probe's case files named by the run's manifest (the field named
after the condition, else ``user`` / ``query`` / ``request`` / ``prompt``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from runner.analysis.leaderboard import SUCCESS_RATES, RunAnalysis
from runner.probes import PROBES

MAX_CELLS = 12
PER_CELL = 2
_MAX_TEXT = 700
_SAMPLE_SEED = 2026
#: outcome columns too bulky or too internal for an example (the full row is in the trial files)
_SKIP = frozenset({"steps", "catalogue_order", "judge_verdicts"})
_REQUEST_KEYS = ("user", "query", "request", "prompt", "question", "task")


@dataclass(frozen=True)
class Example:
    """One sampled trial, as a reader sees it."""

    model: str
    case_id: str
    condition: str
    run: int
    event: bool                          # the headline event happened (a failure, for pass/fail probes)
    request: str | None
    tool_calls: list[tuple[str, str]]    # (tool name, raw arguments)
    reply: str
    outcome: list[tuple[str, str]]       # the probe's outcome columns that hold something


def shorten(text: str, limit: int = _MAX_TEXT) -> str:
    """``text`` up to ``limit`` characters, saying how much was left out."""
    return text if len(text) <= limit else f"{text[:limit]} [+{len(text) - limit:,} more characters]"


def _case_entries(run: RunAnalysis, probe: str) -> dict[str, dict[str, Any]]:
    """case id → its entry in the probe's case files (best effort: {} when none can be read)."""
    config = next((p for p in run.manifest.sweep.probes or [] if (p.get("name") or p.get("kind")) == probe), None)
    if config is None:
        return {}
    base = Path(run.manifest.sweep_file or ".").parent
    named = [v for v in config.values() if isinstance(v, str)] + [x for v in config.values() if isinstance(v, list)
                                                                 for x in v if isinstance(x, str)]
    candidates = [base / v for v in named if v.endswith((".yaml", ".yml"))]
    if not candidates and (base / config.get("kind", "")).is_dir():
        candidates = sorted((base / config["kind"]).glob("*.yaml"))
    entries: dict[str, dict[str, Any]] = {}
    for path in candidates:
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            continue
        items = data if isinstance(data, list) else next((v for v in (data or {}).values() if isinstance(v, list)), [])
        entries.update({str(e["id"]): e for e in items if isinstance(e, dict) and "id" in e})
    return entries


def _request(entry: dict[str, Any] | None, condition: str) -> str | None:
    if not entry:
        return None
    base = condition.split("+")[0]
    for key in (condition, base, *_REQUEST_KEYS):
        if isinstance(entry.get(key), str):
            return str(entry[key])
    return None


def _value(x: Any) -> str | None:
    if x is None or x == [] or x == "":
        return None
    if isinstance(x, list):
        return ", ".join(json.dumps(v, ensure_ascii=False) if isinstance(v, dict) else str(v) for v in x)
    return str(x)


def sample_examples(run: RunAnalysis, probe: str, kind: str, head: str) -> list[Example]:
    """Up to ``MAX_CELLS`` × ``PER_CELL`` trials of one probe in one run (see the module docstring)."""
    fields = [f.name for f in PROBES[kind].outcome_fields] if kind in PROBES else []
    frame = run.trials.filter((pl.col("probe") == probe) & (pl.col("status") == "ok")).collect()
    if frame.height == 0 or head not in frame.columns:
        return []
    success = head in SUCCESS_RATES
    event = (~pl.col(head).fill_null(True)) if success else pl.col(head).fill_null(False)
    frame = frame.with_columns(event.alias("_event"), pl.col("trial_id").hash(_SAMPLE_SEED).alias("_order"))
    cells = (frame.group_by("case_id", "condition").agg(pl.col("_event").any().alias("_any"),
                                                        pl.col("_order").min().alias("_first"))
             .sort(["_any", "_first"], descending=[True, False]).head(MAX_CELLS))
    entries = _case_entries(run, probe)
    out = []
    for c in cells.iter_rows(named=True):
        rows = (frame.filter((pl.col("case_id") == c["case_id"]) & (pl.col("condition") == c["condition"]))
                .sort(["_event", "_order"], descending=[True, False]))
        picked = rows.head(1).to_dicts()
        rest = rows.filter(pl.col("_event") != picked[0]["_event"]).head(PER_CELL - 1).to_dicts()
        for r in (picked + rest)[:PER_CELL]:
            calls = [(str(t.get("name")), str(t.get("arguments") or "")) for t in (r.get("tool_calls") or [])]
            outcome = [(k, v) for k in fields if k not in _SKIP and (v := _value(r.get(k))) is not None]
            out.append(Example(r["model"], r["case_id"], r["condition"], int(r["run"]), bool(r["_event"]),
                               _request(entries.get(r["case_id"]), r["condition"]), calls,
                               r.get("response_text") or "", outcome))
    return out
