"""Functions the ``callable`` provider tests name as ``module:function``."""

from __future__ import annotations

import asyncio

from runner.core.types import ChatRequest, ChatResponse
from runner.providers.errors import ErrorKind, ProviderError
from runner.sim import SimProvider

_SIM = SimProvider()
_failed_once: set[int] = set()


def sim_sync(request: ChatRequest) -> ChatResponse:
    return _SIM.respond(request)


async def sim_async(request: ChatRequest) -> ChatResponse:
    await asyncio.sleep(0)
    return _SIM.respond(request)


async def flaky_once(request: ChatRequest) -> ChatResponse:
    """Fails each seed's first call with a classified transient error, then answers."""
    if request.seed not in _failed_once:
        _failed_once.add(request.seed or 0)
        raise ProviderError(ErrorKind.TRANSIENT, "warming up")
    return _SIM.respond(request)


def wrong_type(request: ChatRequest) -> str:
    return "not a response"


def explodes(request: ChatRequest) -> ChatResponse:
    raise RuntimeError("the user's agent broke")


def echo_params(request: ChatRequest) -> ChatResponse:
    """Rejects temperature the way an API would, so the wrapper's remedies reach plain params."""
    if "temperature" in request.params:
        import httpx

        from runner.providers.classify import classify_http

        raise classify_http(400, httpx.Headers(), "Unsupported parameter: 'temperature' is not supported with this model.")
    return _SIM.respond(request)
