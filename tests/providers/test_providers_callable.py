"""Provider ``callable``: a user's function, sync or async, behind the same limits, retries and remedies."""

from __future__ import annotations

from pathlib import Path

import pytest

import runner
from runner.config.sweep import load_sweep
from runner.core.errors import UserError
from tests.conftest import quickstart_dict
from tests.helpers.messages import heard
from tests.providers.conftest import outcomes, trials, write

MODULE = "tests.providers.callable_agents"


def _sweep(function: str, runs: int = 2, **model: object) -> dict:
    data = quickstart_dict()
    data["probes"][0]["runs"] = runs
    for m in data["models"]:
        m.update(provider="callable", function=f"{MODULE}:{function}", **model)
    return data


@pytest.mark.parametrize("function", ["sim_sync", "sim_async"])
def test_callable_matches_in_process_sim(tmp_path: Path, function: str) -> None:
    local = quickstart_dict()
    local["probes"][0]["runs"] = 2
    runner.run(load_sweep(write(tmp_path, local, "sim.yaml")), tmp_path / "sim", quiet=True)
    result = runner.run(load_sweep(write(tmp_path, _sweep(function))), tmp_path / "out", quiet=True)
    assert result.counts == {"ok": result.total}
    assert outcomes(trials(tmp_path / "out")).equals(outcomes(trials(tmp_path / "sim")))


def test_callable_errors_are_retried_and_recorded(tmp_path: Path) -> None:
    retry = {"max_attempts": 3, "backoff_base_s": 0.001, "backoff_max_s": 0.002}
    runner.run(load_sweep(write(tmp_path, _sweep("flaky_once", retry=retry))), tmp_path / "a", quiet=True)
    df = trials(tmp_path / "a")
    assert (df["status"] == "ok").all() and (df["attempts"] == 2).all()

    runner.run(load_sweep(write(tmp_path, _sweep("wrong_type", runs=1), "b.yaml")), tmp_path / "b", quiet=True)
    df = trials(tmp_path / "b")
    assert (df["error_kind"] == "fatal").all() and df["error"].str.contains("expected runner.core.types.ChatResponse").all()

    runner.run(load_sweep(write(tmp_path, _sweep("explodes", runs=1), "c.yaml")), tmp_path / "c", quiet=True)
    df = trials(tmp_path / "c")
    assert (df["error_kind"] == "fatal").all() and df["error"].str.contains("the user's agent broke").all()


def test_callable_remedies_apply_to_params(tmp_path: Path) -> None:
    data = _sweep("echo_params", params={"temperature": 0.3})
    with heard(notes=True) as lines:
        runner.run(load_sweep(write(tmp_path, data)), tmp_path / "out", quiet=True)
    df = trials(tmp_path / "out")
    assert (df["status"] == "ok").all() and df["remedies"].to_list() == [["drop temperature"]] * df.height
    assert len(lines) == 3  # one per model id


@pytest.mark.parametrize("function, words", [("nope", "must be written 'module:function'"),
                                             ("no_such_module_x:fn", "cannot import module"),
                                             (f"{MODULE}:missing", "has no attribute")])
def test_bad_function_is_a_located_config_error(tmp_path: Path, function: str, words: str) -> None:
    data = _sweep("sim_sync")
    data["models"][0]["function"] = function
    with pytest.raises(UserError) as info:
        load_sweep(write(tmp_path, data))
    assert words in str(info.value) and "models[0].function" in str(info.value)
