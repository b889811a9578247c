"""What the model actually sent, per model and condition: a view every probe's report carries.

A rate says how often an outcome fired; it cannot say that a third of the replies
were empty, that calls arrived with arguments that do not parse, that calls were
read from text, or that a model's trials timed out while its server was still
busy (issue 19). This view counts those from the common columns (``tool_calls``,
``response_text``, ``status``, ``error_kind``, ``attempts``) and from the probe's
``calls_from_text`` column where it has one, so it exists for every probe kind and
reaches every renderer — terminal, JSON, CSV, HTML — like any other probe view.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from runner.core.views import Format, ProbeView, ViewColumn
from runner.probes.replies import is_empty

KEY = "replies"

COLUMNS = (
    ViewColumn("model", "model"), ViewColumn("condition", "condition"),
    ViewColumn("trials", "trials", Format.COUNT),
    ViewColumn("empty_reply", "empty replies", Format.COUNT),
    ViewColumn("empty_rate", "empty", Format.RATE),
    ViewColumn("unparsable_calls", "unparsable calls", Format.COUNT),
    ViewColumn("calls_from_text", "calls from text", Format.COUNT),
    ViewColumn("errors", "errors", Format.COUNT),
    ViewColumn("error_kinds", "error kinds"),
)

#: trials per model that time out with a request out before a note says the server queues them
_QUEUE_NOTE_MIN = 1


def _row_flags(status: str, calls: list[dict[str, Any]] | None, text: str | None) -> tuple[bool, int]:
    calls = calls or []
    empty = status == "ok" and is_empty(text or "", len(calls))
    return empty, sum(1 for c in calls if c.get("parse_error") is not None)


def _reply_table(frame: pl.LazyFrame, probe: str) -> pl.DataFrame:
    """Per (model, condition): trials, empty replies, unparsable calls, calls read from text, errors by kind."""
    names = frame.collect_schema().names()
    cols = ["model", "condition", "status", "error_kind", "tool_calls", "response_text", "attempts"]
    if any(c not in names for c in cols):
        return pl.DataFrame()
    text_col = "calls_from_text" in names
    rows = frame.filter(pl.col("probe") == probe).select(
        [*cols, *(["calls_from_text"] if text_col else [])]).collect()
    acc: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows.iter_rows(named=True):
        a = acc.setdefault((r["model"], r["condition"]), {
            "trials": 0, "empty_reply": 0, "unparsable_calls": 0, "calls_from_text": 0, "errors": 0,
            "kinds": {}, "timeouts_sent": 0})
        a["trials"] += 1
        if r["status"] != "ok":
            a["errors"] += 1
            kind = r["error_kind"] or "unknown"
            a["kinds"][kind] = a["kinds"].get(kind, 0) + 1
            if kind == "timeout" and (r["attempts"] or 0) > 0:
                a["timeouts_sent"] += 1
            continue
        empty, broken = _row_flags(r["status"], r["tool_calls"], r["response_text"])
        a["empty_reply"] += empty
        a["unparsable_calls"] += broken
        if text_col and r["calls_from_text"]:
            a["calls_from_text"] += 1
    out = [{"model": m, "condition": c, "trials": a["trials"], "empty_reply": a["empty_reply"],
            "empty_rate": a["empty_reply"] / ok if (ok := a["trials"] - a["errors"]) else None,
            "unparsable_calls": a["unparsable_calls"], "calls_from_text": a["calls_from_text"],
            "errors": a["errors"], "error_kinds": ", ".join(f"{k} {n}" for k, n in sorted(a["kinds"].items())),
            "timeouts_sent": a["timeouts_sent"]}
           for (m, c), a in sorted(acc.items())]
    schema = {"model": pl.String, "condition": pl.String, "trials": pl.Int64, "empty_reply": pl.Int64,
              "empty_rate": pl.Float64, "unparsable_calls": pl.Int64, "calls_from_text": pl.Int64,
              "errors": pl.Int64, "error_kinds": pl.String, "timeouts_sent": pl.Int64}
    return pl.DataFrame(out, schema=schema)


def _queue_notes(table: pl.DataFrame) -> list[str]:
    """A warning per model whose trials timed out with requests out: the server is likely queueing them."""
    if table.is_empty():
        return []
    notes = []
    per_model = table.group_by("model").agg(pl.col("timeouts_sent").sum()).sort("model")
    for model, n in per_model.iter_rows():
        if n >= _QUEUE_NOTE_MIN:
            notes.append(f"{model}: {n} trial(s) timed out with requests sent. A server that runs one request at a "
                         "time (llama.cpp, a small vLLM or Ollama) queues the rest, and a retry re-sends to a busy "
                         "server: set concurrency: 1, retry: {max_attempts: 1} and a longer timeout_s "
                         "(see docs/local-models.md).")
    return notes


def replies_view(frame: pl.LazyFrame, probe: str) -> list[ProbeView]:
    table = _reply_table(frame, probe)
    if table.is_empty():
        return []
    return [ProbeView(
        KEY, f"{probe} · replies: what the model sent",
        "Per model and condition: empty replies (no tool call, no text once template tokens are removed: never a "
        "pass, an abstention or a question), calls whose arguments do not parse, trials whose calls were read "
        "from the reply's text (tool_call_parser), and error rows by kind.",
        table, COLUMNS, tuple(_queue_notes(table)))]
