"""Intervals for a single binomial proportion.

Kept apart from the cluster machinery because it is the one statistic that is
correct at the trial level: a Wilson interval describes the pooled rate of the
trials observed, and the report prints it beside the cluster interval so readers
can see how much clustering widens it.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike


def wilson_interval(hits: ArrayLike, n: ArrayLike, confidence_level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for ``hits`` successes in ``n`` trials (vectorised).

    Parameters
    ----------
    hits : array_like of int
        Successes, ``0 <= hits <= n``.
    n : array_like of int
        Trials, broadcast against ``hits``.
    confidence_level : float, default 0.95
        Two-sided confidence level, in (0, 1).

    Returns
    -------
    low, high : numpy.ndarray
        The bounds, shaped like the broadcast inputs; NaN where ``n == 0``
        (no information), not 0 or 1.

    Notes
    -----
    The interval of p solving |p̂ − p| = z √(p(1 − p) / n), with z the
    two-sided normal quantile for ``confidence_level``; as
    ``scipy.stats.binomtest(...).proportion_ci(method="wilson")``. Assumes
    independent trials: it describes the trials observed, not the
    population of prompts (the cluster interval does that).

    References
    ----------
    .. [1] E. B. Wilson, "Probable inference, the law of succession, and
           statistical inference", Journal of the American Statistical
           Association 22(158), 209–212, 1927.
    """
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level}")
    k = np.asarray(hits, dtype=np.float64)
    m = np.asarray(n, dtype=np.float64)
    if np.any(k < 0) or np.any(k > m):
        raise ValueError("hits must satisfy 0 <= hits <= n")
    z = NormalDist().inv_cdf(0.5 + confidence_level / 2.0)
    z2 = z * z
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / m
        denom = 1.0 + z2 / m
        centre = (p + z2 / (2.0 * m)) / denom
        half = z * np.sqrt(p * (1.0 - p) / m + z2 / (4.0 * m * m)) / denom
        lo = np.where(m > 0, np.clip(centre - half, 0.0, 1.0), np.nan)
        hi = np.where(m > 0, np.clip(centre + half, 0.0, 1.0), np.nan)
    return lo, hi
