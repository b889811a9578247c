"""``trialgrid report --csv DIR``: the summary tables as CSV files for spreadsheets.

One file per table of ``runner.analysis.leaderboard.Summary`` (long format, one header row,
the ``run`` label in every row); list cells (remedies) are joined with "; ". Every
probe view (``runner.core.views``) is one more file, ``view.<probe>.<key>.csv``,
its rows stacked over the runs that have it, with ``run`` and ``kind`` in front (a view's
own column of either name, e.g. a listing's trial ``run``, becomes ``view_run``).

Labels come from the runs (a manifest someone else wrote, a model named like a
formula): every text cell goes through ``runner.core.safety.csv_cell`` so a
spreadsheet never evaluates it, and a probe or view name becomes part of a file name
only through ``safe_filename``, inside ``directory``.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from runner.analysis.leaderboard import Summary
from runner.core.safety import confined, csv_cell, safe_filename

_TABLES = ("runs", "models", "leaderboard", "conditions", "contrasts", "cells", "fields", "stages", "comparisons",
           "consistency")


def write_csv(summary: Summary, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    frames = {"runs": summary.run_table, "models": summary.models, "leaderboard": summary.leaderboard,
              "conditions": summary.conditions, "contrasts": summary.contrasts, "cells": summary.cells,
              "fields": summary.fields, "stages": summary.stages, "comparisons": summary.comparisons,
              "consistency": summary.consistency}
    written = []
    for name in _TABLES:
        written.append(_write(frames[name], confined(directory, f"{name}.csv")))
    for (probe, key), frame in _view_frames(summary).items():
        written.append(_write(frame, confined(directory, f"view.{safe_filename(probe)}.{safe_filename(key)}.csv")))
    return written


def _view_frames(summary: Summary) -> dict[tuple[str, str], pl.DataFrame]:
    """(probe, view key) → the view's rows over every run, with ``run`` and ``kind`` columns in front."""
    parts: dict[tuple[str, str], list[pl.DataFrame]] = {}
    for run in summary.runs:
        for a in run.probes:
            for view in summary.probe_views(run, a.probe):
                head = [pl.lit(run.label, pl.String).alias("run"), pl.lit(a.kind, pl.String).alias("kind")]
                table = view.table.rename({c: f"view_{c}" for c in ("run", "kind") if c in view.table.columns})
                parts.setdefault((a.probe, view.key), []).append(table.select([*head, *table.columns]))
    return {k: pl.concat(v, how="diagonal_relaxed") for k, v in parts.items()}


def _write(frame: pl.DataFrame, path: Path) -> Path:
    lists = [c for c, t in frame.schema.items() if isinstance(t, pl.List)]
    frame = frame.with_columns([pl.col(c).cast(pl.List(pl.String)).list.join("; ") for c in lists])
    texts = [c for c, t in frame.schema.items() if t in (pl.String, pl.Categorical) or isinstance(t, pl.Enum)]
    frame = frame.with_columns([pl.col(c).cast(pl.String).map_elements(csv_cell, return_dtype=pl.String,
                                                                     skip_nulls=True) for c in texts])
    frame = frame.rename({c: str(csv_cell(c)) for c in frame.columns if csv_cell(c) != c})
    frame.write_csv(path)
    return path
