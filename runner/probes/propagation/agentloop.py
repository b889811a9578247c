"""The agent loop: native tool calls, results fed back, up to N model turns, every step kept.

One model call per turn (``Agent.chat``, which counts attempts and usage). A reply
with tool calls has each call executed by the domain simulator — after the
parameter injection, if this trial has one — and the results appended as ``tool``
messages; a reply without tool calls ends the loop and is the final answer. The
interceptor, when on, can stop the loop after a result or refuse the final answer.

A provider failure at any turn propagates as a ``ProviderError`` naming the turn and
the steps done so far, so the trial is written as ``status = error``: a failed call
is never turned into an answer (AgentProp's released harness scored API exceptions
as wrong answers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from runner.core.types import Message, ToolCall
from runner.probes.answertext import final_answer
from runner.probes.propagation import injection as inj
from runner.probes.propagation import interceptor as icpt
from runner.probes.propagation.toolsim import Domain
from runner.probes.propagation.trace import Step
from runner.providers.base import Agent
from runner.providers.errors import ProviderError


@dataclass
class LoopResult:
    steps: list[Step] = field(default_factory=list)
    reply: str | None = None          # the last reply's full text
    answer: str | None = None         # its final-answer part (None: no answer, or abstained)
    finished: bool = False            # the agent gave a final answer within the turn budget
    abstain_reason: str | None = None
    turns: int = 0


@dataclass(frozen=True)
class InjectionPlan:
    injection: inj.Injection
    param_field: str | None = None   # the task's preferred argument to corrupt
    result_field: str | None = None  # the task's preferred result field to corrupt


async def run_loop(agent: Agent, messages: list[Message], domain: Domain, *, seed: int, max_turns: int,
                   plan: InjectionPlan | None = None, intercept: bool = False) -> LoopResult:
    out = LoopResult()
    state: dict[str, Any] = {}
    tools = domain.specs
    request_texts = [m.content for m in messages]
    param_done = result_done = False
    for turn in range(max_turns):
        try:
            response = await agent.chat(messages, tools, seed=seed)
        except ProviderError as exc:
            done = ", ".join(f"{s.tool} {'ok' if s.ok else s.code}" for s in out.steps if s.role == "result") or "none"
            raise ProviderError(exc.kind, f"turn {turn + 1} of the agent loop failed (tool results so far: {done}): "
                                          f"{exc.message}", retry_after_s=exc.retry_after_s,
                                status_code=exc.status_code) from exc
        out.turns = turn + 1
        out.steps.append(Step(turn, "assistant", response.text))
        if not response.tool_calls:
            out.reply = response.text
            out.answer = final_answer(response.text)
            out.finished = True
            break
        executed: list[ToolCall] = []
        results: list[tuple[ToolCall, Step]] = []
        for i, call in enumerate(response.tool_calls):
            call_id = call.id or f"call_{turn}_{i}"
            args, raw, note = call.arguments, call.raw_arguments, None
            if plan and plan.injection.target == "param" and not param_done and args is not None:
                param_done = True  # only the first call of the trial is ever corrupted
                spec = domain.tools[call.name].spec.parameters if call.name in domain.tools else None
                fld = inj.pick_field(args, plan.param_field, spec)
                if fld is not None:
                    args, note = inj.apply(plan.injection.kind, args, fld, spec)
                    raw = json.dumps(args, separators=(",", ":"))
            executed.append(ToolCall(call.name, raw, args, call_id, call.parse_error))
            out.steps.append(Step(turn, "call", "", call.name, call_id, raw, injected=note))
            result = domain.execute(call.name, args, state, call.parse_error)
            body, rnote = result.content(), None
            if plan and plan.injection.target == "result" and not result_done and result.ok:
                result_done = True  # the first successful result of the trial
                returns = domain.tools[call.name].returns
                fld = inj.pick_field(result.data or {}, plan.result_field, returns)
                if fld is not None:
                    data, rnote = inj.apply(plan.injection.kind, result.data or {}, fld, returns)
                    body = json.dumps(data, separators=(", ", ": "), ensure_ascii=False)
            step = Step(turn, "result", body, call.name, call_id, ok=result.ok, code=result.code, injected=rnote)
            out.steps.append(step)
            results.append((call, step))
        messages = [*messages, Message("assistant", response.text, tool_calls=tuple(executed))]
        messages += [Message("tool", step.text, tool_call_id=step.call_id, name=call.name) for call, step in results]
        if intercept:
            for call, step in results:
                tooldef = domain.tools.get(call.name)
                reason = icpt.check_result(step, tooldef.returns if tooldef else None)
                if reason:
                    out.steps.append(Step(turn, "interceptor", reason))
                    out.abstain_reason = reason
                    return out
    if out.finished and intercept and out.answer is not None:
        reasons = icpt.check_final(out.steps, out.answer, request_texts)
        if reasons:
            out.steps.append(Step(out.turns - 1, "interceptor", reasons[0]))
            out.abstain_reason = reasons[0]
    return out
