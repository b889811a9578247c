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
    model_order = {m["name"]: i for i, m in enumerate(manifest.get("sweep", {}).get("models", []))}
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
            .with_columns(
                pl.col("model").replace_strict(model_order, default=len(model_order), return_dtype=pl.Int64).alias("_m"),
                pl.col("condition").replace_strict(condition_order, default=len(condition_order), return_dtype=pl.Int64).alias("_c"))
            .sort("_m", "model", "_c")
            .drop("_m", "_c")
        )
        summaries.append(ProbeSummary(probe_name, kind, rates, table))
    return summaries


def _pct(x: float) -> str:
    return "—" if x is None or np.isnan(x) else f"{100 * x:.1f}%"


def print_report(out: Path, console: Console | None = None) -> list[ProbeSummary]:
    """One table per probe × model: conditions as columns, so it fits an 80-column terminal."""
    console = console or Console()
    summaries = summarize(out)
    for s in summaries:
        for model, rows in s.table.group_by("model", maintain_order=True):
            records = list(rows.iter_rows(named=True))
            table = Table(title=f"{s.probe} · {model[0]}", title_justify="left", header_style="bold")
            table.add_column("")
            for r in records:
                table.add_column(r["condition"], justify="right")
            table.add_row("trials (errors)", *(f"{r['trials']:,} ({r['errors']:,})" for r in records))
            for rate in s.rates:
                table.add_row(f"{rate} %", *(_pct(r[f"{rate}_rate"]) for r in records))
                table.add_row("  95% Wilson", *(f"{_pct(r[f'{rate}_lo'])}–{_pct(r[f'{rate}_hi'])}" for r in records),
                              style="dim")
            table.add_row(f"prompts firing ({s.rates[0]})",
                          *(f"{r.get(f'{s.rates[0]}_prompts') or 0}/{r.get('prompts') or 0}" for r in records))
            console.print(table)
    console.print("[dim]Wilson intervals treat trials as independent; trials of one prompt are not. "
                  "Cluster-level tests and intervals arrive with the stats core.[/dim]")
    return summaries
