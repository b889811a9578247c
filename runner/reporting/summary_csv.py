"""``trialgrid report --csv DIR``: the summary tables as CSV files for spreadsheets.

One file per table of ``runner.analysis.leaderboard.Summary`` (long format, one header row,
the ``run`` label in every row); list cells (remedies) are joined with "; ".
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from runner.analysis.leaderboard import Summary

TABLES = ("runs", "models", "leaderboard", "conditions", "contrasts", "cells", "fields", "stages")


def write_csv(summary: Summary, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    frames = {"runs": summary.run_table, "models": summary.models, "leaderboard": summary.leaderboard,
              "conditions": summary.conditions, "contrasts": summary.contrasts, "cells": summary.cells,
              "fields": summary.fields, "stages": summary.stages}
    written = []
    for name in TABLES:
        frame = frames[name]
        lists = [c for c, t in frame.schema.items() if isinstance(t, pl.List)]
        frame = frame.with_columns([pl.col(c).cast(pl.List(pl.String)).list.join("; ") for c in lists])
        path = directory / f"{name}.csv"
        frame.write_csv(path)
        written.append(path)
    return written
