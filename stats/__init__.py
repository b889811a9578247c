"""trialgrid's statistics core: pure functions on numpy arrays, no I/O.

Imports neither ``runner`` nor ``cluster``. The cluster (prompt, case, task)
is the unit of inference throughout; inputs are per-cell counts.
"""

from stats._clusters import factorize_clusters
from stats.agreement import average_ranks, cohen_kappa, spearman
from stats.bootstrap import cluster_bootstrap_ci, cluster_bootstrap_many
from stats.contingency import fisher_exact, mcnemar_exact
from stats.fields import field_scores
from stats.firing import prompts_firing
from stats.paired import paired_difference
from stats.permutation import cluster_permutation_test
from stats.power import PowerResult, design_floor, simulate_power
from stats.proportions import wilson_interval
from stats.results import (
    BootstrapResult,
    ConfidenceInterval,
    FieldScores,
    Firing,
    FisherResult,
    KappaResult,
    McNemarResult,
    PairedDifferenceResult,
    PermutationTestResult,
    SpearmanResult,
)

__all__ = [
    "BootstrapResult",
    "ConfidenceInterval",
    "FieldScores",
    "Firing",
    "FisherResult",
    "KappaResult",
    "McNemarResult",
    "PairedDifferenceResult",
    "PermutationTestResult",
    "PowerResult",
    "SpearmanResult",
    "average_ranks",
    "cluster_bootstrap_ci",
    "cluster_bootstrap_many",
    "cluster_permutation_test",
    "cohen_kappa",
    "design_floor",
    "factorize_clusters",
    "field_scores",
    "fisher_exact",
    "mcnemar_exact",
    "paired_difference",
    "prompts_firing",
    "simulate_power",
    "spearman",
    "wilson_interval",
]
