"""``tool_choice`` as the simulated agent honours it: what a reply may contain, and how a reply is made legal.

Real APIs enforce ``tool_choice`` after the model has "decided": ``none`` strips
the tools (the model answers in words), ``required`` (Anthropic ``any``) forces at
least one call, a named tool (Anthropic ``{"type": "tool"}``) forces exactly one
call to that tool, ``auto`` leaves the choice to the model. The sim does the same:
it decides as it would under ``auto`` and then, only when the decision is not
legal under the requested choice, replaces it — so a request without
``tool_choice`` (or with ``auto``) is answered exactly as before, and each forced
answer is still a pure function of the request and its seed.

The neutral request carries the choice as a string (``ChatRequest.tool_choice``):
``auto``, ``none``, ``required`` or a tool name; both wire formats decode theirs
into it (``runner/sim/serve/codecs.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from runner.core.types import ChatResponse, ToolCall, ToolSpec

#: the choices that do not name a tool
MODES = ("auto", "none", "required")


def _is_named(choice: str | None) -> bool:
    """True when ``choice`` names one tool (a forced function / ``{"type": "tool"}``)."""
    return choice is not None and choice not in MODES


def legal(choice: str | None, calls: Sequence[ToolCall], tools: Sequence[ToolSpec]) -> bool:
    """Whether a reply with ``calls`` obeys ``choice`` for a request offering ``tools``."""
    if not tools or choice in (None, "auto"):
        return True
    if choice == "none":
        return not calls
    if choice == "required":
        return bool(calls)
    return len(calls) == 1 and calls[0].name == choice


def unknown_tool(choice: str | None, tools: Sequence[ToolSpec]) -> str | None:
    """An error message when ``choice`` names a tool the request does not offer, else None."""
    if not _is_named(choice) or not tools:
        return None
    if any(t.name == choice for t in tools):
        return None
    return f"tool_choice names tool {choice!r}, which is not among the request's tools"


def withheld(answer: ChatResponse) -> ChatResponse:
    """The reply of an agent that wanted to call tools but was told ``tool_choice: none``: words only."""
    names = ", ".join(dict.fromkeys(c.name for c in answer.tool_calls))
    text = answer.text or f"I would use {names} for this, but I cannot call tools in this reply."
    return ChatResponse(text=text, usage=answer.usage, latency_s=answer.latency_s, finish_reason="stop")
