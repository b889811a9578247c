"""Malformed sweeps and case files: one located line, exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from runner.cli.app import app
from tests.conftest import CONFIGS, quickstart_dict

runner = CliRunner()

TRIPLE = {"id": "t1", "expected_tool": "fetch_invoices", "ungroundable": "Pull invoices from our billing provider.",
          "groundable_unknown": "Pull invoices from Vantrel Billing.", "groundable_known": "Pull invoices from Stripe."}


def _validate(path: Path) -> tuple[int, str]:
    result = runner.invoke(app, ["validate", str(path)])
    return result.exit_code, result.output


def _sweep_with(tmp_path: Path, mutate) -> Path:  # type: ignore[no-untyped-def]
    data = quickstart_dict()
    mutate(data, tmp_path)
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _triples_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "triples.yaml"
    path.write_text(text)
    return str(path)


def _catalogue_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "tools.json"
    path.write_text(text)
    return str(path)


CASES = {
    # name: (mutation, expected substrings of the one error line)
    "unknown top-level key": (lambda d, t: d.update(modelz=[]), ["sweep.yaml", "modelz", "unknown key"]),
    "unknown probe key": (lambda d, t: d["probes"][0].update(runz=3), ["sweep.yaml", "probes[0].runz", "unknown key"]),
    "wrong type": (lambda d, t: d["probes"][0].update(runs="many"), ["sweep.yaml", "probes[0].runs", "integer"]),
    "out of range": (lambda d, t: d["probes"][0].update(runs=0), ["probes[0].runs", "greater than or equal to 1"]),
    "missing required": (lambda d, t: d.pop("models"), ["sweep.yaml", "models", "required key is missing"]),
    "unknown provider": (lambda d, t: d["models"][0].update(provider="openia"), ["models[0]", "unknown provider 'openia' (did you mean 'openai'?)"]),
    "unknown persona": (lambda d, t: d["models"][1].update(model="sloppy"), ["models[1]", "unknown sim persona"]),
    "duplicate model": (lambda d, t: d["models"][1].update(name="sim-careful"), ["models", "used twice"]),
    "unknown probe kind": (lambda d, t: d["probes"][0].update(kind="misselect"), ["probes[0]", "misselect"]),
    "unknown condition": (lambda d, t: d["probes"][0].update(conditions=["unnamed"]), ["probes[0].conditions", "unknown condition 'unnamed'"]),
    "missing case file": (lambda d, t: d["probes"][0].update(cases="nope.yaml"), ["sweep.yaml", "probes[0].cases", "file not found"]),
    "missing catalogue": (lambda d, t: d["probes"][0].update(catalogue="nope.json"), ["probes[0].catalogue", "file not found"]),
    "decoy not in catalogue": (lambda d, t: d["probes"][0].update(decoy_name="ghost"), ["probes[0].decoy_name", "ghost"]),
    "empty case set": (lambda d, t: d["probes"][0].update(cases=_triples_file(t, "triples: []\n")),
                       ["triples.yaml", "triples", "case set is empty"]),
    "triple missing field": (lambda d, t: d["probes"][0].update(cases=_triples_file(
        t, yaml.safe_dump({"triples": [TRIPLE, {k: v for k, v in TRIPLE.items() if k != "expected_tool"} | {"id": "t2"}]}))),
        ["triples.yaml:", "triples[1].expected_tool", "required key is missing"]),
    "triple wrong type": (lambda d, t: d["probes"][0].update(cases=_triples_file(
        t, yaml.safe_dump({"triples": [TRIPLE | {"ungroundable": ["a", "list"]}]}))), ["triples.yaml", "triples[0].ungroundable"]),
    "duplicate triple id": (lambda d, t: d["probes"][0].update(cases=_triples_file(
        t, yaml.safe_dump({"triples": [TRIPLE, TRIPLE]}))), ["triples.yaml", "triples[1].id", "duplicate triple id"]),
    "case file syntax": (lambda d, t: d["probes"][0].update(cases=_triples_file(t, "triples:\n  - id: [unclosed\n")),
                         ["triples.yaml:", "does not parse"]),
    "catalogue entry without name": (lambda d, t: d["probes"][0].update(catalogue=_catalogue_file(
        t, '[{"description": "x", "parameters": {"type": "object", "properties": {}}}]')), ["tools.json:1", "[0].name"]),
    "catalogue not a list": (lambda d, t: d["probes"][0].update(catalogue=_catalogue_file(t, '{"name": "x"}')),
                             ["tools.json", "must be a list"]),
    "catalogue bad required": (lambda d, t: d["probes"][0].update(catalogue=_catalogue_file(
        t, '[{"name": "a", "parameters": {"type": "object", "properties": {}, "required": ["b"]}}]')),
        ["tools.json", "[0].parameters.required"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_input_is_one_located_line(tmp_path: Path, case: str) -> None:
    mutate, expected = CASES[case]
    code, output = _validate(_sweep_with(tmp_path, mutate))
    assert code == 2, output
    lines = [line for line in output.strip().splitlines() if line.strip()]
    text = " ".join(lines)
    assert "Traceback" not in output
    assert text.startswith("error:"), output
    for part in expected:
        assert part in text, f"{part!r} not in {text!r}"


def test_an_openai_model_without_its_key_says_which_variable_and_what_to_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, output = _validate(_sweep_with(tmp_path, lambda d, t: d["models"][0].update(provider="openai",
                                                                                        model="gpt-4.1-mini")))
    assert code == 2 and output.count("\n") == 1, output
    assert "models[0].api_key_env: environment variable OPENAI_API_KEY is not set" in output
    # the message names the variable: no ", got 'OPENAI_API_KEY'" repeating it after what to do
    assert output.rstrip().endswith("or set api_key_env: null for an endpoint that needs no key"), output


def test_yaml_syntax_error_in_sweep_names_line(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text("name: x\nmodels:\n  - name: a\n    provider: sim\n   bad: indent\n")
    code, output = _validate(path)
    assert code == 2 and "sweep.yaml:" in output and "does not parse" in output


def test_line_numbers_point_at_the_key(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "name: x\nmodels:\n  - name: a\n    provider: sim\n    model: typical\nprobes:\n  - kind: misselection\n"
        f"    cases: {CONFIGS / 'misselection/triples.yaml'}\n    catalogue: {CONFIGS / 'misselection/tools.json'}\n"
        "    runs: -1\n")
    code, output = _validate(path)
    assert code == 2
    assert "sweep.yaml:10 probes[0].runs" in output


def test_missing_sweep_file_and_no_traceback_in_a_real_process(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "runner.cli.app", "run", str(tmp_path / "absent.yaml")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "absent.yaml" in proc.stderr and "not found" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_validate_warns_on_drift_and_few_runs(tmp_path: Path) -> None:
    # (an expected_tool not in the catalogue is an error: tests/config/test_lint.py)
    triples = {"triples": [TRIPLE | {"groundable_known": "Please pull every single one of the invoices that were issued from Stripe last month."}]}
    path = _sweep_with(tmp_path, lambda d, t: d["probes"][0].update(runs=2, cases=_triples_file(t, yaml.safe_dump(triples))))
    code, output = _validate(path)
    assert code == 0, output
    assert "drift in length" in output
    assert "fewer than 5" in output
