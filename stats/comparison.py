"""Paired comparisons of two arms run on the same cases, and the family-wise rule across many of them.

Why this exists: when two models (or two runs of one agent) answered the same
cases, the case is the unit and the pairing is the design. The question "is A's
rate different from B's on these cases?" is answered by swapping the A and B
labels *within each case* — under the null that the label does not matter, each
case's two sets of trials are exchangeable, and cases are independent. A diff or
a model comparison then asks that question many times (every probe × model ×
rate, every pair of models), so a verdict needs a rule that controls the
family-wise error rate across all of them: Holm's step-down adjustment.

``paired_permutation_test`` is one swap per case, all of the case's matched
conditions together (a case's conditions share the model's case-level effect, so
swapping them one by one would break the dependence the null keeps). Each case
contributes its A hits and trials, or its B hits and trials, to arm A — cells
with unequal trials swap their trial counts too. That is exactly the whole-cells
scheme of ``stats.cluster_permutation_test(level="cell")`` with two cells (A, B)
per cluster, so the same exact dynamic programme, tilted convolution, Monte
Carlo path and attainable floor serve it (one mechanism, not two): exact while
the design allows (2^cases arrangements, folded over cases with the DP), Monte
Carlo beyond it, always with its floor (the smallest p any arrangement of these
data could give — a floor above alpha means the design cannot answer).

The interval of the paired difference is not here: it is the report's A − B
interval, ``stats.cluster_rate_ci(..., arm=...)``, on the same per-case arrays.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import ArrayLike

from stats._clusters import as_counts, factorize_clusters
from stats._rng import SeedLike
from stats.permutation import cluster_permutation_test
from stats.results import PermutationTestResult

__all__ = ["holm", "paired_permutation_test"]


def paired_permutation_test(
    case: ArrayLike,
    hits_a: ArrayLike,
    n_a: ArrayLike,
    hits_b: ArrayLike,
    n_b: ArrayLike,
    *,
    n_resamples: int | None = None,
    seed: SeedLike = None,
) -> PermutationTestResult:
    """Two-sided paired cluster permutation test of pooled rate A − pooled rate B, labels swapped within case.

    Parameters
    ----------
    case : array_like, shape (cells,)
        Case id of each matched cell (one entry per case, or per case ×
        condition; entries of one case are pooled and swapped together).
    hits_a, n_a : array_like of int, shape (cells,)
        Arm A's hits and trials in each cell.
    hits_b, n_b : array_like of int, shape (cells,)
        Arm B's hits and trials in the same cell (matched on case × condition).
    n_resamples : int, optional
        None (default): exact where the design allows, else the tilted
        convolution or Monte Carlo of ``cluster_permutation_test``; an integer
        forces that many Monte Carlo draws.
    seed : None, int, or numpy.random.Generator, optional
        Seed of the Monte Carlo draws.

    Returns
    -------
    res : PermutationTestResult
        As ``cluster_permutation_test(level="cell")``: ``statistic`` (pooled
        rate A − pooled rate B), two-sided ``pvalue``, ``attainable_floor``,
        ``n_resamples`` / ``mc_stderr`` (None when exact), ``n_clusters``
        (cases) and the arms' counts; ``method`` names the paired scheme.

    Notes
    -----
    Under the null, the two arms' outcomes of a case are exchangeable and
    cases are independent; each of the 2^cases label swaps is equally likely.
    A case whose trials in one arm are all missing carries no pair: it still
    counts towards that arm's pooled rate but never swaps (its only cell stays
    where it is). Extremeness is ``|statistic| ≥ |observed|`` compared on
    integers (no floating-point ties). A Monte Carlo p is (b + 1) / (R + 1).

    References
    ----------
    .. [1] E. S. Edgington and P. Onghena, "Randomization Tests", 4th ed.,
           Chapman & Hall/CRC, 2007 (paired, within-block permutation).
    .. [2] B. Phipson and G. K. Smyth, Statistical Applications in Genetics
           and Molecular Biology 9(1), 2010.

    Examples
    --------
    >>> import stats
    >>> res = stats.paired_permutation_test(["c1", "c2", "c3"], [5, 4, 5], [5, 5, 5], [1, 0, 2], [5, 5, 5])
    >>> round(res.statistic, 3), round(res.pvalue, 3), round(res.attainable_floor, 3)
    (0.733, 0.25, 0.25)
    """
    codes, _ = factorize_clusters(case)
    m = codes.size
    ha, na = as_counts(hits_a, n_a, m)
    hb, nb = as_counts(hits_b, n_b, m)
    k = int(codes.max()) + 1 if m else 0
    # one A cell and one B cell per case: the whole-cells scheme then is exactly the swap within case
    agg = [np.bincount(codes, x, k).astype(np.int64) for x in (ha, na, hb, nb)]
    cluster = np.repeat(np.arange(k), 2)
    arm = np.tile([1, 0], k)
    hits = np.column_stack([agg[0], agg[2]]).ravel()
    n = np.column_stack([agg[1], agg[3]]).ravel()
    res = cluster_permutation_test(cluster, arm, hits, n, level="cell", n_resamples=n_resamples, seed=seed)
    method = res.method.replace("cluster permutation (whole cells within cluster",
                                f"paired cluster permutation (A and B labels swapped within case, {k} cases, "
                                f"2^{k} arrangements")
    return dataclasses.replace(res, method=method)


def holm(pvalues: ArrayLike) -> np.ndarray:
    """Holm's step-down adjusted p-values, which control the family-wise error rate.

    Parameters
    ----------
    pvalues : array_like of float, shape (m,)
        The family's p-values, each in [0, 1] (NaN entries are not tested:
        they stay NaN and do not count towards m).

    Returns
    -------
    adjusted : numpy.ndarray, shape (m,)
        Holm-adjusted p-values in the input order: reject hypothesis i at
        family-wise level α when ``adjusted[i] <= α``.

    Notes
    -----
    Sort the m p-values ascending; the j-th smallest (1-based) is adjusted to
    max over i ≤ j of min(1, (m − i + 1) p_(i)). This equals closed testing
    with Bonferroni tests of every intersection, so it is valid under any
    dependence between the tests (cells of one run share the agent).

    References
    ----------
    .. [1] S. Holm, "A simple sequentially rejective multiple test procedure",
           Scandinavian Journal of Statistics 6(2), 65–70, 1979.

    Examples
    --------
    >>> import stats
    >>> stats.holm([0.01, 0.04, 0.03]).round(3).tolist()
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError("pvalues must be 1-D")
    live = ~np.isnan(p)
    if np.any((p[live] < 0) | (p[live] > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    out = np.full(p.shape, np.nan)
    q = p[live]
    order = np.argsort(q, kind="stable")
    steps = (q.size - np.arange(q.size)) * q[order]
    adjusted = np.minimum(1.0, np.maximum.accumulate(steps))
    back = np.empty_like(adjusted)
    back[order] = adjusted
    out[live] = back
    return out
