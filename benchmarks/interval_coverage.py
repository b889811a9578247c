"""Coverage and width of cluster intervals for a pooled rate and a paired A − B difference.

Usage: PYTHONPATH=. python benchmarks/interval_coverage.py [--quick] [--designs N] [--analytic-designs N]
                                                          [--resamples B] [--seed S] [--only rate|diff] [--floor]

Simulation study behind the default interval method of ``stats.cluster_bootstrap_ci`` /
``stats.cluster_bootstrap_many`` (issue 15). Seeded: the same command prints the same table.

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
Σtrials) in the cell (quadrature over the prompt rates, FFT convolution over prompts).
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
from stats._kernels import _below, _chunk_state  # noqa: E402

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

RATE_METHODS = ("percentile", "bca", "boot-t", "t", "kg", "kg-uncapped", "jeffreys-eff", "wilson-eff", "kg-midp",
                "kg-tilted")
DIFF_METHODS = ("percentile", "bca", "boot-t", "t", "mover-kg", "mover-jeffreys", "mover-wilson", "mover-kg-midp",
                "mover-kg-tilted")
BOOT_METHODS = ("percentile", "bca", "boot-t")


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
    ap.add_argument("--only", choices=("rate", "diff", "floor"), default=None,
                    help="only the rate or the difference tables, or only the exact floor table (implies --floor)")
    ap.add_argument("--no-stress", action="store_true", help="skip the J-shaped stress panel")
    ap.add_argument("--prompts", type=str, default=None, help="comma-separated subset of 6,12,30,100")
    args = ap.parse_args(argv[1:])
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
        if args.only != "floor":
            run_panel(args, R, RA, B, title, levels, 1000 * p_i)
    if args.floor or args.only == "floor":
        print_floor()
    print(f"\nwall time {time.perf_counter() - t0:.1f}s (after imports; numba kernels cached)")
    return 0


def run_panel(args, R, RA, B, title, levels, offset):
    rate_rows, diff_rows = [], []
    rate_methods = RATE_METHODS if B else tuple(m for m in RATE_METHODS if m not in BOOT_METHODS)
    diff_methods = DIFF_METHODS if B else tuple(m for m in DIFF_METHODS if m not in BOOT_METHODS)
    for idx, (k, mu, het, family, par, runs, sizes) in enumerate(cells(levels), start=offset):
        rng = np.random.default_rng([args.seed, idx])
        hA, nA, hB, nB = simulate(rng, RA, k, mu, family, par, runs, sizes)
        label = fmt_cell(k, mu, het, runs, sizes)
        if args.only != "diff":
            rate_rows.append((label, score(rate_intervals(hA, nA, B, args.seed + 2 * idx, R), mu)))
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
