"""Importers: BFCL (hand-written lines in BFCL's format, and the real bfcl-eval data when installed) and ungrounded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.config.sweep import load_sweep
from runner.core.types import ChatResponse, ToolCall
from runner.importers import import_bfcl, write_bfcl
from runner.probes.negative import NegativeCase, score_response

cli = CliRunner()

BMI = {"name": "health.bmi", "description": "Body mass index from weight and height.",
       "parameters": {"type": "dict", "properties": {"weight": {"type": "float"}, "height": {"type": "float"}},
                      "required": ["weight", "height"]}}
AREA = {"name": "calculate_triangle_area", "description": "Area of a triangle from base and height.",
        "parameters": {"type": "dict", "properties": {
            "base": {"type": "integer"}, "height": {"type": "integer"},
            "unit": {"type": "string", "description": "defaults to 'units'"}}, "required": ["base", "height"]}}
CD = {"name": "cd", "description": "Change directory.", "parameters": {
    "type": "dict", "properties": {"folder": {"type": "string"}}, "required": ["folder"]}}
MV = {"name": "mv", "description": "Move a file.", "parameters": {
    "type": "dict", "properties": {"source": {"type": "string"}, "destination": {"type": "string"}},
    "required": ["source", "destination"]}}


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def bfcl_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    _jsonl(d / "BFCL_v4_irrelevance.json", [
        {"id": "irrelevance_0", "question": [[{"role": "user", "content": "What is the capital of Peru?"}]],
         "function": [BMI]}])
    _jsonl(d / "BFCL_v4_simple_python.json", [
        {"id": "simple_python_0", "question": [[{"role": "user", "content": "Area of a triangle, base 10 and height 5."}]],
         "function": [AREA]}])
    _jsonl(d / "possible_answer" / "BFCL_v4_simple_python.json", [
        {"id": "simple_python_0", "ground_truth": [{"calculate_triangle_area": {"base": [10], "height": [5],
                                                                                "unit": ["units", ""]}}]}])
    _jsonl(d / "BFCL_v4_multi_turn_miss_param.json", [
        {"id": "multi_turn_miss_param_0", "involved_classes": ["GorillaFileSystem"], "initial_config": {}, "path": [],
         "question": [[{"role": "user", "content": "Go into the documents folder."}],
                      [{"role": "user", "content": "Now move the report into the archive."}],
                      [{"role": "user", "content": "The report is q3_summary.pdf."}]]}])
    _jsonl(d / "possible_answer" / "BFCL_v4_multi_turn_miss_param.json", [
        {"id": "multi_turn_miss_param_0", "ground_truth": [
            ["cd(folder='documents')"], [], ["mv(source='q3_summary.pdf', destination='archive')"]]}])
    _jsonl(d / "multi_turn_func_doc" / "gorilla_file_system.json", [CD, MV])
    _jsonl(d / "BFCL_v4_web_search.json", [{"id": "web_search_0", "question": [], "involved_classes": []}])
    return d


def test_bfcl_fixture_lines_import_into_valid_cases(bfcl_dir: Path, tmp_path: Path) -> None:
    result = import_bfcl([bfcl_dir])
    counts = write_bfcl(result, tmp_path / "out")
    assert counts[("irrelevance", "negative no_call")] == 1
    assert counts[("simple_python", "positive pinning")] == 1
    assert counts[("simple_python", "phantom trace")] == 1
    assert counts[("multi_turn_miss_param", "forbidden-inference")] == 1
    assert list(result.skipped_files) == ["BFCL_v4_web_search.json"]
    assert "web-search service" in result.skipped_files["BFCL_v4_web_search.json"]
    cases = {c["id"]: c for c in map(json.loads, (tmp_path / "out" / "bfcl_negative.jsonl").read_text().splitlines())}
    irr = cases["bfcl-irrelevance_0"]
    assert irr["expect_action"] == "no_call" and irr["tools"][0]["name"] == "health_bmi"
    assert irr["tools"][0]["parameters"]["properties"]["weight"]["type"] == "number"
    pin = cases["bfcl-simple_python_0"]
    assert pin["positive"] and pin["expect_action"] == "calculate_triangle_area"
    assert pin["expect_args"] == {"base": 10, "height": 5, "unit": {"one_of": ["units"], "optional": True}}
    miss = cases["bfcl-multi_turn_miss_param_0"]
    assert miss["expect_action"] == "ask_user" and miss["forbidden"] == ["q3_summary.pdf"]
    assert miss["messages"][-1]["content"] == "Now move the report into the archive."
    assert "Go into the documents folder." in miss["messages"][0]["content"]
    trace = json.loads((tmp_path / "out" / "bfcl_phantom.jsonl").read_text())
    assert trace["gold_phantoms"] == ["calculate_triangle_area.unit"]
    assert trace["calls"][0]["args"]["unit"] not in ("units", "")
    loaded = load_sweep(tmp_path / "out" / "sweep.yaml")
    assert {p.kind for p in loaded.probes} == {"negative", "phantom"}
    run = cli.invoke(app, ["run", str(tmp_path / "out" / "sweep.yaml"), "--out", str(tmp_path / "run"), "-q"])
    assert run.exit_code == 0, run.output


def test_bfcl_cli_prints_counts_and_refuses_to_overwrite(bfcl_dir: Path, tmp_path: Path) -> None:
    result = cli.invoke(app, ["import", "bfcl", str(bfcl_dir), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "irrelevance" in result.output and "positive pinning" in result.output
    assert "not imported: BFCL_v4_web_search.json: needs a live web-search service" in result.output
    again = cli.invoke(app, ["import", "bfcl", str(bfcl_dir), "--out", str(tmp_path / "o")])
    assert again.exit_code == 2 and "not overwriting" in again.output
    bad = bfcl_dir / "BFCL_v4_live_irrelevance.json"
    bad.write_text('{"id": "live_irrelevance_0", "question": [[]]\n')
    broken = cli.invoke(app, ["import", "bfcl", str(bad), "--out", str(tmp_path / "p")])
    assert broken.exit_code == 2 and "BFCL_v4_live_irrelevance.json:1" in broken.output


def test_an_unparsable_call_on_an_irrelevance_case_is_a_failure_not_an_abstention(bfcl_dir: Path) -> None:
    case = NegativeCase.model_validate(import_bfcl([bfcl_dir / "BFCL_v4_irrelevance.json"]).negative[0])
    broken = ToolCall(name="health_bmi", raw_arguments='{"weight": 70,', arguments=None, parse_error="Expecting value")
    verdict = score_response(case, ChatResponse(tool_calls=(broken,)), {"health_bmi"}, "")
    assert not verdict["passed"] and verdict["unparsable_call"] and verdict["action"] == "call:health_bmi"
    assert score_response(case, ChatResponse(text="I can't help with that."), {"health_bmi"}, "")["passed"]


@pytest.mark.slow  # the whole bundled BFCL data set: seconds of work by its nature
def test_real_bfcl_data_imports_and_runs_against_sim(tmp_path: Path) -> None:
    pytest.importorskip("bfcl_eval")
    import importlib.util

    data = Path(importlib.util.find_spec("bfcl_eval").submodule_search_locations[0]) / "data"
    result = import_bfcl([data])
    counts = write_bfcl(result, tmp_path / "bfcl")
    for category, label in (("irrelevance", "negative no_call"), ("live_irrelevance", "negative no_call"),
                            ("simple_python", "positive pinning"), ("multiple", "positive pinning"),
                            ("live_simple", "positive pinning"), ("simple_python", "phantom trace"),
                            ("multi_turn_miss_param", "forbidden-inference")):
        assert counts[(category, label)] > 50, (category, label)
    # a slice of what was written runs against the sim
    sweep = tmp_path / "bfcl" / "sweep.yaml"
    for name in ("bfcl_negative.jsonl", "bfcl_phantom.jsonl"):
        path = tmp_path / "bfcl" / name
        lines = path.read_text().splitlines()
        path.write_text("\n".join(lines[::40]) + "\n")
    run = cli.invoke(app, ["run", str(sweep), "--out", str(tmp_path / "run"), "-q"])
    assert run.exit_code == 0, run.output


def _fake_ungrounded(root: Path) -> Path:
    pkg = root / "ungrounded"
    (pkg / "data").mkdir(parents=True)
    (pkg / "stimuli.py").write_text('"""stimuli"""\n_RAW = [\n    ("Check our CDN provider.", "Check Cloudflare.", '
                                    '"Check Northbrook CDN."),\n]\nDEFAULT = [x for x in _RAW]\n')
    (pkg / "data" / "example_tools.json").write_text(json.dumps([
        {"name": "fetch_url", "description": "Fetch a public URL.",
         "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}}]))
    return pkg


def test_ungrounded_package_folder_and_stimuli_file_import(tmp_path: Path) -> None:
    pkg = _fake_ungrounded(tmp_path)
    result = cli.invoke(app, ["import", "ungrounded", str(pkg), "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    loaded = load_sweep(tmp_path / "a" / "sweep.yaml")
    assert loaded.probes[0].kind == "misselection" and loaded.probes[0].n_cells == 3
    stimuli = tmp_path / "stimuli.json"
    stimuli.write_text(json.dumps([{"ungroundable": "Check our CDN provider.", "groundable_known": "Check Cloudflare."}]))
    missing = cli.invoke(app, ["import", "ungrounded", str(stimuli), "--tools", str(pkg / "data" / "example_tools.json"),
                               "--out", str(tmp_path / "b")])
    assert missing.exit_code == 2 and "[0].expected_tool" in missing.output
    ok = cli.invoke(app, ["import", "ungrounded", str(stimuli), "--tools", str(pkg / "data" / "example_tools.json"),
                          "--expected-tool", "fetch_url", "--out", str(tmp_path / "b")])
    assert ok.exit_code == 0, ok.output
    assert cli.invoke(app, ["run", str(tmp_path / "b" / "sweep.yaml"), "--out", str(tmp_path / "r"), "-q"]).exit_code == 0
