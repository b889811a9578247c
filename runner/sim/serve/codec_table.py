"""Which codec speaks each served API: ``"openai"`` (Chat Completions), ``"azure"`` (Chat Completions on Azure
OpenAI's paths and key header), ``"anthropic"`` (Messages), ``"responses"``, ``"gemini"`` (``generateContent``), ``"vertex"`` (the same on Vertex AI's paths), ``"bedrock"`` (Converse).

A table of its own because the Responses codec builds on the Chat Completions one
(``codecs.py``): keeping the table beside either would make the two modules import
each other.
"""

from __future__ import annotations

from typing import Any

from runner.sim.serve.bedrock_codec import BedrockCodec
from runner.sim.serve.codecs import AnthropicCodec, AzureCodec, OpenAICodec
from runner.sim.serve.gemini_codec import GeminiCodec, VertexCodec
from runner.sim.serve.responses_codec import ResponsesCodec

CODECS: dict[str, Any] = {"openai": OpenAICodec, "azure": AzureCodec, "anthropic": AnthropicCodec,
                          "responses": ResponsesCodec, "gemini": GeminiCodec, "vertex": VertexCodec,
                          "bedrock": BedrockCodec}
