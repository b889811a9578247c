"""Result objects, in the style of ``scipy.stats``.

Kept in one module so the report (and users) can rely on the same field names
across statistics: ``statistic``, ``pvalue``, ``confidence_interval``,
``method``; tests add ``attainable_floor``, ``n_resamples`` and ``mc_stderr``
(``None`` when the result is exact). All are frozen dataclasses: a result is a
record of what was computed, not something to be edited.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, get_args

import numpy as np


class ConfidenceInterval(NamedTuple):
    """A two-sided confidence interval, as ``scipy.stats``' ``ConfidenceInterval``.

    Attributes
    ----------
    low, high : float
        The bounds (NaN when the interval is undefined, e.g. no trials).
    """

    low: float
    high: float


@dataclass(frozen=True)
class PermutationTestResult:
    """Cluster permutation test of a difference in pooled rates (A − B).

    ``attainable_floor`` is the smallest p-value any arrangement of the observed
    data could produce under the stated permutation scheme (given the data's
    margins), so a p at the floor means "as extreme as this design allows".
    ``floor_is_bound`` is True only when that floor could not be computed
    exactly and a lower bound is reported instead: 1 / number of arrangements,
    or 0 when the floor lies below the float range (``log10_floor`` then
    carries its actual size).
    ``pvalue_error`` is the stated absolute error bound of a p-value computed by
    tilted convolution (None when exact or Monte Carlo — see ``mc_stderr``);
    when that p is below 1e-300 it is reported as the bound 1e-300 with
    ``pvalue_is_bound`` set, and ``log10_pvalue`` carries its actual size.

    Attributes
    ----------
    statistic : float
        Pooled rate A − pooled rate B.
    pvalue : float
        Two-sided permutation p.
    method : str
        The scheme and how p was computed (exact, tilted convolution, Monte Carlo).
    level : str
        ``"trial"`` or ``"cell"``.
    attainable_floor : float
        Smallest p any arrangement of these data could give (also ``floor``).
    n_resamples : int or None
        Monte Carlo draws; None when not Monte Carlo.
    mc_stderr : float or None
        Monte Carlo standard error of p; None when not Monte Carlo.
    n_clusters : int
        Clusters in the test.
    hits_a, n_a, hits_b, n_b : int
        Hits and trials of each arm (``rate_a`` and ``rate_b`` are their ratios).
    floor_is_bound : bool
        True when ``attainable_floor`` is only a lower bound.
    pvalue_error : float or None
        Absolute error bound of a tilted-convolution p.
    pvalue_is_bound : bool
        True when ``pvalue`` is only an upper bound (see ``log10_pvalue``).
    log10_pvalue : float or None
        log10 of a p below the float range.
    log10_floor : float or None
        log10 of a floor below the float range (``attainable_floor`` is then 0,
        a bound).
    """

    statistic: float
    pvalue: float
    method: str
    level: str
    attainable_floor: float
    n_resamples: int | None
    mc_stderr: float | None
    n_clusters: int
    hits_a: int
    n_a: int
    hits_b: int
    n_b: int
    floor_is_bound: bool = False
    #: absolute error bound of ``pvalue`` when it comes from the tilted, pruned convolution (else None)
    pvalue_error: float | None = None
    #: True when ``pvalue`` is only an upper bound (the true p is smaller; see ``log10_pvalue``)
    pvalue_is_bound: bool = False
    #: log10 of the p-value where it is known below the float range (tilted convolution), else None
    log10_pvalue: float | None = None
    #: log10 of the attainable floor where it is below the float range (reported as the bound 0), else None
    log10_floor: float | None = None

    @property
    def floor(self) -> float:
        return self.attainable_floor

    @property
    def floor_log10(self) -> float | None:
        """log10 of the attainable floor, also where the floor is below the float range (``log10_floor``): what
        the report's tables and JSON carry beside the floor, so a floor reported as 0 keeps its size. None
        when the floor is 0 and its size unknown."""
        if self.attainable_floor > 0.0:
            return math.log10(self.attainable_floor)
        return self.log10_floor

    @property
    def rate_a(self) -> float:
        return self.hits_a / self.n_a if self.n_a else float("nan")

    @property
    def rate_b(self) -> float:
        return self.hits_b / self.n_b if self.n_b else float("nan")


#: the interval methods of ``stats.cluster_rate_ci(method=...)``, scipy-style keys
IntervalMethod = Literal["korn-graubard-tilted", "korn-graubard", "t", "percentile"]
METHODS: tuple[IntervalMethod, ...] = get_args(IntervalMethod)
DEFAULT_METHOD: IntervalMethod = "korn-graubard-tilted"
#: the key of the interval a ``ClusterIntervalResult`` holds (``IntervalMethod`` plus the MOVER keys of differences)
IntervalKey = Literal["korn-graubard-tilted", "mover-korn-graubard-tilted", "korn-graubard", "mover-korn-graubard",
                      "t", "percentile", "paired-shaped"]


@dataclass(frozen=True, eq=False)
class ClusterIntervalResult:
    """Cluster confidence interval of a pooled rate or a difference (``stats.cluster_rate_ci`` / ``_many``).

    The default interval is analytic and draws no resamples.

    Attributes
    ----------
    statistic : float
        The pooled rate Σhits / Σn, or the difference of pooled rates A − B.
    confidence_interval : ConfidenceInterval
        (low, high) at the requested confidence level.
    standard_error : float
        The cluster linearisation (Taylor) standard error for the analytic
        methods; the standard deviation of the bootstrap distribution for
        ``"percentile"``.
    method : str
        Human-readable description: the method, its degrees of freedom or
        resamples, and the number of clusters.
    n_resamples : int
        Resamples drawn: 0 for the analytic methods.
    n_clusters : int
        Clusters observed.
    n_undefined : int
        Resamples whose statistic was undefined (an arm without trials);
        0 for the analytic methods.
    bootstrap_distribution : numpy.ndarray
        For ``"percentile"``, the statistic of every resample in draw order
        (NaN where a resample left an arm without trials; excluded from the
        percentiles). Empty for the analytic methods.
    interval_method : str
        A stable, machine-readable key of the interval: ``"korn-graubard-tilted"``
        (pooled rate, the default), ``"mover-korn-graubard-tilted"`` (difference,
        MOVER of the arms' tilted Korn–Graubard intervals), the equal-tailed
        ``"korn-graubard"`` / ``"mover-korn-graubard"``, ``"t"``, ``"percentile"``, or
        ``"paired-shaped"`` (``stats.paired_difference_ci``).
    """

    statistic: float
    confidence_interval: ConfidenceInterval
    standard_error: float
    method: str
    n_resamples: int
    n_clusters: int
    n_undefined: int
    bootstrap_distribution: np.ndarray = field(repr=False)
    interval_method: IntervalKey = "percentile"


@dataclass(frozen=True)
class FisherResult:
    """Fisher's exact test on a 2 × 2 table (trial level, two-sided).

    Attributes
    ----------
    statistic : float
        The sample odds ratio, as in ``scipy.stats.fisher_exact``.
    pvalue : float
        Two-sided p.
    method : str
        Description of the test.
    """

    statistic: float
    pvalue: float
    method: str


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar test: binomial(½) on the discordant pairs, two-sided.

    Attributes
    ----------
    statistic : float
        ``min(a_only, b_only)``, the binomial count.
    pvalue : float
        Two-sided exact p.
    method : str
        Description of the test.
    a_only, b_only : int
        Discordant pairs with the outcome in arm A only / arm B only.
    """

    statistic: float
    pvalue: float
    method: str
    a_only: int
    b_only: int


@dataclass(frozen=True, eq=False)
class PairedDifferenceResult:
    """Paired difference in rates (arm A − arm B) on the same units.

    Attributes
    ----------
    statistic : float
        rate A − rate B.
    rate_a, rate_b : float
        The arms' rates over the pairs.
    confidence_interval : ConfidenceInterval
        Cluster bootstrap percentile interval, both arms resampled together.
    mcnemar : McNemarResult
        Exact McNemar test on the discordant pairs.
    method : str
        Description, with the resamples and clusters.
    n_pairs, n_clusters, n_resamples : int
        Pairs, clusters of pairs, and bootstrap resamples drawn.
    """

    statistic: float
    rate_a: float
    rate_b: float
    confidence_interval: ConfidenceInterval
    mcnemar: McNemarResult
    method: str
    n_pairs: int
    n_clusters: int
    n_resamples: int


@dataclass(frozen=True)
class KappaResult:
    """Cohen's kappa of two raters with a cluster bootstrap percentile interval.

    Attributes
    ----------
    statistic : float
        Kappa (NaN when the expected agreement is 1).
    confidence_interval : ConfidenceInterval
        Cluster bootstrap percentile interval.
    observed_agreement, expected_agreement : float
        p_o and p_e.
    method : str
        Description, with the resamples and clusters.
    n : int
        Items rated by both.
    n_resamples : int
        Bootstrap resamples drawn.
    """

    statistic: float
    confidence_interval: ConfidenceInterval
    observed_agreement: float
    expected_agreement: float
    method: str
    n: int
    n_resamples: int


@dataclass(frozen=True)
class SpearmanResult:
    """Spearman's rank correlation with an exact or Monte Carlo permutation p.

    Attributes
    ----------
    statistic : float
        rho (NaN for a constant input).
    pvalue : float
        Two-sided permutation p.
    method : str
        Exact or Monte Carlo, and over how many pairings or draws.
    n : int
        Pairs.
    n_resamples : int or None
        Monte Carlo draws; None when exact.
    mc_stderr : float or None
        Monte Carlo standard error of p; None when exact.
    """

    statistic: float
    pvalue: float
    method: str
    n: int
    n_resamples: int | None
    mc_stderr: float | None


@dataclass(frozen=True)
class FieldScores:
    """Field-level precision / recall / F1 over sets of (unit, field) tuples.

    Attributes
    ----------
    precision, recall, f1 : float
        The scores, with ``stats.field_scores``' empty-set conventions.
    true_positives, false_positives, false_negatives : int
        The counts they come from.
    """

    precision: float
    recall: float
    f1: float
    true_positives: int
    false_positives: int
    false_negatives: int


class Firing(NamedTuple):
    """Clusters with at least one hit, out of clusters observed.

    Attributes
    ----------
    firing : int
        Clusters with at least one hit.
    clusters : int
        Clusters observed.
    """

    firing: int
    clusters: int
