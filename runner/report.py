"""``trialgrid report OUT``: per model × probe × condition, the rates and their intervals.

Computation and presentation are separate: ``summarize`` returns polars DataFrames
(usable from a notebook), ``print_report`` renders them with rich. The per-cell
aggregation happens in polars, so the cost grows with cells, not trials; the
statistics (``stats``) get per-cell counts only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from rich.console import Console
from rich.table import Table

from runner.errors import UserError
from runner.manifest import read_manifest
from runner.probes import PROBES
from stats import wilson_interval


@dataclass
class ProbeSummary:
    probe: str
    kind: str
    rates: tuple[str, ...]
    #: one row per model × condition
    table: pl.DataFrame


def _scan(out: Path) -> pl.LazyFrame:
    parts = sorted((out / "trials").glob("*.arrow"))
    if not parts:
        raise UserError(f"no finished trial files in {out / 'trials'}",
                        hint="run a sweep into this directory first; a crashed run is repaired by rerunning it")
    return pl.scan_ipc([str(p) for p in parts])


def summarize(out: Path) -> list[ProbeSummary]:
    """Per-probe tables of trials, errors, rates with Wilson 95% intervals, and prompts firing."""
    manifest = read_manifest(out)
    if manifest is None:
        raise UserError(f"{out} has no manifest.json; is it a trialgrid output directory?")
    frame = _scan(out)
    condition_order = {}
    summaries = []
    for probe_name, info in manifest["probes"].items():
        kind = info["kind"]
        probe_cls = PROBES.get(kind)
        if probe_cls is None:
            raise UserError(f"{out}: probe {probe_name!r} has kind {kind!r}, unknown to this trialgrid version")
        rates = probe_cls.rates
        condition_order = {c: i for i, c in enumerate(probe_cls.all_conditions)}
        sub = frame.filter(pl.col("probe") == probe_name)
        ok = pl.col("status") == "ok"
        per_case = (
            sub.filter(ok)
            .group_by("model", "condition", "case_id")
            .agg([pl.col(r).cast(pl.Int64).sum().alias(r) for r in rates])
            .group_by("model", "condition")
            .agg([(pl.col(r) > 0).sum().alias(f"{r}_prompts") for r in rates] + [pl.len().alias("prompts")])
        )
        cells = (
            sub.group_by("model", "condition")
            .agg([pl.len().alias("trials"), ok.sum().alias("ok"), (~ok).sum().alias("errors")]
                 + [pl.col(r).filter(ok).cast(pl.Int64).sum().alias(f"{r}_hits") for r in rates])
            .join(per_case, on=["model", "condition"], how="left")
            .collect()
        )
        if cells.height == 0:
            continue
        n = cells["ok"].to_numpy()
        extra = []
        for r in rates:
            hits = cells[f"{r}_hits"].fill_null(0).to_numpy()
            lo, hi = wilson_interval(hits, n)
            with np.errstate(invalid="ignore", divide="ignore"):
                rate = np.where(n > 0, hits / np.maximum(n, 1), np.nan)
            extra += [pl.Series(f"{r}_rate", rate), pl.Series(f"{r}_lo", lo), pl.Series(f"{r}_hi", hi)]
        table = (
            cells.with_columns(extra)
            .with_columns(pl.col("condition").replace_strict(condition_order, default=len(condition_order)).alias("_order"))
            .sort("model", "_order")
            .drop("_order")
        )
        summaries.append(ProbeSummary(probe_name, kind, rates, table))
    return summaries


def _pct(x: float) -> str:
    return "—" if x is None or np.isnan(x) else f"{100 * x:.1f}%"


def print_report(out: Path, console: Console | None = None) -> list[ProbeSummary]:
    console = console or Console()
    summaries = summarize(out)
    for s in summaries:
        table = Table(title=f"{s.probe} ({s.kind}) — {out}", title_justify="left", header_style="bold")
        for col in ("model", "condition", "trials", "errors"):
            table.add_column(col, justify="left" if col in ("model", "condition") else "right")
        for r in s.rates:
            table.add_column(f"{r} (95% Wilson)", justify="right")
        table.add_column(f"prompts firing ({s.rates[0]})", justify="right")
        previous = None
        for row in s.table.iter_rows(named=True):
            cells = [row["model"] if row["model"] != previous else "", row["condition"], f"{row['trials']:,}", f"{row['errors']:,}"]
            previous = row["model"]
            for r in s.rates:
                cells.append(f"{_pct(row[f'{r}_rate'])} [{_pct(row[f'{r}_lo'])}, {_pct(row[f'{r}_hi'])}]")
            fired, prompts = row.get(f"{s.rates[0]}_prompts"), row.get("prompts")
            cells.append(f"{fired or 0}/{prompts or 0}")
            table.add_row(*cells)
        console.print(table)
    console.print("[dim]Wilson intervals treat trials as independent; trials of one prompt are not. "
                  "Cluster-level tests and intervals arrive with the stats core.[/dim]")
    return summaries
