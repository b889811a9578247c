"""Simulated power and interval width of a prompt-clustered design, before any trial is run.

Why this exists: whether a design can answer "does arm A differ from arm B" depends
on how many prompts it has far more than on how many runs each prompt gets, once
prompts differ from one another — and the only honest way to show that for the
exact test the report uses is to simulate it.

Generative model (per simulated study): each of ``n_prompts`` prompts has one cell
per condition c with rate ``expit(logit(rate_c) + sd · (√shared · u_k + √(1−shared) · e_kc))``,
u_k and e_kc standard normal (``shared`` is the share of the logit variance common
to a prompt's cells); each cell runs ``n_runs`` trials, hits ~ Binomial(n_runs, rate).
Conditions are labelled arm A (1), arm B (0), or left out (−1).

Test: the cell-level cluster permutation test of ``stats.cluster_permutation_test``
(whole cells permuted within each prompt, two-sided on pooled rate A − pooled rate
B). With equal cells the statistic is monotone in |X·C − H·a| (X arm-A hits, H all
hits, C cells per prompt, a of them in A), compared on integers. The p-value is
exact — a convolution over prompts of each prompt's C-choose-a equally likely
arm-A totals — when that costs at most ``EXACT_BUDGET`` operations per study, and
Monte Carlo with ``n_perm`` arrangements, p = (b + 1) / (R + 1), otherwise.

Interval width: the interval of A − B the report prints — by default
(``interval="korn-graubard-tilted"``) the MOVER combination of the arms' tilted
Korn–Graubard cluster intervals (``"korn-graubard"``: equal-tailed arms),
computed by ``stats.cluster_intervals`` from each simulated study's per-prompt arm totals; ``"t"`` the cluster t interval; ``"percentile"`` the
cluster bootstrap percentile interval (prompts resampled once for both arms,
numpy's linear interpolation), resampled inside the kernel. The expected width
is its mean over studies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numba as nb
import numpy as np
from numpy.typing import ArrayLike

from stats.cluster_intervals import DEFAULT_METHOD, METHODS, IntervalMethod, difference_results

EXACT_BUDGET = 2_000_000


@dataclass(frozen=True)
class PowerResult:
    """Simulated operating characteristics of one design (prompts × runs).

    Attributes
    ----------
    n_prompts, n_runs : int
        The design: prompts, and trials per prompt × condition cell.
    power : float
        Share of simulated studies with p ≤ alpha.
    power_se : float
        Its Monte Carlo standard error.
    mean_width : float
        Mean width of the interval of A − B.
    floor : float
        Smallest p the cell-level test can produce in this design.
    n_sims : int
        Simulated studies.
    exact : bool
        p-values by exact convolution (else Monte Carlo).
    interval_method : str
        The interval key (``ClusterIntervalResult.interval_method``) of ``mean_width``.
    """

    n_prompts: int
    n_runs: int
    power: float            # share of studies with p ≤ alpha
    power_se: float         # its Monte Carlo standard error
    mean_width: float       # mean width of the interval of A − B (``interval_method``)
    floor: float            # smallest p the cell-level test can produce in this design
    n_sims: int
    exact: bool             # p-values by exact convolution (else Monte Carlo)
    interval_method: str = DEFAULT_METHOD  # the interval key (``ClusterIntervalResult.interval_method``) of ``mean_width``


@nb.njit(cache=True)
def _arrangements(cond_arm: np.ndarray) -> np.ndarray:
    """Every way to label ``a`` of the C in-test cells as arm A: a (n_arr × C) 0/1 matrix."""
    c = cond_arm.size
    a = 0
    for i in range(c):
        a += cond_arm[i]
    rows = 0
    for mask in range(1 << c):
        bits = 0
        for i in range(c):
            bits += (mask >> i) & 1
        if bits == a:
            rows += 1
    out = np.zeros((rows, c), dtype=np.int64)
    r = 0
    for mask in range(1 << c):
        bits = 0
        for i in range(c):
            bits += (mask >> i) & 1
        if bits == a:
            for i in range(c):
                out[r, i] = (mask >> i) & 1
            r += 1
    return out


@nb.njit(cache=True)
def _simulate(logit_rates: np.ndarray, cond_arm: np.ndarray, design: tuple[int, int, int], sd: float,
              shared: float, n_perm: int, alpha: float, n_boot: int, confidence: float,
              seed: int, exact: bool) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    # design: (prompts per study, runs per cell, studies)
    n_prompts, n_runs, n_sims = design
    np.random.seed(seed)
    c = logit_rates.size
    a = 0
    for i in range(c):
        a += cond_arm[i]
    b = c - a
    arr = _arrangements(cond_arm)
    n_arr = arr.shape[0]
    sd_u = sd * math.sqrt(shared)
    sd_e = sd * math.sqrt(1.0 - shared)
    hits = np.zeros((n_prompts, c), dtype=np.int64)
    widths = np.empty(n_sims)
    rejections = 0
    support = a * n_runs * n_prompts + 1
    dist = np.zeros(support)
    nxt = np.zeros(support)
    xk = np.zeros(n_arr, dtype=np.int64)
    boot = np.empty(n_boot)
    hit_a = np.zeros(n_prompts)
    hit_b = np.zeros(n_prompts)
    all_a = np.zeros((n_sims, n_prompts))  # per study and prompt: arm totals, for analytic intervals
    all_b = np.zeros((n_sims, n_prompts))
    for s in range(n_sims):
        total_h = 0
        x_obs = 0
        for k in range(n_prompts):
            u = np.random.standard_normal()
            ha = 0
            hb = 0
            for j in range(c):
                z = logit_rates[j] + sd_u * u + sd_e * np.random.standard_normal()
                p = 1.0 / (1.0 + math.exp(-z))
                h = np.random.binomial(n_runs, p)
                hits[k, j] = h
                total_h += h
                if cond_arm[j] == 1:
                    ha += h
                else:
                    hb += h
            x_obs += ha
            hit_a[k] = ha
            hit_b[k] = hb
            all_a[s, k] = ha
            all_b[s, k] = hb
        target = abs(x_obs * c - total_h * a)
        if exact:
            for x in range(support):
                dist[x] = 0.0
            dist[0] = 1.0
            top = 0
            for k in range(n_prompts):
                for r in range(n_arr):
                    v = 0
                    for j in range(c):
                        v += arr[r, j] * hits[k, j]
                    xk[r] = v
                for x in range(top + a * n_runs + 1):
                    nxt[x] = 0.0
                for x in range(top + 1):
                    w = dist[x]
                    if w == 0.0:
                        continue
                    w /= n_arr
                    for r in range(n_arr):
                        nxt[x + xk[r]] += w
                top += a * n_runs
                for x in range(top + 1):
                    dist[x] = nxt[x]
            pval = 0.0
            for x in range(top + 1):
                if abs(x * c - total_h * a) >= target:
                    pval += dist[x]
            pval = min(pval * (1.0 + 1e-12), 1.0)  # guard rounding at ties
        else:
            count = 0
            for _ in range(n_perm):
                x = 0
                for k in range(n_prompts):
                    r = np.random.randint(0, n_arr)
                    for j in range(c):
                        x += arr[r, j] * hits[k, j]
                if abs(x * c - total_h * a) >= target:
                    count += 1
            pval = (count + 1.0) / (n_perm + 1.0)
        if pval <= alpha:
            rejections += 1
        if n_boot == 0:  # analytic interval: computed outside the kernel from all_a / all_b
            widths[s] = np.nan
            continue
        # cluster bootstrap of the difference of pooled rates (equal cells: denominators fixed by prompt count)
        den_a = float(n_prompts * a * n_runs)
        den_b = float(n_prompts * b * n_runs)
        for t in range(n_boot):
            sa = 0.0
            sb = 0.0
            for _ in range(n_prompts):
                k = np.random.randint(0, n_prompts)
                sa += hit_a[k]
                sb += hit_b[k]
            boot[t] = sa / den_a - sb / den_b
        boot.sort()
        lo_q = (1.0 - confidence) / 2.0 * (n_boot - 1)
        hi_q = (1.0 - (1.0 - confidence) / 2.0) * (n_boot - 1)
        lo_i = math.floor(lo_q)
        hi_i = math.floor(hi_q)
        lo = boot[lo_i] + (lo_q - lo_i) * (boot[min(lo_i + 1, n_boot - 1)] - boot[lo_i])
        hi = boot[hi_i] + (hi_q - hi_i) * (boot[min(hi_i + 1, n_boot - 1)] - boot[hi_i])
        widths[s] = hi - lo
    return rejections, widths, all_a, all_b


def _arms(rates: ArrayLike, arm: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    r = np.asarray(rates, dtype=np.float64)
    g = np.asarray(arm, dtype=np.int64)
    if r.ndim != 1 or r.shape != g.shape:
        raise ValueError("rates and arm must be 1-d arrays of the same length (one entry per condition)")
    if np.any((r <= 0) | (r >= 1)):
        raise ValueError("rates must lie strictly between 0 and 1 (a logit-normal model has no 0 or 1 rates)")
    if np.any((g != 0) & (g != 1) & (g != -1)):
        raise ValueError("arm entries must be 1 (A), 0 (B) or -1 (not in the test)")
    keep = g >= 0
    r, g = r[keep], g[keep]
    if g.sum() == 0 or g.sum() == g.size:
        raise ValueError("both arms need at least one condition")
    if g.size > 16:
        raise ValueError("at most 16 conditions in the test")
    return np.log(r / (1.0 - r)), g


def design_floor(arm: ArrayLike, n_prompts: int) -> float:
    """Smallest p the cell-level test can give in this design, whatever the data: 1 / C(C, a)^K.

    Parameters
    ----------
    arm : array_like of {1, 0, -1}, shape (conditions,)
        Arm of each condition: 1 = A, 0 = B, -1 = not in the test.
    n_prompts : int
        Prompts (clusters) K in the design.

    Returns
    -------
    floor : float
        The attainable floor of the two-sided cell-level permutation p
        (``cluster_permutation_test(level="cell")``), capped at 1.

    Notes
    -----
    With C conditions in the test, a of them in arm A, each prompt has
    C(C, a) equally likely arrangements; only the one that puts every
    prompt's highest cells in arm A (or, with a = b, also its mirror image)
    is as extreme as the most extreme outcome. No number of runs moves this
    floor: only prompts do.
    """
    g = np.asarray(arm)
    g = g[g >= 0]
    a, c = int(g.sum()), int(g.size)
    n_arr = math.comb(c, a)
    if n_arr <= 1:
        return 1.0
    return min(1.0, (2.0 if 2 * a == c else 1.0) * float(n_arr) ** (-n_prompts))


def simulate_power(rates: ArrayLike, arm: ArrayLike, *, n_prompts: int, n_runs: int, sd: float,
                   shared: float = 0.0, n_sims: int = 1000, alpha: float = 0.05, n_perm: int = 999,
                   n_boot: int = 400, confidence: float = 0.95, seed: int = 0,
                   method: Literal["auto", "exact", "mc"] = "auto",
                   interval: IntervalMethod = DEFAULT_METHOD) -> PowerResult:
    """Power of the cell-level cluster permutation test and mean cluster-interval width for one design.

    Parameters
    ----------
    rates : array_like of float, shape (conditions,)
        Mean rate of each condition, in (0, 1).
    arm : array_like of {1, 0, -1}, shape (conditions,)
        Arm of each condition: 1 = A, 0 = B, -1 = not in the test.
    n_prompts : int
        Prompts (clusters) per simulated study.
    n_runs : int
        Trials per prompt × condition cell.
    sd : float
        Logit-scale standard deviation of cell rates across prompts (≥ 0).
    shared : float, default 0.0
        Share of that variance common to all cells of a prompt, in [0, 1].
    n_sims : int, default 1000
        Simulated studies.
    alpha : float, default 0.05
        Level of the test.
    n_perm : int, default 999
        Monte Carlo arrangements per study when the p is not exact.
    n_boot : int, default 400
        Resamples per study of ``interval="percentile"`` (unused otherwise).
    confidence : float, default 0.95
        Confidence level of the interval.
    seed : int, default 0
        The simulation is deterministic given it.
    method : {"auto", "exact", "mc"}, default "auto"
        p-values by exact convolution, Monte Carlo, or exact when cheap
        (at most ``EXACT_BUDGET`` operations per study).
    interval : {"korn-graubard-tilted", "korn-graubard", "t", "percentile"}, default "korn-graubard-tilted"
        The ``cluster_rate_ci`` method whose A − B interval width is
        averaged (default: the report's).

    Returns
    -------
    res : PowerResult
        ``power`` and its Monte Carlo ``power_se``, ``mean_width`` of the
        interval of A − B (``interval_method`` says which), the design's
        ``floor``, ``n_sims`` and whether the p-values were ``exact``.

    Notes
    -----
    The generative model and the test are in the module docstring: prompt
    effects on the logit scale, binomial trials per cell, the cell-level
    permutation test of ``cluster_permutation_test``. Power is the share of
    studies with p ≤ ``alpha``.
    """
    if n_prompts < 1 or n_runs < 1 or n_sims < 1:
        raise ValueError("n_prompts, n_runs and n_sims must be positive")
    if sd < 0 or not 0.0 <= shared <= 1.0:
        raise ValueError("sd must be ≥ 0 and shared in [0, 1]")
    logits, g = _arms(rates, arm)
    n_arr = math.comb(int(g.size), int(g.sum()))
    cost = n_prompts * (int(g.sum()) * n_runs * n_prompts + 1) * n_arr
    if method not in ("auto", "exact", "mc"):
        raise ValueError("method must be 'auto', 'exact' or 'mc'")
    if interval not in METHODS:
        raise ValueError(f"interval must be one of {METHODS}, got {interval!r}")
    exact = method == "exact" or (method == "auto" and cost <= EXACT_BUDGET)
    boots = int(n_boot) if interval == "percentile" else 0
    rej, widths, hit_a, hit_b = _simulate(logits, g, (int(n_prompts), int(n_runs), int(n_sims)), float(sd),
                                          float(shared), int(n_perm), float(alpha), boots, float(confidence),
                                          int(seed) % (2**32), exact)
    key: str = interval
    if interval != "percentile":
        a, b = int(g.sum()), int(g.size - g.sum())
        res = difference_results(hit_a, np.full(hit_a.shape, float(a * n_runs)), hit_b,
                                 np.full(hit_b.shape, float(b * n_runs)), float(confidence), interval)
        widths = np.array([r.confidence_interval.high - r.confidence_interval.low for r in res])
        key = res[0].interval_method  # "mover-korn-graubard-tilted", … or "t": the key the report prints for A − B
    power = rej / n_sims
    return PowerResult(n_prompts=int(n_prompts), n_runs=int(n_runs), power=power,
                       power_se=math.sqrt(max(power * (1 - power), 1e-12) / n_sims),
                       mean_width=float(np.nanmean(widths)), floor=design_floor(g, n_prompts), n_sims=int(n_sims),
                       exact=exact, interval_method=key)
