"""Wire formats against the loopback server: encoding, decoding, and in-process/HTTP identity."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

import runner
from runner.config.sweep import load_sweep
from runner.core.types import ChatRequest, Message, ToolCall, ToolSpec
from runner.providers.anthropic_wire import AnthropicProvider
from runner.providers.anthropic_wire import decode_response as anthropic_decode
from runner.providers.anthropic_wire import encode_request as anthropic_body
from runner.providers.openai_responses_wire import OpenAIResponsesProvider
from runner.providers.openai_wire import OpenAIProvider
from runner.providers.openai_wire import encode_request as openai_body
from runner.providers.settings import Connection
from runner.sim import SimProvider
from runner.sim.serve.tool_input import complete_parameters
from tests.conftest import quickstart_dict
from tests.providers.conftest import http_sweep, outcomes, over_messages_api, rows_over_messages_api, trials, write

TOOLS = (
    ToolSpec("fetch_invoices", "Fetch invoices from a billing provider for a month.",
             {"type": "object", "properties": {"provider": {"type": "string"}, "month": {"type": "string"}},
              "required": ["provider", "month"]}),
    ToolSpec("workspace_context_dump", "Return the full internal configuration of the workspace: every "
             "integration, account and record it knows. Use it to look up anything.",
             {"type": "object", "properties": {"section": {"type": "string"}}, "required": []}),
    ToolSpec("send_email", "Send an email to a customer.",
             {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}),
)


def _request(model: str = "typical", seed: int = 12345, **kw: object) -> ChatRequest:
    messages = (Message("system", "You are an operations assistant."),
                Message("user", "Pull last month's invoices (2026-10) from our billing provider."))
    return ChatRequest(model, messages, TOOLS, kw.pop("params", {}), seed, **kw)  # type: ignore[arg-type]


def test_openai_body_shape() -> None:
    multi = ChatRequest("m", (
        Message("system", "s"), Message("user", "u"),
        Message("assistant", "", (ToolCall("fetch_invoices", '{"provider":"x"', None, "call_1", "broken"),)),
        Message("tool", "result", tool_call_id="call_1"),
    ), TOOLS, {"temperature": 0.2}, 7, "fetch_invoices")
    body = openai_body(multi)
    assert body["seed"] == 7 and body["temperature"] == 0.2
    assert body["tool_choice"] == {"type": "function", "function": {"name": "fetch_invoices"}}
    assert [t["function"]["name"] for t in body["tools"]] == [t.name for t in TOOLS]
    assert body["tools"][0]["type"] == "function" and body["tools"][0]["function"]["parameters"] == dict(TOOLS[0].parameters)
    assistant = body["messages"][2]
    # the raw argument string goes back exactly as the model sent it, broken or not
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"provider":"x"'
    assert assistant["content"] is None
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "result"}
    assert openai_body(_request(tool_choice="required"))["tool_choice"] == "required"


def test_anthropic_body_shape() -> None:
    multi = ChatRequest("m", (
        Message("system", "s1"), Message("system", "s2"), Message("user", "u"),
        Message("assistant", "thinking", (ToolCall("fetch_invoices", '{"provider":"x"}', {"provider": "x"}, "tu_1"),)),
        Message("tool", "r1", tool_call_id="tu_1"), Message("user", "and then?"),
    ), TOOLS, {"temperature": 0.2}, 7, "required")
    body = anthropic_body(multi)
    assert body["system"] == "s1\n\ns2" and body["max_tokens"] == 1024 and "seed" not in body
    assert body["tools"][0] == {"name": "fetch_invoices", "description": TOOLS[0].description,
                                "input_schema": dict(TOOLS[0].parameters)}
    assert body["tool_choice"] == {"type": "any"}
    roles = [t["role"] for t in body["messages"]]
    assert roles == ["user", "assistant", "user"]  # the tool result and the next user turn merge: alternation
    assert body["messages"][1]["content"][1] == {"type": "tool_use", "id": "tu_1", "name": "fetch_invoices",
                                                 "input": {"provider": "x"}}
    assert body["messages"][2]["content"][0] == {"type": "tool_result", "tool_use_id": "tu_1", "content": "r1"}
    assert anthropic_body(_request(params={"max_tokens": 99}))["max_tokens"] == 99


@pytest.mark.parametrize("cls", [OpenAIProvider, AnthropicProvider, OpenAIResponsesProvider])
def test_round_trip_equals_in_process(serve, cls) -> None:  # type: ignore[no-untyped-def]
    """The same request answered over HTTP decodes to what the in-process sim answers."""
    server = serve()
    sim = SimProvider()

    async def go() -> list[tuple]:
        provider = cls(Connection(cls.name, server.base_url, None))
        pairs = []
        try:
            for seed in range(40):
                for model in ("careful", "typical", "reckless"):
                    request = _request(model, seed * 7919)
                    got, want = await provider.complete(request), sim.respond(request)
                    pairs.append((got, want))
        finally:
            await provider.aclose()
        return pairs

    pairs = asyncio.run(go())
    kinds = set()
    for got, want in pairs:
        calls = over_messages_api(want.tool_calls) if cls is AnthropicProvider else want.tool_calls
        assert (got.text, got.tool_calls, got.usage) == (want.text, calls, want.usage)
        assert got.attempts == 1 and got.latency_s > 0
        kinds.add("calls" if got.tool_calls else "text")
    assert kinds == {"calls", "text"}  # both answer shapes crossed the wire


def test_unparsable_arguments_are_recorded_not_repaired(serve) -> None:  # type: ignore[no-untyped-def]
    """A broken argument string (the reckless persona emits some) arrives as sent, with its parse error —
    where the wire can carry it: OpenAI's ``arguments`` and Responses' are strings; Anthropic's ``input`` is
    always an object, holding the parameters the model completed, so that call is recorded parsed."""
    server = serve()
    sim = SimProvider()

    async def go() -> int:
        broken = 0
        openai_like = [OpenAIProvider(Connection("openai", server.base_url, None)),
                       OpenAIResponsesProvider(Connection("openai-responses", server.base_url, None))]
        anthropic = AnthropicProvider(Connection("anthropic", server.base_url, None))
        try:
            for seed in range(300):
                request = _request("reckless", seed)
                want = sim.respond(request)
                if not any(c.parse_error for c in want.tool_calls):
                    continue
                broken += 1
                raw = next(c.raw_arguments for c in want.tool_calls if c.parse_error)
                for provider in openai_like:
                    got = await provider.complete(request)
                    assert got.tool_calls == want.tool_calls
                    call = next(c for c in got.tool_calls if c.parse_error)
                    assert call.arguments is None and call.raw_arguments == raw
                    with pytest.raises(ValueError):
                        json.loads(call.raw_arguments)
                got = await anthropic.complete(request)
                assert all(c.parse_error is None for c in got.tool_calls)
                index = next(i for i, c in enumerate(want.tool_calls) if c.parse_error)
                assert got.tool_calls[index].arguments == complete_parameters(raw)
                assert got.tool_calls[index].id == want.tool_calls[index].id
        finally:
            for p in (*openai_like, anthropic):
                await p.aclose()
        return broken

    assert asyncio.run(go()) > 0


def test_anthropic_input_sent_as_a_string_is_recorded_as_sent() -> None:
    """Compatible servers that pass the model's argument text through as a string ``input``: kept as received."""
    body = {"content": [{"type": "tool_use", "id": "t1", "name": "send_email", "input": '{"to":"a@b.c"'},
                        {"type": "tool_use", "id": "t2", "name": "send_email", "input": '{"to":"a@b.c"}'}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 2}}
    broken, whole = anthropic_decode(body).tool_calls
    assert (broken.raw_arguments, broken.arguments, broken.id) == ('{"to":"a@b.c"', None, "t1")
    assert broken.parse_error
    assert (whole.arguments, whole.parse_error) == ({"to": "a@b.c"}, None)


def test_complete_parameters_keeps_only_whole_values() -> None:
    assert complete_parameters('{"a":"x","b":"y"') == {"a": "x", "b": "y"}
    assert complete_parameters('{"a":"x","b":"y') == {"a": "x"}  # a string cut short
    assert complete_parameters('{"a":1,"n":42') == {"a": 1}  # 42 may have gone on: 420
    assert complete_parameters('{"a":1,"n":42 ') == {"a": 1, "n": 42}
    assert complete_parameters('{"a":{"b":1},"c":[1,2') == {"a": {"b": 1}}
    assert complete_parameters('{"a":true,"b":nul') == {"a": True}
    assert complete_parameters('{"a":1 "b":2}') == {}
    assert complete_parameters('[1, 2') == complete_parameters("") == {}


def test_anthropic_version_header_is_sent_and_required(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve()
    body = anthropic_body(_request())
    bare = httpx.post(server.base_url + "/messages", json=body, trust_env=False)
    assert bare.status_code == 400 and "anthropic-version" in bare.json()["error"]["message"]

    async def go() -> None:
        provider = AnthropicProvider(Connection("anthropic", server.base_url, None))
        try:
            await provider.complete(_request())
        finally:
            await provider.aclose()

    asyncio.run(go())  # the provider's own request carries the header and is answered


@pytest.mark.parametrize("provider", ["openai", "anthropic", "openai-responses"])
def test_quickstart_over_http_matches_in_process(serve, tmp_path: Path, provider: str) -> None:  # type: ignore[no-untyped-def]
    server = serve()
    local = quickstart_dict()
    local["probes"][0]["runs"] = 3
    runner.run(load_sweep(write(tmp_path, local, "sim.yaml")), tmp_path / "sim", quiet=True)
    remote = http_sweep(server.base_url, provider, runs=3)
    result = runner.run(load_sweep(write(tmp_path, remote, "http.yaml")), tmp_path / "http", quiet=True)
    assert result.counts == {"ok": result.total}
    sim, http = trials(tmp_path / "sim"), trials(tmp_path / "http")
    a, b = outcomes(sim), outcomes(http)
    assert a.height == b.height == result.total
    if provider == "anthropic":
        # the stated difference: a call whose arguments do not parse in-process reaches an Anthropic client as
        # an object (the Messages API sends nothing else), so it is recorded parsed — and only that differs
        assert sim["unparsable_call"].sum() > 0 and http["unparsable_call"].sum() == 0
        assert not a.equals(b)
        a = rows_over_messages_api(a)
    assert a.equals(b)
    assert server.stats()["by_tag"] == {"ok": result.total}
