"""The provider seam and the per-trial agent handle probes talk to.

A ``Provider`` turns a ``ChatRequest`` into a ``ChatResponse`` (or raises a
classified ``ProviderError``). Probes never see a provider: they get an ``Agent``,
bound to one model's name and params for one trial, which records every call it made
(attempts, usage, latency, the last response, and each request exactly as built with
its response or failure: ``Agent.record``) so the engine can fill the common columns
of the result row — ``calls`` among them — without knowing what the probe did.
Recording keeps references to the request and response objects (frozen), never a
copy; they become row values once per trial (``runner.core.calls.encode_calls``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from runner.core.calls import CallRecord
from runner.core.types import ChatRequest, ChatResponse, Message, ToolSpec, add_tokens
from runner.providers import inflight
from runner.providers.errors import ProviderError
from runner.providers.inflight import SendLog
from runner.providers.textcalls import parse_text_calls
from runner.providers.toolchoice import split_tool_choice


@runtime_checkable
class Provider(Protocol):
    """Anything that can answer a chat request. Implementations classify their errors."""

    name: str

    async def complete(self, request: ChatRequest) -> ChatResponse: ...

    async def aclose(self) -> None: ...


class Agent:
    """One model, one trial: builds requests from the model's config and records calls."""

    __slots__ = (
        "_provider",
        "attempts",
        "cache_hits",
        "calls",
        "input_tokens",
        "last",
        "latency_s",
        "model",
        "on_send",
        "output_tokens",
        "params",
        "record",
        "remedies",
        "time_left",
        "tool_call_parser",
        "tool_choice",
        "trial_seed",
    )

    def __init__(self, provider: Provider, model: str, params: Mapping[str, Any],
                 trial_seed: int | None = None, tool_call_parser: str | None = None,
                 on_send: Callable[[], None] | None = None,
                 time_left: Callable[[], float] | None = None) -> None:
        self._provider = provider
        #: seconds until this trial's deadline (``inflight.SendLog.time_left``)
        self.time_left = time_left
        #: hears every request this trial sends (``inflight.SendLog.on_send``): its deadline starts at the first
        self.on_send = on_send
        #: read tool calls written in the reply's text (``runner.providers.textcalls``); None: native calls only
        self.tool_call_parser = tool_call_parser
        self.trial_seed = trial_seed
        self.model = model
        # a tool_choice in the model's params is the default choice of every request with tools
        self.params, self.tool_choice = split_tool_choice(params)
        self.calls = 0
        self.attempts = 0
        #: the trial's tokens, summed over its calls; None once a server sent a count that is none
        self.input_tokens: int | None = 0
        self.output_tokens: int | None = 0
        self.latency_s = 0.0
        self.last: ChatResponse | None = None
        #: every call of the trial, in order: the request as built, the response or the failure
        self.record: list[CallRecord] = []
        #: learned parameter remedies applied to this trial's requests (``Remedy.describe()``)
        self.remedies: tuple[str, ...] = ()
        #: answers the response cache served instead of the model
        self.cache_hits = 0

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        seed: int | None = None,
        tool_choice: str | None = None,
    ) -> ChatResponse:
        if tool_choice is None and tools:
            tool_choice = self.tool_choice
        request = ChatRequest(self.model, tuple(messages), tuple(tools), self.params, seed, tool_choice,
                              self.trial_seed)
        self.calls += 1
        log = SendLog(on_send=self.on_send, time_left=self.time_left)
        token = inflight.CURRENT.set(log)
        try:
            response = await self._provider.complete(request)
        except ProviderError as exc:
            attempts, elapsed = max(exc.attempts, log.sent), log.elapsed_s()
            self.attempts += attempts
            self.latency_s += elapsed
            if exc.remedies:
                self._note(exc.remedies)
            self.record.append(CallRecord(request, None, attempts, elapsed, exc.kind.value, exc.message))
            raise
        except BaseException as exc:
            # cancelled by the trial's deadline (or any other abort): count what was sent all the same
            elapsed = log.elapsed_s()
            self.attempts += log.sent
            self.latency_s += elapsed
            self.record.append(CallRecord(request, None, log.sent, elapsed, None,
                                          f"no answer: {type(exc).__name__}" if not str(exc)
                                          else f"no answer: {type(exc).__name__}: {exc}"))
            raise
        finally:
            inflight.CURRENT.reset(token)
        if self.tool_call_parser is not None and not response.tool_calls and response.text:
            found = parse_text_calls(self.tool_call_parser, response.text)
            if found:
                response = replace(response, tool_calls=found, calls_from_text=len(found))
        self.attempts += response.attempts
        if response.cached:
            self.cache_hits += 1
        if response.remedies:
            self._note(response.remedies)
        self.input_tokens = add_tokens(self.input_tokens, response.usage.input_tokens)
        self.output_tokens = add_tokens(self.output_tokens, response.usage.output_tokens)
        self.latency_s += response.latency_s
        self.last = response
        self.record.append(CallRecord(request, response, response.attempts, response.latency_s))
        return response

    def _note(self, remedies: tuple[str, ...]) -> None:
        self.remedies = self.remedies + tuple(r for r in remedies if r not in self.remedies)
