"""An ``Agent`` that answers from a stored row instead of a model: how a probe re-scores itself.

Re-scoring runs each probe's own ``run`` again with this agent, so the scoring code
that ran live is the code that re-scores — nothing is duplicated. What a row stores
is enough to rebuild what the model said:

- single-call probes (``misselection``, ``negative``, ``phantom``, ``judge``): the
  last response — ``tool_calls`` (raw argument strings, re-parsed exactly as the
  wire decoders parse them) and ``response_text``; and whether those calls were
  read from the reply's text (``calls_from_text``, the column of the probes that
  score it: a ``tool_call_parser`` reads the text only when the reply has no native
  call, so when it is true every stored call came from the text; an output written
  before the column existed has none, and its calls replay as native ones);
- multi-step probes (``propagation``): the ``steps`` column, one model reply per turn
  (its ``assistant`` text and ``call`` steps). A call the loop corrupted is stored
  *after* the injection, so its original argument is restored from the step's
  ``injected`` note before replay, and the loop injects it again exactly as it did.

A probe that asks for more answers than the row holds (its scoring now wants a turn
that never happened) gets ``ReplayExhausted``: that row cannot be re-scored, and
the caller refuses rather than guess.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from runner.core.errors import TrialgridError
from runner.core.types import ChatResponse, Message, ToolCall, ToolSpec, parse_tool_arguments
from runner.providers.base import Agent
from runner.providers.errors import ErrorKind, ProviderError


class ReplayExhausted(TrialgridError):
    """The probe asked for an answer the stored row does not hold."""


def _call(name: str, raw: str, call_id: str, parse_error: str | None = None) -> ToolCall:
    arguments, error = parse_tool_arguments(raw)
    return ToolCall(name, raw, arguments, call_id, parse_error if arguments is None and parse_error else error)


def _uninjected(arguments: str, note: str) -> str:
    """The argument string the model sent, from the executed one and its ``"field: before -> after (kind)"`` note."""
    field, _, rest = note.partition(": ")
    before, _ = json.JSONDecoder().raw_decode(rest)
    args = json.loads(arguments)
    args[field] = before
    return json.dumps(args, separators=(",", ":"), ensure_ascii=False)


def responses_from_steps(steps: Sequence[Mapping[str, Any]]) -> list[ChatResponse]:
    """One response per model turn of a stored multi-step trace."""
    turns: dict[int, tuple[list[str], list[ToolCall]]] = {}
    for step in steps:
        role = step["role"]
        if role not in ("assistant", "call"):
            continue  # results come from the tool simulator again; interceptor notes from the probe
        texts, calls = turns.setdefault(int(step["index"]), ([], []))
        if role == "assistant":
            texts.append(step["text"] or "")
        else:
            raw = step["arguments"] if step["arguments"] is not None else "{}"
            if step.get("injected"):
                raw = _uninjected(raw, step["injected"])
            calls.append(_call(step["tool"] or "", raw, step["call_id"] or ""))
    return [ChatResponse("".join(texts), tuple(calls)) for _, (texts, calls) in sorted(turns.items())]


def stored_responses(row: Mapping[str, Any]) -> list[ChatResponse] | None:
    """What the model said in this trial, in order; ``None`` when the trial got no answer at all."""
    steps = row.get("steps")
    if steps is not None:
        return responses_from_steps(steps)
    calls = row.get("tool_calls")
    if calls is None:
        return None  # the trial's calls all failed (e.g. an auditor that never answered)
    tool_calls = tuple(_call(c["name"], c["arguments"], c["id"] or "", c["parse_error"]) for c in calls)
    from_text = len(tool_calls) if row.get("calls_from_text") else 0
    return [ChatResponse(row.get("response_text") or "", tool_calls, calls_from_text=from_text)]


class ReplayAgent(Agent):
    """Answers ``chat`` with the stored responses in order, without any provider."""

    __slots__ = ("_responses", "_trial")

    def __init__(self, responses: list[ChatResponse] | None, model: str, trial: str) -> None:
        super().__init__(_NO_PROVIDER, model, {})
        self._responses = responses
        self._trial = trial

    async def chat(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), *, seed: int | None = None,
                   tool_choice: str | None = None) -> ChatResponse:
        self.calls += 1
        if self._responses is None:
            # the live trial got no answer here; the probe records it as it did then (a retryable failure)
            raise ProviderError(ErrorKind.TRANSIENT, "replay: the original trial received no response to this call")
        if self.calls > len(self._responses):
            raise ReplayExhausted(f"trial {self._trial}: the probe asked for model answer {self.calls}, "
                                  f"but the row stores {len(self._responses)}")
        response = self._responses[self.calls - 1]
        self.last = response
        return response


class _NoProvider:
    name = "replay"

    async def complete(self, request: Any) -> ChatResponse:
        raise AssertionError("a ReplayAgent never calls a provider")

    async def aclose(self) -> None:
        return None


_NO_PROVIDER = _NoProvider()
