"""Coverage and width of cluster intervals for a pooled rate and a paired A − B difference.

Usage: PYTHONPATH=. python benchmarks/interval_coverage.py [--quick] [--designs N] [--analytic-designs N]
                                                          [--resamples B] [--seed S] [--prompts 6,12,...]
                                                          [--only rate|diff|floor|floor-diff|unequal|paired|paired-null]
                                                          [--floor]
                                                          [--no-stress] [--re-posterior]

Simulation study behind the default interval method of ``stats.cluster_rate_ci`` /
``stats.cluster_rate_ci_many``. Seeded: the same command prints the same table.

Design (one "cell" of the grid = one row of the table):
  prompts k          6, 12, 30, 100
  mean rate μ        2%, 15%, 50% (arm A; the rate study uses arm A alone)
  heterogeneity      logit-normal prompt rates, logit p = m + σZ with m set (by quadrature) so that
                     E p = μ exactly; σ = 0.5 ("low") or 1.5 ("high": ICC 0.22 at μ = 15%, the ICC of
                     the issue's Beta(0.5, 3); 0.08 at 2%, 0.29 at 50%). Same model as stats.power.
                     A STRESS panel printed after the grid (not part of the acceptance grid; skip it
                     with --no-stress) uses Beta rates with ICC 0.25 at every mean: J-shaped at 2%
                     (Beta(0.06, 2.94): most prompts never fire, a few fire often).
  runs               5 or 20 per prompt and arm
  sizes              "eq": every cell has its runs; "uneq": error rows drop a random share of the
                     trials of each cell, share ~ U(0, 0.6) per cell, kept trials ~ Binomial(runs, 1 − share)
                     (a cell can end with no trials)
  paired arm B       p_B has mean 0.4 μ and the same heterogeneity; (p_A, p_B) of one prompt are joined by a
                     Gaussian copula with correlation 0.8 (within-prompt correlation of the arms).

Estimand. The pooled rate Σhits / Σtrials estimates the population's trial-weighted rate
E[n p] / E[n]. Here the number of trials kept is independent of the prompt's rate, so that is
exactly the mean prompt rate μ (and the difference is exactly μ − 0.4 μ = 0.6 μ): the true values
are known in closed form, no quadrature needed.

Methods (95% two-sided; all use the prompt as the unit; t quantiles with k − 1 df where k =
prompts with trials):
  percentile     cluster bootstrap percentile (the previous default), B resamples
  bca            cluster bootstrap BCa (bias correction from the resamples, acceleration by jackknife)
  boot-t         studentised cluster bootstrap (linearisation SE in every resample)
  t              ratio estimate ± t_{k−1} · linearisation SE
  kg             Korn–Graubard: Clopper–Pearson at the effective trials n* = n_eff (z/t_{k−1})²,
                 n_eff = r(1 − r)/v capped at Σn (rates; ``stats.intervals.korn_graubard``)
  kg-uncapped    the same without the cap at Σn (as R survey's svyciprop(method = "beta"))
  jeffreys-eff   Jeffreys interval at the same n* (rates)
  wilson-eff     Wilson score interval at the same n* (rates)
  kg-midp        mid-p Clopper–Pearson at the same n* (rates; ``stats.intervals.korn_graubard_midp``)
  kg-tilted      the default: Korn–Graubard with the α split α(½ + 0.1(1 − 2r)) below and
                 α(½ − 0.1(1 − 2r)) above (``stats.intervals.korn_graubard_tilted``)
  mover-kg       MOVER / Newcombe hybrid of the two arms' Korn–Graubard intervals with the
                 cluster-estimated correlation of the arms' pooled rates (differences)
  mover-jeffreys, mover-wilson, mover-kg-midp, mover-kg-tilted
                 the same with the other arm intervals (mover-kg-tilted is the default)

Each figure is the share of simulated designs whose interval contains the true value (a
design whose interval is undefined counts as not covering), and the mean width over the
designs where it is defined. Full mode: 10,000 designs per cell for the analytic methods
(Monte Carlo SE of a coverage near 95%: 0.22 pp) and the first 2,000 of them for the
bootstrap methods (0.49 pp), B = 999 resamples. --quick: 400 designs, B = 299. Full mode takes
about 4 CPU-minutes (10 minutes of wall time on 2 shared cores; --resamples 0 about a minute).
--floor adds the exact coverage floor of the rate cells with 6–30 prompts: the coverage of the
mid-p and exact intervals for Σn independent trials, from the exact distribution of (Σhits,
Σtrials) in the cell (quadrature over the prompt rates, FFT convolution over prompts); and the
floor of the sparse difference cells with ≥ 12 prompts: the coverage of the MOVER (correlation 0)
of the two arms' intervals of independent trials (design effect 1), exact for equal sizes (2-D
convolution of one prompt's joint (h_A, h_B) pmf) and from 400,000 simulated designs for unequal
sizes (--only floor-diff prints only that table, about 5 minutes on 2 cores).
--only unequal prints the unequal-size grid (prompts 8/20/50/100, Beta rates with mean
15/50/95/99% and ICC --uneq-icc, sizes log-uniform on 1–100 or a few prompts holding most trials; at
least 2,000 designs a cell): the tilted interval with k − 1 df ("kg-tilted", the first default)
against the Bell–McCaffrey design df ("kg-tilted-df"; stats.intervals.design_df) and the design df
with the variance times the Bell–McCaffrey factor ("kg-tilted-bm", the default now;
stats.intervals.design_variance_factor, applied where the design df is at most ½(k − 1)), and the
same three for A − B ("mover-kg-tilted-bm" the default). The "-df" and "-bm" columns are in the main
grid too.
The difference tables also print two paired intervals (measured beside MOVER, not the
default): "paired-t", the symmetric paired cluster t (``stats.intervals.paired_t``), and
"paired-shaped", the paired SE with reaches shaped by the arms' intervals
(``stats.intervals.paired_shaped``, what ``stats.paired_difference_ci`` returns). --only paired-null prints null A − B cells near
0 and 1 (1/3/97/99%, J-shaped Beta rates with ICC 0.25 shared by both arms through a copula of 0.8
or 0.95, 10 runs, 12/30/100 prompts), where MOVER is widest; --only paired runs
benchmarks/paired_coverage.py (the model-comparison design, with both intervals).
--re-posterior adds a measured candidate that is not shipped (docs/statistics-coverage.md,
"Candidates measured"): the equal-tailed credible interval of μ in a logit-normal random-effects
model (uniform prior on the median prompt rate, half-normal(2) prior on σ), by grid quadrature.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numba as nb
import numpy as np
from scipy import special as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stats import intervals as I  # noqa: E402
from stats._draws import _below, _chunk_state  # noqa: E402

PROMPTS = (6, 12, 30, 100)
RATES = (0.02, 0.15, 0.50)
#: heterogeneity: (label, family, parameter). Main grid: logit-normal prompt rates, logit p = m + σ Z, with
#: σ = 0.5 (low) or 1.5 (high; ICC 0.22 at a 15% mean, the ICC of the issue's Beta(0.5, 3)) — the model
#: stats.power simulates with. Stress panel (printed apart): Beta rates with ICC 0.25 at every mean
#: ("J-shaped" at 2%: most prompts never fire, a few fire often).
HETEROGENEITY = (("low", "logitnormal", 0.5), ("high", "logitnormal", 1.5))
STRESS = (("J", "beta", 0.25),)
RUNS = (5, 20)
SIZES = ("eq", "uneq")
B_FACTOR = 0.4
COPULA = 0.8
DROP_MAX = 0.6
LEVEL = 0.95
#: simulated designs per 'uneq' cell of the difference floor (the 'eq' cells are exact)
FLOOR_DESIGNS = 400_000

RATE_METHODS = ("percentile", "bca", "boot-t", "t", "kg", "kg-uncapped", "jeffreys-eff", "wilson-eff", "kg-midp",
                "kg-tilted", "kg-tilted-df", "kg-tilted-bm")
DIFF_METHODS = ("percentile", "bca", "boot-t", "t", "mover-kg", "mover-jeffreys", "mover-wilson", "mover-kg-midp",
                "mover-kg-tilted", "mover-kg-tilted-df", "mover-kg-tilted-bm", "paired-t", "paired-shaped")
BOOT_METHODS = ("percentile", "bca", "boot-t")
#: columns added by --re-posterior (a measured candidate, not a shipped method)
RE_METHODS = ("re-post95", "re-post97", "re-post97+u")


# ---------------------------------------------------------------- bootstrap kernels (per design, B resamples)

@nb.njit(parallel=True, cache=True)
def boot_rate(h, n, B, seed):
    """Sorted bootstrap ratios, sorted studentised roots, and jackknife acceleration, per design."""
    R, k = h.shape
    theta = np.empty((R, B))
    troot = np.empty((R, B))
    accel = np.empty(R)
    for d in nb.prange(R):
        H = 0.0
        N = 0.0
        for i in range(k):
            H += h[d, i]
            N += n[d, i]
        r0 = H / N if N > 0 else np.nan
        state = _chunk_state(seed, d)
        for b in range(B):
            sh = 0.0
            sn = 0.0
            shh = 0.0
            shn = 0.0
            snn = 0.0
            kb = 0
            for _ in range(k):
                state, i = _below(state, k)
                x = h[d, i]
                m = n[d, i]
                sh += x
                sn += m
                shh += x * x
                shn += x * m
                snn += m * m
                if m > 0:
                    kb += 1
            if sn > 0:
                rb = sh / sn
                theta[d, b] = rb
                if kb > 1:
                    vb = kb / (kb - 1.0) * max(shh - 2.0 * rb * shn + rb * rb * snn, 0.0) / (sn * sn)
                    seb = math.sqrt(vb)
                    if seb > 1e-14:
                        troot[d, b] = (rb - r0) / seb
                    elif rb != r0:
                        troot[d, b] = np.inf if rb > r0 else -np.inf
                    else:
                        troot[d, b] = np.nan
                else:
                    troot[d, b] = np.nan
            else:
                theta[d, b] = np.nan
                troot[d, b] = np.nan
        theta[d] = np.sort(theta[d])
        troot[d] = np.sort(troot[d])
        # jackknife (leave one cluster out) for the BCa acceleration
        jk = np.empty(k)
        mean = 0.0
        cnt = 0
        for i in range(k):
            nn = N - n[d, i]
            jk[i] = (H - h[d, i]) / nn if nn > 0 else np.nan
            if nn > 0:
                mean += jk[i]
                cnt += 1
        mean /= max(cnt, 1)
        s2 = 0.0
        s3 = 0.0
        for i in range(k):
            if not np.isnan(jk[i]):
                u = mean - jk[i]
                s2 += u * u
                s3 += u * u * u
        accel[d] = s3 / (6.0 * s2 ** 1.5) if s2 > 0 else 0.0
    return theta, troot, accel


@nb.njit(parallel=True, cache=True)
def boot_diff(hA, nA, hB, nB, B, seed):
    """As boot_rate for rA − rB, clusters drawn once for both arms; the SE includes the covariance."""
    R, k = hA.shape
    theta = np.empty((R, B))
    troot = np.empty((R, B))
    accel = np.empty(R)
    for d in nb.prange(R):
        HA = 0.0
        NA = 0.0
        HB = 0.0
        NB = 0.0
        for i in range(k):
            HA += hA[d, i]
            NA += nA[d, i]
            HB += hB[d, i]
            NB += nB[d, i]
        d0 = HA / NA - HB / NB if NA > 0 and NB > 0 else np.nan
        state = _chunk_state(seed, d)
        for b in range(B):
            a0 = 0.0; a1 = 0.0; b0 = 0.0; b1 = 0.0
            aa = 0.0; am = 0.0; mm = 0.0
            bb = 0.0; bm = 0.0; nn = 0.0
            xab = 0.0; xanb = 0.0; naxb = 0.0; nanb = 0.0
            kb = 0
            for _ in range(k):
                state, i = _below(state, k)
                xa = hA[d, i]
                ma = nA[d, i]
                xb = hB[d, i]
                mb = nB[d, i]
                a0 += xa; a1 += ma; b0 += xb; b1 += mb
                aa += xa * xa; am += xa * ma; mm += ma * ma
                bb += xb * xb; bm += xb * mb; nn += mb * mb
                xab += xa * xb; xanb += xa * mb; naxb += ma * xb; nanb += ma * mb
                if ma + mb > 0:
                    kb += 1
            if a1 > 0 and b1 > 0:
                ra = a0 / a1
                rb = b0 / b1
                db = ra - rb
                theta[d, b] = db
                if kb > 1:
                    f = kb / (kb - 1.0)
                    va = f * max(aa - 2.0 * ra * am + ra * ra * mm, 0.0) / (a1 * a1)
                    vb = f * max(bb - 2.0 * rb * bm + rb * rb * nn, 0.0) / (b1 * b1)
                    cab = f * (xab - rb * xanb - ra * naxb + ra * rb * nanb) / (a1 * b1)
                    v = va + vb - 2.0 * cab
                    seb = math.sqrt(v) if v > 0 else 0.0
                    if seb > 1e-14:
                        troot[d, b] = (db - d0) / seb
                    elif db != d0:
                        troot[d, b] = np.inf if db > d0 else -np.inf
                    else:
                        troot[d, b] = np.nan
                else:
                    troot[d, b] = np.nan
            else:
                theta[d, b] = np.nan
                troot[d, b] = np.nan
        theta[d] = np.sort(theta[d])
        troot[d] = np.sort(troot[d])
        jk = np.empty(k)
        mean = 0.0
        cnt = 0
        for i in range(k):
            na = NA - nA[d, i]
            nb_ = NB - nB[d, i]
            if na > 0 and nb_ > 0:
                jk[i] = (HA - hA[d, i]) / na - (HB - hB[d, i]) / nb_
                mean += jk[i]
                cnt += 1
            else:
                jk[i] = np.nan
        mean /= max(cnt, 1)
        s2 = 0.0
        s3 = 0.0
        for i in range(k):
            if not np.isnan(jk[i]):
                u = mean - jk[i]
                s2 += u * u
                s3 += u * u * u
        accel[d] = s3 / (6.0 * s2 ** 1.5) if s2 > 0 else 0.0
    return theta, troot, accel


# ---------------------------------------------------------------- interval construction from the kernels' output

def _q(sorted_rows: np.ndarray, count: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Type-7 quantile q (per row) of the first ``count`` (finite-or-inf, NaN sorted last) entries of each row."""
    R = sorted_rows.shape[0]
    q = np.broadcast_to(np.asarray(q, dtype=np.float64), (R,))
    ok = (count > 0) & np.isfinite(q)
    pos = np.where(ok, np.clip(q, 0.0, 1.0) * (np.maximum(count, 1) - 1), 0.0)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, np.maximum(count, 1) - 1)
    frac = pos - lo
    rows = np.arange(R)
    a, b = sorted_rows[rows, lo], sorted_rows[rows, hi]
    with np.errstate(invalid="ignore"):
        val = np.where((frac > 0) & (a != b), a + frac * (b - a), a)
    return np.where(ok, val, np.nan)


def bootstrap_intervals(theta, troot, accel, est, se, lo_clip, hi_clip):
    alpha = 1.0 - LEVEL
    cnt_t = np.isfinite(theta).sum(axis=1) + np.isinf(theta).sum(axis=1)
    cnt_r = (~np.isnan(troot)).sum(axis=1)
    out = {"percentile": (_q(theta, cnt_t, alpha / 2), _q(theta, cnt_t, 1 - alpha / 2))}
    # BCa (Efron 1987): bias correction from the share of resamples below the estimate
    with np.errstate(invalid="ignore", divide="ignore"):
        below = (theta < est[:, None]).sum(axis=1) / np.maximum(cnt_t, 1)
        z0 = sp.ndtri(below)
        za = sp.ndtri(np.array([alpha / 2, 1 - alpha / 2]))
        qs = [sp.ndtr(z0 + (z0 + z) / (1 - accel * (z0 + z))) for z in za]
    qs = [np.where(np.isnan(q), np.where(below <= 0, 0.0, 1.0), q) for q in qs]
    out["bca"] = (_q(theta, cnt_t, qs[0]), _q(theta, cnt_t, qs[1]))
    with np.errstate(invalid="ignore"):
        tl, th = _q(troot, cnt_r, alpha / 2), _q(troot, cnt_r, 1 - alpha / 2)
        out["boot-t"] = (np.clip(est - th * se, lo_clip, hi_clip), np.clip(est - tl * se, lo_clip, hi_clip))
    return out


def rate_intervals(h, n, B, seed, n_boot=None):
    """Every method's intervals; the bootstrap ones for the first ``n_boot`` designs only (default: all)."""
    _, N, r, v, k = I.ratio_moments(h, n)
    out = {}
    if B:
        nb_ = h.shape[0] if n_boot is None else min(n_boot, h.shape[0])
        theta, troot, accel = boot_rate(h[:nb_], n[:nb_], B, seed)
        out.update(bootstrap_intervals(theta, troot, accel, r[:nb_], np.sqrt(v[:nb_]), 0.0, 1.0))
    lo, hi = I.t_interval(r, v, k, LEVEL)
    out["t"] = (np.clip(lo, 0, 1), np.clip(hi, 0, 1))
    out["kg"] = I.korn_graubard(r, v, N, k, LEVEL)
    out["kg-uncapped"] = I.korn_graubard(r, v, N, k, LEVEL, cap=False)
    out["jeffreys-eff"] = I.jeffreys_effective(r, v, N, k, LEVEL)
    out["wilson-eff"] = I.wilson_effective(r, v, N, k, LEVEL)
    out["kg-midp"] = I.korn_graubard_midp(r, v, N, k, LEVEL)
    out["kg-tilted"] = I.korn_graubard_tilted(r, v, N, k, LEVEL)
    out["kg-tilted-df"] = I.korn_graubard_tilted(r, v, N, k, LEVEL, df=I.design_df(n))
    # the default: the variance also carries the Bell–McCaffrey factor (gated)
    out["kg-tilted-bm"] = I.korn_graubard_tilted(r, v * I.design_variance_factor(n), N, k, LEVEL, df=I.design_df(n))
    return out


#: the arm interval of each MOVER difference method
MOVER_ARMS = (("mover-kg", I.korn_graubard), ("mover-jeffreys", I.jeffreys_effective),
              ("mover-wilson", I.wilson_effective), ("mover-kg-midp", I.korn_graubard_midp),
              ("mover-kg-tilted", I.korn_graubard_tilted))


def diff_intervals(hA, nA, hB, nB, B, seed, n_boot=None):
    _, NA, rA, vA, kA = I.ratio_moments(hA, nA)
    _, NB, rB, vB, kB = I.ratio_moments(hB, nB)
    cov = I.ratio_covariance(hA, nA, hB, nB)
    k = ((nA + nB) > 0).sum(axis=1).astype(np.float64)
    d = rA - rB
    var = vA + vB - 2 * cov
    se = np.sqrt(np.maximum(var, 0.0))
    out = {}
    if B:
        nb_ = hA.shape[0] if n_boot is None else min(n_boot, hA.shape[0])
        theta, troot, accel = boot_diff(hA[:nb_], nA[:nb_], hB[:nb_], nB[:nb_], B, seed)
        out.update(bootstrap_intervals(theta, troot, accel, d[:nb_], se[:nb_], -1.0, 1.0))
    lo, hi = I.t_interval(d, np.maximum(var, 0.0), k, LEVEL)
    out["t"] = (np.clip(lo, -1, 1), np.clip(hi, -1, 1))
    corr = I.correlation(vA, vB, cov)
    for name, fn in MOVER_ARMS:
        la, ua = fn(rA, vA, NA, kA, LEVEL)
        lb, ub = fn(rB, vB, NB, kB, LEVEL)
        out[name] = I.mover(rA, la, ua, rB, lb, ub, corr)
    la, ua = I.korn_graubard_tilted(rA, vA, NA, kA, LEVEL, df=I.design_df(nA))
    lb, ub = I.korn_graubard_tilted(rB, vB, NB, kB, LEVEL, df=I.design_df(nB))
    out["mover-kg-tilted-df"] = I.mover(rA, la, ua, rB, lb, ub, corr)
    # the default: the arms' variances also carry the Bell–McCaffrey factor
    cA, cB = I.design_variance_factor(nA), I.design_variance_factor(nB)
    la2, ua2 = I.korn_graubard_tilted(rA, vA * cA, NA, kA, LEVEL, df=I.design_df(nA))
    lb2, ub2 = I.korn_graubard_tilted(rB, vB * cB, NB, kB, LEVEL, df=I.design_df(nB))
    out["mover-kg-tilted-bm"] = I.mover(rA, la2, ua2, rB, lb2, ub2, corr)
    out["paired-t"] = I.paired_t(hA, nA, hB, nB, LEVEL, arms=(la, ua, lb, ub))[:2]
    out["paired-shaped"] = I.paired_shaped(hA, nA, hB, nB, (la, ua, lb, ub))[:2]
    return out


# ---------------------------------------------------------------- simulated designs

def beta_params(mu: float, icc: float) -> tuple[float, float]:
    s = (1.0 - icc) / icc
    return mu * s, (1.0 - mu) * s


_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(160)
_GH_W = _GH_W / _GH_W.sum()


def logit_location(mu: float, sigma: float) -> float:
    """m with E[expit(m + σZ)] = μ exactly (Gauss–Hermite quadrature, 160 nodes; bisection to 1e-14)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if float(np.sum(_GH_W * sp.expit(mid + sigma * _GH_X))) < mu:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def rates_from_normals(z: np.ndarray, mu: float, family: str, par: float) -> np.ndarray:
    """Prompt rates with mean μ from standard normals z (so the two arms can share a Gaussian copula)."""
    if family == "beta":
        return sp.betaincinv(*beta_params(mu, par), sp.ndtr(z))
    return sp.expit(logit_location(mu, par) + par * z)


def simulate(rng: np.random.Generator, R: int, k: int, mu: float, family: str, par: float, runs: int, sizes: str):
    z1 = rng.standard_normal((R, k))
    z2 = COPULA * z1 + math.sqrt(1 - COPULA ** 2) * rng.standard_normal((R, k))
    pA = rates_from_normals(z1, mu, family, par)
    pB = rates_from_normals(z2, B_FACTOR * mu, family, par)
    if sizes == "eq":
        nA = np.full((R, k), runs)
        nB = np.full((R, k), runs)
    else:
        nA = rng.binomial(runs, 1.0 - rng.uniform(0, DROP_MAX, (R, k)))
        nB = rng.binomial(runs, 1.0 - rng.uniform(0, DROP_MAX, (R, k)))
    hA = rng.binomial(nA, pA)
    hB = rng.binomial(nB, pB)
    f = np.float64
    return hA.astype(f), nA.astype(f), hB.astype(f), nB.astype(f)


def score(ints: dict, truth: float) -> dict:
    res = {}
    for name, (lo, hi) in ints.items():
        ok = np.isfinite(lo) & np.isfinite(hi)
        cover = ok & (lo <= truth + 1e-12) & (truth - 1e-12 <= hi)
        res[name] = (cover.mean(), float(np.mean((hi - lo)[ok])) if ok.any() else float("nan"), int((~ok).sum()))
    return res


def cells(het_levels):
    for k in PROMPTS:
        for mu in RATES:
            for het, family, par in het_levels:
                for runs in RUNS:
                    for sizes in SIZES:
                        yield k, mu, het, family, par, runs, sizes


def fmt_cell(k, mu, het, runs, sizes) -> str:
    return f"{k:>4} {100 * mu:>3.0f}% {het:>4} {runs:>3} {sizes:>4}"


def print_table(title: str, methods: tuple, rows: list, unit: str) -> None:
    print(f"\n== {title} ==")
    print("cell: prompts, mean rate (arm A), heterogeneity, runs, sizes;  each method: coverage % / mean width "
          f"({unit});  '*' = outside [94.0, 97.5]")
    head = f"{'k':>4} {'rate':>4} {'het':>4} {'run':>3} {'size':>4} |" + "".join(f"{m:>15}" for m in methods)
    print(head)
    print("-" * len(head))
    for label, res in rows:
        parts = []
        for m in methods:
            c, w, _ = res[m]
            flag = "*" if not 0.940 <= c <= 0.975 else " "
            parts.append(f"{100 * c:6.1f}{flag}/{100 * w:6.2f}")
        print(f"{label} |" + "".join(f"{p:>15}" for p in parts))
    print("\nsummary over cells (coverage min / max, cells in [94.0, 97.5], mean width in pp) by prompts:")
    for m in methods:
        line = f"  {m:<13}"
        for k in PROMPTS:
            cs = [res[m][0] for label, res in rows if int(label.split()[0]) == k]
            ws = [res[m][1] for label, res in rows if int(label.split()[0]) == k]
            if cs:
                ok = sum(0.940 <= c <= 0.975 for c in cs)
                line += f" | k={k:<3} {100 * min(cs):5.1f}-{100 * max(cs):5.1f} {ok:>2}/{len(cs)} w {100 * np.mean(ws):5.2f}"
        print(line)
    print("band (docs/statistics-coverage.md, 'The band, restated'): every cell >= 94.0 (hard); <= 97.5 where the "
          "design-effect-1 floor allows (a target: the design df may lift mildly unequal cells by up to ~1 pp):")
    for m in methods:
        cs = [res[m][0] for _, res in rows]
        print(f"  {m:<18} min {100 * min(cs):5.1f}  under 94.0: {sum(c < 0.940 for c in cs):>2}  in [94.0, 97.5]: "
              f"{sum(0.940 <= c <= 0.975 for c in cs):>2}  in (97.5, 98.5]: {sum(0.975 < c <= 0.985 for c in cs):>2}  "
              f"of {len(cs)}")


# ---------------------------------------------------------------- exact coverage floor (discreteness)

def prompt_pmf(mu: float, family: str, par: float, runs: int, sizes: str) -> np.ndarray:
    """Joint pmf of one prompt's (hits, trials) in the study's model: array [h, n] of (runs+1)².

    Prompt rates by 160-node Gauss–Hermite quadrature (logit-normal) or 400-node Gauss–Legendre
    (Beta); kept trials, for "uneq", by 200-node Gauss–Legendre over the dropped share U(0, 0.6).
    """
    nn = np.arange(runs + 1)
    if family == "beta":
        u, wu = np.polynomial.legendre.leggauss(400)
        p = sp.betaincinv(*beta_params(mu, par), 0.5 * (u + 1))
        w = wu / wu.sum()
    else:
        p, w = sp.expit(logit_location(mu, par) + par * _GH_X), _GH_W
    if sizes == "eq":
        pn = np.zeros(runs + 1)
        pn[runs] = 1.0
    else:
        s, ws = np.polynomial.legendre.leggauss(200)
        s, ws = 0.5 * DROP_MAX * (s + 1), ws / ws.sum()
        pn = (ws[:, None] * sp.binom(runs, nn)[None, :] * (1 - s[:, None]) ** nn * s[:, None] ** (runs - nn)).sum(0)
    out = np.zeros((runs + 1, runs + 1))
    for n in nn:
        hh = np.arange(n + 1)
        ph = (w[:, None] * sp.binom(n, hh)[None, :] * p[:, None] ** hh * (1 - p[:, None]) ** (n - hh)).sum(0)
        out[: n + 1, n] = pn[n] * ph
    return out


def total_pmf(one: np.ndarray, k: int) -> np.ndarray:
    """pmf of (Σhits, Σtrials) over k independent prompts: the k-fold 2-D convolution, by FFT."""
    size = k * (one.shape[0] - 1) + 1
    return np.clip(np.fft.irfft2(np.fft.rfft2(one, s=(size, size)) ** k, s=(size, size)), 0.0, None)


def exact_floor(k: int, mu: float, family: str, par: float, runs: int, sizes: str) -> dict:
    """Exact coverage of binomial intervals for Σhits of Σtrials *independent* trials in a study cell.

    Any cluster interval that contains the interval of independent trials (design effect at least 1, as
    the cap n_eff <= Σn makes Korn–Graubard's) covers μ at least as often: its coverage is at least this.
    """
    P = total_pmf(prompt_pmf(mu, family, par, runs, sizes), k)
    H, N = np.meshgrid(np.arange(P.shape[0]), np.arange(P.shape[1]), indexing="ij")
    ok = (H <= N) & (P > 0)
    h, n, pr = H[ok].astype(float), N[ok].astype(float), P[ok] / P[ok].sum()
    out = {"P(no hit)": float(pr[h == 0].sum())}
    for name, fn in (("mid-p", I.clopper_pearson_midp), ("exact CP", I.clopper_pearson)):
        lo, hi = fn(h, n, LEVEL)
        lo, hi = np.where(n > 0, lo, 0.0), np.where(n > 0, hi, 1.0)
        out[name] = float(pr[(lo <= mu) & (mu <= hi)].sum())
    # with the k − 1 df adjustment and design effect 1: mid-p at n* = Σn (z / t_{k−1})², the largest n* any
    # Korn–Graubard-type interval uses (it has n_eff <= Σn and at most k prompts with trials)
    m = n * (_norm_ppf_975() / float(I.t_quantiles(np.array([k - 1.0]), LEVEL)[0])) ** 2
    lo, hi = I.clopper_pearson_midp(h / np.where(n > 0, n, 1.0) * m, m, LEVEL)
    lo, hi = np.where(n > 0, lo, 0.0), np.where(n > 0, hi, 1.0)
    out["mid-p df"] = float(pr[(lo <= mu) & (mu <= hi)].sum())
    return out


def _norm_ppf_975() -> float:
    return float(sp.ndtri(0.5 + LEVEL / 2))


def print_floor() -> None:
    print("\n== exact coverage floor of the rate cells: binomial intervals at Σn independent trials ==")
    print("(exact: the cell's distribution of (Σhits, Σtrials) by quadrature and convolution, no simulation. A cluster")
    print(" interval containing the mid-p interval of Σn independent trials covers at least 'mid-p'; one containing")
    print(" the mid-p interval at n* = Σn (z/t_{k-1})², i.e. with the k - 1 df adjustment, at least 'mid-p df')")
    print(f"{'k':>4} {'rate':>4} {'het':>4} {'run':>3} {'size':>4} | {'P(0 hits)':>9} {'mid-p':>7} {'exact CP':>8} "
          f"{'mid-p df':>8}")
    for k, mu, het, family, par, runs, sizes in cells(HETEROGENEITY):
        if k > 30:
            continue
        f = exact_floor(k, mu, family, par, runs, sizes)
        flag = ("  > 97.5: unreachable" if f["mid-p"] > 0.975 else
                "  > 97.5: unreachable with the df adjustment" if f["mid-p df"] > 0.975 else "")
        print(f"{fmt_cell(k, mu, het, runs, sizes)} | {100 * f['P(no hit)']:9.2f} {100 * f['mid-p']:7.2f} "
              f"{100 * f['exact CP']:8.2f} {100 * f['mid-p df']:8.2f}{flag}")


# ---------------------------------------------------------------- candidate: random-effects posterior (--re-posterior)

#: grid of the random-effects candidate: m = location of logit p (step 0.02), σ = its spread (0 to 4)
_RE_M = np.arange(-14.0, 14.0 + 1e-9, 0.02)
_RE_S = np.linspace(0.0, 4.0, 17)
_RE_X, _RE_W = np.polynomial.hermite_e.hermegauss(24)
_RE_W = _RE_W / _RE_W.sum()
_RE_TABLES: dict = {}
#: prior scale of σ (half-normal) and credible level of the random-effects candidate
RE_TAU = 2.0
RE_LEVELS = (0.95, 0.97)


def re_tables(runs: int, tau: float = RE_TAU) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tables of the logit-normal random-effects model on the (σ, m) grid, for clusters of at most ``runs`` trials.

    L[n, h, s, j] = log ∫ p^h (1 − p)^(n − h) φ(x) dx at p = expit(m_j + σ_s x) (24-node Gauss–Hermite);
    μ[s, j] = E expit(m_j + σ_s Z), the marginal mean rate; prior[s, j] = log prior: m logistic(0, 1) (a uniform
    prior on the median prompt's rate), σ half-normal(τ), trapezoid weights in σ.
    """
    key = (runs, tau)
    if key not in _RE_TABLES:
        eta = _RE_M[None, None, :] + _RE_S[:, None, None] * _RE_X[None, :, None]
        lp, lq, lw = -np.logaddexp(0.0, -eta), -np.logaddexp(0.0, eta), np.log(_RE_W)[None, :, None]
        L = np.zeros((runs + 1, runs + 1, _RE_S.size, _RE_M.size))
        for n in range(1, runs + 1):
            for h in range(n + 1):
                L[n, h] = sp.logsumexp(h * lp + (n - h) * lq + lw, axis=1)
        mu = (_RE_W[None, :, None] * sp.expit(eta)).sum(axis=1)
        ws = np.full(_RE_S.size, _RE_S[1] - _RE_S[0])
        ws[[0, -1]] *= 0.5
        prior = (-0.5 * (_RE_S / tau) ** 2 + np.log(ws))[:, None] + (-np.logaddexp(0.0, -_RE_M)
                                                                      - np.logaddexp(0.0, _RE_M))[None, :]
        _RE_TABLES[key] = (L, mu, prior)
    return _RE_TABLES[key]


@nb.njit(parallel=True, cache=True)
def re_posterior_kernel(h, n, L, mu, prior, tail):
    """Equal-tailed credible interval of the marginal mean μ on the grid, per design (midpoint rule in m)."""
    R, k = h.shape
    S, M = mu.shape
    runs = L.shape[0] - 1
    lo = np.full(R, np.nan)
    hi = np.full(R, np.nan)
    for d in nb.prange(R):
        cnt = np.zeros((runs + 1, runs + 1))
        tot = 0.0
        for i in range(k):
            if n[d, i] > 0:
                cnt[int(n[d, i]), int(h[d, i])] += 1.0
                tot += n[d, i]
        if tot == 0:
            continue
        lp = prior.copy()
        for ni in range(1, runs + 1):
            for hh in range(ni + 1):
                if cnt[ni, hh] > 0:
                    lp += cnt[ni, hh] * L[ni, hh]
        mx = lp.max()
        C = np.empty((S, M))
        T = 0.0
        for s in range(S):
            acc = 0.0
            for j in range(M):
                e = math.exp(lp[s, j] - mx)
                C[s, j] = acc + 0.5 * e
                acc += e
            T += acc
        for side in range(2):
            target = (tail if side == 0 else 1.0 - tail) * T
            tl, th = -30.0, 30.0
            for _ in range(60):  # bisection on logit(μ) for the posterior CDF F(μ) = target
                tm = 0.5 * (tl + th)
                t = 1.0 / (1.0 + math.exp(-tm))
                F = 0.0
                for s in range(S):
                    if t < mu[s, 0]:
                        continue
                    if t >= mu[s, M - 1]:
                        F += C[s, M - 1]
                        continue
                    a, b = 0, M - 1
                    while b - a > 1:
                        c = (a + b) // 2
                        if mu[s, c] <= t:
                            a = c
                        else:
                            b = c
                    F += C[s, a] + (t - mu[s, a]) / (mu[s, b] - mu[s, a]) * (C[s, b] - C[s, a])
                if F < target:
                    tl = tm
                else:
                    th = tm
            val = 1.0 / (1.0 + math.exp(-0.5 * (tl + th)))
            if side == 0:
                lo[d] = val
            else:
                hi[d] = val
    return lo, hi


def re_posterior(h: np.ndarray, n: np.ndarray, runs: int, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Random-effects candidate: credible interval of μ in the logit-normal model (the grid's own model)."""
    L, mu, prior = re_tables(runs)
    return re_posterior_kernel(np.ascontiguousarray(h), np.ascontiguousarray(n), L, mu, prior, (1.0 - level) / 2)


def re_candidates(h: np.ndarray, n: np.ndarray, runs: int) -> dict:
    """The random-effects candidate's columns: re-post{95,97} and re-post97+u (united with the floor's interval).

    +u: the union with the mid-p interval at n* = Σn (z / t_{k−1})² — design effect 1 with the df adjustment,
    the interval of the rate floor table — so the discreteness floor is respected.
    """
    _, N, r, _v, k = I.ratio_moments(h, n)
    m = np.where(k > 1, N * (_norm_ppf_975() / I.t_quantiles(k - 1.0, LEVEL)) ** 2, 0.0)
    ml, mh = I.clopper_pearson_midp(r * m, m, LEVEL)
    out = {}
    for level in RE_LEVELS:
        out[f"re-post{round(100 * level)}"] = re_posterior(h, n, runs, level)
    lo, hi = out["re-post97"]
    out["re-post97+u"] = (np.fmin(lo, ml), np.fmax(hi, mh))
    return out


# ---------------------------------------------------------------- floor of the difference cells (design effect 1)

_GH2_X, _GH2_W = np.polynomial.hermite_e.hermegauss(60)
_GH2_W = _GH2_W / _GH2_W.sum()


def _arm_rates(mu: float, par: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p_A, p_B, weight) on a 60 × 60 Gauss–Hermite grid of the two arms' Gaussian copula (logit-normal)."""
    z1, z2 = np.meshgrid(_GH2_X, _GH2_X, indexing="ij")
    w = np.outer(_GH2_W, _GH2_W).ravel()
    za, zb = z1.ravel(), (COPULA * z1 + math.sqrt(1 - COPULA ** 2) * z2).ravel()
    pa = sp.expit(logit_location(mu, par) + par * za)
    pb = sp.expit(logit_location(B_FACTOR * mu, par) + par * zb)
    return pa, pb, w


def diff_design_effect(mu: float, par: float, runs: int, sizes: str) -> float:
    """Design effect of rA − rB: its (linearisation) variance over that of independent trials at the same sizes.

    Per prompt, with e = (h_A − μ_A n_A) / E n_A − (h_B − μ_B n_B) / E n_B and the kept trials independent of the
    rates: E e² = [E n_A E p_A(1 − p_A) + E n_A² Var p_A] / (E n_A)² + (same for B) − 2 Cov(p_A, p_B);
    independent trials (every prompt at the mean rate) give μ_A(1 − μ_A) / E n_A + μ_B(1 − μ_B) / E n_B.
    Below 1 only if the arms' prompt rates are nearly perfectly correlated (Var(p_A − p_B) < (Var p_A + Var p_B) / n).
    """
    pa, pb, w = _arm_rates(mu, par)
    mA, mB = float(w @ pa), float(w @ pb)
    if sizes == "eq":
        en, en2 = float(runs), float(runs) ** 2
    else:  # n ~ Binomial(runs, 1 − s), s ~ U(0, DROP_MAX): E n = runs (1 − E s), E n² = E[n] + runs(runs − 1) E(1 − s)²
        es, es2 = DROP_MAX / 2, DROP_MAX ** 2 / 3
        en = runs * (1 - es)
        en2 = en + runs * (runs - 1) * (1 - 2 * es + es2)
    vA, vB = float(w @ (pa - mA) ** 2), float(w @ (pb - mB) ** 2)
    cov = float(w @ ((pa - mA) * (pb - mB)))
    var = ((en * float(w @ (pa * (1 - pa))) + en2 * vA) + (en * float(w @ (pb * (1 - pb))) + en2 * vB)) / en ** 2 - 2 * cov
    return var / ((mA * (1 - mA) + mB * (1 - mB)) / en)


def _pair_pmf_eq(mu: float, par: float, runs: int) -> np.ndarray:
    """Joint pmf of one prompt's (h_A, h_B) with runs trials in each arm: array [(runs+1), (runs+1)]."""
    pa, pb, w = _arm_rates(mu, par)
    hh = np.arange(runs + 1)
    ba = sp.binom(runs, hh)[None, :] * pa[:, None] ** hh * (1 - pa[:, None]) ** (runs - hh)
    bb = sp.binom(runs, hh)[None, :] * pb[:, None] ** hh * (1 - pb[:, None]) ** (runs - hh)
    return (ba * w[:, None]).T @ bb


def _sum_outcomes(k: int, mu: float, par: float, runs: int, sizes: str, seed: int,
                  designs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distribution of (H_A, N_A, H_B, N_B) in a cell: exact for "eq", from ``designs`` simulated designs for "uneq".

    "eq": N_A = N_B = k · runs and (H_A, H_B) is the k-fold 2-D convolution of one prompt's joint pmf (FFT).
    "uneq": the per-prompt sizes make the joint law four-dimensional (10^9 points at 12 × 20); it is tallied
    from simulated designs instead (the intervals below depend on the data only through the four totals).
    """
    if sizes == "eq":
        P = total_pmf(_pair_pmf_eq(mu, par, runs), k)
        ha, hb = np.meshgrid(np.arange(P.shape[0]), np.arange(P.shape[1]), indexing="ij")
        keep = P > 1e-15
        n = np.full(int(keep.sum()), float(k * runs))
        return ha[keep].astype(float), n, hb[keep].astype(float), n, P[keep] / P[keep].sum()
    rng = np.random.default_rng([seed, k, runs, int(1000 * mu), int(10 * par)])
    tallies: list[np.ndarray] = []
    for start in range(0, designs, 50_000):
        hA, nA, hB, nB = simulate(rng, min(50_000, designs - start), k, mu, "logitnormal", par, runs, sizes)
        tallies.append(np.stack([hA.sum(1), nA.sum(1), hB.sum(1), nB.sum(1)], axis=1))
    u, cnt = np.unique(np.concatenate(tallies), axis=0, return_counts=True)
    return u[:, 0], u[:, 1], u[:, 2], u[:, 3], cnt / cnt.sum()


def _independent_arm(h: np.ndarray, n: np.ndarray, fn, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rate, lower, upper) of one arm as independent trials: ``fn`` at m effective trials (n = 0: (NaN, 0, 1))."""
    r = np.where(n > 0, h / np.where(n > 0, n, 1.0), np.nan)
    if fn is I.wilson:
        lo, hi = I.wilson(np.nan_to_num(r), m, LEVEL)
    else:
        lo, hi = fn(np.nan_to_num(r) * m, m, LEVEL)
    return r, np.where(n > 0, lo, 0.0), np.where(n > 0, hi, 1.0)


def exact_diff_floor(k: int, mu: float, par: float, runs: int, sizes: str, seed: int, designs: int) -> dict:
    """Coverage of MOVER intervals of A − B built as if each arm were independent trials (design effect 1).

    Design effect 1 means every prompt has the arm's mean rate, so the two arms' pooled rates are independent
    (their covariance comes only from prompts that differ): the MOVER with correlation 0 of the two arms'
    intervals of Σn_A and Σn_B independent trials. Columns: mid-p arms; Wilson arms (Newcombe's 1998 method 10,
    the standard interval for two independent proportions); mid-p arms at n* = Σn (z / t_{k−1})² (df-adjusted).
    A design whose difference is undefined (an arm with no trials) counts as a miss, as in the study.
    """
    hA, nA, hB, nB, pr = _sum_outcomes(k, mu, par, runs, sizes, seed, designs)
    truth = (1 - B_FACTOR) * mu
    c = (_norm_ppf_975() / float(I.t_quantiles(np.array([k - 1.0]), LEVEL)[0])) ** 2
    out = {"P(no hit A)": float(pr[hA == 0].sum()), "deff": diff_design_effect(mu, par, runs, sizes)}
    zero = np.zeros_like(hA)
    for name, fn, f in (("mid-p", I.clopper_pearson_midp, 1.0), ("Newcombe", I.wilson, 1.0),
                        ("mid-p df", I.clopper_pearson_midp, c)):
        rA, la, ua = _independent_arm(hA, nA, fn, nA * f)
        rB, lb, ub = _independent_arm(hB, nB, fn, nB * f)
        lo, hi = I.mover(rA, la, ua, rB, lb, ub, zero)
        cover = np.isfinite(lo) & np.isfinite(hi) & (lo <= truth + 1e-12) & (truth - 1e-12 <= hi)
        out[name] = float(pr[cover].sum())
    return out


def print_diff_floor(seed: int, designs: int) -> None:
    print("\n== coverage floor of the difference cells with >= 12 prompts: MOVER of independent-trial arms ==")
    print("(design effect 1: every prompt at its arm's mean rate, so the arms' pooled rates are independent and the")
    print(" MOVER uses correlation 0. 'eq' cells exact (2-D convolution of the prompt's joint hit pmf); 'uneq' cells")
    print(f" from {designs} simulated designs (SE <= {100 * math.sqrt(0.25 / designs):.2f} pp). 'deff' = the cell's "
          "true design effect of rA - rB. Shown: the sparse cells, rate 2% or 5 runs)")
    print(f"{'k':>4} {'rate':>4} {'het':>4} {'run':>3} {'size':>4} | {'P(A: 0)':>8} {'deff':>5} {'mid-p':>7} "
          f"{'Newcombe':>8} {'mid-p df':>8}")
    for k, mu, het, _family, par, runs, sizes in cells(HETEROGENEITY):
        if k < 12 or not (mu == 0.02 or runs == 5):
            continue
        f = exact_diff_floor(k, mu, par, runs, sizes, seed, designs)
        flag = ("  > 97.5: unreachable" if min(f["mid-p"], f["Newcombe"]) > 0.975 else
                "  > 97.5 (mid-p)" if f["mid-p"] > 0.975 else
                "  > 97.5 with the df adjustment" if f["mid-p df"] > 0.975 else "")
        print(f"{fmt_cell(k, mu, het, runs, sizes)} | {100 * f['P(no hit A)']:8.2f} {f['deff']:5.2f} "
              f"{100 * f['mid-p']:7.2f} {100 * f['Newcombe']:8.2f} {100 * f['mid-p df']:8.2f}{flag}")


# ---------------------------------------------------------------- unequal prompt sizes

#: prompts, Beta mean rates (ICC UNEQ_ICC) and size schemes of the unequal-size grid
UNEQ_PROMPTS = (8, 20, 50, 100)
UNEQ_RATES = (0.15, 0.50, 0.95, 0.99)
UNEQ_ICC = 0.2
UNEQ_SIZES = ("loguni", "few")
UNEQ_METHODS = ("kg-tilted", "kg-tilted-df", "kg-tilted-bm")
UNEQ_DIFF_METHODS = ("mover-kg-tilted", "mover-kg-tilted-df", "mover-kg-tilted-bm", "paired-t", "paired-shaped")


def unequal_sizes(rng: np.random.Generator, R: int, k: int, scheme: str) -> np.ndarray:
    """Trials per prompt (the same in both arms): log-uniform on 1–100, or a few prompts holding most trials.

    "few": max(1, k // 10) prompts get 200 trials each, the others 1–10 (uniform), so the big ones hold
    roughly 70–90% of all trials — imported traces clustered by conversation look like this.
    """
    if scheme == "loguni":
        return np.floor(np.exp(rng.uniform(0.0, math.log(101.0), (R, k)))).clip(1, 100)
    n = rng.integers(1, 11, (R, k)).astype(np.float64)
    n[:, : max(1, k // 10)] = 200.0
    return n


def run_unequal(args, RA: int) -> None:
    """Coverage / width of the k − 1 df default against the design df where prompt sizes differ greatly."""
    rate_rows, diff_rows = [], []
    for idx, (k, mu, scheme) in enumerate(
            (k, mu, s) for k in UNEQ_PROMPTS for mu in UNEQ_RATES for s in UNEQ_SIZES):
        rng = np.random.default_rng([args.seed, 5000 + idx])
        n = unequal_sizes(rng, RA, k, scheme)
        z1 = rng.standard_normal((RA, k))
        z2 = COPULA * z1 + math.sqrt(1 - COPULA ** 2) * rng.standard_normal((RA, k))
        pA = rates_from_normals(z1, mu, "beta", args.uneq_icc)
        pB = rates_from_normals(z2, B_FACTOR * mu, "beta", args.uneq_icc)
        hA, hB = rng.binomial(n.astype(np.int64), pA).astype(np.float64), rng.binomial(n.astype(np.int64), pB).astype(
            np.float64)
        label = f"{k:>4} {100 * mu:>3.0f}% {'b.2':>4} {'-':>3} {scheme[:4]:>4}"
        ints = rate_intervals(hA, n, 0, 0)
        rate_rows.append((label, score({m: ints[m] for m in UNEQ_METHODS}, mu)))
        dints = diff_intervals(hA, n, hB, n, 0, 0)
        diff_rows.append((label, score({m: dints[m] for m in UNEQ_DIFF_METHODS}, (1 - B_FACTOR) * mu)))
    global PROMPTS
    saved, PROMPTS = PROMPTS, UNEQ_PROMPTS
    try:
        print_table(f"UNEQUAL SIZES: pooled rate, Beta rates (ICC {args.uneq_icc}), sizes log-uniform 1–100 ('logu') or "
                    "a few prompts holding most trials ('few')", UNEQ_METHODS, rate_rows, "pp")
        print_table(f"UNEQUAL SIZES: paired A − B (B's mean {B_FACTOR} μ, copula {COPULA}), same sizes in both arms",
                    UNEQ_DIFF_METHODS, diff_rows, "pp")
    finally:
        PROMPTS = saved


# ---------------------------------------------------------------- high rates: coverage by prompts with a failure

MINORITY_PROMPTS = (50, 100)
MINORITY_RATES = (0.95, 0.99)
#: samples grouped by m, the prompts with at least one minority event (a failure at a high rate)
MINORITY_BUCKETS = (0, 1, 2, 3, 4)
#: the null A − B's intervals: the default (MOVER of the arms' intervals) and the shaped paired one
MINORITY_DIFF_METHODS = ("mover-kg-tilted-bm", "paired-shaped")


def run_minority(args, RA: int) -> None:
    """Where the default rate interval misses at high rates over many prompts: coverage by the number m of prompts
    with a minority event (log-uniform sizes, Beta rates at ``--uneq-icc``), beside the measured candidate "df ≤ m"
    (the design df capped at max(m, 1): the variance rests on about m residuals). Not shipped: see
    docs/statistics-coverage.md for what it costs where few prompts fire. Then the default A − B interval (MOVER)
    on the same designs with a second arm of the same mean rate, its prompt rates joined to the first's by a
    Gaussian copula of ``COPULA`` (a null difference between two close agents, the same prompts and sizes)."""
    print(f"\n== HIGH RATES by prompts with a failure (m), Beta rates ICC {args.uneq_icc}, sizes log-uniform 1–100, "
          f"{RA} designs a cell ==")
    heads = "".join(f"{'m=' + str(m) if m < MINORITY_BUCKETS[-1] else 'm≥' + str(m):>15}" for m in MINORITY_BUCKETS)
    print("each interval: coverage % / mean width (pp); then, for each m: % of the samples / the default's coverage %;"
          " then A − B against a second arm of the same mean")
    print(f"{'k':>4} {'rate':>5} | {'default':>13} {'df ≤ m':>13} |{heads} | A − B (null): "
          + " ".join(f"{m:>13}" for m in MINORITY_DIFF_METHODS))
    for idx, (k, mu) in enumerate((k, mu) for k in MINORITY_PROMPTS for mu in MINORITY_RATES):
        rng = np.random.default_rng([args.seed, 9000 + idx])
        n = unequal_sizes(rng, RA, k, "loguni")
        z = rng.standard_normal((RA, k))
        h = rng.binomial(n.astype(np.int64), rates_from_normals(z, mu, "beta", args.uneq_icc)).astype(np.float64)
        _, N, r, v, kk = I.ratio_moments(h, n)
        df, var = I.design_df(n), v * I.design_variance_factor(n)
        m = np.where(r[:, None] >= 0.5, (h < n) & (n > 0), h > 0).sum(axis=1)
        ints = {"default": I.korn_graubard_tilted(r, var, N, kk, LEVEL, df=df),
                "df ≤ m": I.korn_graubard_tilted(r, var, N, kk, LEVEL, df=np.minimum(df, np.maximum(m, 1.0)))}
        res = score(ints, mu)
        covered = (ints["default"][0] <= mu) & (mu <= ints["default"][1])
        cells = ""
        for b in MINORITY_BUCKETS:
            sel = (m == b) if b < MINORITY_BUCKETS[-1] else (m >= b)
            cov = f"{100 * covered[sel].mean():5.1f}" if sel.any() else "    -"
            cells += f"{100 * sel.mean():7.1f} /{cov}"
        # the second arm after the first's draws, so the rate columns are those of the rate-only table before
        zB = COPULA * z + math.sqrt(1 - COPULA ** 2) * rng.standard_normal((RA, k))
        hB = rng.binomial(n.astype(np.int64), rates_from_normals(zB, mu, "beta", args.uneq_icc)).astype(np.float64)
        dints = diff_intervals(h, n, hB, n, 0, 0)
        diff = score({m: dints[m] for m in MINORITY_DIFF_METHODS}, 0.0)
        print(f"{k:>4} {100 * mu:>4.0f}% | " + " ".join(f"{100 * res[x][0]:5.1f} / {100 * res[x][1]:5.2f}"
                                                   for x in ints) + f" |{cells} |"
              + " ".join(f"{100 * diff[m][0]:5.1f} / {100 * diff[m][1]:5.2f}" for m in MINORITY_DIFF_METHODS),
              flush=True)


# ---------------------------------------------------------------- null A − B near 0 and 1, agreeing arms

#: prompts, mean rate of both arms, copula of the arms' prompt rates, runs per prompt and arm
PAIRED_NULL_PROMPTS = (12, 30, 100)
PAIRED_NULL_RATES = (0.01, 0.03, 0.97, 0.99)
PAIRED_NULL_COPULAS = (0.8, 0.95)
PAIRED_NULL_RUNS = 10
PAIRED_NULL_METHODS = ("mover-kg-tilted-df", "paired-t", "paired-shaped")


def run_paired_null(args, RA: int) -> None:
    """Null differences near 0 and 1 with J-shaped Beta prompt rates (ICC 0.25) shared by the arms.

    Both arms have the same mean and the same prompts fire in both (Gaussian copula 0.8 or 0.95): the
    case where MOVER of the arms' skewed intervals is widest. Prints MOVER (the default) beside the
    two paired intervals (``stats.intervals.paired_t`` and ``paired_shaped``) and their widths over MOVER's.
    """
    print(f"\n== NULL A − B near 0 and 1, Beta prompt rates (ICC 0.25) shared by both arms, {PAIRED_NULL_RUNS} runs, "
          f"{RA} designs a cell ==")
    print(f"{'k':>4} {'rate':>5} {'cop':>5} |" + "".join(f"{m:>22}" for m in PAIRED_NULL_METHODS) + "  width ratio")
    for idx, (k, mu, cop) in enumerate((k, mu, c) for k in PAIRED_NULL_PROMPTS for mu in PAIRED_NULL_RATES
                                        for c in PAIRED_NULL_COPULAS):
        rng = np.random.default_rng([args.seed, 7000 + idx])
        z1 = rng.standard_normal((RA, k))
        z2 = cop * z1 + math.sqrt(1 - cop ** 2) * rng.standard_normal((RA, k))
        n = np.full((RA, k), float(PAIRED_NULL_RUNS))
        hA = rng.binomial(PAIRED_NULL_RUNS, rates_from_normals(z1, mu, "beta", 0.25)).astype(np.float64)
        hB = rng.binomial(PAIRED_NULL_RUNS, rates_from_normals(z2, mu, "beta", 0.25)).astype(np.float64)
        res = score({m: v for m, v in diff_intervals(hA, n, hB, n, 0, 0).items() if m in PAIRED_NULL_METHODS}, 0.0)
        cells_ = "".join(f"{100 * res[m][0]:13.1f} / {100 * res[m][1]:5.2f}" for m in PAIRED_NULL_METHODS)
        ratios = " ".join(f"{res[m][1] / res['mover-kg-tilted-df'][1]:.2f}" for m in PAIRED_NULL_METHODS[1:])
        print(f"{k:>4} {100 * mu:>4.0f}% {cop:>5} |{cells_}  {ratios}", flush=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="400 designs per cell, 299 resamples")
    ap.add_argument("--designs", type=int, default=None, help="designs per cell for the bootstrap methods "
                    "(default 2000; --quick 400)")
    ap.add_argument("--analytic-designs", type=int, default=None, help="designs per cell for the analytic methods "
                    "(default 10000; --quick 400; never fewer than --designs)")
    ap.add_argument("--floor", action="store_true", help="also print the exact coverage floor of the rate cells "
                    "with 6-30 prompts (interval of independent trials, by enumeration of the hit distribution)")
    ap.add_argument("--resamples", type=int, default=None, help="bootstrap resamples (default 999; --quick 299; "
                    "0 skips the bootstrap methods)")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--only", choices=("rate", "diff", "floor", "floor-diff", "unequal", "paired", "paired-null",
                                       "minority"),
                    default=None,
                    help="only the rate or the difference tables, or only the floor table of the rates (floor, "
                    "implies --floor) or of the differences (floor-diff)")
    ap.add_argument("--uneq-icc", type=float, default=UNEQ_ICC, help="ICC of the Beta prompt rates of the "
                    "unequal-size grid (default 0.2)")
    ap.add_argument("--no-stress", action="store_true", help="skip the J-shaped stress panel")
    ap.add_argument("--re-posterior", action="store_true", help="add the random-effects posterior candidate's "
                    "columns to the rate table (slow: about 0.5-1 ms per interval; use with --prompts 6,12)")
    ap.add_argument("--prompts", type=str, default=None, help="comma-separated subset of 6,12,30,100")
    args = ap.parse_args(argv[1:])
    if args.only == "paired":  # the paired model difference on correlated designs: its own module
        from paired_coverage import main as paired_main
        return paired_main(argv[1:])
    R = args.designs or (400 if args.quick else 2000)
    RA = max(args.analytic_designs or (400 if args.quick else 10_000), R)
    B = args.resamples if args.resamples is not None else (299 if args.quick else 999)
    global PROMPTS
    if args.prompts:
        PROMPTS = tuple(int(x) for x in args.prompts.split(","))
    print("command: PYTHONPATH=. python benchmarks/interval_coverage.py " + " ".join(argv[1:]))
    print(f"{RA} simulated designs per cell for the analytic methods (Monte Carlo SE of a 95% coverage "
          f"{100 * math.sqrt(0.95 * 0.05 / RA):.2f} pp), the first {R} of them for the bootstrap methods "
          f"({', '.join(BOOT_METHODS)}; SE {100 * math.sqrt(0.95 * 0.05 / R):.2f} pp), {B} bootstrap resamples, "
          f"seed {args.seed}, {nb.get_num_threads()} numba threads")
    t0 = time.perf_counter()
    panels = [("", HETEROGENEITY)] + ([] if args.no_stress else [(" — STRESS PANEL, J-shaped Beta rates "
                                                                   "(ICC 0.25), outside the acceptance grid", STRESS)])
    for p_i, (title, levels) in enumerate(panels):
        if args.only not in ("floor", "floor-diff", "unequal", "paired-null", "minority"):
            run_panel(args, R, RA, B, title, levels, 1000 * p_i)
    if args.only in (None, "unequal"):
        run_unequal(args, max(RA, 2000))
    if args.only in (None, "paired-null"):
        run_paired_null(args, max(RA, 2000))
    if args.only == "minority":
        run_minority(args, max(RA, 2000))
    if args.only != "floor-diff" and (args.floor or args.only == "floor"):
        print_floor()
    if args.only != "floor" and (args.floor or args.only == "floor-diff"):
        print_diff_floor(args.seed, FLOOR_DESIGNS)
    print(f"\nwall time {time.perf_counter() - t0:.1f}s (after imports; numba kernels cached)")
    return 0


def run_panel(args, R, RA, B, title, levels, offset):
    rate_rows, diff_rows = [], []
    rate_methods = RATE_METHODS if B else tuple(m for m in RATE_METHODS if m not in BOOT_METHODS)
    if args.re_posterior:
        rate_methods += RE_METHODS
    diff_methods = DIFF_METHODS if B else tuple(m for m in DIFF_METHODS if m not in BOOT_METHODS)
    for idx, (k, mu, het, family, par, runs, sizes) in enumerate(cells(levels), start=offset):
        rng = np.random.default_rng([args.seed, idx])
        hA, nA, hB, nB = simulate(rng, RA, k, mu, family, par, runs, sizes)
        label = fmt_cell(k, mu, het, runs, sizes)
        if args.only != "diff":
            ints = rate_intervals(hA, nA, B, args.seed + 2 * idx, R)
            if args.re_posterior:
                ints.update(re_candidates(hA, nA, runs))
            rate_rows.append((label, score(ints, mu)))
        if args.only != "rate":
            diff_rows.append((label, score(diff_intervals(hA, nA, hB, nB, B, args.seed + 2 * idx + 1, R),
                                            (1 - B_FACTOR) * mu)))
    if rate_rows:
        print_table("pooled rate of arm A (truth: mean prompt rate μ)" + title, rate_methods, rate_rows, "pp")
    if diff_rows:
        print_table(f"paired difference A − B (truth: {1 - B_FACTOR:.1f} μ; B's mean {B_FACTOR} μ, copula "
                    f"correlation {COPULA})" + title, diff_methods, diff_rows, "pp")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
