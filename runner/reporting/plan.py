"""Terminal presentation of ``trialgrid plan``: the design grid, the recommendation, the same-budget trade-offs."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from runner.analysis.cells import interval_name
from runner.analysis.planner import Design, Plan
from runner.reporting.textgrid import fit_width, say


def print_plan(plan: Plan, tradeoffs: list[tuple[Design, Design]], console: Console, *, sd: float,
               alpha: float) -> None:
    prompts = sorted({d.n_prompts for d in plan.designs})
    runs = sorted({d.n_runs for d in plan.designs})
    grid = {(d.n_prompts, d.n_runs): d for d in plan.designs}
    table = Table(title=f"power at α = {alpha:g} / mean 95% interval width of A − B (pp); sd = {sd:g}",
                  title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("prompts \\ runs")
    for r in runs:
        table.add_column(str(r), justify="right")
    for k in prompts:
        row = [str(k)]
        for r in runs:
            d = grid[(k, r)]
            text = f"{d.result.power:.0%} / {100 * d.result.mean_width:.1f}"
            if d is plan.recommended:
                text = f"[bold green]{text} ◀[/bold green]"
            elif not d.within_budget:
                text = f"[dim]{text}[/dim]"
            elif d.result.power >= plan.target_power:
                text = f"[green]{text}[/green]"
            row.append(text)
        table.add_row(*row)
    method = plan.designs[0].result.interval_method if plan.designs else None
    table.caption = ("green: reaches the target power; dim: over budget; ◀ recommended. "
                     "Cell-level cluster permutation test (whole cells permuted within prompt), as the report uses; "
                     f"width: the {interval_name(method)} of A − B ({method}), as the report prints it.")
    table.caption_justify = "left"
    console.print(table)
    width = fit_width(console)  # a terminal or COLUMNS: prose wraps there; a pipe keeps each line whole
    say(console, plan.message, width)
    for many_prompts, many_runs in tradeoffs:
        say(console, f"  same {many_prompts.trials:,} trials: {many_prompts.n_prompts} prompts × {many_prompts.n_runs} "
                     f"runs → power {many_prompts.result.power:.0%}, width {100 * many_prompts.result.mean_width:.1f} pp; "
                     f"{many_runs.n_prompts} prompts × {many_runs.n_runs} runs → power {many_runs.result.power:.0%}, "
                     f"width {100 * many_runs.result.mean_width:.1f} pp", width)
