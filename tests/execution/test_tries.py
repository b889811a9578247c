"""A try before the whole sweep: ``--model``, ``--runs`` and ``--limit`` narrow the run, which writes beside the
sweep's output, never into it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import runner
from runner.config.sweep import Narrowing
from runner.core.manifest import read_manifest
from runner.execution.modes import narrowed_output
from tests.helpers.cli import invoke
from tests.helpers.files import bundled_sweep
from tests.helpers.rows import written_rows

BUNDLED = ["quickstart.yaml", "negatives.yaml", "phantom.yaml", "propagation.yaml"]


@pytest.mark.parametrize("name", BUNDLED)
def test_limit_1_and_one_model_runs_exactly_one_trial(tmp_path: Path, name: str) -> None:
    sweep = _in(tmp_path, name)
    first = yaml.safe_load(sweep.read_text())["models"][0]["name"]
    result = invoke("run", str(sweep), "--limit", "1", "--model", first, "-q")
    assert result.exit_code == 0, result.output
    tries = list(tmp_path.glob("full-try-*"))
    assert len(tries) == 1 and not (tmp_path / "full").exists()  # never the whole sweep's output
    rows = written_rows(tries[0])
    assert rows.height == 1 and rows["model"].to_list() == [first]


def _in(tmp_path: Path, name: str) -> Path:
    """A bundled sweep whose output is under ``tmp_path / "full"``."""
    sweep = bundled_sweep(tmp_path, name, runs=2)
    data = yaml.safe_load(sweep.read_text())
    data["output"] = str(tmp_path / "full")
    sweep.write_text(yaml.safe_dump(data, sort_keys=False))
    return sweep


def test_a_try_is_another_sweep_and_says_so(tmp_path: Path) -> None:
    sweep = _in(tmp_path, "quickstart.yaml")
    whole = runner.load_sweep(sweep)
    tried = runner.run(sweep, quiet=True, models=["sim-careful"], runs=1)
    narrowed = runner.load_sweep(sweep, narrow=Narrowing(("sim-careful",), 1))
    assert narrowed.sweep_id != whole.sweep_id
    assert tried.out == narrowed_output(narrowed) and tried.total == 39
    assert tried.counts == {"ok": 39} and tried.exit_code == 0
    again = invoke("run", str(sweep), "--model", "sim-careful", "--runs", "1")
    assert again.exit_code == 0 and "a try (--model sim-careful --runs 1): a part of the sweep" in again.stderr


def test_an_unknown_model_is_one_line_with_a_did_you_mean(tmp_path: Path) -> None:
    sweep = _in(tmp_path, "quickstart.yaml")
    result = invoke("run", str(sweep), "--model", "sim-carefull", "-q")
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(errors) == 1 and "did you mean 'sim-careful'" in errors[0]
    assert invoke("run", str(sweep), "--limit", "0", "-q").exit_code == 2
    assert not (tmp_path / "full").exists() and not list(tmp_path.glob("full-try-*"))


@pytest.mark.parametrize("name", BUNDLED)
def test_one_case_runs_its_every_condition_model_and_run_and_nothing_else(tmp_path: Path, name: str) -> None:
    sweep = _in(tmp_path, name)
    case = str(next(iter(runner.load_sweep(sweep).probes[0].cells()))[0])
    result = invoke("run", str(sweep), "--case", case, "-q")
    assert result.exit_code in (0, 1), result.output  # 1: a pass/fail gate of the bundled sweep may fire
    [tried] = list(tmp_path.glob("full-try-*"))
    assert not (tmp_path / "full").exists()
    rows = written_rows(tried)
    whole = written_rows(runner.run(sweep, tmp_path / "whole", quiet=True).out)
    assert rows.height > 0 and set(rows["case_id"].to_list()) == {case}
    assert rows.height == whole.filter(whole["case_id"] == case).height  # all of the case, as the whole run has it
    # the try is whole: its output holds every trial of its grid, and says nothing is left to run
    assert "incomplete" not in result.output
    again = runner.run(sweep, tried, quiet=True, cases=[case])
    assert again.total == again.skipped == rows.height  # nothing left: every trial of the try already written


def test_an_unknown_case_is_one_line_with_a_did_you_mean(tmp_path: Path) -> None:
    sweep = _in(tmp_path, "quickstart.yaml")
    result = invoke("run", str(sweep), "--case", "invoice", "-q")
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(errors) == 1 and "did you mean 'invoices'" in errors[0]
    assert not list(tmp_path.glob("full-try-*"))


@pytest.mark.parametrize("name", BUNDLED)
def test_a_case_try_builds_only_its_cases_specs_in_grid_order(tmp_path: Path, name: str) -> None:
    from runner.execution.grid import grid_of

    grid = grid_of(runner.load_sweep(_in(tmp_path, name)))
    specs = list(grid)
    cases = sorted({s.case_id for s in specs})
    for picked in ({cases[0]}, set(cases[-2:]), set()):
        want = [s for s in specs if s.case_id in picked]
        assert [grid.spec_at(i) for i in grid.indexes_of(picked)] == want
        assert grid.size_of(picked) == len(want)


def test_the_report_of_a_limited_try_says_how_to_run_the_whole_grid(tmp_path: Path) -> None:
    sweep = _in(tmp_path, "quickstart.yaml")
    out = tmp_path / "tried"
    result = invoke("run", str(sweep), "--out", str(out), "--limit", "5")
    assert result.exit_code == 0, result.output
    manifest = read_manifest(out)
    assert manifest is not None and manifest.sessions[-1].picks == ["--limit 5"]
    said = result.output
    assert "a try (--limit 5): 5 of 234 trials written" in said and "without --limit for the whole grid" in said
    assert "rerun the same command" not in said  # that would run five more, never the grid
    whole = invoke("run", str(sweep), "--out", str(out), "--limit", "3")  # still a try: still said as one
    assert "a try (--limit 3): 8 of 234 trials written" in whole.output
    finished = invoke("run", str(sweep), "--out", str(out))
    assert finished.exit_code == 0 and "a try" not in finished.output and "incomplete" not in finished.output
