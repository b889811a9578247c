"""Prompts firing: how many clusters produced at least one hit.

Why this exists: a pooled rate can be carried by one or two prompts; the
count of clusters with any hit says how widespread an effect is, and it is
the figure published beside the rates in this field.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from stats._clusters import factorize_clusters
from stats.results import Firing


def prompts_firing(cluster: ArrayLike, hits: ArrayLike) -> Firing:
    """Number of clusters with at least one hit, and number of clusters.

    Parameters
    ----------
    cluster : array_like, shape (cells,)
        Cluster id of each cell (or trial).
    hits : array_like, shape (cells,)
        Non-negative hit counts; summed within each cluster.

    Returns
    -------
    res : Firing
        ``firing`` (clusters with at least one hit) and ``clusters``
        (clusters observed).

    Notes
    -----
    A cluster present with zero trials still counts in the denominator (it
    was observed and did not fire). The figure published beside pooled rates
    in this field (e.g. "8 / 12 prompts").
    """
    codes, uniques = factorize_clusters(cluster)
    h = np.asarray(hits, dtype=np.float64)
    if h.shape != codes.shape:
        raise ValueError("hits must have one entry per cluster entry")
    if np.any(~np.isfinite(h)) or np.any(h < 0):
        raise ValueError("hits must be non-negative counts")
    per = np.bincount(codes, h, uniques.size)
    return Firing(firing=int(np.sum(per > 0)), clusters=int(uniques.size))
