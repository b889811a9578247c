"""An agent for the ``callable`` provider that writes its tool calls in the reply's text (hermes form).

The simulated agent answers; its native calls are moved into the text, as a model
served without a tool parser sends them, so a sweep with ``tool_call_parser: hermes``
reads them back (``calls_from_text``).
"""

from __future__ import annotations

import json
from dataclasses import replace

from runner.core.types import ChatRequest, ChatResponse
from runner.sim import SimProvider

_SIM = SimProvider()


def hermes_text(request: ChatRequest) -> ChatResponse:
    response = _SIM.respond(request)
    if not response.tool_calls:
        return response
    text = "".join(f'<tool_call>{json.dumps({"name": c.name, "arguments": c.arguments})}</tool_call>'
                   for c in response.tool_calls)
    return replace(response, text=response.text + text, tool_calls=())
