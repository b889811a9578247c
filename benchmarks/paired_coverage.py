"""Coverage of the paired model difference's interval, by simulation on correlated designs.

Usage: python benchmarks/paired_coverage.py [--designs 1000] [--seed 27] [--prompts 12,30,100] [--null]
       (or python benchmarks/interval_coverage.py --only paired ...)

Two models answer the same k cases, each case in two conditions, 5 runs per cell. A case's
difficulty is shared: on the logit scale model A's rate in case i and condition c is
logit(mu_A) + s z_i + d_c, model B's logit(mu_B) + s (rho z_i + sqrt(1 − rho²) w_i) + d_c, with
z, w standard normal, s = 1 and d = (−0.5, +0.5): the two models' case effects correlate by
rho. The truth is the population difference of the pooled rates (equal cells: the mean rate
over cases and conditions), by Gauss–Hermite quadrature. Each simulated design's interval is
the one ``trialgrid report`` and ``diff`` print for a paired model difference:
``stats.cluster_rate_ci(case, hits, n, arm=...)`` on the matched (case, condition) cells of the
two models — the public function, so a change to that interval is measured here unchanged.

Prints one row per cell (k × rates × rho) and interval: coverage, its Monte Carlo standard error,
misses below / above, the mean width and the width relative to MOVER, for the report's MOVER
interval and the shaped paired interval (``stats.paired_difference_ci``) on the same designs.
``--null`` adds null differences near 0 and 1 (1% vs 1%, 97% vs 97%), where MOVER is widest. Goal:
coverage ≥ 94% in every cell.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

import stats

RUNS = 5
OFFSETS = (-0.5, 0.5)
SCALE = 1.0
#: (label, rate of A, rate of B) at the centre of the case distribution
RATES = (("rare", 0.03, 0.06), ("common", 0.40, 0.50))
#: null differences near 0 and 1 (where MOVER is widest, because the arms agree)
NULL_RATES = (("null rare", 0.01, 0.01), ("null high", 0.97, 0.97))
#: the intervals measured side by side: the report's MOVER default and the shaped paired interval
INTERVALS = (("mover", lambda c, h, n, a: stats.cluster_rate_ci(c, h, n, arm=a)),
             ("paired-shaped", lambda c, h, n, a: stats.paired_difference_ci(c, h, n, arm=a)))
RHOS = (0.5, 0.9)


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def _expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def truth(mu_a: float, mu_b: float) -> float:
    """E[rate A] − E[rate B] over cases and conditions (each model's marginal is logit-normal with scale s)."""
    x, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()
    ea = np.mean([np.sum(w * _expit(_logit(mu_a) + SCALE * x + d)) for d in OFFSETS])
    eb = np.mean([np.sum(w * _expit(_logit(mu_b) + SCALE * x + d)) for d in OFFSETS])
    return float(ea - eb)


def simulate_cell(rng: np.random.Generator, k: int, mu_a: float, mu_b: float, rho: float,
                  designs: int) -> dict[str, tuple[float, float, float, float]]:
    """Per interval: (coverage, misses below, misses above, mean width) over the same ``designs`` designs."""
    target = truth(mu_a, mu_b)
    case = np.repeat(np.arange(k), len(OFFSETS))
    cluster = np.concatenate([case, case])
    arm = np.repeat([1, 0], case.size)
    n = np.full(cluster.size, RUNS)
    d = np.tile(OFFSETS, k)
    tally = {name: [0, 0, 0, 0.0] for name, _ in INTERVALS}
    for _ in range(designs):
        z = rng.standard_normal(k)
        w = rng.standard_normal(k)
        za = np.repeat(z, len(OFFSETS))
        zb = np.repeat(rho * z + math.sqrt(1 - rho * rho) * w, len(OFFSETS))
        pa = _expit(_logit(mu_a) + SCALE * za + d)
        pb = _expit(_logit(mu_b) + SCALE * zb + d)
        hits = rng.binomial(RUNS, np.concatenate([pa, pb]))
        for name, fn in INTERVALS:
            t = tally[name]
            lo, hi = fn(cluster, hits, n, arm).confidence_interval
            if not (math.isfinite(lo) and math.isfinite(hi)):
                t[1] += 1  # an undefined interval covers nothing
                continue
            t[3] += hi - lo
            t[1 if target < lo else 2 if target > hi else 0] += 1
    return {name: (c / designs, b / designs, a / designs, w / designs) for name, (c, b, a, w) in tally.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--designs", type=int, default=1000, help="simulated designs per cell (default 1000)")
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--prompts", default="12,30,100", help="comma-separated case counts")
    ap.add_argument("--null", action="store_true", help="add the null cells near 0 and 1 (1%% vs 1%%, 97%% vs 97%%)")
    args, _ = ap.parse_known_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"paired model difference A − B, {RUNS} runs × {len(OFFSETS)} conditions per case, {args.designs} designs "
          f"per cell; interval: stats.cluster_rate_ci(..., arm=...) on the matched cells")
    print("| cases | rates (A vs B) | rho | truth pp | interval | coverage | ± MC se | below | above | mean width pp "
          "| width / MOVER |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    worst = {name: 1.0 for name, _ in INTERVALS}
    rates = RATES + (NULL_RATES if args.null else ())
    for k in (int(x) for x in args.prompts.split(",")):
        for label, mu_a, mu_b in rates:
            for rho in RHOS:
                res = simulate_cell(rng, k, mu_a, mu_b, rho, args.designs)
                for name, (cov, lo, hi, width) in res.items():
                    se = math.sqrt(cov * (1 - cov) / args.designs)
                    worst[name] = min(worst[name], cov)
                    print(f"| {k} | {label} ({100 * mu_a:g}% vs {100 * mu_b:g}%) | {rho:g} | "
                          f"{100 * truth(mu_a, mu_b):+.2f} | {name} | {100 * cov:.1f}% | {100 * se:.1f} | "
                          f"{100 * lo:.1f}% | {100 * hi:.1f}% | {100 * width:.2f} | "
                          f"{width / res['mover'][3]:.2f} |", flush=True)
    for name, w in worst.items():
        print(f"lowest coverage, {name}: {100 * w:.1f}% (goal ≥ 94%)")
    return 0 if worst["mover"] >= 0.94 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
