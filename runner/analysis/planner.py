"""``trialgrid plan``: which prompts × runs design can answer the question, before money is spent.

Over a grid of designs, ``stats.power.simulate_power`` simulates the cell-level
cluster permutation test the report uses (power at ``alpha``) and the interval of
A − B the report prints (its default method; mean width), given the expected rate per condition, the
prompt-level heterogeneity (logit-normal sd of cell rates across prompts) and an
optional budget (trials, or dollars at a cost per trial). The recommendation is the
cheapest design within budget that reaches the target power (ties: the narrower
interval); if none does, the most powerful design within budget, said as such.

Why prompts beat runs when prompts differ: runs only shrink the binomial noise
inside a cell, while the between-prompt spread — and the test's floor, 1 / C(C, a)^K
for K prompts — only move with more prompts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from stats.power import PowerResult, simulate_power


@dataclass(frozen=True)
class Design:
    result: PowerResult
    trials: int
    cost_usd: float | None
    within_budget: bool

    @property
    def n_prompts(self) -> int:
        return self.result.n_prompts

    @property
    def n_runs(self) -> int:
        return self.result.n_runs


@dataclass(frozen=True)
class Budget:
    """What a design may cost: at most ``trials`` trials and at most ``usd`` dollars at ``cost_per_trial`` each
    (either, both or neither)."""

    trials: int | None = None
    usd: float | None = None
    cost_per_trial: float | None = None

    def __post_init__(self) -> None:
        if self.usd is not None and not self.cost_per_trial:
            raise ValueError("a dollar budget needs a cost per trial")

    def allows(self, trials: int) -> tuple[float | None, bool]:
        """(the cost of ``trials`` trials in dollars, or None without a cost per trial; whether they fit)."""
        cost = trials * self.cost_per_trial if self.cost_per_trial else None
        within = (self.trials is None or trials <= self.trials) and \
                 (self.usd is None or (cost is not None and cost <= self.usd))
        return cost, within


@dataclass(frozen=True)
class Plan:
    designs: list[Design]
    recommended: Design | None
    reaches_target: bool
    target_power: float
    message: str


#: the planner's bounds: each simulated design holds n_sims × prompts × cells draws in memory at once, and a
#: planning question is answered in seconds, so a design past these is refused before any work (one line)
MAX_DESIGNS = 400
MAX_DRAWS_PER_DESIGN = 20_000_000
MAX_SIMS = 100_000
MAX_RUNS = 1_000_000


def _check_bounds(rates: Sequence[float], prompts: Sequence[int], runs: Sequence[int], *, sd: float, shared: float,
                  alpha: float, target_power: float, n_sims: int) -> None:
    """``ValueError`` saying which input is out of range (the CLI prints it as one line)."""
    if not rates:
        raise ValueError("give at least one rate per arm (--arm-a, --arm-b)")
    if not all(math.isfinite(r) and 0 <= r <= 1 for r in rates):
        raise ValueError("rates are probabilities: each between 0 and 1")
    if not (math.isfinite(sd) and 0 <= sd <= 20):
        raise ValueError(f"--sd {sd:g}: a logit-scale standard deviation between 0 and 20")
    if not (math.isfinite(shared) and 0 <= shared <= 1):
        raise ValueError(f"--shared {shared:g}: a share between 0 and 1")
    if not (0 < alpha < 1) or not (0 < target_power <= 1):
        raise ValueError("--alpha must be in (0, 1) and --target-power in (0, 1]")
    if not 1 <= n_sims <= MAX_SIMS:
        raise ValueError(f"--sims {n_sims}: between 1 and {MAX_SIMS:,}")
    if not prompts or not runs or min(prompts) < 2 or min(runs) < 1 or max(runs) > MAX_RUNS:
        raise ValueError(f"--prompts must each be at least 2 and --runs between 1 and {MAX_RUNS:,}")
    designs = len(set(prompts)) * len(set(runs))
    if designs > MAX_DESIGNS:
        raise ValueError(f"{designs:,} designs asked (prompts × runs); at most {MAX_DESIGNS}")
    draws = n_sims * max(prompts) * len(rates)
    if draws > MAX_DRAWS_PER_DESIGN:
        raise ValueError(f"{max(prompts):,} prompts × {len(rates)} cells × {n_sims:,} simulations is {draws:,} draws "
                         f"for one design, over the planner's {MAX_DRAWS_PER_DESIGN:,}; ask for fewer prompts or --sims")


def plan_designs(rates: Sequence[float], arm: Sequence[int], *, prompts: Sequence[int], runs: Sequence[int],
                 sd: float, shared: float = 0.0, alpha: float = 0.05, target_power: float = 0.8,
                 budget: Budget = Budget(), n_sims: int = 500, seed: int = 0) -> Plan:
    """Simulate every design in ``prompts`` × ``runs`` and recommend one within ``budget`` (see the module
    docstring)."""
    _check_bounds(rates, prompts, runs, sd=sd, shared=shared, alpha=alpha, target_power=target_power, n_sims=n_sims)
    cells_per_prompt = sum(1 for g in arm if g >= 0)
    designs = []
    for k in sorted(set(prompts)):
        for r in sorted(set(runs)):
            trials = k * r * cells_per_prompt
            cost, within = budget.allows(trials)
            res = simulate_power(rates, arm, n_prompts=k, n_runs=r, sd=sd, shared=shared, n_sims=n_sims, alpha=alpha,
                                 seed=seed + 7919 * k + r)
            designs.append(Design(res, trials, cost, within))
    affordable = [d for d in designs if d.within_budget]
    reaching = [d for d in affordable if d.result.power >= target_power]
    if reaching:
        best = min(reaching, key=lambda d: (d.trials, d.result.mean_width))
        message = (f"{best.n_prompts} prompts × {best.n_runs} runs ({best.trials:,} trials) is the cheapest design "
                   f"within budget that reaches power {target_power:.0%} (simulated {best.result.power:.0%}).")
    elif affordable:
        best = max(affordable, key=lambda d: (d.result.power, -d.trials))
        message = (f"no design within budget reaches power {target_power:.0%}; the most powerful is "
                   f"{best.n_prompts} prompts × {best.n_runs} runs ({best.result.power:.0%}). Add prompts, not runs, "
                   "when prompts differ.")
    else:
        best = None
        message = "no design in the grid fits the budget"
    return Plan(designs, best, bool(reaching), target_power, message)


def same_budget_tradeoffs(plan: Plan) -> list[tuple[Design, Design]]:
    """Pairs of designs with the same trial count: (more prompts, more runs) — the comparison the planner argues from."""
    by_trials: dict[int, list[Design]] = {}
    for d in plan.designs:
        by_trials.setdefault(d.trials, []).append(d)
    out = []
    for trials in sorted(by_trials):
        group = sorted(by_trials[trials], key=lambda d: d.n_prompts)
        if len(group) >= 2:
            out.append((group[-1], group[0]))
    return out
