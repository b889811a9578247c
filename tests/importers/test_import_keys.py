"""No call lost, none invented: a call is keyed by where it sits (trace, span, position), never by a provider's
call id alone, its context cut short is kept apart, and every record read is imported or counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.core.errors import UserError
from runner.importers.traces import INCOMPLETE_FILE, import_traces
from runner.probes.phantom import Trace
from tests.helpers.messages import heard
from tests.helpers.trace_formats import otlp

SYSTEM = "You are the shop's support agent."


def _attr(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value if isinstance(value, str) else json.dumps(value)}}


def _chat(trace: int, span: int, user: str, history: list[tuple[str, str, Any]], calls: list[tuple[str, str, dict]],
          *, conversation: str | None = None, dropped: int = 0, inputs: Any = ...) -> dict[str, Any]:
    """A GenAI chat span: the user turn, the earlier calls and results, and the calls this response made."""
    inp: list[dict[str, Any]] = [{"role": "user", "parts": [{"type": "text", "content": user}]}]
    for cid, tool, result in history:
        inp.append({"role": "assistant", "parts": [{"type": "tool_call", "id": cid, "name": tool, "arguments": {}}]})
        inp.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": cid, "response": result}]})
    out = [{"role": "assistant", "parts": [{"type": "tool_call", "id": cid, "name": tool, "arguments": args}
                                           for cid, tool, args in calls]}]
    attrs = [_attr("gen_ai.operation.name", "chat"),
             _attr("gen_ai.system_instructions", [{"type": "text", "content": SYSTEM}]),
             _attr("gen_ai.output.messages", out)]
    if inputs is not None:
        attrs.append(_attr("gen_ai.input.messages", inp if inputs is ... else inputs))
    if conversation:
        attrs.append(_attr("gen_ai.conversation.id", conversation))
    span_ = {"traceId": f"{trace:032x}", "spanId": f"{span:016x}", "name": "chat m", "attributes": attrs}
    if dropped:
        span_["droppedAttributesCount"] = dropped
    return span_


def _tool(trace: int, span: int, call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"traceId": f"{trace:032x}", "spanId": f"{span:016x}", "name": f"execute_tool {name}", "attributes": [
        _attr("gen_ai.operation.name", "execute_tool"), _attr("gen_ai.tool.name", name),
        _attr("gen_ai.tool.call.id", call_id), _attr("gen_ai.tool.call.arguments", args)]}


def _refund_conversation(trace: int, first_span: int, user: str, order: str) -> list[dict[str, Any]]:
    """Three responses, each numbering its calls from call_0 (as many servers do), each call executed."""
    lookup = {"order_id": order}
    found = {"order_id": order, "total": 42.5}
    return [
        _chat(trace, first_span, user, [], [("call_0", "lookup_order", lookup)]),
        _tool(trace, first_span + 1, "call_0", "lookup_order", lookup),
        _chat(trace, first_span + 2, user, [("call_0", "lookup_order", found)],
              [("call_0", "refund", {"order_id": order, "amount": 42.5}), ("call_1", "notify", {"order_id": order})]),
        _tool(trace, first_span + 3, "call_0", "refund", {"order_id": order, "amount": 42.5}),
        _tool(trace, first_span + 4, "call_1", "notify", {"order_id": order}),
    ]


def _traces(out: Path, name: str = "traces.jsonl") -> list[Trace]:
    return [Trace.model_validate_json(line) for line in (out / name).read_text().splitlines()]


def test_repeated_call_ids_lose_no_call_and_tool_spans_add_none(tmp_path: Path) -> None:
    spans = _refund_conversation(1, 10, "Refund order ORD-1", "ORD-1") + _refund_conversation(2, 20, "Refund ORD-2",
                                                                                               "ORD-2")
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(otlp(spans)) + "\n")
    summary = import_traces([path], tmp_path / "out")
    traces = _traces(tmp_path / "out")
    assert sorted(t.calls[0].tool for t in traces) == ["lookup_order", "lookup_order", "notify", "notify", "refund",
                                                       "refund"]
    assert len({t.id for t in traces}) == 6 == summary.imported
    # every span read is a call imported, or counted under its reason: the counts add up to the input
    assert summary.notes == {"execute_tool spans of calls read from their model span (imported once)": 6}
    assert summary.imported + sum(summary.notes.values()) == len(spans) + 2  # two chat spans hold two calls
    refund = next(t for t in traces if t.calls[0].tool == "refund" and t.calls[0].args["order_id"] == "ORD-1")
    assert [r["result"] for r in refund.context.tool_results] == [{"order_id": "ORD-1", "total": 42.5}]


def test_a_span_exported_twice_is_imported_once(tmp_path: Path) -> None:
    spans = _refund_conversation(1, 10, "Refund order ORD-1", "ORD-1")
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(otlp(spans)) + "\n" + json.dumps(otlp(spans[:1])) + "\n")
    summary = import_traces([path], tmp_path / "out")
    assert summary.imported == 3 and summary.notes["calls seen again (imported once)"] == 1


def test_pairs_whose_response_and_call_ids_repeat_lose_no_call(tmp_path: Path) -> None:
    """A local server answering every request with the same response id and call ids: each turn is its own call;
    the same pair logged twice is one."""
    def pair(turn: int, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Refund order ORD-9"}]
        for t in range(turn):
            messages += [{"role": "assistant", "tool_calls": [{"id": "call_0", "type": "function", "function": {
                "name": "lookup_order", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "call_0", "content": json.dumps({"turn": t})}]
        return {"request": {"model": "m", "messages": messages},
                "response": {"id": "chatcmpl-local", "choices": [{"message": {"role": "assistant", "tool_calls": [
                    {"id": "call_0", "type": "function",
                     "function": {"name": tool, "arguments": json.dumps(args)}}]}}]}}

    records = [pair(0, "lookup_order", {"order_id": "ORD-9"}), pair(1, "refund", {"order_id": "ORD-9"}),
               pair(2, "notify", {"order_id": "ORD-9"})]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [*records, records[1]]))
    summary = import_traces([path], tmp_path / "out")
    traces = _traces(tmp_path / "out")
    assert [t.calls[0].tool for t in traces] == ["lookup_order", "refund", "notify"] and summary.imported == 3
    assert summary.notes == {"calls seen again (imported once)": 1}
    assert len({t.source.conversation_id for t in traces if t.source}) == 1


@pytest.mark.parametrize("case, reason", [
    ("dropped", "the SDK's attribute limit dropped 3 attributes"),
    ("null", "no input messages recorded"),
    ("absent", "no input messages recorded"),
])
def test_a_call_whose_context_was_cut_short_is_kept_apart_not_audited(tmp_path: Path, case: str,
                                                                      reason: str) -> None:
    good = _chat(1, 1, "Refund order ORD-1", [], [("call_0", "lookup_order", {"order_id": "ORD-1"})])
    cut = {"dropped": dict(dropped=3), "null": dict(inputs="null"), "absent": dict(inputs=None)}[case]
    bad = _chat(2, 2, "Refund order ORD-2", [], [("call_0", "lookup_order", {"order_id": "ORD-2"})],
                **cut)  # type: ignore[arg-type]
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(otlp([good, bad])) + "\n")
    summary = import_traces([path], tmp_path / "out")
    assert summary.imported == 1 and summary.incomplete == {reason: 1}
    [kept] = [json.loads(line) for line in (tmp_path / "out" / INCOMPLETE_FILE).read_text().splitlines()]
    assert kept["context_incomplete"] == reason and kept["calls"][0]["args"] == {"order_id": "ORD-2"}
    written = json.loads((tmp_path / "out" / "import.json").read_text())
    assert written["context_incomplete"] == {reason: 1} and written["context_incomplete_traces"] == INCOMPLETE_FILE
    assert [t.calls[0].args["order_id"] for t in _traces(tmp_path / "out")] == ["ORD-1"]


def test_one_model_call_per_trace_keeps_its_conversation(tmp_path: Path) -> None:
    """No parent span: each model call its own trace. The conversation is derived from its start, as for pairs."""
    spans = [_chat(1, 1, "Refund order ORD-1", [], [("a", "lookup_order", {"order_id": "ORD-1"})]),
             _chat(2, 2, "Refund order ORD-1", [("a", "lookup_order", {"total": 3})], [("b", "refund", {"x": 1})]),
             _chat(3, 3, "Where is ORD-2?", [], [("c", "lookup_order", {"order_id": "ORD-2"})]),
             _chat(4, 4, "Refund order ORD-1", [], [("d", "lookup_order", {"order_id": "ORD-1"})],
                   conversation="given-id")]
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(otlp(spans)) + "\n")
    import_traces([path], tmp_path / "out")
    conv = [t.source.conversation_id for t in _traces(tmp_path / "out") if t.source]
    assert conv[0] == conv[1] != conv[2] and conv[3] == "given-id" and len(set(conv)) == 3


def test_an_import_that_imports_nothing_fails_naming_why(tmp_path: Path) -> None:
    spans = [{"traceId": "zz", "spanId": 5, "attributes": []}, {"name": "no ids, no model call"}]
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(otlp(spans)) + "\n")
    with pytest.raises(UserError, match=r"no tool call imported from 1 record \(.*\)"):
        import_traces([path], tmp_path / "out")
    assert not (tmp_path / "out" / "traces.jsonl").exists()


def test_skips_are_counted_by_reason_and_printed_a_few_times_each(tmp_path: Path) -> None:
    """3,000 calls whose arguments are not JSON, each of another tool: one reason, a handful of lines."""
    spans = [_chat(n + 1, n + 1, "hi", [], []) for n in range(3000)]
    for n, span in enumerate(spans):
        out = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c", "name": f"tool_{n}" * 20,
                                                "arguments": "{not json"}]}]
        span["attributes"] = [a for a in span["attributes"] if a["key"] != "gen_ai.output.messages"]
        span["attributes"].append(_attr("gen_ai.output.messages", out))
    good = _chat(9999, 9999, "Refund order ORD-1", [], [("call_0", "lookup_order", {"order_id": "ORD-1"})])
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(otlp([*spans, good])) + "\n")
    with heard() as lines:
        summary = import_traces([path], tmp_path / "out")
    assert summary.imported == 1 and summary.skipped == {"arguments is not JSON": 3000}
    skip_lines = [line for line in lines if "(detected)" not in line]
    assert len(skip_lines) <= 6 and all(len(line) <= 400 for line in skip_lines)


def test_a_file_whose_records_do_not_read_says_so_not_that_the_format_is_unknown(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\x00\x01garbage\n{cut\n")
    with pytest.raises(UserError, match="no record reads: the first is not JSON"):
        import_traces([path], tmp_path / "out")


def _langfuse(trace: int, span: int, kind: str, inp: Any, out: Any, session: str | None = None) -> dict[str, Any]:
    """A span as Langfuse's SDK sends it: ``langfuse.observation.*`` attributes, input and output as JSON."""
    attrs = [_attr("langfuse.observation.type", kind), _attr("langfuse.observation.output", out)]
    if inp is not None:
        attrs.append(_attr("langfuse.observation.input", inp))
    if session:
        attrs.append(_attr("session.id", session))
    return {"traceId": f"{trace:032x}", "spanId": f"{span:016x}", "name": "OpenAI-generation", "attributes": attrs}


def test_langfuse_spans_keep_their_session_count_other_observations_and_keep_a_call_without_input_apart(
        tmp_path: Path) -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "lookup_order", "arguments": '{"order_id": "A1"}'}}]}
    asked = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Where is order A1?"}]
    path = tmp_path / "langfuse.jsonl"
    path.write_text(json.dumps(otlp([
        _langfuse(1, 1, "span", None, {"ok": True}),  # an @observe span around the agent: no model call
        _langfuse(1, 2, "generation", asked, call, session="chat-7"),
        _langfuse(1, 3, "generation", None, call),  # input not recorded: not audited as if nobody asked
    ])) + "\n")
    summary = import_traces([path], tmp_path / "out")
    assert summary.imported_by == {"langfuse": 1} and summary.incomplete == {"no input messages recorded": 1}
    assert summary.notes == {"Langfuse observations of type span (no model call)": 1}
    [t] = _traces(tmp_path / "out")
    assert t.source is not None and t.source.conversation_id == "chat-7" and t.context.user == ["Where is order A1?"]
    assert (t.calls[0].tool, t.calls[0].args) == ("lookup_order", {"order_id": "A1"})


def test_a_flattened_index_int_refuses_is_a_key_not_a_crash(tmp_path: Path) -> None:
    """``"²".isdigit()`` is true and ``int("²")`` raises: such an index is read as a key, and the span still reads."""
    prefix = "llm.output_messages.0.message.tool_calls.0.tool_call."
    attrs = [_attr("llm.input_messages.0.message.role", "user"),
             _attr("llm.input_messages.0.message.content", "Where is order A1?"),
             _attr("llm.input_messages.².message.role", "user"),
             _attr("llm.output_messages.0.message.role", "assistant"),
             _attr(prefix + "id", "call_0"), _attr(prefix + "function.name", "lookup_order"),
             _attr(prefix + "function.arguments", '{"order_id": "A1"}')]
    path = tmp_path / "oi.jsonl"
    path.write_text(json.dumps(otlp([{"traceId": f"{7:032x}", "spanId": f"{7:016x}", "name": "llm",
                                      "attributes": attrs}])) + "\n")
    summary = import_traces([path], tmp_path / "out")
    assert summary.imported == 1
