"""What a sweep will cost, before it spends: tokens and dollars from one calibration run of the oracle.

``trialgrid validate`` prints it when the sweep sets ``prices``. Each cell of the grid is asked once of the oracle
persona (``runner/sim/oracle.py``), offline: the requests are the sweep's own, so their input tokens (the request's
length at about 4 characters a token, tool schemas included) are what each model will be sent. Output tokens are
the fewest a passing answer takes, so a real model's replies cost more; a multi-step probe is counted at the
oracle's turns (a real agent may take up to ``max_turns``). Every model of a sweep runs every cell ``runs`` times,
so a model's estimate is the cells' tokens times their runs, priced by its own ``prices`` entry. Probes the oracle
cannot answer (``judge``) are not estimated, and the estimate says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from runner.config.sweep import LoadedSweep
from runner.output import Output


@dataclass(frozen=True)
class ModelEstimate:
    model: str
    trials: int
    input_tokens: int
    output_tokens: int
    #: dollars at the model's price; None for a model without one
    usd: float | None


def estimate(loaded: LoadedSweep, calibration: Output | None) -> list[ModelEstimate]:
    """Per model of ``loaded``: the trials, tokens and dollars its grid will take, from ``calibration`` (the oracle's
    one-run sweep of the same cells); a probe with no calibration rows (the oracle cannot answer it) counts neither
    trials nor tokens."""
    per_probe: dict[str, tuple[int, int, int]] = {}  # probe → (trials, input, output) for one model
    runs = {p.name: p.runs for p in loaded.probes}
    if calibration is not None and calibration.parts:
        cells = (calibration.scan().group_by("probe")
                 .agg(pl.len().alias("cells"), pl.col("input_tokens").fill_null(0).sum().alias("input"),
                      pl.col("output_tokens").fill_null(0).sum().alias("output")).collect())
        for row in cells.iter_rows(named=True):
            r = runs.get(row["probe"], 1)
            per_probe[row["probe"]] = (row["cells"] * r, row["input"] * r, row["output"] * r)
    trials = sum(t for t, _, _ in per_probe.values())
    inp = sum(i for _, i, _ in per_probe.values())
    outp = sum(o for _, _, o in per_probe.values())
    out = []
    for m in loaded.sweep.models:
        price = loaded.sweep.prices.get(m.name)
        out.append(ModelEstimate(m.name, trials, inp, outp, None if price is None else price.cost(inp, outp)))
    return out


__all__ = ["ModelEstimate", "estimate"]
