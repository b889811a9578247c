"""trialgrid's statistics core: pure functions on numpy arrays, no I/O.

Imports neither ``runner`` nor ``cluster``. The cluster (prompt, case, task)
is the unit of inference throughout; inputs are per-cell counts. Every public
function has a numpydoc docstring (Parameters, Returns, the method and a
reference), in the style of ``scipy.stats``.
"""

from stats._clusters import factorize_clusters
from stats.agreement import average_ranks, cohen_kappa, spearman
from stats.cluster_intervals import (
    DEFAULT_METHOD,
    INTERVAL_NAMES,
    IntervalMethod,
    cluster_rate_ci,
    cluster_rate_ci_many,
    paired_difference_ci,
)
from stats.comparison import holm, paired_permutation_test
from stats.consistency import PassHatKCurve, PassHatKResult, pass_hat_k, pass_hat_k_curve
from stats.contingency import fisher_exact, mcnemar_exact
from stats.fields import field_scores
from stats.firing import prompts_firing
from stats.paired import paired_difference
from stats.permutation import cluster_permutation_test
from stats.power import PowerResult, design_floor, simulate_power
from stats.proportions import wilson_interval
from stats.results import (
    ClusterIntervalResult,
    ConfidenceInterval,
    FieldScores,
    Firing,
    FisherResult,
    IntervalKey,
    KappaResult,
    McNemarResult,
    PairedDifferenceResult,
    PermutationTestResult,
    SpearmanResult,
)

__all__ = [
    "DEFAULT_METHOD",
    "INTERVAL_NAMES",
    "ClusterIntervalResult",
    "ConfidenceInterval",
    "FieldScores",
    "Firing",
    "FisherResult",
    "IntervalKey",
    "IntervalMethod",
    "KappaResult",
    "McNemarResult",
    "PairedDifferenceResult",
    "PassHatKCurve",
    "PassHatKResult",
    "PermutationTestResult",
    "PowerResult",
    "SpearmanResult",
    "average_ranks",
    "cluster_permutation_test",
    "cluster_rate_ci",
    "cluster_rate_ci_many",
    "cohen_kappa",
    "design_floor",
    "factorize_clusters",
    "field_scores",
    "fisher_exact",
    "holm",
    "mcnemar_exact",
    "paired_difference",
    "paired_difference_ci",
    "paired_permutation_test",
    "pass_hat_k",
    "pass_hat_k_curve",
    "prompts_firing",
    "simulate_power",
    "spearman",
    "wilson_interval",
]
