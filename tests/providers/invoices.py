"""The request the wire-format tests send each vendor's route: an operations assistant asked for last month's
invoices, with one tool, so each test compares what the server answered with what the simulated agent says."""

from __future__ import annotations

from runner.core.types import ChatRequest, Message, ToolSpec

SYSTEM = "You are an operations assistant."
USER = "Pull last month's invoices (2026-10) from our billing provider."
SCHEMA = {"type": "object", "properties": {"provider": {"type": "string"}, "month": {"type": "string"}},
          "required": ["provider", "month"]}
TOOLS = (ToolSpec("fetch_invoices", "Fetch invoices from a billing provider.", SCHEMA),)


def ask(model: str, seed: int) -> ChatRequest:
    """The request as the simulated agent receives it, for ``model`` at ``seed``."""
    return ChatRequest(model, (Message("system", SYSTEM), Message("user", USER)), TOOLS, {}, seed)
