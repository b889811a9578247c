"""A finished output's sorted pages and text searches' counts are read a slice at a time (``Source.page``,
``Source.count``: bounded memory at 1 M trials); their rows, order and counts equal the whole output's, computed
here by plain Python over every trial.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.output import Output
from runner.viewer import data
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


def test_sorted_pages_and_text_counts_match_the_whole(quick_out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data, "_TEXT_SLICE", 17)  # many slices, the last one short
    rows = _rows(quick_out)
    source = Source(quick_out, "q", Output.open(quick_out))
    assert source.snapshot().stream_frame is None  # finished: the sliced paths

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
