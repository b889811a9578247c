"""Cluster identity and per-cell input validation, derived in exactly one place.

Every statistic in this package treats the cluster (prompt, case, task) as the
unit of inference, so every function needs the same two things: dense integer
cluster codes, and validated hit / trial counts. Doing both here means a
missing cluster id or an impossible count is rejected with the same message
whichever statistic the caller reached for.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, (float, np.floating)) and math.isnan(value):
        return True
    # pandas.NA / polars nulls arrive as None or NaN; numpy datetime NaT too.
    if isinstance(value, (np.datetime64, np.timedelta64)) and np.isnat(value):
        return True
    return False


def factorize_clusters(cluster: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Map cluster ids to dense codes ``0..k-1`` in order of first appearance.

    Parameters
    ----------
    cluster : array_like, shape (cells,)
        Cluster ids: any hashable values (ints, strings, tuples).

    Returns
    -------
    codes : numpy.ndarray of int64, shape (cells,)
        The dense code of each id, numbered in order of first appearance.
    uniques : numpy.ndarray, shape (k,)
        The distinct ids, with ``uniques[codes[i]] == cluster[i]``.

    Raises
    ------
    ValueError
        For a missing id (None, NaN, NaT), naming its position: a trial
        without a cluster cannot be assigned to a unit of inference, and
        silently pooling such trials into one "missing" cluster would invent one.

    Notes
    -----
    Like ``pandas.factorize`` (``sort=False``): the codes do not depend on
    how the ids sort.
    """
    if isinstance(cluster, np.ndarray) and cluster.dtype.kind in "iub":
        arr = cluster.ravel()
        uniques, first, codes = np.unique(arr, return_index=True, return_inverse=True)
        # Re-order codes by first appearance so results do not depend on sort order.
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        return rank[codes].astype(np.int64), uniques[order]
    if not isinstance(cluster, np.ndarray | Iterable):
        raise TypeError(f"cluster ids must be a sequence, got {type(cluster).__name__}")
    values = list(cluster.tolist() if isinstance(cluster, np.ndarray) else cluster)
    mapping: dict[Any, int] = {}
    codes = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        if _is_missing(v):
            raise ValueError(f"cluster id at position {i} is missing ({v!r}); every cell needs a cluster")
        code = mapping.get(v)
        if code is None:
            code = len(mapping)
            mapping[v] = code
        codes[i] = code
    uniques = np.empty(len(mapping), dtype=object)
    for v, code in mapping.items():
        uniques[code] = v
    return codes, uniques


def as_counts(hits: ArrayLike, n: ArrayLike, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate per-cell hit and trial counts: integers, ``0 <= hits <= n``."""
    h = np.asarray(hits)
    m = np.asarray(n)
    if h.shape != (size,) or m.shape != (size,):
        raise ValueError(f"hits and n must be 1-D with one entry per cell ({size}), got {h.shape} and {m.shape}")
    for name, a in (("hits", h), ("n", m)):
        if a.dtype.kind == "f":
            if not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
                raise ValueError(f"{name} must hold whole counts")
        elif a.dtype.kind not in "iub":
            raise ValueError(f"{name} must be numeric counts, got dtype {a.dtype}")
    h = h.astype(np.int64)
    m = m.astype(np.int64)
    if np.any(h < 0) or np.any(h > m):
        raise ValueError("counts must satisfy 0 <= hits <= n in every cell")
    return h, m


def as_arm(arm: ArrayLike, size: int) -> np.ndarray:
    """Validate an arm indicator: 1 = arm A, 0 = arm B (booleans accepted)."""
    a = np.asarray(arm)
    if a.shape != (size,):
        raise ValueError(f"arm must be 1-D with one entry per cell ({size}), got {a.shape}")
    if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
        raise ValueError("arm contains a missing value")
    if not np.all((a == 0) | (a == 1)):
        raise ValueError("arm must be 0 (arm B) or 1 (arm A)")
    return a.astype(np.int64)


def cluster_table(
    cluster: ArrayLike, hits: ArrayLike, n: ArrayLike, arm: ArrayLike | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-cluster sums: ``(uniques, hits[k, a], n[k, a])`` with ``a`` = arm B, arm A.

    Without ``arm`` the second axis has length 1 (all cells pooled).
    """
    codes, uniques = factorize_clusters(cluster)
    h, m = as_counts(hits, n, codes.size)
    k = uniques.size
    if arm is None:
        return uniques, np.bincount(codes, h, k)[:, None], np.bincount(codes, m, k)[:, None]
    a = as_arm(arm, codes.size)
    idx = codes * 2 + a
    hk = np.bincount(idx, h, 2 * k).reshape(k, 2)
    nk = np.bincount(idx, m, 2 * k).reshape(k, 2)
    return uniques, hk, nk
