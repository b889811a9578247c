"""Writes the flattened-attribute OTLP fixtures: run by hand, in a venv with an instrumentation that still emits them.

``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.tool_calls.M.*`` are no longer written by today's
opentelemetry-instrumentation-openai / -anthropic (0.62 writes ``gen_ai.input.messages``), and one
environment cannot hold two versions of a package, so these files were made once by the real
0.40.14 releases, with the official SDKs talking to ``trialgrid serve``, and are kept here:

    python -m venv /tmp/legacy && /tmp/legacy/bin/pip install opentelemetry-instrumentation-openai==0.40.14 \\
        opentelemetry-instrumentation-anthropic==0.40.14 opentelemetry-sdk opentelemetry-exporter-otlp-proto-common \\
        'openai<2' 'anthropic<1'
    trialgrid serve --port 18777 &
    /tmp/legacy/bin/python tests/importers/data/make_flat_otel.py http://127.0.0.1:18777

Beside each OTLP file it writes what the SDK received (``*.seen.json``: every tool call the server
answered, with the context it was answered in), which the test checks the import against.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

HERE = Path(__file__).parent
SYSTEM = "You are the support assistant for Kestrel Outdoor."
TASKS = ["Where is order 55821? The email on it is jamie.ortiz@fernmail.test.", "Please look up order ORD-7713.",
         "Can you check on order 99120 for me?"]
FOLLOW_UP = "Thanks. Now please look up order 40417 as well."
SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}, "email": {"type": "string"}},
          "required": ["order_id"]}


def _result(n: int, turn: int) -> str:
    return json.dumps({"status": "shipped", "carrier": f"UPS-{n}-{turn}", "eta": "2026-12-0" + str(turn + 1)})


def run(vendor: str, url: str) -> None:
    import os
    os.environ["TRACELOOP_TRACE_CONTENT"] = "true"
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("fixture")
    seen: dict[str, Any] = {}
    if vendor == "openai":
        import openai
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
        inst: Any = OpenAIInstrumentor()
        inst.instrument(tracer_provider=provider)
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
        tools = [{"type": "function", "function": {"name": "lookup_order", "description": "Look up an order",
                                                   "parameters": SCHEMA}}]
        for n, task in enumerate(TASKS):
            with tracer.start_as_current_span("invoke_agent support"):
                messages: list[Any] = [{"role": "system", "content": SYSTEM}]
                results: list[str] = []
                users: list[str] = []
                for ask in (task, FOLLOW_UP):
                    users.append(ask)
                    messages.append({"role": "user", "content": ask})
                    for _ in range(3):
                        m = client.chat.completions.create(model="typical", messages=messages, tools=tools,
                                                           seed=100 + n + 10 * len(users)).choices[0].message
                        messages.append(m.model_dump(exclude_none=True))
                        if not m.tool_calls:
                            break
                        for c in m.tool_calls:
                            seen[c.id] = {"tool": c.function.name, "args": json.loads(c.function.arguments),
                                          "user": list(users), "results": list(results)}
                            out = _result(n, len(results))
                            messages.append({"role": "tool", "tool_call_id": c.id, "content": out})
                            results.append(out)
    else:
        import anthropic
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor
        inst = AnthropicInstrumentor()
        inst.instrument(tracer_provider=provider)
        aclient = anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0)
        atools = [{"name": "lookup_order", "description": "Look up an order", "input_schema": SCHEMA}]
        for n, task in enumerate(TASKS):
            with tracer.start_as_current_span("invoke_agent support"):
                amsgs: list[Any] = []
                results = []
                users = []
                for ask in (task, FOLLOW_UP):
                    users.append(ask)
                    amsgs.append({"role": "user", "content": ask})
                    for _ in range(3):
                        r = aclient.messages.create(model="typical", max_tokens=256, system=SYSTEM, messages=amsgs,
                                                    tools=atools,
                                                    extra_headers={"x-trialgrid-seed": str(200 + n + 10 * len(users))})
                        amsgs.append({"role": "assistant",
                                      "content": [b.model_dump(exclude_none=True) for b in r.content]})
                        if r.stop_reason != "tool_use":
                            break
                        blocks = []
                        for b in r.content:
                            if b.type == "tool_use":
                                seen[b.id] = {"tool": b.name, "args": dict(b.input), "user": list(users),
                                              "results": list(results)}
                                blocks.append({"type": "tool_result", "tool_use_id": b.id,
                                               "content": _result(n, len(results) + len(blocks))})
                        amsgs.append({"role": "user", "content": blocks})
                        results += [b["content"] for b in blocks]
    inst.uninstrument()
    (HERE / f"otel_flat_{vendor}.otlp.json").write_text(MessageToJson(encode_spans(exporter.get_finished_spans())))
    (HERE / f"otel_flat_{vendor}.seen.json").write_text(json.dumps(seen, indent=1) + "\n")


if __name__ == "__main__":
    for v in ("openai", "anthropic"):
        run(v, sys.argv[1])
