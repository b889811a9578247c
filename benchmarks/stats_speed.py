"""Speed of trialgrid's statistics core beside the `ungrounded` package and scipy.

Usage: python benchmarks/stats_speed.py [--quick]

Same inputs for every implementation: k prompts x 3 conditions x 20 trials
(two conditions in arm A, one in arm B), at k = 12 and k = 1,000. Prints
wall-clock seconds and ratios (the machine is shared; ratios are the figure
to read). `ungrounded` is a benchmark-only comparison (pip install
ungrounded), not a project dependency; its column is skipped if it is absent.
--quick times `ungrounded` at a tenth of the draws and scales linearly
(its cost is exactly linear in draws), labelled as extrapolated.

Sections are functions taking the shared context; main() runs them in order,
so further sections (e.g. an end-to-end report timing) can be appended to
SECTIONS.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/coverage.py would shadow the `coverage` package, which numba
# imports when installed; drop this folder from the import path first.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

import stats  # noqa: E402

try:
    import ungrounded.stats as ung
except ImportError:  # benchmark-only comparison
    ung = None

try:
    import scipy.stats as sps
except ImportError:
    sps = None

PERM_DRAWS = 20_000
BOOT_DRAWS = 4_000
CONDITIONS = ("ungroundable", "groundable_unknown", "groundable_known")


@dataclass
class Design:
    """One synthetic design held in both input shapes."""

    k: int
    runs: int
    trials: np.ndarray  # (k, 3, runs) 0/1 outcomes
    cluster: np.ndarray = field(init=False)
    arm: np.ndarray = field(init=False)
    hits: np.ndarray = field(init=False)
    n: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.cluster = np.repeat(np.arange(self.k), 3)
        self.arm = np.tile([1, 1, 0], self.k)
        self.hits = self.trials.sum(axis=2).ravel()
        self.n = np.full(3 * self.k, self.runs)

    def ungrounded_clusters(self) -> dict:
        return {
            f"p{i}": {c: self.trials[i, j].tolist() for j, c in enumerate(CONDITIONS)} for i in range(self.k)
        }

    def arm_a_by_cluster(self) -> list[list[int]]:
        return [self.trials[i, :2].ravel().tolist() for i in range(self.k)]


def make_design(k: int, runs: int = 20, seed: int = 7) -> Design:
    rng = np.random.default_rng(seed)
    base = 1 / (1 + np.exp(-rng.normal(-2.2, 1.0, k)))  # heterogeneous prompt rates
    rate = np.stack([base * 1.8, base * 1.4, base * 0.6], axis=1).clip(0, 1)
    return Design(k, runs, (rng.random((k, 3, runs)) < rate[:, :, None]).astype(np.int64))


def timed(fn: Callable[[], object], repeat: int = 1) -> tuple[float, object]:
    best = float("inf")
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def row(label: str, seconds: float | None, result: str, ref: float | None = None) -> None:
    if seconds is None:
        print(f"  {label:<58} {'—':>10}   {result}")
        return
    ratio = f"{ref / seconds:9.0f}x" if ref else ""
    print(f"  {label:<58} {seconds:9.4f}s {ratio:>10}   {result}")


def permutation_section(ctx: dict) -> None:
    print(f"\n== cluster permutation test, {PERM_DRAWS:,} draws (ratio = ungrounded time / ours) ==")
    for d in ctx["designs"]:
        print(f" {d.k} prompts x 3 conditions x {d.runs} trials = {d.trials.size:,} trials")
        ref = None
        if ung is not None:
            clusters = d.ungrounded_clusters()
            reps = PERM_DRAWS // 10 if ctx["quick"] else PERM_DRAWS
            sec, (diff, p, _) = timed(lambda: ung.cluster_permutation(clusters, CONDITIONS[:2], CONDITIONS[2:], reps=reps, seed=17))
            ref = sec * PERM_DRAWS / reps
            note = f" (timed at {reps:,} draws, scaled x{PERM_DRAWS // reps})" if reps != PERM_DRAWS else ""
            row("ungrounded.cluster_permutation (cell-level MC)" + note, ref, f"diff {diff:.3f} pp, p {p:.4g}")
        else:
            row("ungrounded: not importable, column skipped", None, "pip install ungrounded to compare")
        row("scipy: no within-cluster permutation test", None, "permutation_test has no strata; no equivalent")
        args = (d.cluster, d.arm, d.hits, d.n)
        cases = [
            ("ours, cell level, Monte Carlo (same test as ungrounded)", dict(level="cell", n_resamples=PERM_DRAWS, seed=1)),
            ("ours, cell level, exact", dict(level="cell")),
            ("ours, trial level, Monte Carlo", dict(level="trial", n_resamples=PERM_DRAWS, seed=1)),
            ("ours, trial level, exact (convolution)", dict(level="trial")),
        ]
        for label, kw in cases:
            sec, res = timed(lambda: stats.cluster_permutation_test(*args, **kw), repeat=3)
            extra = f" ± {res.mc_stderr:.1g}" if res.mc_stderr else ""
            row(label, sec, f"diff {100 * res.statistic:.3f} pp, p {res.pvalue:.4g}{extra}, floor {res.attainable_floor:.2g}", ref)


def bootstrap_section(ctx: dict) -> None:
    print(f"\n== cluster bootstrap of the arm-A pooled rate, {BOOT_DRAWS:,} resamples (ratio = ungrounded time / ours) ==")
    for d in ctx["designs"]:
        print(f" {d.k} prompts x 3 conditions x {d.runs} trials")
        ref = None
        if ung is not None:
            groups = d.arm_a_by_cluster()
            sec, (lo, hi) = timed(lambda: ung.cluster_bootstrap_ci(groups, reps=BOOT_DRAWS, seed=17))
            ref = sec
            row("ungrounded.cluster_bootstrap_ci", sec, f"[{lo / 100:.4f}, {hi / 100:.4f}]")
        else:
            row("ungrounded: not importable, column skipped", None, "pip install ungrounded to compare")
        a = d.arm == 1
        h, n, cl = d.hits[a], d.n[a], d.cluster[a]
        hk = np.bincount(cl, h, d.k)
        nk = np.bincount(cl, n, d.k)
        if sps is not None:
            sec, res = timed(lambda: sps.bootstrap(
                (hk, nk), lambda x, y, axis=-1: x.sum(axis) / y.sum(axis), paired=True, vectorized=True,
                n_resamples=BOOT_DRAWS, method="percentile", rng=np.random.default_rng(1)))
            row("scipy.stats.bootstrap (paired over clusters, percentile)", sec,
                f"[{res.confidence_interval.low:.4f}, {res.confidence_interval.high:.4f}]", ref)
        sec, res = timed(lambda: stats.cluster_bootstrap_ci(cl, h, n, n_resamples=BOOT_DRAWS, seed=1), repeat=3)
        row("ours, cluster_bootstrap_ci", sec, f"[{res.confidence_interval.low:.4f}, {res.confidence_interval.high:.4f}]", ref)
        sec, res = timed(lambda: stats.cluster_bootstrap_ci(d.cluster, d.hits, d.n, arm=d.arm, n_resamples=BOOT_DRAWS, seed=1), repeat=3)
        row("ours, cluster_bootstrap_ci of A − B (arm=...)", sec, f"[{res.confidence_interval.low:.4f}, {res.confidence_interval.high:.4f}]", ref)


SECTIONS: list[Callable[[dict], None]] = [permutation_section, bootstrap_section]


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    t = time.perf_counter()
    stats.cluster_permutation_test([0, 0], [1, 0], [1, 0], [2, 2], level="cell")  # load cached kernels
    stats.cluster_permutation_test([0, 0], [1, 0], [1, 0], [2, 2], level="cell", n_resamples=10, seed=0)
    stats.cluster_permutation_test([0, 0], [1, 0], [1, 0], [2, 2], level="trial", n_resamples=10, seed=0)
    stats.cluster_bootstrap_ci([0, 1], [1, 0], [2, 2], n_resamples=10, seed=0)
    print(f"kernel load (numba cache; compiles only on first run after install): {time.perf_counter() - t:.2f}s")
    print("ungrounded:", "available" if ung is not None else "NOT importable (column skipped)")
    ctx = {"quick": quick, "designs": [make_design(12), make_design(1000)]}
    for section in SECTIONS:
        section(ctx)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
