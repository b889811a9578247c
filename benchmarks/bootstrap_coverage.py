"""Coverage of the cluster bootstrap interval under prompt-level heterogeneity.

Usage: python benchmarks/bootstrap_coverage.py [--replications N]

Simulates studies in which every prompt has its own true rate (logit-normal
across prompts) and every prompt is run the same number of times, so the
pooled rate estimates the population mean of prompt rates, which is known
exactly (by quadrature). For each replication it computes the cluster
bootstrap 95% percentile interval (trialgrid's ``cluster_rate_ci``) and
the naive trial-level Wilson interval, and counts how often each covers the
truth. The cluster interval should cover 93-97% of the time; the Wilson
interval, which treats correlated trials as independent, covers far less.
(Pinned to ``method="percentile"``; the default, analytic interval is studied by
benchmarks/interval_coverage.py.)
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

import stats  # noqa: E402


def true_mean_rate(mu: float, sigma: float) -> float:
    """E[expit(mu + sigma Z)], Z standard normal, by Gauss-Hermite quadrature."""
    x, w = np.polynomial.hermite_e.hermegauss(80)
    return float(np.sum(w / (1 + np.exp(-(mu + sigma * x)))) / math.sqrt(2 * math.pi))


def run(prompts: int, runs: int, mu: float, sigma: float, reps: int, resamples: int, seed: int) -> tuple[float, float, float]:
    rng = np.random.default_rng(seed)
    truth = true_mean_rate(mu, sigma)
    cluster = np.arange(prompts)
    n = np.full(prompts, runs)
    cover_boot = cover_wilson = 0
    for r in range(reps):
        p = 1 / (1 + np.exp(-(mu + sigma * rng.standard_normal(prompts))))
        hits = rng.binomial(runs, p)
        ci = stats.cluster_rate_ci(cluster, hits, n, n_resamples=resamples, seed=seed * 100_003 + r,
                                   method="percentile").confidence_interval
        cover_boot += ci.low <= truth <= ci.high
        lo, hi = stats.wilson_interval(hits.sum(), n.sum())
        cover_wilson += float(lo) <= truth <= float(hi)
    return truth, cover_boot / reps, cover_wilson / reps


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replications", type=int, default=4000)
    ap.add_argument("--resamples", type=int, default=2000)
    args = ap.parse_args(argv[1:])
    reps = args.replications
    se = math.sqrt(0.95 * 0.05 / reps)
    print(f"{reps} replications per design, {args.resamples} bootstrap resamples each; "
          f"Monte Carlo SE of a 95% coverage estimate = {100 * se:.2f} pp")
    print(f"{'design':<52} {'truth':>7} {'cluster bootstrap':>18} {'naive Wilson':>13}")
    designs = [
        # (prompts, runs, mu, sigma, headline?)
        (100, 20, -1.5, 1.0, True),
        (60, 20, -1.5, 1.0, False),
        (30, 20, -1.0, 0.8, False),
        (12, 20, -1.5, 1.0, False),
    ]
    headline_ok = None
    for i, (k, runs, mu, sigma, headline) in enumerate(designs):
        t = time.perf_counter()
        truth, boot, wil = run(k, runs, mu, sigma, reps, args.resamples, seed=11 + i)
        label = f"{k} prompts x {runs} runs, logit-normal({mu}, {sigma})"
        print(f"{label:<52} {truth:7.4f} {100 * boot:17.1f}% {100 * wil:12.1f}%   ({time.perf_counter() - t:.1f}s)")
        if headline:
            headline_ok = 0.93 <= boot <= 0.97
    print("\nheadline design (100 prompts): cluster bootstrap coverage in [93%, 97%]:", "yes" if headline_ok else "NO")
    print("note: the percentile bootstrap under-covers slightly with few clusters (about 1 pp at 60 prompts, "
          "about 5 pp at 12), yet stays far closer to nominal than the trial-level interval.")
    return 0 if headline_ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
