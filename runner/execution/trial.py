"""One trial, start to row: bind the model, run the probe, catch everything.

This is where a trial's failure becomes data. Whatever the probe or provider raises,
the trial ends as a row: ``status = "ok"`` with the probe's outcome columns, or
``status = "error"`` with the error's kind and message and *null* outcome columns —
so an error can never be counted as a pass or a fail.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from runner.core.calls import encode_calls
from runner.core.schema import STATUS_ERROR, STATUS_OK
from runner.core.types import TrialSpec
from runner.execution.deadlines import Deadlines
from runner.probes import Probe
from runner.providers import Agent, ErrorKind, Provider, ProviderError


@dataclass(frozen=True)
class ModelBinding:
    """What a trial needs to reach one model."""

    name: str
    provider_name: str
    provider: Provider
    model_id: str
    params: Mapping[str, Any]
    tool_call_parser: str | None = None  # read tool calls written in the reply's text (opt-in)
    #: its calls wait their turn in a key's limiter: the trial's deadline starts at its first request
    queued: bool = False


class TrialRunner:
    """Callable: ``await runner(spec) -> row``. Never raises for a trial's own failure."""

    def __init__(self, probes: Mapping[str, Probe], models: Mapping[str, ModelBinding], timeout_s: float) -> None:
        self._probes = probes
        self._models = models
        self._timeout_s = timeout_s
        self._deadlines = Deadlines(timeout_s)

    async def aclose(self) -> None:
        await self._deadlines.aclose()

    async def __call__(self, spec: TrialSpec) -> dict[str, Any]:
        binding = self._models[spec.model]
        task = asyncio.current_task()
        assert task is not None
        deadlines = self._deadlines
        queued = binding.queued
        agent = Agent(binding.provider, binding.model_id, binding.params, spec.seed, binding.tool_call_parser,
                      partial(deadlines.arm, task) if queued else None, partial(deadlines.left, task))
        row: dict[str, Any] = {
            "sweep_id": spec.sweep_id, "trial_id": spec.trial_id, "model": spec.model,
            "provider": binding.provider_name, "model_id": binding.model_id, "probe": spec.probe,
            "case_id": spec.case_id, "condition": spec.condition, "run": spec.run, "seed": spec.seed,
        }
        deadlines.start(task, armed=not queued)
        try:
            outcome = await self._probes[spec.probe].run(spec, agent)
        except asyncio.CancelledError:
            if not deadlines.claim_timeout(task):
                raise
            row.update(status=STATUS_ERROR, error_kind=ErrorKind.TIMEOUT.value,
                       error=f"trial exceeded its {self._timeout_s:g} s deadline"
                             + (" (counted from its first request)" if queued else ""))
        except ProviderError as exc:
            row.update(status=STATUS_ERROR, error_kind=exc.kind.value, error=exc.message)
        except Exception as exc:
            row.update(status=STATUS_ERROR, error_kind=ErrorKind.INTERNAL.value, error=f"{type(exc).__name__}: {exc}")
        else:
            row.update(outcome)
            row["status"] = STATUS_OK
        finally:
            deadlines.stop(task)
        last = agent.last
        row["attempts"] = agent.attempts
        row["cache_hits"] = agent.cache_hits
        row["remedies"] = list(agent.remedies) if agent.remedies else None
        row["latency_ms"] = agent.latency_s * 1000.0
        row["input_tokens"] = agent.input_tokens
        row["output_tokens"] = agent.output_tokens
        last_calls = None
        if last is not None:
            last_calls = row["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.raw_arguments,
                                               "parse_error": c.parse_error} for c in last.tool_calls]
            row["response_text"] = last.text
        if agent.record:
            # the last response's tool calls are the same list object in both columns: no second build
            row["calls"], row["call_blobs"] = encode_calls(agent.record, last_calls)
        row["finished_at"] = int(time.time() * 1000)
        return row
