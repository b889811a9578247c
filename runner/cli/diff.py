"""``trialgrid diff OLD NEW``: two runs of one sweep compared under a family-wise rule; exit 1 on a regression.

Why a module of its own: the command grew options (``--strict``, ``--fail-on``) and its
rule is the part a CI log must state; the decisions are in ``runner.analysis.diff``.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from runner.cli.console import EXIT_GATE, fail, out
from runner.core.errors import UserError


class FailOn(str, Enum):
    regression = "regression"
    never = "never"


def diff(
    old: Path = typer.Argument(..., help="The earlier run's output directory."),
    new: Path = typer.Argument(..., help="The later run's output directory."),
    force: bool = typer.Option(False, "--force", help="Compare runs of different sweeps (refused by default)."),
    strict: bool = typer.Option(False, "--strict", help="Also count a pass/fail cell that passed every scored trial "
                                "and now fails as a REGRESSION (a gate on any single failure, not a test)."),
    fail_on: FailOn = typer.Option(FailOn.regression, "--fail-on",
                                   help="regression (default): exit 1 on a REGRESSION under the controlled rule "
                                        "(and --strict's, if given); never: always exit 0."),
    max_regression: float | None = typer.Option(None, "--max-regression", metavar="PP", min=0.0,
                                                help="Also exit 1 when a run-level change's 95% interval says the "
                                                     "event rate rose by more than PP percentage points (its lower "
                                                     "bound above PP), whatever the family-wise verdict."),
) -> None:
    """Compare two runs of a sweep: per probe × model the paired clustered NEW − OLD difference on the shared cases,
    case-level flips as cells to watch; REGRESSION / FIXED only under a family-wise (Holm) rule; exit 1 on a regression."""
    from runner.analysis.diff import diff_runs
    from runner.output import Output

    try:
        result = diff_runs(Output.open(old), Output.open(new), force=force, strict=strict)
    except UserError as exc:
        raise fail(exc) from None
    from runner.reporting.textgrid import fit_width, say

    width = fit_width(out)  # a terminal's width or COLUMNS: long lines wrap there; a pipe keeps each line whole
    past = result.past_bound(max_regression) if max_regression is not None else []
    for line in [*result.lines(), *past]:
        say(out, line, width)
    if (result.regressions or past) and fail_on is FailOn.regression:
        raise typer.Exit(EXIT_GATE)


def register(app: typer.Typer) -> None:
    """Add ``diff`` to the ``trialgrid`` command."""
    app.command()(diff)
