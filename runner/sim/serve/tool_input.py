"""A tool call's ``input`` as the Anthropic Messages API delivers it: always a JSON object.

The simulated agent sometimes writes argument text that does not parse (a persona's
``garble``). OpenAI's and the Responses API's ``arguments`` are strings, so that text
crosses those wires as written; Anthropic's ``input`` is not. The API buffers each
parameter value and validates it before passing it on, so a response (and a default
stream) never carries input that does not parse: a value the model left unfinished
never reaches the client, and the parameters before it arrive as an object —
anthropic-sdk-python#794 (a value cut off by ``max_tokens`` "never reached the
stream") and #975 (a cut-off call arrives without its required parameter). Only
fine-grained tool streaming (``eager_input_streaming`` on the tool, or the older
``fine-grained-tool-streaming-2025-05-14`` beta header) skips that step, and the
vendor warns it "may potentially receive invalid or partial JSON inputs"
(platform.claude.com/docs/en/agents-and-tools/tool-use/fine-grained-tool-streaming);
``sse.py`` streams the model's own text for those tools.
"""

from __future__ import annotations

import json
from typing import Any

from runner.core.types import ToolCall


def tool_input(call: ToolCall) -> dict[str, Any]:
    """The call's arguments, or — when they do not parse — the object of its complete leading parameters."""
    if call.arguments is not None:
        return dict(call.arguments)
    return complete_parameters(call.raw_arguments)


_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _SPACE:
        pos += 1
    return pos


def complete_parameters(raw: str) -> dict[str, Any]:
    """The leading parameters of an argument text that does not parse, each with a complete value.

    Reads ``{"key": value, ...`` from the start and stops at the first thing that is
    not a whole key and value followed by ``,``, ``}`` or the end; a number that runs
    to the very end may have been cut short (only what follows it shows it ended), so
    it is left out too.
    """
    out: dict[str, Any] = {}
    pos = _skip(raw, 0)
    if raw[pos:pos + 1] != "{":
        return out
    pos += 1
    while True:
        pos = _skip(raw, pos)
        if raw[pos:pos + 1] != '"':
            return out
        try:
            key, pos = _DECODER.raw_decode(raw, pos)
            pos = _skip(raw, pos)
            if raw[pos:pos + 1] != ":":
                return out
            value, pos = _DECODER.raw_decode(raw, _skip(raw, pos + 1))
        except ValueError:
            return out
        cut = pos >= len(raw) and isinstance(value, int | float) and not isinstance(value, bool)
        pos = _skip(raw, pos)
        after = raw[pos:pos + 1]
        if cut or after not in ("", ",", "}"):  # a value cut short, or followed by what no object allows
            return out
        out[key] = value
        if after != ",":
            return out
        pos += 1
