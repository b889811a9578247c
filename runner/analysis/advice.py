"""What to change when the numbers cannot answer yet: one line under a report whose intervals are too wide to use.

A first sweep of a few cases prints rates with intervals of tens of points and comparisons that find no
evidence either way; without a word on why, a user adds runs, which narrow only the noise inside a prompt.
The prompt is the unit of inference: an interval over k prompts narrows about as 1 / √k, so the prompts a
target half-width needs is about k · (half-width / target)². The t quantile of a small k makes that an
overestimate, never an underestimate; ``trialgrid plan`` simulates the designs for a comparison.
"""

from __future__ import annotations

import math

import polars as pl

#: a rate's 95% interval half-width a report reads as informative
TARGET_HALF_WIDTH = 0.10
#: the median half-width past which the report says so (a little past the target: no line for a near miss)
WIDE_HALF_WIDTH = 0.15


def width_advice(conditions: pl.DataFrame, target: float = TARGET_HALF_WIDTH) -> str | None:
    """One line when the median half-width of the headline rates' cluster intervals (each probe's first rate,
    the one its leaderboard ranks by) is over ``WIDE_HALF_WIDTH``, saying how many prompts would bring it to
    ``target``; None
    when they are narrow enough (or there are none). ``conditions``: the summary's per-(model, condition, rate)
    table (``kind``, ``rate``, ``prompts``, ``cluster_lo``, ``cluster_hi``)."""
    from runner.probes import PROBES

    if not {"kind", "rate", "prompts", "cluster_lo", "cluster_hi"} <= set(conditions.columns):
        return None
    headline = {kind: cls.rates[0] for kind, cls in PROBES.items() if cls.rates}
    cells = conditions.filter(pl.col("cluster_lo").is_not_null() & pl.col("cluster_hi").is_not_null()
                              & (pl.col("prompts") >= 1)
                              & (pl.col("rate") == pl.col("kind").replace_strict(headline, default=None)))
    if not cells.height:
        return None
    half = float(((cells["cluster_hi"] - cells["cluster_lo"]) / 2).median())  # type: ignore[arg-type]
    prompts = int(cells["prompts"].median())  # type: ignore[arg-type]
    if not half > max(target, WIDE_HALF_WIDTH):
        return None
    needed = math.ceil(prompts * (half / target) ** 2)
    return (f"These intervals are wide: ±{100 * half:.0f} pp (the median) over {prompts} prompt"
            f"{'s' if prompts != 1 else ''}. More prompts narrow them; more runs narrow only the noise within a "
            f"prompt. About {needed:,} prompts would bring them to ±{100 * target:.0f} pp; `trialgrid plan` "
            "simulates the designs for a comparison.")
