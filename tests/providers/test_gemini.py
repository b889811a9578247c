"""The Gemini API (``provider: gemini``) against ``trialgrid serve``'s ``generateContent``.

The server is checked first with Google's own client (``google-genai``) pointed at it: its path, its
``x-goog-api-key``, its function declarations, calls and seed, its 400 for a bad key. Then trialgrid's own
provider against the same server gives what the in-process simulated agent gives (a call whose argument text
does not parse arrives as an object, as over the Messages API), and the quickstart sweep's outcomes equal the
in-process run's. Safety blocks are error rows of kind ``content_filter``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import runner
from runner.config.sweep import load_sweep
from runner.core.errors import ErrorKind, ProviderError
from runner.core.types import ChatRequest, Message
from runner.providers.gemini_wire import GeminiProvider, decode_response, encode_request
from runner.providers.settings import Connection
from runner.sim import SimProvider
from tests.conftest import quickstart_dict
from tests.providers.conftest import (
    http_sweep,
    outcomes,
    over_messages_api,
    rows_over_messages_api,
    trials,
    write,
)
from tests.providers.invoices import SCHEMA, SYSTEM, TOOLS, USER, ask

KEY = "gemini-test-key-51ab"



@pytest.fixture
def keyed(serve, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GEMINI_TEST_KEY", KEY)
    return serve(keys=(KEY,))


def test_googles_own_client_is_answered(keyed) -> None:  # type: ignore[no-untyped-def]
    genai = pytest.importorskip("google.genai")
    from google.genai import errors, types

    client = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=keyed.url, api_version="v1beta"))
    tools = [types.Tool(function_declarations=[types.FunctionDeclaration(
        name=t.name, description=t.description, parameters_json_schema=t.parameters) for t in TOOLS])]
    sim = SimProvider()
    kinds = set()
    for seed in range(16):
        got = client.models.generate_content(
            model="typical", contents=USER, config=types.GenerateContentConfig(
                system_instruction=SYSTEM, tools=tools, seed=seed,
                automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True)))
        want = sim.respond(ask("typical", seed))
        calls = [(c.name, c.args) for c in got.function_calls or []]
        assert calls == [(c.name, c.arguments) for c in over_messages_api(want.tool_calls)]
        assert (got.text or "") == want.text
        assert got.usage_metadata is not None and got.usage_metadata.prompt_token_count == want.usage.input_tokens
        kinds.add("calls" if calls else "text")
    assert kinds == {"calls", "text"}
    wrong = genai.Client(api_key="wrong", http_options=types.HttpOptions(base_url=keyed.url, api_version="v1beta"))
    with pytest.raises(errors.ClientError) as refused:
        wrong.models.generate_content(model="typical", contents=USER)
    assert refused.value.code == 400 and "API key not valid" in str(refused.value)


def test_the_provider_answers_as_the_simulated_agent(keyed) -> None:  # type: ignore[no-untyped-def]
    sim = SimProvider()

    async def go() -> None:
        provider = GeminiProvider(Connection("gemini", keyed.url + "/v1beta", "GEMINI_TEST_KEY"))
        try:
            for seed in range(20):
                for model in ("careful", "typical", "reckless"):
                    request = ask(model, seed * 7919 + 2**40)  # a seed past 32 bits reaches serve whole
                    got, want = await provider.complete(request), sim.respond(request)
                    assert (got.text, got.tool_calls, got.usage) == \
                        (want.text, over_messages_api(want.tool_calls), want.usage)
        finally:
            await provider.aclose()

    asyncio.run(go())
    assert keyed.stats()["by_tag"] == {"ok": 60}


def test_the_quickstart_on_gemini_equals_the_in_process_run(keyed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    local = quickstart_dict()
    local["probes"][0]["runs"] = 2
    runner.run(load_sweep(write(tmp_path, local, "sim.yaml")), tmp_path / "sim", quiet=True)
    remote = http_sweep(keyed.url + "/v1beta", "gemini", runs=2, api_key_env="GEMINI_TEST_KEY")
    result = runner.run(load_sweep(write(tmp_path, remote, "gemini.yaml")), tmp_path / "gemini", quiet=True)
    assert result.counts == {"ok": result.total}
    assert rows_over_messages_api(outcomes(trials(tmp_path / "sim"))).equals(outcomes(trials(tmp_path / "gemini")))


def test_the_request_names_tools_results_and_choice_as_the_api_does() -> None:
    from runner.core.types import ToolCall

    request = ChatRequest("m", (
        Message("system", SYSTEM), Message("user", USER),
        Message("assistant", "", (ToolCall("fetch_invoices", '{"provider":"x"}', {"provider": "x"}, "c1"),)),
        Message("tool", "no invoices", tool_call_id="c1"),
    ), TOOLS, {"temperature": 0, "max_tokens": 64}, 2**40 + 5, "fetch_invoices")
    body = encode_request(request)
    assert body["systemInstruction"] == {"parts": [{"text": SYSTEM}]}
    assert [t["role"] for t in body["contents"]] == ["user", "model", "user"]
    assert body["contents"][1]["parts"] == [{"functionCall": {"name": "fetch_invoices", "args": {"provider": "x"},
                                                              "id": "c1"}}]
    assert body["contents"][2]["parts"] == [{"functionResponse": {"name": "fetch_invoices", "id": "c1",
                                                                  "response": {"result": "no invoices"}}}]
    assert body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] == SCHEMA
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["fetch_invoices"]}}
    assert body["generationConfig"] == {"temperature": 0, "maxOutputTokens": 64, "seed": 5}  # an int32


@pytest.mark.parametrize("answer", [
    {"promptFeedback": {"blockReason": "SAFETY"}},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "Sure"}]}, "finishReason": "SAFETY"}]},
], ids=["prompt-blocked", "answer-stopped"])
def test_a_safety_block_is_an_error_of_its_own_kind(answer: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(ProviderError) as caught:
        decode_response(answer)
    assert caught.value.kind is ErrorKind.CONTENT_FILTER and not caught.value.kind.retryable


def _quota_error(delay: str) -> dict:  # type: ignore[type-arg]
    """A 429 as the Gemini API writes it: the wait in a RetryInfo detail, beside the quota that ran out."""
    return {"error": {"code": 429, "message": "You exceeded your current quota, please check your plan.",
                      "status": "RESOURCE_EXHAUSTED", "details": [
                          {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                           "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                                           "quotaId": "GenerateRequestsPerMinutePerProjectPerModel"}]},
                          {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}]}}


@pytest.mark.parametrize(("delay", "headers", "wait"), [
    ("37s", {}, 37.0), ("0.5s", {}, 0.5), ("12s", {"Retry-After": "3"}, 3.0), ("soon", {}, None), ("-4s", {}, None),
], ids=["body", "fraction", "header-first", "garbage", "negative"])
def test_a_rate_limit_waits_as_long_as_the_body_asks(delay: str, headers: dict[str, str], wait: float | None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers.hostile import HostileServer

    monkeypatch.setenv("GEMINI_TEST_KEY", KEY)
    with HostileServer(lambda n, body: (429, headers, _quota_error(delay))) as server:
        provider = GeminiProvider(Connection("gemini", server.base_url, "GEMINI_TEST_KEY"))
        try:
            with pytest.raises(ProviderError) as caught:
                asyncio.run(provider.complete(ChatRequest("gemini-2.5-flash", (Message("user", "hi"),))))
        finally:
            asyncio.run(provider.aclose())
    assert caught.value.kind is ErrorKind.RATE_LIMITED and caught.value.retry_after_s == wait
