"""The simulator's seed channels reach only ``trialgrid serve``: a loopback ``base_url``, or ``sim_seed: true``.

Every live request used to carry ``x-trialgrid-seed``, and batch requests put the seed
in ``metadata`` (Anthropic's ``metadata.user_id``, the field a vendor uses to tell end
users apart for abuse handling). Tests may reach only 127.0.0.1, so a non-loopback
vendor is an ``httpx.MockTransport`` at the transport seam: what it captures is the
request exactly as it would have left the machine. That the sim still gets its seed
over real HTTP on loopback is tests/providers/test_serve*.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from runner.core.types import ChatRequest, Message
from runner.providers import ProviderError, http_base, make_provider
from runner.providers.batches import VENDORS
from runner.providers.seed_channel import SEED_HEADER, SEED_METADATA_KEY, SEED_USER_PREFIX
from runner.providers.settings import Connection, RetryPolicy, is_loopback

VENDOR = "https://api.example.com/v1"
LOOPBACK = "http://127.0.0.1:9/v1"
REQUEST = ChatRequest("m", (Message("user", "hi"),), params={"max_tokens": 8}, seed=1234, trial_seed=99)
WIRES = ("openai", "anthropic", "openai-responses")


def _captured(monkeypatch: pytest.MonkeyPatch, provider: str, connection: Connection) -> httpx.Request:
    """The one request a live ``complete`` sends, captured where it would leave the machine."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={})  # the body does not decode: only the request matters here

    def client(transport: str, *, timeout_s: float, headers: dict[str, str], max_connections: int) -> Any:
        return httpx.AsyncClient(transport=httpx.MockTransport(answer), headers=headers)

    monkeypatch.setattr(http_base, "make_client", client)
    wire = make_provider(provider, connection)

    async def go() -> None:
        try:
            await wire.complete(REQUEST)
        except ProviderError:
            pass
        finally:
            await wire.aclose()

    asyncio.run(go())
    [request] = sent
    return request


def _carries_seed(request: httpx.Request) -> bool:
    body = request.content.decode()
    return SEED_HEADER in request.headers or SEED_METADATA_KEY in body or SEED_USER_PREFIX in body


@pytest.mark.parametrize("provider", WIRES)
def test_a_live_request_to_a_vendor_carries_no_seed_header(monkeypatch: pytest.MonkeyPatch, provider: str) -> None:
    request = _captured(monkeypatch, provider, Connection(provider, VENDOR, None))
    assert request.url.host == "api.example.com"
    assert not _carries_seed(request) and not any("trialgrid" in k for k in request.headers)


@pytest.mark.parametrize("provider", WIRES)
def test_a_live_request_to_loopback_or_opted_in_carries_it(monkeypatch: pytest.MonkeyPatch, provider: str) -> None:
    assert _captured(monkeypatch, provider, Connection(provider, LOOPBACK, None)).headers[SEED_HEADER] == "1234"
    opted_in = _captured(monkeypatch, provider, Connection(provider, VENDOR, None, sim_seed=True))
    assert opted_in.headers[SEED_HEADER] == "1234"
    opted_out = _captured(monkeypatch, provider, Connection(provider, LOOPBACK, None, sim_seed=False))
    assert SEED_HEADER not in opted_out.headers


def _submitted(provider: str, connection: Connection) -> list[httpx.Request]:
    """Every request one batch submission sends (the input file upload, the batch creation)."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"id": f"obj-{len(sent)}"})

    batches = VENDORS[provider](connection, RetryPolicy(max_attempts=1))

    async def go() -> None:
        await batches.client.aclose()
        batches.client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
        try:
            await batches.submit([("trial-1", batches.encode(REQUEST))], "label")
        finally:
            await batches.aclose()

    asyncio.run(go())
    return sent


@pytest.mark.parametrize("provider", WIRES)
def test_a_batch_to_a_vendor_carries_no_seed_metadata(provider: str) -> None:
    sent = _submitted(provider, Connection(provider, VENDOR, None))
    assert sent and all(r.url.host == "api.example.com" and not _carries_seed(r) for r in sent)
    assert all(b"user_id" not in r.content for r in sent)


def test_a_batch_to_trialgrid_serve_keeps_the_seed_where_serve_reads_it() -> None:
    [created] = _submitted("anthropic", Connection("anthropic", LOOPBACK, None))
    params = json.loads(created.content)["requests"][0]["params"]
    assert params["metadata"] == {"user_id": f"{SEED_USER_PREFIX}1234"}
    upload = _submitted("openai-responses", Connection("openai-responses", VENDOR, None, sim_seed=True))[0]
    assert f'"{SEED_METADATA_KEY}":"1234"'.encode() in upload.content


def test_sim_seed_is_a_validated_model_key() -> None:
    from pydantic import ValidationError

    from runner.config.sweep import ModelConfig

    def model(**kw: Any) -> ModelConfig:
        return ModelConfig.model_validate({"name": "m", "provider": "openai", "api_key_env": None, **kw})

    assert not model(base_url=VENDOR).connection.sends_seed
    assert model(base_url=LOOPBACK).connection.sends_seed
    assert model(base_url=VENDOR, sim_seed=True).connection.sends_seed
    assert not model(base_url=LOOPBACK, sim_seed=False).connection.sends_seed
    assert not model().connection.sends_seed  # the vendor's public API
    with pytest.raises(ValidationError, match="sim_seed"):
        model(sim_seed="sometimes")
    with pytest.raises(ValidationError, match="sim_seed is not used by provider sim"):
        ModelConfig.model_validate({"name": "s", "provider": "sim", "model": "careful", "sim_seed": True})


@pytest.mark.parametrize("url, local", [
    ("http://127.0.0.1:8080/v1", True), ("http://127.0.0.2", True), ("http://localhost:1/v1", True),
    ("http://LOCALHOST.", True), ("http://[::1]:8000", True), ("http://0.0.0.0:8000", True),
    ("https://api.openai.com/v1", False), ("https://localhost.example.com", False), ("http://127.example.com", False),
    ("http://10.0.0.2:8000", False), (None, False), ("", False),
])
def test_is_loopback(url: str | None, local: bool) -> None:
    assert is_loopback(url) is local
