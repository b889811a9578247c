"""The framework recipes of docs/providers.md (OpenAI Agents SDK, pydantic-ai, LangGraph) run as the page shows them,
against ``trialgrid serve``.

Behind ``serve --keys SWEEP`` the model ``oracle`` answers each request from the answer key it was given, found by
the request's exact messages and tool names: so every case passes only if a recipe hands its framework the request
as it is and returns the calls as they came back. A run against a simulated persona then checks what the oracle
never sends: asks, wrong calls and arguments that do not parse, each a row like any provider's.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from tests.docs.docpages import page, section
from tests.helpers.cli import invoke
from tests.helpers.files import CONFIGS, write_yaml
from tests.providers.conftest import ServeProcess, trials

pytest.importorskip("agents", reason="pip install openai-agents (test extra)")
pytest.importorskip("pydantic_ai", reason="pip install 'pydantic-ai-slim[openai]' (test extra)")
pytest.importorskip("langgraph", reason="pip install langgraph langchain-openai (test extra)")

RECIPES = ("openai_agents_recipe", "pydantic_ai_recipe", "langgraph_recipe")
NEGATIVE = {"kind": "negative", "cases": str(CONFIGS / "negative/cases.yaml"),
            "catalogue": str(CONFIGS / "negative/tools.json"), "runs": 1}


def _recipes(folder: Path) -> None:
    text = section(page("providers.md"), "### Recipes: an agent built with a framework")
    for name in RECIPES:
        code = re.search(rf"`{name}\.py`:\n\n```python\n(.*?)```", text, re.S)
        assert code is not None, name
        (folder / f"{name}.py").write_text(code.group(1))


def _run(folder: Path, out: str, model: str, url: str, monkeypatch: pytest.MonkeyPatch, **probe: object) -> pl.DataFrame:
    monkeypatch.setenv("AGENT_BASE_URL", url + "/v1")
    monkeypatch.setenv("AGENT_MODEL", model)
    sweep = write_yaml(folder / f"{out}.yaml", {
        "name": out, "models": [{"name": n, "provider": "callable", "function": f"{n}:respond"} for n in RECIPES],
        "probes": [{**NEGATIVE, **probe}]})
    result = invoke("run", str(sweep), "--out", str(folder / out), "-q")
    rows = trials(folder / out)
    assert result.exit_code == 0, (result.output, rows.filter(pl.col("status") != "ok")["error"].unique().to_list())
    return rows


@pytest.mark.slow  # three agent frameworks imported, and 93 trials over HTTP
def test_each_recipe_hands_its_framework_the_request_and_returns_its_calls(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _recipes(tmp_path)
    keys = write_yaml(tmp_path / "keys.yaml", {"name": "keys", "models": [{"name": "o", "provider": "sim",
                                                                            "model": "oracle"}], "probes": [NEGATIVE]})
    server = ServeProcess("--keys", str(keys))
    try:
        answered = _run(tmp_path, "oracle", "oracle", server.url, monkeypatch)
        typical = _run(tmp_path, "typical", "typical", server.url, monkeypatch, conditions=["positive"])
    finally:
        server.close()
    for rows in (answered, typical):
        assert sorted(rows["model"].unique()) == sorted(RECIPES)
        assert (rows["status"] == "ok").all(), rows.filter(pl.col("status") != "ok")["error"].to_list()
    # the key's answer came back through each framework: every case passed, the pinning calls with their arguments
    assert answered["passed"].all() and answered.filter(pl.col("condition") == "positive").height == 3 * 8
    # a persona's answers are the persona's: some cases asked, some called, and nothing was lost on the way
    for name in RECIPES:
        mine = typical.filter(pl.col("model") == name)
        assert mine["action"].str.starts_with("call:").any() and (mine["action"] == "ask_user").any(), name
