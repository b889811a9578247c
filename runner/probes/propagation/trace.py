"""One multi-step trial as data: every model turn, tool call, tool result and intervention.

A ``Step`` is one event of the loop. The whole list is written into the row (the
``steps`` column), so a trace can be re-scored, audited or judged later without
rerunning anything. Stage, fabrication and interceptor rules read only this list
(and the final answer), which is what lets tests pin each rule on a hand-written trace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from runner.core.columns import Column, Struct

STEP = Struct((
    Column("index", "int32"),       # the model turn this event belongs to (0-based)
    Column("role", "string"),       # assistant | call | result | interceptor
    Column("text", "string"),       # reply text, result body, or the interceptor's reason
    Column("tool", "string"),
    Column("call_id", "string"),
    Column("arguments", "string"),  # raw argument string as executed (after any injection)
    Column("ok", "bool"),           # result: the tool succeeded
    Column("code", "int32"),        # result: status code (200, 400, 404, 409, 422)
    Column("injected", "string"),   # "field: before -> after (kind)" when this step was corrupted
))


@dataclass
class Step:
    index: int
    role: str
    text: str = ""
    tool: str | None = None
    call_id: str | None = None
    arguments: str | None = None
    ok: bool | None = None
    code: int | None = None
    injected: str | None = None

    def row(self) -> dict[str, Any]:
        return {"index": self.index, "role": self.role, "text": self.text, "tool": self.tool, "call_id": self.call_id,
                "arguments": self.arguments, "ok": self.ok, "code": self.code, "injected": self.injected}

    @property
    def args(self) -> dict[str, Any] | None:
        """Parsed arguments of a call step (``None`` when absent or not a JSON object)."""
        if self.arguments is None:
            return None
        try:
            value = json.loads(self.arguments)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None

    @property
    def data(self) -> Any:
        """Parsed body of a result step (``None`` when it is not JSON)."""
        try:
            return json.loads(self.text)
        except (json.JSONDecodeError, TypeError):
            return None

    @property
    def injected_field(self) -> str | None:
        return self.injected.split(":", 1)[0] if self.injected else None


def observations(steps: list[Step]) -> list[str]:
    """Bodies of every tool result the agent was shown."""
    return [s.text for s in steps if s.role == "result"]


def tool_ran(steps: list[Step]) -> bool:
    """Did any tool call reach a tool (successfully or not)?"""
    return any(s.role == "result" for s in steps)
