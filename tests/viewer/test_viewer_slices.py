"""A finished output is read a window of rows at a time (``runner.analysis.windows``: bounded memory at 1 M
trials) by the counts, the filter columns' values, the usage and the trial index, and a sorted page finds its rows
from the sort column alone; their rows, order, counts and values equal the whole output's, computed here by plain
Python over every trial.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.analysis import windows
from runner.output import Output
from runner.viewer.data import Query, Source


def _rows(out: Path) -> list[dict[str, Any]]:
    frame = Output.open(out).scan().collect()
    return list(frame.iter_rows(named=True))


def _text(row: dict[str, Any]) -> str:
    """What the text search reads: the reply and the arguments of every tool call (the last response's, every
    recorded call's)."""
    parts = [row.get("response_text") or ""]
    parts += [c["arguments"] or "" for c in row.get("tool_calls") or []]
    for call in row.get("calls") or []:
        parts += [c["arguments"] or "" for c in ((call.get("response") or {}).get("tool_calls") or [])]
    return "\n".join(parts).lower()


def test_sorted_pages_and_windowed_counts_match_the_whole(quick_out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(windows, "VIEWER_WINDOW_ROWS", 17)  # many windows, the last one short
    rows = _rows(quick_out)
    source = Source(quick_out, "q", Output.open(quick_out))
    snap = source.snapshot()
    assert snap.stream_frame is None and len(snap.windows()) == -(-len(rows) // 17)  # finished: windowed

    # the filter columns' values, the usage and every trial found by the index: as the whole output has them
    columns = source.columns()
    for entry in columns["common"] + columns["outcomes"]:
        if "values" in entry:
            name = entry["name"]
            seen = {v for r in rows for v in (r[name] if isinstance(r[name], list) else [r[name]]) if v is not None}
            assert entry["values"] == [str(v) for v in sorted(seen)], name
    assert {c["name"] for c in columns["outcomes"] if "values" in c} >= {"catalogue_order", "tools_called"}
    info = source.run_info()
    assert (info["trials"], info["errors"]) == (len(rows), sum(r["status"] != "ok" for r in rows))
    assert info["input_tokens"] == sum(r["input_tokens"] or 0 for r in rows)
    for r in rows[::7]:
        found = source.trial(r["trial_id"])
        assert found is not None and found["row"]["trial_id"] == r["trial_id"]
    for model in ("sim-careful", "sim-reckless"):
        assert source.count(Query.parse({"f.model": model, "f.decoy_called": "true"})) == sum(
            r["model"] == model and r["decoy_called"] is True for r in rows)

    for column, desc, model in (("latency_ms", True, None), ("error_kind", False, None),
                                ("input_tokens", False, "sim-reckless"), ("case_id", True, "sim-careful")):
        chosen = [(i, r) for i, r in enumerate(rows) if model is None or r["model"] == model]
        present = [x for x in chosen if x[1][column] is not None]
        present.sort(key=lambda x: x[1][column], reverse=desc)  # stable either way: ties keep the output's order
        want = [r["trial_id"] for _, r in present] + [r["trial_id"] for _, r in chosen if r[column] is None]
        for offset in (0, 5, len(want) - 3, len(want) + 10):
            params = {"sort": column, "offset": str(max(offset, 0)), "limit": "7"}
            if desc:
                params["desc"] = "1"
            if model is not None:
                params["f.model"] = model
            page = source.page(Query.parse(params), count=False)
            assert [r["trial_id"] for r in page["rows"]] == want[max(offset, 0):max(offset, 0) + 7], (column, offset)

    words = {w for r in rows for w in _text(r).replace('"', " ").split() if len(w) > 4}
    for word in sorted(words)[:: max(1, len(words) // 6)] + ["no-such-text-anywhere"]:
        want_n = sum(word in _text(r) for r in rows)
        assert source.count(Query.parse({"q": word})) == want_n, word
        want_m = sum(word in _text(r) for r in rows if r["model"] == "sim-typical")
        assert source.count(Query.parse({"q": word, "f.model": "sim-typical"})) == want_m, word
