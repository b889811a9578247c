"""The error taxonomy: each failure the server can produce, classified once by the provider."""

from __future__ import annotations

import asyncio
import time
from email.utils import formatdate

import httpx
import pytest

from runner.core.types import ChatRequest, ChatResponse, Message, ToolSpec
from runner.providers.anthropic_wire import AnthropicProvider
from runner.providers.classify import classify_http, parse_remedy, retry_after_s
from runner.providers.errors import ErrorKind, ProviderError, Remedy
from runner.providers.openai_wire import OpenAIProvider
from runner.providers.settings import Connection
from runner.sim.serve import parse_rule

PROVIDERS = {"openai": OpenAIProvider, "anthropic": AnthropicProvider}
TOOL = ToolSpec("fetch_invoices", "Fetch invoices.", {"type": "object", "properties": {"month": {"type": "string"}},
                                                      "required": ["month"]})


def _one(server, api: str, request: ChatRequest | None = None, *, timeout_s: float = 5.0,  # type: ignore[no-untyped-def]
         key_env: str | None = None) -> ProviderError:
    """One request through the single-attempt provider; the ProviderError it raised."""
    request = request or ChatRequest("typical", (Message("user", "Pull invoices for 2026-10 from Stripe."),), (TOOL,),
                                     {}, 1)

    async def go() -> ProviderError:
        provider = PROVIDERS[api](Connection(api, server.base_url, key_env, timeout_s=timeout_s))
        try:
            with pytest.raises(ProviderError) as info:
                await provider.complete(request)
            return info.value
        finally:
            await provider.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("fault, kind, words", [
    ("500", ErrorKind.TRANSIENT, "HTTP 500"),
    ("503", ErrorKind.TRANSIENT, "HTTP 503"),
    ("reset", ErrorKind.TRANSIENT, "connection failed"),
    ("malformed", ErrorKind.TRANSIENT, "malformed JSON"),
    ("truncated", ErrorKind.TRANSIENT, "connection failed"),
    ("slow", ErrorKind.TRANSIENT, "request timeout"),
    ("429", ErrorKind.RATE_LIMITED, "HTTP 429"),
])
def test_each_fault_is_classified(serve, api: str, fault: str, kind: ErrorKind, words: str) -> None:  # type: ignore[no-untyped-def]
    server = serve(faults={fault: 1.0}, slow_s=2.0, fault_retry_after_s=2.5)
    error = _one(server, api, timeout_s=0.3)
    assert error.kind is kind, error
    assert words in error.message
    if fault == "429":
        assert error.retry_after_s == pytest.approx(2.5)  # retry-after-ms wins over the rounded Retry-After


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_server_rate_limit_headers_give_the_wait(serve, api: str) -> None:  # type: ignore[no-untyped-def]
    server = serve(rpm=1, rpm_window_s=30)
    request = ChatRequest("typical", (Message("user", "hello"),), (), {}, 1)

    async def go() -> ProviderError:
        provider = PROVIDERS[api](Connection(api, server.base_url, None))
        try:
            await provider.complete(request)  # the one allowed
            with pytest.raises(ProviderError) as info:
                await provider.complete(request)
            return info.value
        finally:
            await provider.aclose()

    error = asyncio.run(go())
    # the wait is the server's: what is left of its 30 s window (however long the first request took), not a default
    assert error.kind is ErrorKind.RATE_LIMITED and 0 < (error.retry_after_s or 0) <= 30
    assert error.retry_after_s != pytest.approx(1.0)


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("rule, params, remedy", [
    ("drop:temperature", {"temperature": 0.3}, Remedy("drop", "temperature")),
    ("rename:max_tokens:max_completion_tokens", {"max_tokens": 50}, Remedy("rename", "max_tokens", "max_completion_tokens")),
    ("require:reasoning_effort=none:tools", {"reasoning_effort": "low"}, Remedy("set", "reasoning_effort", value="none")),
    ("require:temperature=1", {"temperature": 0.5}, Remedy("set", "temperature", value=1)),
])
def test_rejected_parameter_carries_its_remedy(serve, api: str, rule: str, params: dict, remedy: Remedy) -> None:  # type: ignore[no-untyped-def]
    server = serve(rules=[parse_rule(rule)])
    request = ChatRequest("typical", (Message("user", "Pull invoices for 2026-10 from Stripe."),), (TOOL,), params, 1)
    error = _one(server, api, request)
    assert error.kind is ErrorKind.REJECTED_PARAM and error.status_code == 400
    assert error.remedy == remedy and error.param == remedy.param


def test_require_when_tools_does_not_fire_without_tools(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(rules=[parse_rule("require:reasoning_effort=none:tools")])
    request = ChatRequest("typical", (Message("user", "hello"),), (), {"reasoning_effort": "low"}, 1)

    async def go() -> ChatResponse:
        provider = OpenAIProvider(Connection("openai", server.base_url, None))
        try:
            return await provider.complete(request)
        finally:
            await provider.aclose()

    answer = asyncio.run(go())
    assert answer.text and answer.attempts == 1 and answer.remedies == ()  # answered as sent, nothing changed
    stats = server.stats()
    assert stats["by_status"] == {"200": 1} and stats["rejections"] == {}
    # the same rule on the same server does fire once tools are offered: the pass above is not a dead rule
    with_tools = _one(server, "openai", ChatRequest("typical", request.messages, (TOOL,), request.params, 1))
    assert with_tools.kind is ErrorKind.REJECTED_PARAM and with_tools.param == "reasoning_effort"


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_auth_failure_is_fatal_and_the_echoed_key_is_scrubbed(serve, api: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    key = "sk-tg-test-9f8e7d6c5b4a39281706"
    monkeypatch.setenv("TG_TEST_KEY", key)
    server = serve(keys=("the-right-key",))
    error = _one(server, api, key_env="TG_TEST_KEY")
    assert error.kind is ErrorKind.FATAL and error.status_code == 401
    assert key not in error.message and key[:12] not in error.message and "[redacted]" in error.message


def test_unknown_model_is_fatal(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve()
    request = ChatRequest("no-such-persona", (Message("user", "hi"),), (), {}, 1)
    error = _one(server, "openai", request)
    assert error.kind is ErrorKind.FATAL and error.status_code == 404


def test_connection_refused_is_transient() -> None:
    # a port nothing listens on: bind one, close it, connect to it
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    class Gone:
        base_url = f"http://127.0.0.1:{port}/v1"

    assert _one(Gone(), "openai").kind is ErrorKind.TRANSIENT


# -- the pure readers behind the classification


@pytest.mark.parametrize("message, param, remedy", [
    ("Unsupported parameter: 'temperature' is not supported with this model.", None, Remedy("drop", "temperature")),
    ("'seed' is not supported with this model", None, Remedy("drop", "seed")),
    ("Unrecognized request argument supplied: top_k", None, Remedy("drop", "top_k")),
    ("top_k: Extra inputs are not permitted", None, Remedy("drop", "top_k")),
    ("Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
     "max_tokens", Remedy("rename", "max_tokens", "max_completion_tokens")),
    ("Unsupported value: 'temperature' does not support 0.5 with this model. Only the default (1) value is supported.",
     "temperature", Remedy("set", "temperature", value=1)),
    ("Unsupported value: 'reasoning_effort' does not support 'low' with this model when tools are present. "
     "Set reasoning_effort to 'none'.", None, Remedy("set", "reasoning_effort", value="none")),
    ("Invalid request: the messages are empty.", None, None),
    # Google's JSON mapping (Gemini API, Vertex AI), naming the field as sent
    ("Invalid JSON payload received. Unknown name \"topK\" at 'generation_config': Cannot find field.", None,
     Remedy("drop", "topK")),
    # a model's own validation, as Bedrock passes it on
    ("The model returned the following errors: Malformed input request: #: extraneous key [top_k] is not permitted, "
     "please reformat your input and try again.", None, Remedy("drop", "top_k")),
    ("Invalid JSON payload received. Unknown name \"contents\": Cannot bind query parameter.", None, None),
])
def test_parse_remedy(message: str, param: str | None, remedy: Remedy | None) -> None:
    assert parse_remedy(message, param) == remedy


def test_retry_after_headers() -> None:
    now = time.time()
    assert retry_after_s(httpx.Headers({"Retry-After": "2"})) == 2.0
    assert retry_after_s(httpx.Headers({"Retry-After": "2", "retry-after-ms": "1500"})) == 1.5
    assert retry_after_s(httpx.Headers({"Retry-After": formatdate(now + 30, usegmt=True)}), now=now) == pytest.approx(30, abs=1)
    assert retry_after_s(httpx.Headers({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1m6.5s",
                                        "x-ratelimit-remaining-tokens": "10", "x-ratelimit-reset-tokens": "9m"})) == 66.5
    assert retry_after_s(httpx.Headers({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "20ms"})) == 0.02
    assert retry_after_s(httpx.Headers({"anthropic-ratelimit-tokens-remaining": "0",
                                        "anthropic-ratelimit-tokens-reset": "2030-01-01T00:00:10Z"}),
                         now=1893456000.0) == 10.0
    assert retry_after_s(httpx.Headers({"x-ratelimit-reset-requests": "5s"})) is None  # budget not exhausted


@pytest.mark.parametrize("status, kind", [(429, ErrorKind.RATE_LIMITED), (408, ErrorKind.TRANSIENT),
                                          (409, ErrorKind.TRANSIENT), (529, ErrorKind.TRANSIENT),
                                          (401, ErrorKind.FATAL), (403, ErrorKind.FATAL), (404, ErrorKind.FATAL),
                                          (400, ErrorKind.FATAL)])
def test_status_kinds(status: int, kind: ErrorKind) -> None:
    assert classify_http(status, httpx.Headers(), "something went wrong").kind is kind


def test_quota_exhaustion_is_fatal_not_rate_limited() -> None:
    assert classify_http(429, httpx.Headers(), "You exceeded your current quota", code="insufficient_quota").kind is ErrorKind.FATAL
