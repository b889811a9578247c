"""Whether a run's grid is finished: every report of an unfinished one says so, with counts, before its tables.

A budget stop, a crash or Ctrl-C leaves a grid part-written. Its rates are rates of the trials that ran, and
a verdict on them (the scorecard) would grade prompts the rest of the grid would change, so every renderer
leads with ``incomplete_lines`` and the scorecard grades no unfinished run.
"""

from __future__ import annotations

from runner.analysis.leaderboard import Summary


def incomplete_runs(summary: Summary) -> list[tuple[str, int, int]]:
    """(run, trials written, trials in its grid) of every run whose grid is not finished; an import, whose
    manifest counts no grid, is never incomplete."""
    return [(r["run"], r["trials"], r["trials_total"]) for r in summary.run_table.iter_rows(named=True)
            if r["trials_total"] and r["trials"] < r["trials_total"]]


def incomplete_lines(summary: Summary) -> list[str]:
    """One line per unfinished run: ``incomplete: 417 of 540 trials written …``."""
    many = len(summary.runs) > 1
    return [f"incomplete: {done:,} of {total:,} trials written" + (f" (run {run})" if many else "")
            + " — rates cover only the trials that ran, and the scorecard is not graded; rerun the same command "
              "to finish the grid" for run, done, total in incomplete_runs(summary)]
