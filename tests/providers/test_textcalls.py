"""Tool calls written as text (opt-in ``tool_call_parser``): the three formats, malformed calls, off by default."""

from __future__ import annotations

import asyncio

import pytest

from runner.core.types import ChatResponse, Message, ToolCall, parse_tool_arguments
from runner.providers.base import Agent
from runner.providers.textcalls import parse_text_calls
from tests.helpers.fakes import Recorded


def test_json_object_bare_fenced_and_list() -> None:
    calls = parse_text_calls("json", 'Sure!\n```json\n{"name": "get_order", "arguments": {"order_id": "88412"}}\n```')
    assert [(c.name, c.arguments) for c in calls] == [("get_order", {"order_id": "88412"})]
    calls = parse_text_calls("json", '[{"name": "a", "parameters": {"x": 1}}, {"tool": "b", "args": {}}]')
    assert [(c.name, c.arguments) for c in calls] == [("a", {"x": 1}), ("b", {})]
    assert parse_text_calls("json", 'The answer is {"temperature": 21}.') == ()  # not call-shaped
    assert parse_text_calls("json", "") == ()


def test_hermes_tags_one_or_more_and_malformed_kept() -> None:
    text = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
            '<tool_call>{"name": "get_time", "arguments": {"tz": "UTC"</tool_call>')
    calls = parse_text_calls("hermes", text)
    assert [c.name for c in calls] == ["get_weather", "get_time"]
    assert calls[0].arguments == {"city": "Paris"} and calls[0].parse_error is None
    assert calls[1].arguments is None and "not JSON" in (calls[1].parse_error or "")


def test_functions_prefix_one_or_more() -> None:
    text = 'functions.get_order:{"order_id": "88412"}\nfunctions.cancel_order: {"order_id": "1", "reason": "dup"}'
    calls = parse_text_calls("functions-prefix", text)
    assert [(c.name, c.arguments) for c in calls] == [("get_order", {"order_id": "88412"}),
                                                      ("cancel_order", {"order_id": "1", "reason": "dup"})]
    broken = parse_text_calls("functions-prefix", "functions.get_order:{order_id: 5}")
    assert broken[0].arguments is None and broken[0].parse_error


def test_unknown_parser_names_the_choices() -> None:
    with pytest.raises(ValueError, match="json, hermes, functions-prefix"):
        parse_text_calls("xml", "<call/>")


def test_control_character_message_says_at_once() -> None:
    _, error = parse_tool_arguments('{"note": "a\tb"}')
    assert error is not None and "at at" not in error and error.startswith("Invalid control character at column")


def _chat(parser: str | None, response: ChatResponse) -> ChatResponse:
    agent = Agent(Recorded(response), "m", {}, 1, parser)
    return asyncio.run(agent.chat([Message("user", "hi")]))


def test_agent_reads_text_calls_only_when_asked_and_only_without_native_calls() -> None:
    text = '<tool_call>{"name": "get_order", "arguments": {"order_id": "5"}}</tool_call>'
    off = _chat(None, ChatResponse(text=text))
    assert off.tool_calls == () and off.calls_from_text == 0
    on = _chat("hermes", ChatResponse(text=text))
    assert [c.name for c in on.tool_calls] == ["get_order"] and on.calls_from_text == 1 and on.text == text
    native = ChatResponse(text=text, tool_calls=(ToolCall("other", "{}", {}),))
    assert _chat("hermes", native).tool_calls == native.tool_calls
