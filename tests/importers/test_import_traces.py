"""``import traces``: the round trip of the bundled traces through every format, the CLI, and hostile input.

Equivalence: each bundled phantom trace, written out in each format (``tests.helpers.trace_formats``)
and imported back, gives the baseline verdicts the bundled trace gives, in both conditions.
Hostile input — truncated OTLP, wrong attribute types, a 1 GB single line (sparse, so it never
sits on the disk), nesting bombs, ids shaped like paths — is one line each, in bounded memory,
with nothing written outside ``--out``.
"""

from __future__ import annotations

import json
import resource
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.core.errors import UserError
from runner.importers.traces import detect, import_traces
from runner.probes.phantom import Trace, baseline_fields, load_traces
from tests.conftest import CONFIGS
from tests.helpers.messages import heard
from tests.helpers.trace_formats import WRITERS, genai_span, otlp

BUNDLED, _ = load_traces(CONFIGS / "phantom/traces.yaml")


def _imported(out: Path) -> list[Trace]:
    return [Trace.model_validate_json(line) for line in (out / "traces.jsonl").read_text().splitlines()]


def _write(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("name", list(WRITERS))
def test_bundled_traces_round_trip_to_the_same_baseline_verdicts(name: str, tmp_path: Path) -> None:
    fmt, write = WRITERS[name]
    path = _write(tmp_path / f"{name}.jsonl", [write(t, n) for n, t in enumerate(BUNDLED)])
    assert detect(path) == fmt
    summary = import_traces([path], tmp_path / "out", fmt="auto")
    assert summary.imported == sum(len(t.calls) for t in BUNDLED) and not summary.skipped
    back = _imported(tmp_path / "out")
    assert {t.source.format for t in back if t.source} == {name}
    by_call = {t.source.call_id: t for t in back if t.source}
    for t in BUNDLED:
        for hide in (False, True):
            got = sorted(f for i in range(len(t.calls)) for f in baseline_fields(by_call[f"{t.id}-c{i}"], hide))
            assert got == sorted(baseline_fields(t, hide)), (t.id, hide)
        one = by_call[f"{t.id}-c0"]
        assert one.context.system == t.context.system and one.context.tool_results == t.context.tool_results


def test_the_imported_file_loads_as_a_phantom_trace_file(tmp_path: Path) -> None:
    _, write = WRITERS["otel-genai"]
    path = _write(tmp_path / "t.jsonl", [write(t, n) for n, t in enumerate(BUNDLED)])
    import_traces([path], tmp_path / "out")
    traces, _ = load_traces(tmp_path / "out" / "traces.jsonl")
    assert len(traces) == len(BUNDLED) and all(t.gold_phantoms is None for t in traces)
    ids = [t.id for t in traces]
    from runner.config.sweep import load_sweep

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(json.dumps({"name": "audit", "seed": 0, "output": str(tmp_path / "run"),
                                 "models": [{"name": "auditor", "provider": "sim", "model": "auditor-balanced"}],
                                 "probes": [{"kind": "phantom", "traces": "out/traces.jsonl", "runs": 1}]}))
    load_sweep(sweep)  # the contract: a phantom sweep loads what the import wrote
    import_traces([path], tmp_path / "again")
    assert ids == [t.id for t in _imported(tmp_path / "again")]  # stable across imports


def test_cli_says_the_format_it_chose_and_refuses_to_overwrite(tmp_path: Path) -> None:
    _, write = WRITERS["anthropic"]
    path = _write(tmp_path / "a.jsonl", [write(t, n) for n, t in enumerate(BUNDLED)])
    runner = CliRunner()
    res = runner.invoke(app, ["import", "traces", str(path), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert "format anthropic (detected)" in res.output and f"{len(BUNDLED)} tool calls imported" in res.output
    res = runner.invoke(app, ["import", "traces", str(path), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2 and "--force" in res.output
    res = runner.invoke(app, ["import", "traces", str(tmp_path / "nope.json"), "--out", str(tmp_path / "o2")])
    assert res.exit_code == 2 and "no such trace file" in res.output


def _lines(res: Any, word: str) -> list[str]:
    return [ln for ln in res.output.splitlines() if ln.startswith(word)]


def test_bad_records_are_one_line_each_and_only_all_bad_is_fatal(tmp_path: Path) -> None:
    good = otlp([genai_span(BUNDLED[0], 0)])
    wrong_type = otlp([genai_span(BUNDLED[1], 1)])
    wrong_type["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"] = {"gen_ai.input.messages": 3}
    int_attr = otlp([genai_span(BUNDLED[2], 2)])
    for kv in int_attr["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]:
        if kv["key"] == "gen_ai.output.messages":
            kv["value"] = {"intValue": "not a number"}
    args_list = otlp([genai_span(BUNDLED[3], 3)])
    for kv in args_list["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]:
        if kv["key"] == "gen_ai.output.messages":
            kv["value"] = {"stringValue": json.dumps([{"role": "assistant", "parts": [
                {"type": "tool_call", "id": "x", "name": "t", "arguments": [1, 2]}]}])}
    text = json.dumps(good) + "\n" + json.dumps(good)[:-40] + "\n" + json.dumps(wrong_type) + "\n" \
        + json.dumps(int_attr) + "\n" + json.dumps(args_list) + "\n" + "[" * 100_000 + "\n"
    path = tmp_path / "mixed.otlp.jsonl"
    path.write_text(text)
    res = CliRunner().invoke(app, ["import", "traces", str(path), "--format", "otlp", "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    skipped = _lines(res, "skipped ")
    assert len(skipped) == 5, res.output
    assert all(str(path) in ln and "record " in ln for ln in skipped)
    summary = json.loads((tmp_path / "out" / "import.json").read_text())
    assert summary["imported"] == 1 and summary["bad_records"] == 5
    assert set(summary["skipped"]) == {"not JSON", "wrong type", "arguments not a JSON object"}

    cut_first = tmp_path / "cut_first.jsonl"  # JSON lines whose first record is cut short: the rest still reads
    cut_first.write_text(json.dumps(good)[:-40] + "\n" + json.dumps(good) + "\n")
    with heard() as lines:
        assert import_traces([cut_first], tmp_path / "cf", fmt="otlp").imported == 1
    assert len(lines) == 1 and "record 1: not JSON" in lines[0]

    truncated = tmp_path / "truncated.json"
    truncated.write_text(json.dumps(good, indent=2)[:-100])  # a pretty-printed export cut short
    res = CliRunner().invoke(app, ["import", "traces", str(truncated), "--format", "otlp", "--out", str(tmp_path / "t")])
    assert res.exit_code == 2 and "every record (1) is bad" in res.output
    assert not (tmp_path / "t" / "traces.jsonl").exists()


def test_nesting_bombs_are_refused_in_one_line(tmp_path: Path) -> None:
    deep: Any = "x"
    for _ in range(61):  # orjson reads it and writes it; a sweep would not load it
        deep = {"a": deep}
    span = genai_span(BUNDLED[0], 0)
    for kv in span["attributes"]:
        if kv["key"] == "gen_ai.output.messages":
            kv["value"] = {"stringValue": json.dumps([{"role": "assistant", "parts": [
                {"type": "tool_call", "id": "x", "name": "t", "arguments": {"deep": deep}}]}])}
    kv_bomb: Any = {"stringValue": "x"}
    for _ in range(100):  # 400 JSON levels: orjson reads it, the attribute reader refuses it
        kv_bomb = {"kvlistValue": {"values": [{"key": "k", "value": kv_bomb}]}}
    bomb = genai_span(BUNDLED[1], 1)
    bomb["attributes"].append({"key": "deep", "value": kv_bomb})
    deeper = genai_span(BUNDLED[3], 3)
    for kv in deeper["attributes"]:
        if kv["key"] == "gen_ai.output.messages":
            kv["value"] = {"stringValue": "[" * 3000 + "]" * 3000}
    path = _write(tmp_path / "bomb.jsonl", [otlp([span]), otlp([bomb]), otlp([deeper]), otlp([genai_span(BUNDLED[2], 2)])])
    with heard() as lines:
        summary = import_traces([path], tmp_path / "out", fmt="otlp")
    assert summary.imported == 1 and summary.skipped == {"nested too deeply": 2, "gen_ai.output.messages is not JSON": 1}
    assert len(lines) == 3 and all("nest" in ln or "depth" in ln for ln in lines), lines
    load_traces(tmp_path / "out" / "traces.jsonl")  # what was written loads


def test_the_depth_limit_is_the_sweep_loaders() -> None:
    from runner.core import sources
    from runner.importers.traces import _core

    assert _core.MAX_DEPTH == sources._MAX_DEPTH


def test_ids_that_look_like_paths_stay_data(tmp_path: Path) -> None:
    span = genai_span(BUNDLED[0], 0)
    span["traceId"], span["spanId"] = "../../etc/passwd", "/tmp/x\n"
    for kv in span["attributes"]:
        if kv["key"] == "gen_ai.output.messages":
            kv["value"] = {"stringValue": json.dumps([{"role": "assistant", "parts": [
                {"type": "tool_call", "id": "../../../../evil", "name": "../../bin/sh", "arguments": {"a": "b"}}]}])}
    out = tmp_path / "deep" / "out"
    import_traces([_write(tmp_path / "p.jsonl", [otlp([span])])], out)
    [t] = _imported(out)
    assert "/" not in t.id and "." not in t.id and t.id.startswith("bin_sh-")
    assert t.source and t.source.trace_id == "../../etc/passwd" and t.source.call_id == "../../../../evil"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["import.json", "p.jsonl", "traces.jsonl"]


def test_a_1gb_single_line_is_skipped_in_bounded_memory(tmp_path: Path) -> None:
    """A sparse 1 GiB line (no disk used) between two good records: one line, and memory stays far below it."""
    path = tmp_path / "huge.otlp.jsonl"
    good = (json.dumps(otlp([genai_span(BUNDLED[0], 0)])) + "\n").encode()
    size = 1 << 30
    with path.open("wb") as fh:
        fh.write(good + b'{"resourceSpans": "')
        fh.seek(len(good) + size)  # a hole: reads as NUL bytes, takes no blocks
        fh.write(b'"}\n' + (json.dumps(otlp([genai_span(BUNDLED[1], 1)])) + "\n").encode())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        with heard() as lines:
            summary = import_traces([path], tmp_path / "out", fmt="otlp")
    finally:
        path.unlink()
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert summary.imported == 2 and summary.skipped == {"record too large": 1}
    assert len(lines) == 1 and "record 2" in lines[0] and "1,073,741,8" in lines[0]
    assert grown_mb < 200, grown_mb  # the limit is 32 MiB; the line is never held


def test_gzip_files_are_read_through(tmp_path: Path) -> None:
    import gzip

    _, write = WRITERS["otel-genai"]
    path = tmp_path / "spans.otlp.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.writelines(json.dumps(write(t, n)) + "\n" for n, t in enumerate(BUNDLED))
    assert import_traces([path], tmp_path / "out").imported == len(BUNDLED)


def test_auto_refuses_an_unknown_format_in_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.jsonl", [{"hello": 1}])
    with pytest.raises(UserError, match="cannot tell the trace format"):
        import_traces([path], tmp_path / "out")


def _tool_span(trace: int, span: int, call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"traceId": f"{trace:032x}", "spanId": f"{span:016x}", "name": f"execute_tool {name}", "attributes": [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
        {"key": "gen_ai.tool.name", "value": {"stringValue": name}},
        {"key": "gen_ai.tool.call.id", "value": {"stringValue": call_id}},
        {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": json.dumps(args)}}]}


def test_execute_tool_spans_add_only_the_calls_no_model_span_holds(tmp_path: Path) -> None:
    t = BUNDLED[2]  # refund-from-lookup: one call, one earlier result
    chat = genai_span(t, 0)  # trace 1, call id "<id>-c0"
    spans = [chat, _tool_span(1, 90, f"{t.id}-c0", t.calls[0].tool, t.calls[0].args),  # the same call: not again
             _tool_span(1, 91, "extra", "notify", {"order_id": "ORD-7713"}),  # only here: the trace's context
             _tool_span(7, 92, "alone", "notify", {"order_id": "X"})]  # no model span in its trace: empty context
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(otlp(spans), indent=2))  # one pretty-printed document, as MessageToJson writes
    summary = import_traces([path], tmp_path / "out")
    assert summary.imported == 3
    assert summary.notes["execute_tool spans of calls read from their model span (imported once)"] == 1
    by_call = {x.source.call_id: x for x in _imported(tmp_path / "out") if x.source}
    assert by_call["extra"].context == by_call[f"{t.id}-c0"].context and by_call["extra"].source.span_id == f"{91:016x}"
    assert by_call["alone"].context.tool_results == [] and by_call["alone"].context.system == ""
    assert baseline_fields(by_call["extra"], False) == []  # ORD-7713 is in the lookup's result


def test_execute_tool_spans_written_before_their_model_span_are_imported_once(tmp_path: Path) -> None:
    """Another instrumentation's scope listed first (a framework's execute_tool spans before the client's chat
    span): the call the model span holds is imported once, from it, with its context."""
    t = BUNDLED[2]
    tools = {"scope": {"name": "agent-framework"}, "spans": [
        _tool_span(1, 90, f"{t.id}-c0", t.calls[0].tool, t.calls[0].args),
        _tool_span(1, 91, "extra", "notify", {"order_id": "ORD-7713"})]}
    chat = {"scope": {"name": "openai-client"}, "spans": [genai_span(t, 0)]}
    doc = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [tools, chat]}]}
    summary = import_traces([_write(tmp_path / "doc.jsonl", [doc])], tmp_path / "out")
    assert summary.imported == 2
    assert summary.notes["execute_tool spans of calls read from their model span (imported once)"] == 1
    by_call = {x.source.call_id: x for x in _imported(tmp_path / "out") if x.source}
    assert by_call[f"{t.id}-c0"].context.system and by_call["extra"].context == by_call[f"{t.id}-c0"].context


def test_langfuse_api_pages_and_base64_ids(tmp_path: Path) -> None:
    import base64

    from tests.helpers.trace_formats import langfuse

    page = {"data": [langfuse(t) for t in BUNDLED[:3]] + [{"id": "s", "traceId": "x", "type": "SPAN"}], "meta": {}}
    path = _write(tmp_path / "page.json", [page])
    summary = import_traces([path], tmp_path / "out")
    assert summary.files[str(path)] == "langfuse" and summary.imported == 3
    assert summary.notes == {"observations of type SPAN": 1}
    span = genai_span(BUNDLED[0], 0)
    span["traceId"] = base64.b64encode(bytes.fromhex("ab" * 16)).decode()  # protobuf's JSON mapping writes bytes so
    span["spanId"] = base64.b64encode(bytes.fromhex("cd" * 8)).decode()
    import_traces([_write(tmp_path / "b64.jsonl", [otlp([span])])], tmp_path / "o2")
    [x] = _imported(tmp_path / "o2")
    assert x.source and (x.source.trace_id, x.source.span_id) == ("ab" * 16, "cd" * 8)


def test_flattened_attributes_read_the_same_whatever_keys_were_met_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """Flattened keys (``llm.input_messages.0.message.role``) are parsed once per prefix and remembered: the tree
    is the same on first sight, on the next span, and after the memory starts over; a value met where a deeper
    key follows becomes a node, as it always did."""
    from runner.importers.traces import otlp as O

    attrs = {"llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "hi",
             "llm.input_messages.1.message.tool_calls.0.tool_call.id": "c1", "llm.input_messages.x": 3,
             "llm.input_messages.2": "flat", "llm.input_messages.2.message.role": "tool", "other.0.role": "no",
             "llm.input_messages.٣.message.role": "not an int step"}
    want = {0: {"message": {"role": "user", "content": "hi"}}, 1: {"message": {"tool_calls": {0: {"tool_call": {
        "id": "c1"}}}}}, "x": 3, 2: {"message": {"role": "tool"}}, "٣": {"message": {"role": "not an int step"}}}
    monkeypatch.setattr(O, "_PATHS", {})
    assert O._unflatten(attrs, "llm.input_messages.") == want
    assert O._unflatten(attrs, "llm.input_messages.") == want  # every key remembered now
    monkeypatch.setattr(O, "_PATHS_LIMIT", 3)
    assert O._unflatten(attrs, "llm.input_messages.") == want  # past the limit the memory starts over
    assert len(O._PATHS["llm.input_messages."]) <= len(attrs)
    assert O._unflatten(attrs, "other.") == {0: {"role": "no"}}


@pytest.mark.parametrize("gz", [False, True])
def test_a_long_import_says_how_far_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool) -> None:
    """A progress line after each record when one is due (every record here): the calls imported so far and the
    share of the file read (of a ``.gz`` file, its compressed bytes)."""
    import gzip

    from runner.core import readprogress

    monkeypatch.setattr(readprogress, "EVERY_S", 0.0)
    path = _write(tmp_path / "spans.jsonl", [otlp([genai_span(t, n)]) for n, t in enumerate(BUNDLED)])
    if gz:
        gz_path = tmp_path / "spans.jsonl.gz"
        gz_path.write_bytes(gzip.compress(path.read_bytes()))
        path = gz_path
    with heard() as lines:
        summary = import_traces([path], tmp_path / "out", fmt="otlp")
    progress = [line for line in lines if " so far" in line]
    assert len(progress) == len(BUNDLED)
    counts = [int(line.split(": ", 1)[1].split(" calls imported")[0].replace(",", "")) for line in progress]
    assert counts == sorted(counts) and counts[-1] == summary.imported
    assert progress[-1].startswith(f"{path}: {summary.imported} calls imported so far (100% of the file)")
