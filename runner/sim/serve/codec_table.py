"""Which codec speaks each served API: ``"openai"`` (Chat Completions), ``"anthropic"`` (Messages), ``"responses"``.

A table of its own because the Responses codec builds on the Chat Completions one
(``codecs.py``): keeping the table beside either would make the two modules import
each other.
"""

from __future__ import annotations

from typing import Any

from runner.sim.serve.codecs import AnthropicCodec, OpenAICodec
from runner.sim.serve.responses_codec import ResponsesCodec

CODECS: dict[str, Any] = {"openai": OpenAICodec, "anthropic": AnthropicCodec, "responses": ResponsesCodec}
