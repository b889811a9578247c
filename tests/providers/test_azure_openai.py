"""Azure OpenAI (``provider: azure-openai``) against ``trialgrid serve``'s Azure routes.

The server is checked first with the official client (``openai.AzureOpenAI``, and ``openai.OpenAI`` on Azure's v1
API): its paths, its ``api-key`` header, its ``api-version``, its 401 and 404. Then trialgrid's own provider
against the same server gives what the in-process simulated agent gives, and the same outcomes as the quickstart
sweep run in process; a prompt the content filter refuses and an answer it cuts are error rows of their own kind.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import types
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

import runner
from runner.config.sweep import load_sweep
from runner.core.errors import ErrorKind, ProviderError, UserError
from runner.providers.azure_openai_wire import AzureOpenAIProvider
from runner.providers.classify import classify_http
from runner.providers.settings import Connection
from runner.sim import SimProvider
from tests.conftest import quickstart_dict
from tests.helpers.hostile import HostileServer, chat_answer
from tests.providers.conftest import http_sweep, outcomes, trials, write
from tests.providers.invoices import SYSTEM, TOOLS, USER, ask

KEY = "azure-test-key-3f9c"
VERSION = "2024-10-21"
OPENAI_TOOLS = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                  "parameters": t.parameters}} for t in TOOLS]
ASK = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]



@pytest.fixture
def keyed(serve, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("AZURE_TEST_KEY", KEY)
    return serve(keys=(KEY,))


def test_the_official_azure_client_is_answered_on_both_apis(keyed) -> None:  # type: ignore[no-untyped-def]
    openai = pytest.importorskip("openai")
    deployments = openai.AzureOpenAI(azure_endpoint=keyed.url, api_key=KEY, api_version=VERSION, max_retries=0)
    v1 = openai.OpenAI(base_url=keyed.url + "/openai/v1", api_key="unused", default_headers={"api-key": KEY},
                       max_retries=0)
    sim = SimProvider()
    for client in (deployments, v1):
        for seed in range(12):
            got = client.chat.completions.create(model="typical", messages=ASK, tools=OPENAI_TOOLS, seed=seed)
            want = sim.respond(ask("typical", seed))
            message = got.choices[0].message
            assert [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []] == \
                [(c.name, c.arguments) for c in want.tool_calls]
            assert (message.content or "") == want.text
    bad = openai.AzureOpenAI(azure_endpoint=keyed.url, api_key="wrong", api_version=VERSION, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model="typical", messages=ASK)
    # the deployments API without api-version: Azure's 404
    answer = httpx.post(keyed.url + "/openai/deployments/typical/chat/completions", headers={"api-key": KEY},
                        json={"model": "typical", "messages": ASK})
    assert answer.status_code == 404 and answer.json()["error"]["message"] == "Resource not found"


@pytest.mark.parametrize("api_version", [None, VERSION], ids=["v1", "deployments"])
def test_the_provider_answers_as_the_simulated_agent(keyed, api_version: str | None) -> None:  # type: ignore[no-untyped-def]
    sim = SimProvider()

    async def go() -> None:
        provider = AzureOpenAIProvider(Connection("azure-openai", keyed.url, "AZURE_TEST_KEY", api_version=api_version))
        try:
            for seed in range(20):
                for model in ("careful", "typical", "reckless"):
                    got, want = await provider.complete(ask(model, seed)), sim.respond(ask(model, seed))
                    assert (got.text, got.tool_calls, got.usage) == (want.text, want.tool_calls, want.usage)
        finally:
            await provider.aclose()

    asyncio.run(go())
    assert keyed.stats()["by_tag"] == {"ok": 60}


def test_the_quickstart_on_azure_equals_the_in_process_run(keyed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    local = quickstart_dict()
    local["probes"][0]["runs"] = 2
    runner.run(load_sweep(write(tmp_path, local, "sim.yaml")), tmp_path / "sim", quiet=True)
    remote = http_sweep(keyed.url, "azure-openai", runs=2, api_key_env="AZURE_TEST_KEY", api_version=VERSION)
    result = runner.run(load_sweep(write(tmp_path, remote, "azure.yaml")), tmp_path / "azure", quiet=True)
    assert result.counts == {"ok": result.total}
    assert outcomes(trials(tmp_path / "sim")).equals(outcomes(trials(tmp_path / "azure")))


def test_the_content_filter_is_an_error_kind_of_its_own() -> None:
    body = {"error": {"code": "content_filter", "message": "The response was filtered due to the prompt triggering "
                                                         "Azure OpenAI's content management policy."}}
    error = classify_http(400, {}, body["error"]["message"], code=body["error"]["code"])
    assert error.kind is ErrorKind.CONTENT_FILTER and not error.kind.retryable


def _error_of(answer: dict[str, Any]) -> tuple[ProviderError, int]:
    """The error one request of an Entra-signed provider raises against a server answering ``answer`` with a
    200, and how many requests reached that server."""
    with HostileServer(lambda n, body: (200, {}, answer)) as server:
        async def go() -> ProviderError:
            provider = AzureOpenAIProvider(Connection("azure-openai", f"http://127.0.0.1:{server.port}", None))
            try:
                with pytest.raises(ProviderError) as caught:
                    await provider.complete(ask("typical", 1))
                return caught.value
            finally:
                await provider.aclose()

        return asyncio.run(go()), server.requests


def test_an_answer_the_filter_cut_is_an_error_row_not_an_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 200 whose ``finish_reason`` is ``content_filter``: the text it kept is not the model's answer."""
    monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", "entra-token-1")
    cut = chat_answer("Sure, h", usage={"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12})
    cut["choices"][0]["finish_reason"] = "content_filter"
    error, _ = _error_of(cut)
    assert error.kind is ErrorKind.CONTENT_FILTER and "content filter" in str(error)


def test_a_sweep_names_what_azure_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from runner.config.sweep import ModelConfig

    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)

    with pytest.raises(ValidationError, match="needs base_url"):
        ModelConfig(name="a", provider="azure-openai", model="gpt-4o")
    with pytest.raises(ValidationError, match="only used by provider azure-openai"):
        ModelConfig(name="a", provider="openai", model="gpt-4o", api_key_env=None, api_version=VERSION)
    m = ModelConfig(name="a", provider="azure-openai", model="gpt-4o", base_url="https://r.openai.azure.com")
    assert m.api_key_env == "AZURE_OPENAI_API_KEY"


class _Token:
    def __init__(self, token: str, expires_on: float) -> None:
        self.token, self.expires_on = token, expires_on


class _Credential:
    """``azure.identity.DefaultAzureCredential`` as the provider uses it: ``get_token(scope)``, counted."""

    scopes: ClassVar[list[str]] = []
    life_s = 3600.0
    fail: Exception | None = None

    def get_token(self, scope: str) -> _Token:
        if _Credential.fail is not None:
            raise _Credential.fail
        _Credential.scopes.append(scope)
        return _Token(f"entra-{len(_Credential.scopes)}", time.time() + _Credential.life_s)


@pytest.fixture
def identity(monkeypatch: pytest.MonkeyPatch) -> type[_Credential]:
    """An ``azure.identity`` module whose ``DefaultAzureCredential`` is ``_Credential`` (no Entra tenant here)."""
    module = types.ModuleType("azure.identity")
    module.DefaultAzureCredential = _Credential  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "azure.identity", module)
    monkeypatch.delenv("AZURE_OPENAI_AD_TOKEN", raising=False)
    _Credential.scopes, _Credential.life_s, _Credential.fail = [], 3600.0, None
    return _Credential


def _sent_headers(requests: int) -> list[dict[str, str]]:
    """The headers of ``requests`` requests of an Entra-signed provider (``api_key_env: null``)."""
    record: list[tuple[dict[str, str], bytes]] = []
    with HostileServer(lambda n, body: (200, {}, chat_answer()), record) as server:
        async def go() -> None:
            provider = AzureOpenAIProvider(Connection("azure-openai", f"http://127.0.0.1:{server.port}", None))
            try:
                for seed in range(requests):
                    await provider.complete(ask("typical", seed))
            finally:
                await provider.aclose()

        asyncio.run(go())
    return [{k.lower(): v for k, v in headers.items()} for headers, _ in record]


def test_entra_id_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", "eyJ0eXAi.entra.token")
    for headers in _sent_headers(2):
        assert headers["authorization"] == "Bearer eyJ0eXAi.entra.token" and "api-key" not in headers


def test_entra_id_token_from_azure_identity_is_fetched_again_before_it_expires(identity: type[_Credential]) -> None:
    assert [h["authorization"] for h in _sent_headers(3)] == ["Bearer entra-1"] * 3  # one token, cached
    assert identity.scopes == ["https://cognitiveservices.azure.com/.default"]
    identity.life_s = 60.0  # under five minutes left: every request fetches again
    assert [h["authorization"] for h in _sent_headers(2)] == ["Bearer entra-2", "Bearer entra-3"]


def test_entra_id_sign_in_that_fails_is_one_fatal_line(identity: type[_Credential]) -> None:
    identity.fail = RuntimeError("DefaultAzureCredential failed to retrieve a token from the included credentials.")
    error, requests = _error_of(chat_answer())
    assert requests == 0
    assert error.kind is ErrorKind.FATAL and "Entra ID" in str(error) and "az login" in str(error)


def test_entra_id_without_a_token_or_azure_identity_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_OPENAI_AD_TOKEN", raising=False)
    monkeypatch.setitem(sys.modules, "azure.identity", None)  # not installed
    connection = Connection("azure-openai", "https://r.openai.azure.com", None)
    with pytest.raises(UserError, match="Entra ID") as caught:
        AzureOpenAIProvider(connection)
    assert "trialgrid[azure]" in (caught.value.hint or "")
    assert "AZURE_OPENAI_AD_TOKEN" in (AzureOpenAIProvider.check_offline(connection) or "")
    assert AzureOpenAIProvider.check_offline(Connection("azure-openai", "https://r.openai.azure.com", "K")) is None
