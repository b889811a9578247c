"""An ``Agent`` that answers from a stored row instead of a model: how a probe re-scores itself.

Re-scoring runs each probe's own ``run`` again with this agent, so the scoring code
that ran live is the code that re-scores — nothing is duplicated. The row's
``calls`` column (``runner.core.calls``) holds every model call of the trial in
order, each with its response exactly as the probe received it (tool calls read from
the text included, with ``calls_from_text``) or the error it raised; the agent hands
them back in that order. No probe's own columns are read: a multi-step trial's calls
are the model's own (a call the loop then corrupted is stored as the model sent it,
and the loop corrupts it again exactly as it did).

A probe that asks for more answers than the row holds gets ``ReplayExhausted``: that
row cannot be re-scored, and the caller refuses rather than guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runner.core.calls import decode_response
from runner.core.errors import TrialgridError
from runner.core.types import ChatResponse, Message, ToolSpec
from runner.providers.base import Agent
from runner.providers.errors import ErrorKind, ProviderError

#: a stored answer: the response, or the error the call raised (kind, message)
Answer = ChatResponse | tuple[str | None, str | None]


class ReplayExhausted(TrialgridError):
    """The probe asked for an answer the stored row does not hold."""


def stored_responses(row: Mapping[str, Any]) -> list[Answer]:
    """What the model said in this trial, call by call, as the probe received each (or the error it raised)."""
    answers: list[Answer] = []
    for call in row.get("calls") or ():
        response = decode_response(call)
        answers.append(response if response is not None else (call["error_kind"], call["error"]))
    return answers


def _error(kind: str | None, message: str | None) -> ProviderError:
    try:
        error_kind = ErrorKind(kind) if kind else ErrorKind.TRANSIENT
    except ValueError:
        error_kind = ErrorKind.TRANSIENT
    return ProviderError(error_kind, message or "replay: the original call received no response")


class ReplayAgent(Agent):
    """Answers ``chat`` with the stored answers in order, without any provider."""

    __slots__ = ("_responses", "_trial")

    def __init__(self, responses: Sequence[Answer], model: str, trial: str) -> None:
        super().__init__(_NO_PROVIDER, model, {})
        self._responses = responses
        self._trial = trial

    async def chat(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), *, seed: int | None = None,
                   tool_choice: str | None = None) -> ChatResponse:
        self.calls += 1
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
