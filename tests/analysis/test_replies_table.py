"""The replies view is per-cell aggregates of polars expressions, with the numbers of the row loop.

The oracle below is the loop the view used to run over every trial in Python (7.4 of ≈ 10 CPU s of a
1M-trial report). The expressions must give the same table on real outputs of the bundled sweeps and on
replies chosen to split the two regex engines (Python's ``re`` and polars' Rust regex disagree on U+001C–U+001F
as whitespace and on ``\\w`` outside ASCII).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import runner
from runner.analysis.replies import _reply_table
from runner.config.sweep import load_sweep
from runner.probes.replies import is_empty
from tests.helpers import bundled_sweep


def oracle(frame: pl.LazyFrame, probe: str) -> pl.DataFrame:
    """The row loop the view ran before (runner/analysis/replies.py, before polars expressions)."""
    names = frame.collect_schema().names()
    cols = ["model", "condition", "status", "error_kind", "tool_calls", "response_text", "attempts"]
    text_col = "calls_from_text" in names
    extra = [c for c in ("calls_from_text", "calls", "output_tokens") if c in names]
    rows = frame.filter(pl.col("probe") == probe).select([*cols, *extra]).collect()
    acc: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows.iter_rows(named=True):
        a = acc.setdefault((r["model"], r["condition"]), {
            "trials": 0, "empty_reply": 0, "empty_with_tokens": 0, "unparsable_calls": 0, "calls_from_text": 0,
            "errors": 0, "kinds": {}, "timeouts_sent": 0})
        a["trials"] += 1
        if r["status"] != "ok":
            a["errors"] += 1
            kind = r["error_kind"] or "unknown"
            a["kinds"][kind] = a["kinds"].get(kind, 0) + 1
            if kind == "timeout" and (r["attempts"] or 0) > 0:
                a["timeouts_sent"] += 1
            continue
        calls = r["tool_calls"] or []
        empty = is_empty(r["response_text"] or "", len(calls))
        a["empty_reply"] += empty
        recorded = r.get("calls") or []  # the last model call's output tokens: the reply the verdict read
        last = (recorded[-1]["response"] or {}).get("output_tokens") if recorded else None
        a["empty_with_tokens"] += empty and ((r.get("output_tokens") if last is None else last) or 0) > 0
        a["unparsable_calls"] += sum(1 for c in calls if c.get("parse_error") is not None)
        if text_col and r["calls_from_text"]:
            a["calls_from_text"] += 1
    out = [{"model": m, "condition": c, "trials": a["trials"], "empty_reply": a["empty_reply"],
            "empty_rate": a["empty_reply"] / ok if (ok := a["trials"] - a["errors"]) else None,
            "empty_with_tokens": a["empty_with_tokens"], "unparsable_calls": a["unparsable_calls"], "calls_from_text": a["calls_from_text"],
            "errors": a["errors"], "error_kinds": ", ".join(f"{k} {n}" for k, n in sorted(a["kinds"].items())),
            "timeouts_sent": a["timeouts_sent"]}
           for (m, c), a in sorted(acc.items())]
    schema = {"model": pl.String, "condition": pl.String, "trials": pl.Int64, "empty_reply": pl.Int64,
              "empty_rate": pl.Float64, "empty_with_tokens": pl.Int64, "unparsable_calls": pl.Int64, "calls_from_text": pl.Int64,
              "errors": pl.Int64, "error_kinds": pl.String, "timeouts_sent": pl.Int64}
    return pl.DataFrame(out, schema=schema)


@pytest.mark.parametrize(("name", "runs"), [("quickstart.yaml", 2), ("negatives.yaml", 1), ("phantom.yaml", 1)])
def test_the_view_equals_the_row_loop_on_bundled_outputs(tmp_path: Path, name: str, runs: int) -> None:
    out = tmp_path / "out"
    runner.run(load_sweep(bundled_sweep(tmp_path, name, runs)), out, quiet=True)
    frame = runner.load(out)
    for probe in frame.select("probe").unique().collect()["probe"].to_list():
        expected = oracle(frame, probe)
        assert expected.height > 0
        assert _reply_table(frame, probe).equals(expected), (name, probe)


CALL = pl.Struct({"id": pl.String, "name": pl.String, "arguments": pl.String, "parse_error": pl.String})


def test_the_view_equals_the_row_loop_on_replies_that_split_the_regex_engines() -> None:
    texts = [None, "", "   ", "<|im_end|>", "<start_of_turn>model\n", " \x1c ", "\x1f<|eot_id|>", "\u00a0\u3000",
             "<|start_header_id|>½<|end_header_id|>", "<|start_header_id|>abc<|end_header_id|>", "[INST] [/INST]",
             "hello", "ok <s>", "<|im_start|>assistant", "\u200b", "é", "<</SYS>>\t\n", "<bos>½"]
    rows: list[dict[str, Any]] = []
    for i, text in enumerate(texts * 3):
        calls = [] if i % 4 else [{"id": "c", "name": "t", "arguments": "{", "parse_error": "bad" if i % 8 else None}]
        status = "ok" if i % 7 else "error"
        rows.append({"probe": "p", "model": f"m{i % 2}", "condition": f"c{i % 3}", "status": status,
                     "error_kind": None if status == "ok" else ["timeout", "transient", None, ""][i % 4],
                     "tool_calls": calls if i % 5 else None, "response_text": text, "attempts": i % 3,
                     "calls_from_text": [True, False, None][i % 3]})
    rows.append({**rows[0], "probe": "other"})
    frame = pl.DataFrame(rows, schema_overrides={"tool_calls": pl.List(CALL), "attempts": pl.Int32}).lazy()
    expected = oracle(frame, "p")
    assert expected["empty_reply"].sum() > 0 and expected["errors"].sum() > 0
    assert _reply_table(frame, "p").equals(expected)
    # summed window by window (runner.analysis.windows), every count the same: windows of 5 rows split every cell
    windows = [frame.slice(start, 5) for start in range(0, len(rows), 5)]
    assert _reply_table(frame, "p", windows=windows).equals(expected)
