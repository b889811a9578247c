"""The simulated agent after its tool calls were answered: finish the task, so agent loops end.

A request whose last message is a tool result is the next turn of somebody's agent
loop (an SDK loop against ``trialgrid serve``, a user's own harness). Without this
module the sim read only the user's message and decided afresh — calling a tool
again on every turn, so no loop ever ended. A real model answers once it has what
it needs; so does the sim:

- when it reached for the broad (inspection) tool and has not yet called the
  specific tool the task needs, the lookup is done and it now calls that tool — the
  one case where the task needs another call;
- otherwise it answers in words from the tool results it was given (or reports the
  failure when a result is an error).

The propagation probe's multi-step tasks (``multistep.py``) are answered there, not
here: their own loop rules are unchanged. Every reply is a pure function of the
request and its seed, in-process or over HTTP.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from runner.core.types import ChatRequest, ChatResponse, ToolCall, Usage

if TYPE_CHECKING:
    from runner.sim.agent import SimProvider, _Prompt
    from runner.sim.personas import Persona

_ERROR_RE = re.compile(r"^\s*(?:error\b|\{\s*\"error\")|\b(?:failed|not found|invalid)\b", re.IGNORECASE)
_SHOWN = 240  # characters of a tool result quoted in the answer


def calls_since_user(request: ChatRequest) -> list[ToolCall]:
    """The tool calls the assistant made after the last user message, in order."""
    out: list[ToolCall] = []
    for m in request.messages:
        if m.role == "user":
            out = []
        elif m.role == "assistant":
            out.extend(m.tool_calls)
    return out


def after_results(sim: SimProvider, persona: Persona, prompt: _Prompt, request: ChatRequest,
                  seed: int) -> ChatResponse:
    """The reply to a turn that ends with tool results: the chained specific call, or the answer in words."""
    earlier = calls_since_user(request)
    called = {c.name for c in earlier}
    r = prompt.reading
    chars = sum(len(m.content) for m in request.messages)
    usage_in = max(1, chars // 4)
    if r.broad is not None and r.broad in called and r.specific is not None and r.specific not in called:
        call = sim._call(persona, prompt, r.specific, r.specific_schema, seed, len(earlier))
        return ChatResponse(text="", tool_calls=(call,),
                            usage=Usage(usage_in, max(1, (len(call.raw_arguments) + len(call.name)) // 4)),
                            finish_reason="tool_calls")
    text = _answer_text(request)
    return ChatResponse(text=text, usage=Usage(usage_in, max(1, len(text) // 4)), finish_reason="stop")


def _answer_text(request: ChatRequest) -> str:
    results = []
    for m in reversed(request.messages):
        if m.role != "tool":
            break
        results.append(m)
    results.reverse()
    names = {c.id: c.name for m in request.messages if m.role == "assistant" for c in m.tool_calls}
    parts = []
    for m in results:
        name = m.name or names.get(m.tool_call_id or "", "the tool")
        shown = m.content.strip().replace("\n", " ")
        if len(shown) > _SHOWN:
            shown = shown[: _SHOWN - 1] + "…"
        if _ERROR_RE.search(m.content):
            parts.append(f"The call to {name} did not succeed: {shown}")
        else:
            parts.append(f"{name} returned: {shown}")
    return "Done. " + " ".join(parts) if parts else "Done."
