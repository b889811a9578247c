"""A user's own agent beside their sweep: found without PYTHONPATH, its code part of the
sweep's identity, and every way its import can fail one located line with exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.config.sweep import load_sweep
from tests.helpers.cli import invoke, invoke_error_line
from tests.helpers.files import CONFIGS, write_yaml

AGENT = '''
from runner.core.types import ChatRequest, ChatResponse


def respond(request: ChatRequest) -> ChatResponse:
    return ChatResponse(text="{text}")
'''


def _sweep(folder: Path, function: str, **model: object) -> Path:
    return write_yaml(folder / "sweep.yaml", {
        "name": "own", "models": [{"name": "mine", "provider": "callable", "function": function, **model}],
        "probes": [{"kind": "negative", "cases": str(CONFIGS / "negative/cases.yaml"),
                    "catalogue": str(CONFIGS / "negative/tools.json"), "runs": 1, "conditions": ["positive"]}]})


def test_the_sweep_folder_is_on_the_import_path_and_an_edit_is_a_new_run(tmp_path: Path) -> None:
    agent = tmp_path / "first_sweep_agent.py"
    agent.write_text(AGENT.format(text="Which order do you mean?"))
    sweep = _sweep(tmp_path, "first_sweep_agent:respond")
    first = load_sweep(sweep)
    result = invoke("run", str(sweep), "--out", str(tmp_path / "out"), "-q")
    assert result.exit_code == 0, result.output

    agent.write_text(AGENT.format(text="I will not guess."))
    edited = load_sweep(sweep)
    assert edited.sweep_id != first.sweep_id
    line = invoke_error_line(invoke("run", str(sweep), "--out", str(tmp_path / "out"), "-q"))
    assert "the code of model 'mine' (first_sweep_agent:respond) changed since" in line
    assert f"id {first.sweep_id} then, {edited.sweep_id} now" in line and "another --out" in line

    # the edited code is what runs (not the module imported before the edit)
    result = invoke("run", str(sweep), "--out", str(tmp_path / "out2"), "-q")
    assert result.exit_code == 0, result.output
    from tests.helpers.rows import written_rows

    assert set(written_rows(tmp_path / "out2")["response_text"].to_list()) == {"I will not guess."}


def test_a_set_version_is_the_identity_instead_of_the_file(tmp_path: Path) -> None:
    agent = tmp_path / "versioned_agent.py"
    agent.write_text(AGENT.format(text="a"))
    sweep = _sweep(tmp_path, "versioned_agent:respond", version="1.0")
    first = load_sweep(sweep).sweep_id
    agent.write_text(AGENT.format(text="b"))
    assert load_sweep(sweep).sweep_id == first
    assert load_sweep(_sweep(tmp_path, "versioned_agent:respond", version="1.1")).sweep_id != first


@pytest.mark.parametrize(("function", "module", "words"), [
    ("./agent.py:respond", None, "names a file path, not a module: write the module's dotted name (e.g. agent:respond)"),
    ("agents/oracle.py:respond", None, "names a file path, not a module: write the module's dotted name "
                                       "(e.g. agents.oracle:respond)"),
    ("raising_agent:respond", "raise RuntimeError('no key configured')\n",
     "importing module 'raising_agent' for function 'raising_agent:respond' raised RuntimeError: no key configured at "),
    ("exiting_agent:respond", "import sys\nsys.exit(0)\n",
     "importing module 'exiting_agent' for function 'exiting_agent:respond' called sys.exit(0) at "),
])
def test_an_import_that_cannot_work_is_one_line_and_exit_2(tmp_path: Path, function: str, module: str | None,
                                                           words: str) -> None:
    if module is not None:
        (tmp_path / f"{function.partition(':')[0]}.py").write_text(module)
    sweep = _sweep(tmp_path, function)
    for command in ("validate", "run"):
        line = invoke_error_line(invoke(command, str(sweep)))
        assert words in line, line
        at = next(i for i, text in enumerate(sweep.read_text().splitlines(), 1) if "function:" in text)
        assert f"sweep.yaml:{at} models[0].function:" in line, line
