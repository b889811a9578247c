"""The OpenTelemetry GenAI names trialgrid reads and writes, pinned against the semantic conventions themselves.

``data/otel_genai_semconv.json`` is copied from github.com/open-telemetry/semantic-conventions (the commit and
files are in it): the attribute ids of ``model/gen-ai/registry.yaml`` and of its deprecated registry, the event
names of ``model/gen-ai/events.yaml``, the members of ``gen_ai.operation.name``, and the message parts of
``docs/gen-ai/gen-ai-{input,output}-messages.json``. Every ``gen_ai.*`` string in the modules that read OTLP or
write evaluation events (and in the test writers that make OTLP for the round trip) must be one of those names;
the one family that is not — the flattened ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` that traceloop's
instrumentations emit — is named here, with why.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from runner.importers.traces import _messages as wire
from runner.probes.phantom.calibration import evaluation_event

ROOT = Path(__file__).resolve().parents[2]
SEMCONV = json.loads((Path(__file__).parent / "data" / "otel_genai_semconv.json").read_text())
MODULES = ("runner/importers/traces/otlp.py", "runner/importers/traces/_messages.py",
           "runner/probes/phantom/calibration.py", "tests/helpers/trace_formats.py")
#: prefixes of attributes outside the conventions: the conventions have only the single-string ``gen_ai.prompt`` /
#: ``gen_ai.completion`` (deprecated, "use Event API"); the numbered ones are traceloop's (opentelemetry-semantic-
#: conventions-ai), which its instrumentations still emit
FLATTENED = ("gen_ai.prompt.", "gen_ai.completion.")


def _gen_ai_strings(path: Path) -> set[str]:
    return {node.value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("gen_ai.")}


def test_every_gen_ai_name_in_the_code_is_in_the_conventions() -> None:
    known = set(SEMCONV["attributes"]) | set(SEMCONV["deprecated_attributes"]) | set(SEMCONV["events"])
    seen: dict[str, str] = {}
    for module in MODULES:
        for name in _gen_ai_strings(ROOT / module):
            seen.setdefault(name, module)
    flattened = {n for n in seen if n.startswith(FLATTENED)}
    assert all(n in FLATTENED or n.split(".")[2].isdigit() for n in flattened), flattened  # numbered, or a prefix
    assert {p.rstrip(".") for p in FLATTENED} <= set(SEMCONV["deprecated_attributes"])
    unknown = {n: m for n, m in seen.items() if n not in known and n not in flattened}
    assert not unknown, f"not in the GenAI semantic conventions at {SEMCONV['commit'][:12]}: {unknown}"
    # the names the readers depend on are all there (a scan that found nothing would pass above)
    assert {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.tool.definitions",
            "gen_ai.conversation.id", "gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.call.id",
            "gen_ai.tool.call.arguments", "gen_ai.client.inference.operation.details", "gen_ai.evaluation.result",
            "gen_ai.evaluation.name", "gen_ai.evaluation.score.value", "gen_ai.evaluation.score.label",
            "gen_ai.evaluation.explanation"} <= set(seen)
    assert "execute_tool" in SEMCONV["operation_names"]


def test_the_evaluation_event_uses_the_conventions_names_and_types() -> None:
    event = evaluation_event({"source_format": "otel-genai", "trace_id": "ab" * 16, "span_id": "cd" * 8,
                              "call_id": "call_1", "tool": "refund_order", "field": "refund_order.email",
                              "flagged_by": ["baseline"]})
    assert event is not None
    assert event["eventName"] in SEMCONV["events"] and event["eventName"] == "gen_ai.evaluation.result"
    attrs = {a["key"]: a["value"] for a in event["attributes"]}
    assert "gen_ai.evaluation.name" in attrs  # the event's one required attribute (events.yaml)
    for key in attrs:
        assert key in SEMCONV["attributes"] or key.startswith("trialgrid."), key
    assert set(attrs["gen_ai.evaluation.score.value"]) == {"doubleValue"}  # type: double
    # parented to the span of the call it judges ("SHOULD be parented to GenAI operation span being evaluated")
    assert (event["traceId"], event["spanId"]) == ("ab" * 16, "cd" * 8)


def test_message_parts_as_the_json_schemas_name_them_are_read() -> None:
    parts = SEMCONV["input_message_parts"]
    assert parts == SEMCONV["output_message_parts"]
    assert parts["tool_call"] == ["arguments", "id", "name"] and parts["tool_call_response"] == ["id", "response"]
    msgs = wire.genai([
        {"role": "user", "parts": [{"type": "text", "content": "Refund ORD-1"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_order",
                                         "arguments": {"order_id": "ORD-1"}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": {"amount": 12}}]},
    ])
    assert [m.role for m in msgs] == ["user", "assistant", "tool"]
    call = msgs[1].calls[0]
    assert (call.id, call.name, call.args) == ("c1", "get_order", {"order_id": "ORD-1"})
    assert (msgs[2].result_of, msgs[2].result) == ("c1", {"amount": 12})
