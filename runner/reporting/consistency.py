"""The consistency section of a report: pass^k per model × condition (terminal) and its JSON records.

Why a module of its own: ``Summary.consistency`` (``runner.analysis.consistency``) is drawn by the
terminal and written to JSON and CSV; the existing renderers only call in. The terminal shows a
few k (1, 2, 3, 5, 10 and each row's largest); the JSON and CSV hold every k.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from runner.analysis.leaderboard import Summary
from runner.core.constants import CONFIDENCE
from runner.core.formatting import pct as _pct
from runner.reporting.textgrid import Col, Grid

_SHOWN = (1, 2, 3, 5, 10)


def consistency_grids(summary: Summary) -> list[Grid]:
    """One grid per run × probe: model × condition rows, pass^k at a few k with the interval, and every-run share."""
    frame = summary.consistency
    grids = []
    for (run, probe), sub in frame.group_by("run", "probe", maintain_order=True):
        top = int(sub["k"].max())  # type: ignore[arg-type]
        ks = [k for k in _SHOWN if k < top] + [top]
        success = str(sub["success"][0])
        grid = Grid(f"{probe} · consistency · pass^k ({success})" + (f" · {run}" if summary.runs[1:] else ""),
                    [Col("model", "left"), Col("condition", "left"), *(Col(f"pass^{k}") for k in ks),
                     Col("every run"), Col("cases")], keys=2)
        for (model, condition), rows in sub.group_by("model", "condition", maintain_order=True):
            by_k = {r["k"]: r for r in rows.iter_rows(named=True)}
            cells = []
            for k in ks:
                r = by_k.get(k)
                cells.append(f"{_pct(r['pass_k'])} [{_pct(r['ci_lo'], 0)}–{_pct(r['ci_hi'], 0)}]" if r else "—")
            first = rows.row(0, named=True)
            grid.add_row(str(model), str(condition), *cells, _pct(first["every_run"]), str(first["cases"]))
        grid.caption = (f"pass^k: the chance that k runs of one case all succeed ({success}), C(c, k) / C(n, k) per "
                        f"case averaged over cases, {CONFIDENCE:.0%} t interval over cases; every run: the share of "
                        "cases that succeeded in all of their runs.")
        grids.append(grid)
    return grids


def consistency_records(summary: Summary) -> list[dict[str, Any]]:
    """The JSON ``consistency`` list: one record per run × probe × model × condition × k."""
    frame: pl.DataFrame = summary.consistency
    return [{k: r[k] for k in ("run", "probe", "kind", "model", "condition", "success", "k", "pass_k", "cases",
                               "every_run")} | {"ci": [r["ci_lo"], r["ci_hi"]]} for r in frame.iter_rows(named=True)]
