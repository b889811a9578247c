"""``import traces`` on files the real tools wrote: official SDKs, real instrumentations, the OTel SDK's own encoder.

Each test runs multi-turn tool conversations with the ``openai`` / ``anthropic`` SDK against
``trialgrid serve`` on loopback, with one instrumentation on; the spans are exported by the
OpenTelemetry SDK (in-memory exporter → the OTLP protobuf encoder → protobuf's JSON mapping, as
a collector's file exporter would write), then imported. Every tool call the server answered
(counted from the server's own request log, read back from the SDK's answers) must be imported
exactly once, with the context the model had and the source's ids. Each instrumentation is a
test-only dependency; a missing one skips its test.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runner.importers.traces import import_traces
from runner.probes.phantom import Trace
from tests.helpers.serving import serving

SYSTEM = "You are the support assistant for Kestrel Outdoor."
TASKS = ["Where is order 55821? The email on it is jamie.ortiz@fernmail.test.", "Please look up order ORD-7713.",
         "Can you check on order 99120 for me?"]
#: the second user turn of every conversation: its call is made with the first turn's tool result in context
FOLLOW_UP = "Thanks. Now please look up order 40417 as well."
SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}, "email": {"type": "string"}},
          "required": ["order_id"]}
TOOLS_OPENAI = [{"type": "function", "function": {"name": "lookup_order", "description": "Look up an order",
                                                  "parameters": SCHEMA}}]
TOOLS_ANTHROPIC = [{"name": "lookup_order", "description": "Look up an order", "input_schema": SCHEMA}]


def _result(n: int, turn: int) -> str:
    return json.dumps({"status": "shipped", "carrier": f"UPS-{n}-{turn}", "eta": "2026-12-0" + str(turn + 1)})


class Seen:
    """What the client saw: each tool call the server answered, with the context it was answered in."""

    def __init__(self) -> None:
        self.calls: dict[str, dict[str, Any]] = {}

    def add(self, call_id: str, tool: str, args: dict[str, Any], users: list[str], results: list[str]) -> None:
        assert call_id not in self.calls
        self.calls[call_id] = {"tool": tool, "args": args, "user": list(users), "results": list(results)}


def _openai_conversations(base_url: str, seen: Seen, tracer: Any = None, http_client: Any = None) -> None:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0, timeout=10, http_client=http_client)
    for n, task in enumerate(TASKS):
        span = tracer.start_as_current_span("invoke_agent support") if tracer else _nothing()
        with span:
            messages: list[Any] = [{"role": "system", "content": SYSTEM}]
            results: list[str] = []
            users: list[str] = []
            for ask in (task, FOLLOW_UP):
                users.append(ask)
                messages.append({"role": "user", "content": ask})
                for _ in range(3):
                    message = client.chat.completions.create(model="typical", messages=messages, tools=TOOLS_OPENAI,
                                                             seed=100 + n + 10 * len(users)).choices[0].message
                    messages.append(message.model_dump(exclude_none=True))
                    if not message.tool_calls:
                        break
                    for c in message.tool_calls:
                        seen.add(c.id, c.function.name, json.loads(c.function.arguments), users, results)
                        out = _result(n, len(results))
                        messages.append({"role": "tool", "tool_call_id": c.id, "content": out})
                        results.append(out)
    client.close()


def _responses_conversations(base_url: str, seen: Seen, http_client: Any = None) -> None:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0, timeout=10, http_client=http_client)
    tools = [{"type": "function", "name": "lookup_order", "description": "Look up an order", "parameters": SCHEMA,
              "strict": False}]
    for n, task in enumerate(TASKS):
        items: list[Any] = []
        results: list[str] = []
        users: list[str] = []
        for ask in (task, FOLLOW_UP):
            users.append(ask)
            items.append({"role": "user", "content": ask})
            for _ in range(3):
                reply = client.responses.create(model="typical", instructions=SYSTEM, input=items, tools=tools,
                                                extra_headers={"x-trialgrid-seed": str(300 + n + 10 * len(users))})
                calls = [it for it in reply.output if it.type == "function_call"]
                items += [it.model_dump(exclude_none=True) for it in reply.output]
                if not calls:
                    break
                for c in calls:
                    seen.add(c.call_id, c.name, json.loads(c.arguments), users, results)
                    out = _result(n, len(results))
                    items.append({"type": "function_call_output", "call_id": c.call_id, "output": out})
                    results.append(out)
    client.close()


def _anthropic_conversations(url: str, seen: Seen, tracer: Any = None, http_client: Any = None) -> None:
    import anthropic

    client = anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0, timeout=10,
                                 http_client=http_client)
    for n, task in enumerate(TASKS):
        span = tracer.start_as_current_span("invoke_agent support") if tracer else _nothing()
        with span:
            messages: list[Any] = []
            results: list[str] = []
            users: list[str] = []
            for ask in (task, FOLLOW_UP):
                users.append(ask)
                messages.append({"role": "user", "content": ask})
                for _ in range(3):
                    reply = client.messages.create(model="typical", max_tokens=256, system=SYSTEM, messages=messages,
                                                   tools=TOOLS_ANTHROPIC,
                                                   extra_headers={"x-trialgrid-seed": str(200 + n + 10 * len(users))})
                    messages.append({"role": "assistant",
                                     "content": [b.model_dump(exclude_none=True) for b in reply.content]})
                    if reply.stop_reason != "tool_use":
                        break
                    blocks = []
                    for b in reply.content:
                        if b.type == "tool_use":
                            seen.add(b.id, b.name, dict(b.input), users, results)
                            blocks.append({"type": "tool_result", "tool_use_id": b.id,
                                           "content": _result(n, len(results) + len(blocks))})
                    messages.append({"role": "user", "content": blocks})
                    results += [b["content"] for b in blocks]
    client.close()


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _answered(server: Any) -> int:
    """Model requests the server answered with 200, from its own request log."""
    log = httpx.get(server.url + "/stats", params={"log": "1"}).json()["log"]
    return sum(1 for status in log["status"] if status == 200)


def _check(out: Path, seen: Seen, fmt: str, *, model_requests: int, answered: int, ids: bool = True,
           tools: bool = True) -> list[Trace]:
    traces = [Trace.model_validate_json(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    assert model_requests == answered  # every request the server answered is a model call that was read
    by_call = {t.source.call_id: t for t in traces if t.source}
    assert len(traces) == len(by_call) == len(seen.calls) >= 3, (len(traces), len(seen.calls))
    assert any(c["results"] for c in seen.calls.values())  # some calls had earlier tool results in context
    for call_id, want in seen.calls.items():
        t = by_call[call_id]
        assert t.source is not None and t.source.format == fmt
        assert (t.calls[0].tool, t.calls[0].args) == (want["tool"], want["args"])
        assert t.context.system == SYSTEM and t.context.user == want["user"]
        assert [r["result"] for r in t.context.tool_results] == [json.loads(r) for r in want["results"]]
        assert all(r["tool"] == "lookup_order" for r in t.context.tool_results)
        if tools:
            assert t.tools and t.tools[0]["name"] == "lookup_order" and t.tools[0]["parameters"] == SCHEMA
        else:  # the instrumentation does not record the tools offered
            assert t.tools is None
        assert t.gold_phantoms is None
        if ids:
            assert t.source.trace_id and len(t.source.trace_id) == 32 and t.source.span_id
    if ids:  # no conversation id in the spans: derived from the conversation's start, one per conversation
        by_start = {(t.context.system, t.context.user[0]): set() for t in traces}  # type: ignore[var-annotated]
        for t in traces:
            assert t.source is not None
            by_start[(t.context.system, t.context.user[0])].add(t.source.conversation_id)
        assert all(len(ids_) == 1 for ids_ in by_start.values())
        assert len({i for ids_ in by_start.values() for i in ids_}) == len(by_start)
    summary = json.loads((out / "import.json").read_text())
    assert summary["imported"] == len(traces) and summary["bad_records"] == 0
    return traces


@pytest.fixture
def otel(tmp_path: Path) -> Iterator[tuple[Any, Callable[[], Path]]]:
    """A tracer provider whose spans end up, when asked, in an OTLP JSON file written by the SDK's own encoder."""
    pytest.importorskip("opentelemetry.sdk.trace")
    encoder = pytest.importorskip("opentelemetry.exporter.otlp.proto.common.trace_encoder")
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    def write() -> Path:
        path = tmp_path / "spans.otlp.json"
        path.write_text(MessageToJson(encoder.encode_spans(exporter.get_finished_spans())))
        return path

    yield provider, write
    provider.shutdown()


def _model_spans(path: Path, marker: str) -> int:
    doc = json.loads(path.read_text())
    return sum(1 for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]
               if any(a["key"].startswith(marker) for a in sp.get("attributes", [])))


INSTRUMENTATIONS = [
    # (module, class, vendor, format, an attribute every model span has)
    ("opentelemetry.instrumentation.openai_v2", "OpenAIInstrumentor", "openai", "otel-genai", "gen_ai.input.messages"),
    ("opentelemetry.instrumentation.openai", "OpenAIInstrumentor", "openai", "otel-genai", "gen_ai.input.messages"),
    ("opentelemetry.instrumentation.anthropic", "AnthropicInstrumentor", "anthropic", "otel-genai",
     "gen_ai.input.messages"),
    ("openinference.instrumentation.openai", "OpenAIInstrumentor", "openai", "openinference", "llm.input_messages"),
    ("openinference.instrumentation.anthropic", "AnthropicInstrumentor", "anthropic", "openinference",
     "llm.input_messages"),
]


@pytest.mark.parametrize(("module", "cls", "vendor", "fmt", "marker"), INSTRUMENTATIONS,
                         ids=[f"{m.split('.')[0]}-{m.split('.')[-1]}" for m, *_ in INSTRUMENTATIONS])
def test_instrumented_sdk_spans_import_every_call_once(module: str, cls: str, vendor: str, fmt: str, marker: str,
                                                        otel: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip(vendor)
    mod = pytest.importorskip(module)
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "true")
    provider, write = otel
    instrumentor = getattr(mod, cls)()
    instrumentor.instrument(tracer_provider=provider)
    seen = Seen()
    try:
        with serving() as server:
            tracer = provider.get_tracer("test")
            if vendor == "openai":
                _openai_conversations(server.base_url, seen, tracer)
            else:
                _anthropic_conversations(server.url, seen, tracer)
            answered = _answered(server)
    finally:
        instrumentor.uninstrument()
    path = write()
    summary = import_traces([path], tmp_path / "out", fmt="auto")
    assert summary.files == {str(path): "otlp"}
    _check(tmp_path / "out", seen, fmt, model_requests=_model_spans(path, marker), answered=answered,
           tools=module != "opentelemetry.instrumentation.openai_v2")  # openai-v2 writes no gen_ai.tool.definitions


@pytest.mark.parametrize("fmt", ["openai-chat", "openai-responses", "anthropic"])
def test_sdk_wire_pairs_import_every_call_once(fmt: str, tmp_path: Path) -> None:
    """Request/response pairs as a logging proxy stores them: the SDK's own request and response bodies."""
    pytest.importorskip("anthropic" if fmt == "anthropic" else "openai")
    pairs: list[dict[str, Any]] = []

    def on_response(response: Any) -> None:
        response.read()
        pairs.append({"request": json.loads(response.request.content), "response": response.json()})

    seen = Seen()
    # each SDK takes its own client class: openai's is httpx's, anthropic's is httpx2's
    client_cls = pytest.importorskip("httpx2").Client if fmt == "anthropic" else httpx.Client
    with serving() as server, client_cls(event_hooks={"response": [on_response]}) as http:
        if fmt == "openai-chat":
            _openai_conversations(server.base_url, seen, http_client=http)
        elif fmt == "openai-responses":
            _responses_conversations(server.base_url, seen, http_client=http)
        else:
            _anthropic_conversations(server.url, seen, http_client=http)
        answered = _answered(server)
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    summary = import_traces([path], tmp_path / "out")
    assert summary.files == {str(path): fmt}
    traces = _check(tmp_path / "out", seen, fmt, model_requests=len(pairs), answered=answered, ids=False)
    assert len({t.source.conversation_id for t in traces if t.source}) == len({c["user"][0] for c in seen.calls.values()})


def test_inspect_eval_log_imports_every_call_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inspect_ai = pytest.importorskip("inspect_ai")
    pytest.importorskip("openai")
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import generate, system_message, use_tools
    from inspect_ai.tool import tool

    calls: list[tuple[str, dict[str, Any]]] = []

    @tool
    def lookup_order() -> Any:
        async def execute(order_id: str, email: str = "") -> str:
            """Look up an order.

            Args:
                order_id: The order id.
                email: The customer's email.
            """
            calls.append((order_id, {"order_id": order_id, "email": email}))
            return _result(len(calls), 0)
        return execute

    with serving() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        task = inspect_ai.Task(dataset=[Sample(input=t, id=f"s{i}") for i, t in enumerate(TASKS)],
                               solver=[system_message(SYSTEM), use_tools(lookup_order()), generate()])
        [log] = inspect_ai.eval(task, model="openai/typical", log_dir=str(tmp_path / "logs"), display="none",
                                log_format="eval", max_connections=1)
        answered = _answered(server)
    path = Path(log.location)
    summary = import_traces([path], tmp_path / "out")
    assert summary.files == {str(path): "inspect"}
    traces = [Trace.model_validate_json(line) for line in (tmp_path / "out" / "traces.jsonl").read_text().splitlines()]
    events = [e for s in log.samples or [] for e in s.events if e.event == "model"]
    # every model event was a request the server answered (inspect_ai sends one more of its own on this server)
    assert 0 < len(events) <= answered
    want = [(tc.id, tc.function, tc.arguments) for e in events for tc in e.output.message.tool_calls or []]
    assert len(want) == len(calls) >= 3
    got = [(t.source.call_id, t.calls[0].tool, t.calls[0].args) for t in traces if t.source]
    assert sorted(got, key=repr) == sorted(want, key=repr)  # the server numbers calls per seed: the same call id in every sample, kept
    for t in traces:
        assert t.context.system == SYSTEM and len(t.context.user) == 1 and t.context.user[0] in TASKS
        assert t.tools and t.tools[0]["name"] == "lookup_order"
        assert t.source and t.source.format == "inspect" and t.source.trace_id == log.eval.run_id
    later = [t for t in traces if t.context.tool_results]
    assert all(r["tool"] == "lookup_order" and isinstance(r["result"], dict) for t in later for r in t.context.tool_results)


DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_flattened_gen_ai_attributes_of_older_instrumentations(vendor: str, tmp_path: Path) -> None:
    """``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.tool_calls.M.*``, as opentelemetry-instrumentation-openai /
    -anthropic 0.40.14 wrote them (today's releases write ``gen_ai.input.messages``, and one environment cannot
    hold both): files made by those releases against ``trialgrid serve`` (``data/make_flat_otel.py`` says how),
    with what the SDK received beside them."""
    path = DATA / f"otel_flat_{vendor}.otlp.json"
    seen = Seen()
    seen.calls = json.loads((DATA / f"otel_flat_{vendor}.seen.json").read_text())
    import_traces([path], tmp_path / "out")
    _check(tmp_path / "out", seen, "otel-genai-flat", model_requests=0, answered=0)


def test_the_sdks_attribute_limit_keeps_a_call_apart_with_its_reason(tmp_path: Path) -> None:
    """The OTel SDK's own span limit: the input messages set first are dropped when the span fills up (the SDK
    evicts the oldest); the call the output holds is kept apart, never audited as if no one had said anything."""
    pytest.importorskip("opentelemetry.sdk.trace")
    encoder = pytest.importorskip("opentelemetry.exporter.otlp.proto.common.trace_encoder")
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from runner.importers.traces import INCOMPLETE_FILE

    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=3))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    user = [{"role": "user", "parts": [{"type": "text", "content": "Refund order ORD-77"}]}]
    out = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "call_0", "name": "refund",
                                            "arguments": {"order_id": "ORD-77"}}]}]
    with tracer.start_as_current_span("chat m") as span:
        span.set_attribute("gen_ai.input.messages", json.dumps(user))  # the oldest: evicted first
        span.set_attribute("gen_ai.system_instructions", json.dumps([{"type": "text", "content": SYSTEM}]))
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.request.model", "m")
        span.set_attribute("gen_ai.output.messages", json.dumps(out))
    provider.shutdown()
    path = tmp_path / "spans.otlp.json"
    path.write_text(MessageToJson(encoder.encode_spans(exporter.get_finished_spans())))
    summary = import_traces([path], tmp_path / "out")
    assert summary.imported == 0 and summary.incomplete == {"the SDK's attribute limit dropped 2 attributes": 1}
    [kept] = [json.loads(line) for line in (tmp_path / "out" / INCOMPLETE_FILE).read_text().splitlines()]
    assert kept["calls"] == [{"tool": "refund", "args": {"order_id": "ORD-77"}}]
    assert (tmp_path / "out" / "traces.jsonl").read_text() == ""


#: the child that writes Langfuse's spans: its OpenAI integration patches the ``openai`` module for the whole
#: process, so it runs apart from the test worker (every other test's ``openai`` stays unpatched)
_LANGFUSE_CHILD = """
import json, sys
from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common import trace_encoder
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from langfuse import Langfuse

exporter = InMemorySpanExporter()
client = Langfuse(public_key="pk-lf-test", secret_key="sk-lf-test", base_url="http://127.0.0.1:9",
                  span_exporter=exporter, flush_at=1)
import langfuse.openai  # noqa: F401  (the integration: every openai client of this process now reports)
from tests.importers.test_import_traces_real import Seen, _openai_conversations

seen = Seen()
_openai_conversations(sys.argv[1], seen)
client.flush()
with open(sys.argv[2], "w") as fh:
    fh.write(MessageToJson(trace_encoder.encode_spans(exporter.get_finished_spans())))
with open(sys.argv[3], "w") as fh:
    json.dump(seen.calls, fh)
"""


def test_langfuse_sdk_spans_import_every_call_once(tmp_path: Path) -> None:
    """Langfuse's own SDK (its OpenAI integration) sends ``langfuse.observation.*`` spans over OTLP: read."""
    import subprocess
    import sys

    pytest.importorskip("langfuse")
    pytest.importorskip("opentelemetry.exporter.otlp.proto.common.trace_encoder")
    path, calls = tmp_path / "langfuse.otlp.json", tmp_path / "seen.json"
    with serving() as server:
        subprocess.run([sys.executable, "-c", _LANGFUSE_CHILD, server.base_url, str(path), str(calls)], check=True,
                       cwd=Path(__file__).resolve().parents[2], timeout=120)
        answered = _answered(server)
    seen = Seen()
    seen.calls = json.loads(calls.read_text())
    summary = import_traces([path], tmp_path / "out", fmt="auto")
    assert summary.files == {str(path): "otlp"} and summary.imported_by == {"langfuse": len(seen.calls)}
    _check(tmp_path / "out", seen, "langfuse", model_requests=_model_spans(path, "langfuse.observation.input"),
           answered=answered)
