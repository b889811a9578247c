"""``ManagedProvider`` re-sends a request with remedies applied, and loses no field of it or of the answer."""

from __future__ import annotations

import asyncio
from dataclasses import fields

from runner.core.types import ChatRequest, ChatResponse, Message, ToolSpec, Usage
from runner.providers.errors import ErrorKind, ProviderError, Remedy
from runner.providers.managed import ManagedProvider
from runner.providers.remedies import RemedyBook
from runner.providers.settings import RetryPolicy
from tests.helpers.fakes import NoLimits


class _RejectsTemperatureOnce:
    """An in-process provider (no wire body: ``ManagedProvider`` applies remedies to the request itself)."""

    name = "inproc"

    def __init__(self) -> None:
        self.seen: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.seen.append(request)
        if "temperature" in request.params:
            raise ProviderError(ErrorKind.REJECTED_PARAM, "temperature is not supported", status_code=400,
                                remedy=Remedy("drop", "temperature"), param="temperature")
        return ChatResponse("ok", usage=Usage(1, 1), cached=True, calls_from_text=2)

    async def aclose(self) -> None:
        pass



def test_a_remedied_resend_keeps_every_field_of_the_request_and_of_the_answer() -> None:
    request = ChatRequest("m", (Message("user", "hi"),), (ToolSpec("t", "a tool", {"type": "object"}),),
                          {"temperature": 0.2, "max_tokens": 5}, seed=7, tool_choice="t", trial_seed=42)
    inner = _RejectsTemperatureOnce()
    managed = ManagedProvider(inner, endpoint="x", limiter=NoLimits(), book=RemedyBook(), policy=RetryPolicy())  # type: ignore[arg-type]
    response = asyncio.run(managed.complete(request))
    first, resent = inner.seen
    assert first == request
    assert dict(resent.params) == {"max_tokens": 5}
    for f in fields(ChatRequest):
        if f.name != "params":
            assert getattr(resent, f.name) == getattr(request, f.name), f.name  # trial_seed was dropped here
    assert (response.attempts, response.remedies) == (2, ("drop temperature",))
    assert (response.cached, response.calls_from_text, response.text) == (True, 2, "ok")
