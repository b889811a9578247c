"""``trialgrid plan``: simulate the power and interval width of prompts × runs designs, and recommend one.

Why a module of its own: the simulation is the library's (``runner.analysis.planner``); this module reads the
command line's rates and designs and prints the plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import typer

from runner.cli.console import fail, out
from runner.cli.flags import command
from runner.core.errors import UserError

__all__ = ["PlanFlags", "plan", "register"]


def _floats(text: str, what: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise fail(UserError(f"{what}: expected comma-separated numbers, got {text!r}")) from None
    if not all(math.isfinite(v) for v in values):  # an int() of inf would overflow: refused as written
        raise fail(UserError(f"{what}: expected finite numbers, got {text!r}"))
    return values


@dataclass(frozen=True)
class PlanFlags:
    """``trialgrid plan``'s flags: the expected rates of each arm, the heterogeneity, the designs to try and the budget."""

    arm_a: str = typer.Option(..., "--arm-a", help="Expected rate of each arm-A condition, comma-separated (e.g. 0.09,0.17).")
    arm_b: str = typer.Option(..., "--arm-b", help="Expected rate of each arm-B condition, comma-separated (e.g. 0.017).")
    sd: float = typer.Option(1.0, "--sd", help="Prompt-level heterogeneity: logit-normal sd of cell rates across prompts.")
    shared: float = typer.Option(0.0, "--shared", help="Share of that variance common to a prompt's cells (0–1).")
    prompts: str = typer.Option("6,12,24,48", "--prompts", help="Prompt counts to try.")
    runs: str = typer.Option("5,10,20,40", "--runs", help="Runs per cell to try.")
    budget_trials: int | None = typer.Option(None, "--budget-trials", help="At most this many trials.")
    budget_usd: float | None = typer.Option(None, "--budget-usd", help="At most this many dollars (needs --cost-per-trial).")
    cost_per_trial: float | None = typer.Option(None, "--cost-per-trial", help="USD per trial (see `trialgrid report` for a measured one).")
    target: float = typer.Option(0.8, "--target-power", help="Power the design must reach.")
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level of the cell-level permutation test.")
    sims: int = typer.Option(500, "--sims", help="Simulated studies per design.")
    seed: int = typer.Option(0, "--seed")


@command(PlanFlags)
def plan(flags: PlanFlags) -> None:
    """Simulate power and interval width of prompts × runs designs and recommend one."""
    from runner.analysis.planner import Budget, plan_designs, same_budget_tradeoffs
    from runner.reporting.plan import print_plan

    a, b = _floats(flags.arm_a, "--arm-a"), _floats(flags.arm_b, "--arm-b")
    try:
        result = plan_designs(a + b, [1] * len(a) + [0] * len(b), prompts=[int(x) for x in _floats(flags.prompts, "--prompts")],
                              runs=[int(x) for x in _floats(flags.runs, "--runs")], sd=flags.sd, shared=flags.shared, alpha=flags.alpha,
                              target_power=flags.target,
                              budget=Budget(flags.budget_trials, flags.budget_usd, flags.cost_per_trial),
                              n_sims=flags.sims, seed=flags.seed)
    except ValueError as exc:
        raise fail(UserError(str(exc))) from None
    print_plan(result, same_budget_tradeoffs(result), out, sd=flags.sd, alpha=flags.alpha)


def register(app: typer.Typer) -> None:
    app.command(name="plan")(plan)
