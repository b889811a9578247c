"""``tool_choice`` written in a model's ``params``, read into the neutral request.

Probes may pass a ``tool_choice`` per call; a sweep may also set one for every
request of a model in ``params`` (``params: {tool_choice: required}``). Left in the
params it would go to the wire as an opaque parameter — ignored by the simulated
agent, and sent verbatim (in one vendor's shape) to the others. Lifted into
``ChatRequest.tool_choice`` it is encoded by each wire format in its own shape and
honoured by the sim, so it measures the same thing everywhere.

Accepted spellings: ``auto`` / ``none`` / ``required`` / a tool name, and each
vendor's object form — OpenAI ``{"type": "function", "function": {"name": N}}``,
Responses ``{"type": "function", "name": N}``, Anthropic ``{"type": "auto" | "any" |
"none"}`` and ``{"type": "tool", "name": N}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_MODES = {"auto": "auto", "none": "none", "required": "required", "any": "required"}


def neutral_tool_choice(value: Any) -> str:
    """Any accepted spelling → ``auto`` / ``none`` / ``required`` / a tool name; ``ValueError`` otherwise."""
    if isinstance(value, str) and value:
        return _MODES.get(value, value)
    if isinstance(value, Mapping):
        kind = value.get("type")
        if kind in _MODES:
            return _MODES[kind]
        name = value.get("name") or (value.get("function") or {}).get("name")
        if kind in ("function", "tool") and isinstance(name, str) and name:
            return name
    raise ValueError(f"cannot read tool_choice {value!r}: expected auto, none, required, a tool name, "
                     "or a vendor's tool_choice object")


def split_tool_choice(params: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    """``params`` without ``tool_choice``, and that choice made neutral (None when absent)."""
    if "tool_choice" not in params:
        return params, None
    rest = {k: v for k, v in params.items() if k != "tool_choice"}
    return rest, neutral_tool_choice(params["tool_choice"])
