"""The trials behind the numbers: a few sampled trials per case × condition, with what they asked and did.

Why: a rate says how often; only a trial says what happened — which decoy was
called with which arguments, what the reply said, why a negative case failed.
The sample is reproducible (trials ordered by a hash of their id with a fixed
seed, so the same run gives the same page) and bounded (``MAX_CELLS`` cells per
probe and run, ``PER_CELL`` trials each, long texts shortened), preferring cells
and trials where the headline event happened, since those are the ones a reader
asks about. What the model was asked comes from the row's recorded calls
(``runner.execution.exchange``): each request exactly as sent and each response,
so an example stays true when the case files have changed or are gone. An output
that records no calls (trials imported from another harness) shows the last reply only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import polars as pl

from runner.analysis.leaderboard import SUCCESS_RATES, RunAnalysis
from runner.core.calls import Blobs, RecordedCall, row_calls
from runner.probes import PROBES

MAX_CELLS = 12
PER_CELL = 2
_MAX_TEXT = 700
_SAMPLE_SEED = 2026
#: outcome columns too bulky or too internal for an example (the full row is in the trial files)
_SKIP = frozenset({"steps", "catalogue_order", "judge_verdicts"})


@dataclass(frozen=True)
class Example:
    """One sampled trial, as a reader sees it."""

    model: str
    case_id: str
    condition: str
    run: int
    event: bool                          # the headline event happened (a failure, for pass/fail probes)
    request: str | None                  # the first request's last user message (None: no call recorded)
    tool_calls: list[tuple[str, str]]    # (tool name, raw arguments)
    reply: str
    outcome: list[tuple[str, str]]       # the probe's outcome columns that hold something
    calls: tuple[RecordedCall, ...] = () # every model call, its request rebuilt exactly (empty: an import)


def shorten(text: str, limit: int = _MAX_TEXT) -> str:
    """``text`` up to ``limit`` characters, saying how much was left out."""
    return text if len(text) <= limit else f"{text[:limit]} [+{len(text) - limit:,} more characters]"


def _request(calls: list[RecordedCall] | None) -> str | None:
    """The text the trial asked first: the first request's last user message."""
    if not calls:
        return None
    users = [m.content for m in calls[0].request.messages if m.role == "user"]
    return users[-1] if users else None


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
    blobs: Blobs | None = None
    out = []
    for c in cells.iter_rows(named=True):
        rows = (frame.filter((pl.col("case_id") == c["case_id"]) & (pl.col("condition") == c["condition"]))
                .sort(["_event", "_order"], descending=[True, False]))
        picked = rows.head(1).to_dicts()
        rest = rows.filter(pl.col("_event") != picked[0]["_event"]).head(PER_CELL - 1).to_dicts()
        for r in (picked + rest)[:PER_CELL]:
            calls = [(str(t.get("name")), str(t.get("arguments") or "")) for t in (r.get("tool_calls") or [])]
            outcome = [(k, v) for k in fields if k not in _SKIP and (v := _value(r.get(k))) is not None]
            if blobs is None and r.get("calls") is not None:
                blobs = run.output.blobs()  # read once, only when a sampled row names stored content
            recorded = row_calls(r, blobs) if blobs is not None else None
            out.append(Example(r["model"], r["case_id"], r["condition"], int(r["run"]), bool(r["_event"]),
                               _request(recorded), calls, r.get("response_text") or "", outcome,
                               tuple(recorded or ())))
    return out
