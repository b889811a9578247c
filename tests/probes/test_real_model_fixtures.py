"""The reply rules on real output: responses recorded from Gemma 3 270M under llama.cpp.

``scripts/real_model_check.py --save-fixtures tests/probes/fixtures/real_model`` kept
these from both server modes (``function-calling``: empty replies; ``plain``: echoes of
the request and chat-template debris), beside hand-written replies in the three
text tool-call formats. Each is replayed through the probe it came from, so the suite
checks the scoring on real output without the model.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import runner
from runner.core.types import ChatResponse, ToolCall, TrialSpec, parse_tool_arguments
from runner.probes.replies import asks_user, is_empty
from runner.providers.base import Agent
from tests.conftest import CONFIGS
from tests.helpers.fakes import Recorded

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "real_model").glob("*.json"))
_OLD_ASK = __import__("re").compile(r"\?")


@pytest.fixture(scope="module")
def probes() -> dict[str, Any]:
    loaded = runner.load_sweep(CONFIGS / "local-model.yaml")
    return {p.kind: p for p in loaded.probes}


def _response(fx: dict[str, Any]) -> ChatResponse:
    calls = []
    for c in fx["tool_calls"]:
        parsed, error = parse_tool_arguments(c["arguments"])
        calls.append(ToolCall(c["name"], c["arguments"], parsed, c.get("id") or "", error))
    return ChatResponse(text=fx["response_text"], tool_calls=tuple(calls))


def _run(probe: Any, fx: dict[str, Any]) -> dict[str, Any]:
    spec = TrialSpec("s", "t", "gemma", probe.name, fx["case_id"], fx["condition"], 0, 7, 7)
    agent = Agent(Recorded(_response(fx)), "gemma", {}, 7, fx.get("tool_call_parser"))
    return dict(asyncio.run(probe.run(spec, agent)))


def test_there_are_recorded_responses_of_every_kind() -> None:
    kinds = {(json.loads(p.read_text())["mode"], json.loads(p.read_text())["kind"]) for p in FIXTURES}
    assert ("function-calling", "empty") in kinds
    assert {"echo", "debris", "user-voice", "empty"} <= {k for m, k in kinds if m == "plain"}
    assert {("hand-written", "text-call")} <= kinds


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_recorded_response_scores_as_the_rules_say(path: Path, probes: dict[str, Any]) -> None:
    fx = json.loads(path.read_text())
    row = _run(probes[fx["probe"]], fx)
    text = fx["response_text"]
    assert row["empty_reply"] is fx["expect"]["empty_reply"]
    assert row["asked"] is fx["expect"]["asked"]
    if fx["kind"] == "empty":
        assert is_empty(text, 0)
        assert row["asked"] is False
        if fx["probe"] == "negative":
            assert row["passed"] is False and row["action"] == "empty_reply"
        else:
            assert row["decoy_called"] is None and row["expected_called"] is False
    if fx["kind"] in ("echo", "debris", "user-voice"):
        assert _OLD_ASK.search(text) or fx["probe"] == "negative"  # the old rule called it asking
        assert not asks_user(text, fx["request"]) and row["asked"] is False
    if fx["kind"] == "asks":
        assert asks_user(text, fx["request"])
    if fx["kind"] == "text-call":
        assert row["calls_from_text"] is True
        assert row["action"] == "call:" + ",".join(fx["expect_calls"])
        assert row["passed"] is fx["expect_passed"]
        assert row["unparsable_call"] is (not fx["expect_passed"])
