"""An ``Agent`` that answers from a stored row instead of a model: how a probe re-scores itself.

Re-scoring runs each probe's own ``run`` again with this agent, so the scoring code
that ran live is the code that re-scores — nothing is duplicated. The row's
``calls`` column (``runner.core.calls``) holds every model call of the trial in
order, each with its response exactly as the probe received it (tool calls read from
the text included, with ``calls_from_text``) or the error it raised; the agent hands
them back in that order. No probe's own columns are read: a multi-step trial's calls
are the model's own (a call the loop then corrupted is stored as the model sent it,
and the loop corrupts it again exactly as it did).

Outputs of format 1 (written before the ``calls`` column) are replayed from what
they stored:

- single-call probes: the last response — ``tool_calls`` (raw argument strings,
  re-parsed as the wire decoders parse them), ``response_text``, and whether those
  calls were read from the text (``calls_from_text``; an output older than that
  column replays them as native calls);
- multi-step probes: the ``steps`` column, one reply per turn. A step that was
  corrupted holds the *executed* argument, not the model's: such a row cannot be
  replayed (``NotReplayable``) — rerun that trial.

A probe that asks for more answers than the row holds gets ``ReplayExhausted``: that
row cannot be re-scored, and the caller refuses rather than guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runner.core.calls import decode_response
from runner.core.errors import TrialgridError
from runner.core.types import ChatResponse, Message, ToolCall, ToolSpec, parse_tool_arguments
from runner.providers.base import Agent
from runner.providers.errors import ErrorKind, ProviderError

#: a stored answer: the response, or the error the call raised (kind, message)
Answer = ChatResponse | tuple[str | None, str | None]


class ReplayExhausted(TrialgridError):
    """The probe asked for an answer the stored row does not hold."""


class NotReplayable(TrialgridError):
    """The row does not store what the model said (a format-1 multi-step row with a corrupted call)."""


def _call(name: str, raw: str, call_id: str, parse_error: str | None = None) -> ToolCall:
    arguments, error = parse_tool_arguments(raw)
    return ToolCall(name, raw, arguments, call_id, parse_error if arguments is None and parse_error else error)


def responses_from_steps(steps: Sequence[Mapping[str, Any]]) -> list[ChatResponse]:
    """One response per model turn of a stored multi-step trace (format 1: no ``calls`` column)."""
    turns: dict[int, tuple[list[str], list[ToolCall]]] = {}
    for step in steps:
        role = step["role"]
        if role not in ("assistant", "call"):
            continue  # results come from the tool simulator again; interceptor notes from the probe
        texts, calls = turns.setdefault(int(step["index"]), ([], []))
        if role == "assistant":
            texts.append(step["text"] or "")
        else:
            if step.get("injected"):
                raise NotReplayable("a call of this trial was corrupted by the loop, and an output of format 1 "
                                    "stores only the corrupted argument, not the model's")
            raw = step["arguments"] if step["arguments"] is not None else "{}"
            calls.append(_call(step["tool"] or "", raw, step["call_id"] or ""))
    return [ChatResponse("".join(texts), tuple(calls)) for _, (texts, calls) in sorted(turns.items())]


def stored_responses(row: Mapping[str, Any]) -> list[Answer] | None:
    """What the model said in this trial, call by call; ``None`` when a format-1 row got no answer at all."""
    if "calls" in row:  # format 2: every call, as the probe received it
        answers: list[Answer] = []
        for call in row["calls"] or ():
            response = decode_response(call)
            answers.append(response if response is not None else (call["error_kind"], call["error"]))
        return answers
    steps = row.get("steps")
    if steps is not None:
        return list(responses_from_steps(steps))
    calls = row.get("tool_calls")
    if calls is None:
        return None  # the trial's calls all failed (e.g. an auditor that never answered)
    tool_calls = tuple(_call(c["name"], c["arguments"], c["id"] or "", c["parse_error"]) for c in calls)
    from_text = len(tool_calls) if row.get("calls_from_text") else 0
    return [ChatResponse(row.get("response_text") or "", tool_calls, calls_from_text=from_text)]


def _error(kind: str | None, message: str | None) -> ProviderError:
    try:
        error_kind = ErrorKind(kind) if kind else ErrorKind.TRANSIENT
    except ValueError:
        error_kind = ErrorKind.TRANSIENT
    return ProviderError(error_kind, message or "replay: the original call received no response")


class ReplayAgent(Agent):
    """Answers ``chat`` with the stored answers in order, without any provider."""

    __slots__ = ("_responses", "_trial")

    def __init__(self, responses: Sequence[Answer] | None, model: str, trial: str) -> None:
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
        answer = self._responses[self.calls - 1]
        if isinstance(answer, tuple):
            raise _error(*answer)  # the call failed live: it fails the same way now
        self.last = answer
        return answer


class _NoProvider:
    name = "replay"

    async def complete(self, request: Any) -> ChatResponse:
        raise AssertionError("a ReplayAgent never calls a provider")

    async def aclose(self) -> None:
        return None


_NO_PROVIDER = _NoProvider()
