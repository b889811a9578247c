"""The notebook API: ``runner.load(OUT)`` for the trials, ``runner.load_summary(OUT, ...)`` for the report's tables.

``load`` returns a polars LazyFrame over every finished trial file of an output
directory — the columns documented in the README's "Output schema" (common columns,
then each probe's outcome columns) — so a filter or aggregation reads only what it
needs. ``load_summary`` returns the ``Summary`` the report prints (leaderboard,
conditions, contrasts, cells, fields, stages, models, runs: all polars DataFrames;
each probe's own views, e.g. a judge's kappas, via ``summary.probe_views(run, probe)``).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from runner.analysis.cells import scan_trials
from runner.analysis.leaderboard import Summary, summarize


def load(out: str | Path) -> pl.LazyFrame:
    """The trials of the run at ``out`` as a LazyFrame. Raises ``UserError`` when there are none."""
    return scan_trials(Path(out))


def load_summary(*outs: str | Path) -> Summary:
    """The report's tables for one or many runs, as DataFrames (see ``runner.analysis.leaderboard.Summary``)."""
    return summarize([Path(o) for o in outs])
