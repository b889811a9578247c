"""`trialgrid plan`: the recommendation, and how it moves when prompts grow more heterogeneous."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from runner.analysis.planner import Budget, plan_designs, same_budget_tradeoffs
from runner.cli.app import app

RATES, ARM = [0.0875, 0.1667, 0.0167], [1, 1, 0]
GRID = dict(prompts=[4, 8, 16, 32], runs=[5, 10, 20, 40], budget=Budget(trials=2000), n_sims=300, seed=3)


@pytest.mark.slow
def test_recommendation_moves_to_more_prompts_when_heterogeneity_grows() -> None:
    calm = plan_designs(RATES, ARM, sd=0.2, **GRID)
    wild = plan_designs(RATES, ARM, sd=2.0, **GRID)
    assert calm.recommended is not None and wild.recommended is not None
    assert wild.recommended.n_prompts >= calm.recommended.n_prompts
    # at one trial count (480), runs can stand in for prompts when prompts are alike, not when they differ
    def reaching(plan):  # type: ignore[no-untyped-def]
        return {(d.n_prompts, d.n_runs) for d in plan.designs if d.trials == 480 and d.result.power >= 0.8}
    assert len(reaching(calm)) > len(reaching(wild)) >= 1
    assert max(reaching(wild)) == (32, 5)
    # with high heterogeneity, at every trial count, the design with more prompts has more power
    for many_prompts, many_runs in same_budget_tradeoffs(wild):
        assert many_prompts.result.power >= many_runs.result.power


def test_budget_excludes_designs_and_says_when_nothing_reaches_the_target() -> None:
    plan = plan_designs(RATES, ARM, sd=3.0, prompts=[4, 6], runs=[5, 10], budget=Budget(trials=200), n_sims=100, seed=1)
    assert all(d.trials <= 200 for d in plan.designs if d.within_budget)
    assert not plan.reaches_target and "no design within budget reaches" in plan.message


def test_cli_prints_the_grid_and_the_recommendation() -> None:
    result = CliRunner().invoke(app, ["plan", "--arm-a", "0.0875,0.1667", "--arm-b", "0.0167", "--sd", "1.5",
                                      "--prompts", "6,12,24", "--runs", "5,20", "--budget-trials", "3000",
                                      "--sims", "150"])
    assert result.exit_code == 0, result.output
    assert "◀" in result.output and "cheapest design" in result.output and "same " in result.output
    bad = CliRunner().invoke(app, ["plan", "--arm-a", "0.2", "--arm-b", "x"])
    assert bad.exit_code == 2
