"""How a probe is run in two passes without knowing it: record its request, then replay the answer.

Batch mode cannot call the model while ``probe.run(spec, agent)`` waits. Instead:

1. **record**: the probe runs against an ``Agent`` whose provider is a
   ``_RecordingProvider``; the first ``chat`` raises ``Captured`` (a
   ``BaseException``, so no probe's own ``except Exception`` / ``except
   ProviderError`` can swallow it), and the request submitted is the one the agent
   recorded for that call (``Agent.record``: the same record that becomes the row's
   ``calls``). The probe's outcome is discarded — there is none yet.
2. **replay**: once the batch has ended, the trial runs again through the ordinary
   ``TrialRunner`` whose provider is a ``ReplayProvider``: its ``complete`` returns
   the batch's answer for the current trial (or raises the batch's per-request
   error), so the probe scores it with its own code and the row is built exactly
   as in live mode — its ``calls`` column holds the request submitted and the
   batch's answer. The current trial is a context variable set around each replay.

A replayed request must be the one recorded (its wire-body hash is checked): a
probe that asks something else the second time would be scored against an answer
to another question, so that trial becomes an ``internal`` error row instead.
"""

from __future__ import annotations

import contextvars
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from runner.core.types import ChatRequest, ChatResponse, TrialSpec
from runner.probes import Probe
from runner.providers import Agent, ErrorKind, ProviderError
from runner.providers.batches import Answer

#: the trial a ``ReplayProvider`` answers for (set by the batch runner around each replay)
CURRENT_TRIAL: contextvars.ContextVar[str] = contextvars.ContextVar("trialgrid_batch_trial")


class Captured(BaseException):
    """The request a probe asked for, raised out of the probe by ``_RecordingProvider``.

    Internal control flow, deliberately a ``BaseException`` and outside ``TrialgridError``:
    a probe's own ``except Exception`` must not swallow it (``capture_request`` catches it).
    """

    def __init__(self, request: ChatRequest) -> None:
        super().__init__("request captured for batch mode")
        self.request = request


class _RecordingProvider:
    """A provider that never answers: it hands the first request back to the batch runner."""

    name = "batch-record"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        raise Captured(request)

    async def aclose(self) -> None:
        return None


async def capture_request(probe: Probe, spec: TrialSpec, model_id: str, params: Mapping[str, Any]) -> ChatRequest | None:
    """The request ``probe`` makes first for ``spec``; ``None`` if it finished without asking the model."""
    agent = Agent(_RecordingProvider(), model_id, params)
    try:
        await probe.run(spec, agent)
    except Captured:
        return agent.record[0].request
    except Exception:
        return None
    return None


def body_hash(body: Mapping[str, Any]) -> str:
    """A short digest of a wire body: what the replay check compares."""
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


class ReplayProvider:
    """Answers each trial's request with what its batch returned. One model call per trial."""

    name = "batch-replay"

    def __init__(self, encode: Callable[[ChatRequest], dict[str, Any]], where: str) -> None:
        self._encode = encode
        self._where = where
        #: trial id → (the batch's answer, the hash of the body submitted for it)
        self.answers: dict[str, tuple[Answer, str]] = {}
        self._calls: dict[str, int] = {}

    async def complete(self, request: ChatRequest) -> ChatResponse:
        trial = CURRENT_TRIAL.get()
        if trial not in self.answers:
            raise ProviderError(ErrorKind.INTERNAL, f"trial {trial} asked the model nothing when its request was "
                                "recorded, but asks now; batch mode needs a probe that asks the same both times")
        answer, submitted = self.answers[trial]
        calls = self._calls[trial] = self._calls.get(trial, 0) + 1
        if calls > 1:
            if answer.error is not None:  # a probe retrying a failed call gets the same failure: nothing was resent
                raise _copy(answer.error)
            raise ProviderError(ErrorKind.INTERNAL, f"the probe made a second model call for trial {trial}; batch mode "
                                "answers one call per trial (run multi-turn probes live)")
        if body_hash(self._encode(request)) != submitted:
            raise ProviderError(ErrorKind.INTERNAL, f"the probe built a different request for trial {trial} than the "
                                f"one submitted{self._where}; its answer cannot be scored (is the probe deterministic?)")
        if answer.error is not None:
            raise _copy(answer.error)
        assert answer.response is not None
        return answer.response

    def forget(self, trial: str) -> None:
        self.answers.pop(trial, None)
        self._calls.pop(trial, None)

    async def aclose(self) -> None:
        return None


def _copy(error: ProviderError) -> ProviderError:
    """A fresh exception per raise: the agent adds attempts to it."""
    return ProviderError(error.kind, error.message, retry_after_s=None, remedy=error.remedy,
                         status_code=error.status_code, param=error.param)
