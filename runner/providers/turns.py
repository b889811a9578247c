"""Messages as the alternating turns the Messages, Converse and Gemini APIs require.

Why a module of its own: three wire formats put a conversation the same way (system messages apart, a tool's
result inside a user turn, consecutive turns of one role merged into one) and differ only in how one message
becomes blocks and what the assistant's role and the blocks' key are called.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from runner.core.types import Message

__all__ = ["alternating_turns"]


def alternating_turns(messages: Sequence[Message], blocks_of: Callable[[Message], list[dict[str, Any]]], *,
                      assistant: str = "assistant", key: str = "content") -> list[dict[str, Any]]:
    """The non-system ``messages`` as turns ``{"role": "user" | assistant, key: blocks}``: each message's blocks
    (``blocks_of``, called once per message, in order), a tool's result in a user turn, consecutive turns of one
    role merged."""
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        role = assistant if m.role == "assistant" else "user"
        blocks = blocks_of(m)
        if turns and turns[-1]["role"] == role:
            turns[-1][key].extend(blocks)
        else:
            turns.append({"role": role, key: blocks})
    return turns
