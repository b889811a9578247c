"""A run's ending is the library's: ``runner.run(...).exit_code`` is what ``trialgrid run`` exits with.

One test per ending: a budget stop, error rows beyond ``max_error_rate`` (and within it), a failing
interval gate (given, and the sweep's own), a failing ``--fail-on`` case; each run twice, once through
``runner.run`` and once through the CLI, into separate outputs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import runner
from runner.core.exits import EXIT_BUDGET, EXIT_ERRORS, EXIT_GATE, EXIT_OK
from runner.core.gates import parse_gate
from runner.output import Output
from tests.helpers.cli import invoke
from tests.helpers.files import bundled_sweep, quickstart_dict, write_yaml


def _both(sweep: Path, tmp_path: Path, *cli_args: str, **run_args: Any) -> tuple[int, int, runner.RunResult]:
    """The exit code of ``runner.run`` and of ``trialgrid run`` on the same sweep, each into its own output."""
    result = runner.run(sweep, tmp_path / "library", quiet=True, **run_args)
    cli = invoke("run", str(sweep), "--out", str(tmp_path / "cli"), "-q", *cli_args)
    return result.exit_code, cli.exit_code, result


def _quickstart(tmp_path: Path, **top: Any) -> Path:
    data = quickstart_dict()
    data["probes"][0]["runs"] = 2
    data.update(top)
    return write_yaml(tmp_path / "sweep.yaml", data)


def test_a_clean_run_exits_0(tmp_path: Path) -> None:
    library, cli, result = _both(_quickstart(tmp_path), tmp_path)
    assert library == cli == EXIT_OK
    assert result.ending is not None and result.ending.verdict.errors == 0 and not result.ending.stopped


def test_a_budget_stop_exits_4(tmp_path: Path) -> None:
    sweep = _quickstart(tmp_path, budget={"tokens": 5_000}, engine={"concurrency": 4})
    library, cli, result = _both(sweep, tmp_path)
    assert library == cli == EXIT_BUDGET
    assert result.ending is not None and result.ending.stopped and "budget" in result.ending.stopped


def _with_a_broken_model(tmp_path: Path) -> Path:
    """The quickstart's three simulated agents and one agent that raises on every trial: a quarter error rows."""
    data = quickstart_dict()
    data["probes"][0]["runs"] = 1
    data["models"].append({"name": "broken", "provider": "callable",
                           "function": "tests.providers.callable_agents:explodes"})
    return write_yaml(tmp_path / "sweep.yaml", data)


def test_error_rows_beyond_max_error_rate_exit_3(tmp_path: Path) -> None:
    library, cli, result = _both(_with_a_broken_model(tmp_path), tmp_path, "--max-error-rate", "0.2",
                                 max_error_rate=0.2)
    assert library == cli == EXIT_ERRORS
    ending = result.ending
    assert ending is not None and ending.errors_over and ending.verdict.error_rate == pytest.approx(0.25)
    assert [d.model for d in ending.verdict.dead_models] == ["broken"]


def test_error_rows_within_max_error_rate_exit_0(tmp_path: Path) -> None:
    library, cli, result = _both(_with_a_broken_model(tmp_path), tmp_path, "--max-error-rate", "0.3",
                                 max_error_rate=0.3)
    assert library == cli == EXIT_OK
    assert result.ending is not None and result.ending.verdict.errors and not result.ending.errors_over


def test_a_failing_gate_exits_1(tmp_path: Path) -> None:
    gate = "upper(decoy_called | ungroundable) <= 0.01"  # no simulated agent is that careful
    library, cli, result = _both(_quickstart(tmp_path), tmp_path, "--gate", gate, gates=[gate])
    assert library == cli == EXIT_GATE
    ending = result.ending
    assert ending is not None and ending.gates == (parse_gate(gate, "--gate"),)
    assert ending.failing_gates and all(line.startswith(f"GATE {gate}") for line in ending.failing_gates)
    # a gate that holds passes
    assert runner.run(_quickstart(tmp_path), tmp_path / "library", quiet=True,
                      gates=["upper(decoy_called | ungroundable) <= 100%"]).exit_code == EXIT_OK


def test_the_sweeps_own_gates_are_judged_too(tmp_path: Path) -> None:
    sweep = _quickstart(tmp_path, gates=["upper(decoy_called | ungroundable) <= 0.01"])
    library, cli, result = _both(sweep, tmp_path)
    assert library == cli == EXIT_GATE
    assert result.ending is not None and len(result.ending.gates) == 1


def test_a_failing_fail_on_case_exits_1(tmp_path: Path) -> None:
    sweep = bundled_sweep(tmp_path, "negatives.yaml", runs=3)  # the reckless agent invents arguments
    library, cli, result = _both(sweep, tmp_path, "--fail-on", "negative", fail_on=["negative"])
    assert library == cli == EXIT_GATE
    ending = result.ending
    assert ending is not None and ending.fail_on == ("negative",) and 0 < len(ending.failing_cases) <= ending.cases
    assert all(line.startswith(("FAIL ", "UNSCORED ")) for line in ending.failing_cases)


def test_bad_endings_are_refused_before_anything_runs(tmp_path: Path) -> None:
    sweep = _quickstart(tmp_path)
    with pytest.raises(runner.UserError, match="names no pass/fail probe"):
        runner.run(sweep, tmp_path / "a", quiet=True, fail_on=["misselection"])
    with pytest.raises(runner.UserError, match="--gate"):
        runner.run(sweep, tmp_path / "b", quiet=True, gates=["decoy_called < 0.2"])
    with pytest.raises(runner.UserError, match="--max-error-rate"):
        runner.run(sweep, tmp_path / "c", quiet=True, max_error_rate=1.5)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


def test_the_verdict_read_from_the_parts_equals_the_scans(tmp_path: Path) -> None:
    """A run whose parts prove each trial one row is tallied from the parts with Arrow alone; the verdict equals
    the one the lazy scan aggregates (which a retried output uses), dead model and first error included."""
    from runner.analysis.verdict import run_verdict
    from runner.output.tally import tally_parts, tally_scan

    result = runner.run(_with_a_broken_model(tmp_path), tmp_path / "out", quiet=True)
    output = Output.open(tmp_path / "out")
    assert output.unique
    assert tally_parts(output.parts) == tally_scan(output.scan())
    assert list(tally_parts(output.parts).first_error) == list(tally_scan(output.scan()).first_error)
    verdict = run_verdict(output)
    assert result.ending is not None and verdict == result.ending.verdict
    assert verdict.rows == output.scan().collect().height and verdict.errors == verdict.rows // 4
    assert [d.model for d in verdict.dead_models] == ["broken"] and verdict.dead_models[0].first_error


def test_a_retried_output_is_judged_by_each_trials_newest_row(tmp_path: Path) -> None:
    sweep = _with_a_broken_model(tmp_path)
    first = runner.run(sweep, tmp_path / "out", quiet=True)
    again = runner.run(sweep, tmp_path / "out", quiet=True, retry_errors=["all"])
    assert first.ending is not None and again.ending is not None
    output = Output.open(tmp_path / "out")
    assert output.unique is False
    assert again.ending.verdict.rows == first.ending.verdict.rows == output.scan().collect().height
    assert again.ending.verdict.errors == first.ending.verdict.errors
