"""Gemini models on Vertex AI (``provider: vertex``) against ``trialgrid serve``'s Vertex route.

Google's own client (``google-genai`` with ``vertexai=True`` and an OAuth token) is answered first; then
trialgrid's provider, with google-auth's own credentials object handing out the token, gives what the
in-process simulated agent gives, at the project's and location's path.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runner.providers.settings import Connection
from runner.sim import SimProvider
from tests.providers.conftest import over_messages_api
from tests.providers.invoices import SYSTEM, TOOLS, USER, ask

TOKEN = "ya29.trialgrid-test-token"



@pytest.fixture
def keyed(serve, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("VERTEX_TEST_TOKEN", TOKEN)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "trialgrid-test")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    return serve(keys=(TOKEN,))


def test_googles_own_vertex_client_is_answered(keyed) -> None:  # type: ignore[no-untyped-def]
    genai = pytest.importorskip("google.genai")
    from google.genai import types
    from google.oauth2.credentials import Credentials

    client = genai.Client(vertexai=True, project="trialgrid-test", location="europe-west4",
                          credentials=Credentials(token=TOKEN),
                          http_options=types.HttpOptions(base_url=keyed.url, api_version="v1"))
    tools = [types.Tool(function_declarations=[types.FunctionDeclaration(
        name=t.name, description=t.description, parameters_json_schema=t.parameters) for t in TOOLS])]
    sim = SimProvider()
    for seed in range(8):
        got = client.models.generate_content(
            model="typical", contents=USER, config=types.GenerateContentConfig(
                system_instruction=SYSTEM, tools=tools, seed=seed,
                automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True)))
        want = sim.respond(ask("typical", seed))
        assert [(c.name, c.args) for c in got.function_calls or []] == \
            [(c.name, c.arguments) for c in over_messages_api(want.tool_calls)]
    assert keyed.stats()["by_tag"] == {"ok": 8}


def test_the_provider_takes_its_token_from_google_auth(keyed, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("google.auth")
    import google.auth
    from google.oauth2.credentials import Credentials

    from runner.providers.vertex_wire import VertexProvider

    def default(scopes: Any = None, **kw: Any) -> tuple[Credentials, str]:
        return Credentials(token=TOKEN), "from-credentials"

    monkeypatch.setattr(google.auth, "default", default)
    sim = SimProvider()

    async def go() -> None:
        provider = VertexProvider(Connection("vertex", keyed.url + "/v1", None))
        try:
            assert (provider.project, provider.location) == ("trialgrid-test", "europe-west4")
            for seed in range(10):
                for model in ("careful", "reckless"):
                    request = ask(model, seed + 2**40)
                    got, want = await provider.complete(request), sim.respond(request)
                    assert (got.text, got.tool_calls) == (want.text, over_messages_api(want.tool_calls))
        finally:
            await provider.aclose()

    asyncio.run(go())
    assert keyed.stats()["by_tag"] == {"ok": 20}
