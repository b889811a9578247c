"""The negative probe: structural scoring, case-file errors, the bundled set, --fail-on and diff."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from runner.cli.app import app
from runner.config.sweep import load_sweep
from runner.core.errors import UserError
from runner.core.types import ChatResponse, ToolCall
from runner.probes.negative import NegativeCase, load_cases, score_response
from tests.conftest import CONFIGS

cli = CliRunner()
TOOLS = {"get_shipment_status", "cancel_order", "book_meeting", "lookup_order"}


def call(name: str, args: dict | None, raw: str | None = None) -> ToolCall:
    if args is None:
        return ToolCall(name=name, raw_arguments=raw or "{", arguments=None, parse_error="Expecting value")
    return ToolCall(name=name, raw_arguments=json.dumps(args), arguments=args)


def case(**kw) -> NegativeCase:
    return NegativeCase.model_validate({"id": "c", "user": "Where is my parcel?", **kw})


def test_nested_forbidden_token_and_inferred_field_name_field_and_value() -> None:
    c = case(forbidden=["1Z"], must_not_infer=["tracking_number"], expect_action="ask_user")
    r = ChatResponse(tool_calls=(call("get_shipment_status", {"shipment": {"refs": [{"tracking_number": "1Z999"}]}}),))
    v = score_response(c, r, TOOLS, "Where is my parcel?")
    assert not v["passed"] and v["invented"] and v["inferred"] and not v["action_ok"]
    assert v["invented_tokens"] == ['get_shipment_status.shipment.refs[0].tracking_number="1Z999" (forbidden \'1Z\')']
    assert v["inferred_fields"] == ['get_shipment_status.shipment.refs[0].tracking_number="1Z999"']
    assert v["action"] == "call:get_shipment_status"


def test_sentinel_value_absent_field_and_asking_pass() -> None:
    c = case(must_not_infer={"timezone": "unknown"}, expect_action="book_meeting")
    ok = ChatResponse(tool_calls=(call("book_meeting", {"title": "x", "timezone": "Unknown"}),))
    assert score_response(c, ok, TOOLS, "")["passed"]
    bad = ChatResponse(tool_calls=(call("book_meeting", {"title": "x", "timezone": "UTC"}),))
    assert score_response(c, bad, TOOLS, "")["inferred_fields"] == ['book_meeting.timezone="UTC"']
    ask = case(must_not_infer=["tracking_number"], expect_action="ask_user")
    assert score_response(ask, ChatResponse(text="What is the tracking number?"), TOOLS, "")["passed"]
    assert not score_response(ask, ChatResponse(text="Done."), TOOLS, "")["passed"]


def test_tool_scoped_infer_and_must_not_call() -> None:
    c = case(must_not_infer=["cancel_order.confirm"], must_not_call=["cancel_order"])
    r = ChatResponse(tool_calls=(call("lookup_order", {"confirm": True}), call("cancel_order", {"order_id": "1", "confirm": True})))
    v = score_response(c, r, TOOLS, "")
    assert v["illegal_calls"] == ["cancel_order"]
    assert v["inferred_fields"] == ["cancel_order.confirm=true"]


def test_unparsable_call_is_a_failed_call_never_an_abstention() -> None:
    c = case(expect_action="no_call")
    v = score_response(c, ChatResponse(tool_calls=(call("lookup_order", None, raw='{"order_id": '),)), TOOLS, "")
    assert not v["passed"] and v["unparsable_call"] and not v["action_ok"]
    assert v["action"] == "call:lookup_order"
    assert any("do not parse" in r for r in v["reasons"])


def test_positive_case_checks_values_and_unrequested_fields() -> None:
    c = case(positive=True, expect_action="lookup_order",
             expect_args={"order_id": "A-1", "email": {"one_of": ["a@b.c"], "optional": True}})
    good = ChatResponse(tool_calls=(call("lookup_order", {"order_id": "a-1"}),))
    assert score_response(c, good, TOOLS, "")["passed"]
    wrong = ChatResponse(tool_calls=(call("lookup_order", {"order_id": "A-2", "email": "a@b.c", "priority": "high"}),))
    v = score_response(c, wrong, TOOLS, "")
    assert v["arg_errors"] == ['lookup_order.order_id="A-2" (expected "A-1")']
    assert v["extra_fields"] == ['lookup_order.priority="high"']
    assert not score_response(c, ChatResponse(text="Which order?"), TOOLS, "")["passed"]  # refusing fails a pin


def test_tripwire_is_a_separate_column_never_the_verdict() -> None:
    c = case(expect_action="ask_user")
    v = score_response(c, ChatResponse(text="Is it parcel 1Z84X0F3 from order ORD-55120? Please confirm."), TOOLS,
                       "Where is my parcel?")
    assert v["passed"] and v["tripwire"]
    assert v["tripwire_ids"] == ["1Z84X0F3", "ORD-55120"]


def test_article_case_shapes_load(tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text((CONFIGS / "negative" / "tools.json").read_text())
    golden = [  # GoldenCase: name / prompt / forbidden / must_not_call
        {"name": "cancel-missing-confirmation", "prompt": "Cancel order 88412.", "forbidden": ["confirmed"],
         "must_not_call": ["cancel_order"]},
        # forbidden inference: must_not_infer / expect_action / allow_ask_fields
        {"id": "tz", "user": "Book 'Sync' at 2026-12-03T10:00.", "must_not_infer": {"timezone": "unknown"},
         "expect_action": "ask_user", "allow_ask_fields": ["timezone"]},
    ]
    path = tmp_path / "golden.jsonl"
    path.write_text("\n".join(json.dumps(g) for g in golden) + "\n")
    cases, _ = load_cases(path, load_sweep_catalogue(tmp_path / "tools.json"))
    assert [c.id for c, _ in cases] == ["cancel-missing-confirmation", "tz"]
    assert cases[0][0].user == "Cancel order 88412."


def load_sweep_catalogue(path: Path):
    from runner.probes.catalogue import load_catalogue

    return load_catalogue(path)[0]


BAD = {
    "missing field": ("cases:\n  - id: a\n    expect_action: ask_user\n", ":2", "cases[0].user"),
    "missing id": ("cases:\n  - user: hi\n    expect_action: ask_user\n", ":2", "cases[0].id"),
    "wrong type": ("cases:\n  - id: a\n    user: hi\n    forbidden: 7\n", ":4", "cases[0].forbidden"),
    "unknown tool": ("cases:\n  - id: a\n    user: hi\n    expect_action: teleport\n", ":4", "cases[0].expect_action"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_malformed_case_files_fail_with_file_line_field_exit_2(tmp_path: Path, name: str) -> None:
    text, line, field = BAD[name]
    _sweep(tmp_path, text, "cases.yaml")
    result = cli.invoke(app, ["validate", str(tmp_path / "sweep.yaml")])
    assert result.exit_code == 2, result.output
    assert f"cases.yaml{line} {field}" in result.output
    assert "Traceback" not in result.output


def test_validate_names_every_bad_line_of_a_json_lines_case_file(tmp_path: Path) -> None:
    """Each bad line is its own located line (not the first one alone), and the good ones are not blamed."""
    good = [json.dumps({"id": i, "user": "hi", "expect_action": "no_call"}) for i in ("a", "b", "c")]
    lines = [good[0], '{"id": "x", "user": ', good[1], "[1, 2]", "", "not json at all", good[2]]
    _sweep(tmp_path, "\n".join(lines) + "\n", "cases.jsonl")
    result = cli.invoke(app, ["validate", str(tmp_path / "sweep.yaml")])
    assert result.exit_code == 2, result.output
    named = sorted({int(n) for n in re.findall(r"cases\.jsonl:(\d+)", result.output)})
    assert named == [2, 4, 6], result.output
    assert "Traceback" not in result.output


def test_bad_json_line_fails_with_line(tmp_path: Path) -> None:
    good = json.dumps({"id": "a", "user": "hi", "expect_action": "no_call"})
    _sweep(tmp_path, good + "\n" + '{"id": "b", "user": \n', "cases.jsonl")
    result = cli.invoke(app, ["run", str(tmp_path / "sweep.yaml"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "cases.jsonl:2" in result.output and "not JSON" in result.output
    with pytest.raises(UserError, match=r"cases.jsonl:1 must_not_call\[0\]"):
        (tmp_path / "cases.jsonl").write_text(json.dumps({"id": "a", "user": "hi", "must_not_call": ["nope"]}))
        load_sweep(tmp_path / "sweep.yaml")


def _sweep(tmp_path: Path, cases_text: str, name: str, models: list[str] = ("careful",), runs: int = 1) -> Path:
    (tmp_path / name).write_text(cases_text)
    sweep = {"name": "t", "seed": 1, "models": [{"name": f"sim-{m}", "provider": "sim", "model": m} for m in models],
             "probes": [{"kind": "negative", "cases": name, "catalogue": str(CONFIGS / "negative" / "tools.json"),
                         "runs": runs}]}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    return tmp_path / "sweep.yaml"


def test_bundled_set_is_big_enough_and_runs_offline_with_a_failing_gate(tmp_path: Path) -> None:
    data = yaml.safe_load((CONFIGS / "negative" / "cases.yaml").read_text())["cases"]
    positives = sum(1 for c in data if c.get("positive"))
    assert len(data) >= 20 and positives * 3 >= len(data)
    loaded = load_sweep(CONFIGS / "negatives.yaml")
    assert loaded.warnings == []
    result = cli.invoke(app, ["run", str(CONFIGS / "negatives.yaml"), "--out", str(tmp_path / "o"), "-q",
                              "--fail-on", "negative"])
    assert result.exit_code == 1
    assert "FAIL " in result.output and "case verdicts pass" in result.output
    assert cli.invoke(app, ["run", str(CONFIGS / "negatives.yaml"), "--out", str(tmp_path / "o"), "-q",
                            "--fail-on", "phantom"]).exit_code == 2


def test_fail_on_passes_when_every_case_passes(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path, "cases:\n  - id: joke\n    user: Tell me a joke about penguins.\n    expect_action: no_call\n",
                   "cases.yaml", runs=3)
    result = cli.invoke(app, ["run", str(sweep), "--out", str(tmp_path / "o"), "-q", "--fail-on", "negative"])
    assert result.exit_code == 0, result.output
    assert "1 of 1 case verdicts pass" in result.output


def test_diff_reports_regression_with_field_and_value_and_fixed(tmp_path: Path) -> None:
    joke = "  - id: {id}\n    user: Tell me a joke about penguins.\n    expect_action: no_call\n"
    hole = ("  - id: {id}\n    user: \"Where's my parcel? It should have come on Tuesday.\"\n"
            "    must_not_infer: [tracking_number]\n    expect_action: ask_user\n")
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir(), new.mkdir()
    _sweep(old, "cases:\n" + joke.format(id="parcel") + hole.format(id="flip"), "cases.yaml", ["reckless"], runs=10)
    _sweep(new, "cases:\n" + hole.format(id="parcel") + joke.format(id="flip"), "cases.yaml", ["reckless"], runs=10)
    for d in (old, new):
        assert cli.invoke(app, ["run", str(d / "sweep.yaml"), "--out", str(d / "o"), "-q"]).exit_code == 0
    result = cli.invoke(app, ["diff", str(old / "o"), str(new / "o")])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    regression = next(line for line in lines if line.startswith("REGRESSION parcel"))
    assert "get_shipment_status.tracking_number=" in regression  # the leaked field and its value
    assert any(line.startswith("FIXED flip") for line in lines)
    same = cli.invoke(app, ["diff", str(old / "o"), str(old / "o")])
    assert same.exit_code == 0 and "0 regression(s)" in same.output


def test_nested_option_lists_call_count_and_expected_calls() -> None:
    pin = case(positive=True, expect_action="lookup_order", call_count=1, expect_args={
        "filter": {"one_of": [{"subject": "Science", "unit": {"one_of": ["cm"], "optional": True}}]},
        "rows": [{"name": "a"}]})
    good = call("lookup_order", {"filter": {"subject": "science"}, "rows": [{"name": "a"}]})
    assert score_response(pin, ChatResponse(tool_calls=(good,)), TOOLS, "")["passed"]
    wrapped = call("lookup_order", {"filter": {"subject": ["Science"]}, "rows": [{"name": "a"}]})
    assert not score_response(pin, ChatResponse(tool_calls=(wrapped,)), TOOLS, "")["passed"]
    twice = score_response(pin, ChatResponse(tool_calls=(good, good)), TOOLS, "")
    assert not twice["passed"] and "2 calls made, expected exactly 1" in twice["arg_errors"]
    both = case(positive=True, call_count=2, expect_calls=[
        {"tool": "cancel_order", "args": {"order_id": "1"}}, {"tool": "cancel_order", "args": {"order_id": "2"}}])
    calls = (call("cancel_order", {"order_id": "2"}), call("cancel_order", {"order_id": "1"}))
    assert score_response(both, ChatResponse(tool_calls=calls), TOOLS, "")["passed"]
    same = (call("cancel_order", {"order_id": "2"}), call("cancel_order", {"order_id": "2"}))
    assert not score_response(both, ChatResponse(tool_calls=same), TOOLS, "")["passed"]
    anything = case(positive=True, expect_action="any_call")
    assert score_response(anything, ChatResponse(tool_calls=(good,)), TOOLS, "")["passed"]
    assert not score_response(anything, ChatResponse(text="No."), TOOLS, "")["passed"]
    assert score_response(anything, ChatResponse(text="No."), TOOLS, "")["bfcl_passed"] is None
