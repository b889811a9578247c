"""The notebook API: ``runner.load(OUT)`` for the trials, ``runner.load_summary(OUT, ...)`` for the report's tables.

``load`` returns a polars LazyFrame over every trial of an output directory (each once,
its newest row; ``runner.output.Output``) — the columns documented in the README's "Output schema" (common columns,
then each probe's outcome columns) — so a filter or aggregation reads only what it
needs. ``load_summary`` returns the ``Summary`` the report prints (leaderboard,
conditions, contrasts, cells, fields, stages, models, runs: all polars DataFrames;
each probe's own views, e.g. a judge's kappas, via ``summary.probe_views(run, probe)``).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from runner.analysis.leaderboard import Summary, summarize
from runner.output.reader import Output, as_output


def load(out: str | Path | Output) -> pl.LazyFrame:
    """The trials of the run at ``out`` as a LazyFrame, each trial once (its newest row). Raises ``UserError``
    when there are none, or for a damaged or foreign part."""
    return as_output(out).scan()


def load_summary(*outs: str | Path | Output) -> Summary:
    """The report's tables for one or many runs, as DataFrames (see ``runner.analysis.leaderboard.Summary``)."""
    return summarize([as_output(o) for o in outs])
