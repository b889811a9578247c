"""Numba kernels that draw random numbers: Monte Carlo counts of the permutation tests and of Spearman's p,
and the cluster bootstrap's resamples.

Kernels that draw random numbers use an inline splitmix64 generator seeded
from an explicit integer (reproducible for a given seed). It is ~2.5x faster
than numba's own generator in these loops, where drawing dominates the cost;
bounded integers use Lemire's multiply-shift with rejection, so they are
exactly uniform. Like ``stats._kernels`` (the exact ones), every kernel is
compiled with ``cache=True``.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import uint64

from stats._kernels import _JIT, as_extreme

_GOLDEN = uint64(0x9E3779B97F4A7C15)
_MIX1 = uint64(0xBF58476D1CE4E5B9)
_MIX2 = uint64(0x94D049BB133111EB)
_LOW32 = uint64(0xFFFFFFFF)
_TWO32 = uint64(1 << 32)


@nb.njit(inline="always", **_JIT)
def _next(state: np.uint64) -> tuple[np.uint64, np.uint64]:
    """splitmix64: returns (new state, 64 random bits)."""
    state = state + _GOLDEN
    z = state
    z = (z ^ (z >> uint64(30))) * _MIX1
    z = (z ^ (z >> uint64(27))) * _MIX2
    return state, z ^ (z >> uint64(31))


@nb.njit(inline="always", **_JIT)
def _below(state: np.uint64, k: int) -> tuple[np.uint64, np.int64]:
    """Uniform integer in [0, k) for 0 < k < 2**32 (Lemire, with rejection)."""
    kk = uint64(k)
    state, z = _next(state)
    m = (z >> uint64(32)) * kk
    low = m & _LOW32
    if low < kk:
        threshold = (_TWO32 - kk) % kk
        while low < threshold:
            state, z = _next(state)
            m = (z >> uint64(32)) * kk
            low = m & _LOW32
    return state, np.int64(m >> uint64(32))


@nb.njit(inline="always", **_JIT)
def _unit(state: np.uint64) -> tuple[np.uint64, float]:
    """Uniform float in [0, 1) with 53 random bits."""
    state, z = _next(state)
    return state, np.float64(z >> uint64(11)) * (1.0 / 9007199254740992.0)


@nb.njit(**_JIT)
def trial_mc_count(offs: np.ndarray, lo: np.ndarray, pmf: np.ndarray, n_draws: int, seed: int, total_n: int, total_k: int, n_a: int,
                   x_obs: int) -> int:
    """Monte Carlo count of arm-A hit totals at least as extreme as observed.

    Each draw samples every cluster's hypergeometric by inverse CDF.
    Extremeness is compared on the integer |X·N − K·N_A|.
    """
    state = uint64(seed)
    k = offs.size - 1
    cdf = np.empty(pmf.size, np.float64)
    base = 0
    for c in range(k):
        acc = 0.0
        for j in range(offs[c], offs[c + 1]):
            acc += pmf[j]
            cdf[j] = acc
        cdf[offs[c + 1] - 1] = 2.0  # guard against rounding at the top
        base += lo[c]
    target = abs(x_obs * total_n - total_k * n_a)
    count = 0
    for _ in range(n_draws):
        x = base
        for c in range(k):
            s = offs[c]
            e = offs[c + 1]
            if e - s == 1:
                continue
            state, u = _unit(state)
            j = s
            while cdf[j] < u:
                j += 1
            x += j - s
        if abs(x * total_n - total_k * n_a) >= target:
            count += 1
    return count


@nb.njit(**_JIT)
def cell_mc_count(arr_offs: np.ndarray, ax: np.ndarray, at: np.ndarray, n_draws: int, seed: int,
                  observed: tuple[int, int, int, int], use_int: bool, rtol: float) -> int:
    """Monte Carlo count of cell arrangements at least as extreme as ``observed`` (trials, hits, arm-A hits, arm-A
    trials)."""
    total_n, total_h, x_obs, t_obs = observed
    state = uint64(seed)
    k = arr_offs.size - 1
    num_o = x_obs * total_n - total_h * t_obs
    den_o = t_obs * (total_n - t_obs)
    x_base = 0
    t_base = 0
    live = np.empty(k, np.int64)
    nl = 0
    for c in range(k):
        if arr_offs[c + 1] - arr_offs[c] == 1:
            x_base += ax[arr_offs[c]]
            t_base += at[arr_offs[c]]
        else:
            live[nl] = c
            nl += 1
    count = 0
    for _ in range(n_draws):
        x = x_base
        t = t_base
        for q in range(nl):
            c = live[q]
            s = arr_offs[c]
            state, j = _below(state, arr_offs[c + 1] - s)
            j += s
            x += ax[j]
            t += at[j]
        if as_extreme(x, t, total_n, total_h, num_o, den_o, use_int, rtol):
            count += 1
    return count


@nb.njit(**_JIT)
def resample_cluster_sums(values: np.ndarray, n_draws: int, seed: int) -> np.ndarray:
    """Sums of ``values`` rows over clusters drawn with replacement.

    ``values`` is (clusters × d); each of ``n_draws`` resamples draws as many
    clusters as there are, with replacement, and sums their rows.
    """
    state = uint64(seed)
    k, d = values.shape
    out = np.zeros((n_draws, d), np.float64)
    for r in range(n_draws):
        for _ in range(k):
            state, i = _below(state, k)
            for j in range(d):
                out[r, j] += values[i, j]
    return out


@nb.njit(**_JIT)
def spearman_mc_count(rx: np.ndarray, ry: np.ndarray, target: int, n_draws: int, seed: int) -> int:
    """Monte Carlo version of :func:`spearman_exact_count` (random shuffles)."""
    state = uint64(seed)
    n = rx.size
    sx = 0
    sy = 0
    for i in range(n):
        sx += rx[i]
        sy += ry[i]
    perm = ry.copy()
    count = 0
    for _ in range(n_draws):
        for i in range(n - 1, 0, -1):
            state, j = _below(state, i + 1)
            tmp = perm[i]
            perm[i] = perm[j]
            perm[j] = tmp
        s = 0
        for i in range(n):
            s += rx[i] * perm[i]
        if abs(n * s - sx * sy) >= target:
            count += 1
    return count


_MC_CHUNKS = 64  # fixed, so a seeded result does not depend on the number of threads


@nb.njit(inline="always", **_JIT)
def _chunk_state(seed: int, chunk: int) -> np.uint64:
    """Independent-looking splitmix64 start for one chunk of draws (a hash of seed and chunk)."""
    state = uint64(seed) ^ (uint64(chunk + 1) * _MIX1)
    state, z = _next(state)
    state, z2 = _next(z ^ state)
    return z2


@nb.njit(parallel=True, **_JIT)
def cell_mc_hybrid(cdf: np.ndarray, x_f0: int, var_offs: np.ndarray, vax: np.ndarray, vat: np.ndarray, n_draws: int, seed: int,
                   base: tuple[int, int], observed: tuple[int, int, int, int], use_int: bool, rtol: float) -> int:
    """Monte Carlo count for the cell-level test, sampling only what must be sampled.

    Clusters whose arrangements all give arm A the same trials contribute only to
    X; the exact distribution of their sum is passed as a CDF (``cdf[i]`` =
    P(X_f <= x_f0 + i)) and drawn by one inverse-CDF lookup per draw. Clusters
    whose arm-A trials vary (``var_offs``/``vax``/``vat``, CSR of their
    arrangements) are drawn uniformly one by one. ``x_base``/``t_base`` hold the
    constant part (``base``); ``observed`` is (trials, hits, arm-A hits, arm-A
    trials). Draws are split into ``_MC_CHUNKS`` fixed chunks with their own
    streams and run in parallel.
    """
    x_base, t_base = base
    total_n, total_h, x_obs, t_obs = observed
    num_o = x_obs * total_n - total_h * t_obs
    den_o = t_obs * (total_n - t_obs)
    kv = var_offs.size - 1
    counts = np.zeros(_MC_CHUNKS, np.int64)
    for ch in nb.prange(_MC_CHUNKS):
        draws = n_draws // _MC_CHUNKS + (1 if ch < n_draws % _MC_CHUNKS else 0)
        state = _chunk_state(seed, ch)
        cnt = 0
        for _ in range(draws):
            x = x_base + x_f0
            t = t_base
            if cdf.size > 1:
                state, u = _unit(state)
                lo = 0
                hi = cdf.size - 1
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if cdf[mid] > u:
                        hi = mid
                    else:
                        lo = mid + 1
                x += lo
            for q in range(kv):
                s = var_offs[q]
                state, j = _below(state, var_offs[q + 1] - s)
                x += vax[s + j]
                t += vat[s + j]
            if as_extreme(x, t, total_n, total_h, num_o, den_o, use_int, rtol):
                cnt += 1
        counts[ch] = cnt
    return int(counts.sum())


@nb.njit(parallel=True, **_JIT)
def bootstrap_counts(k: int, first_draw: int, out: np.ndarray, seed: int) -> None:
    """Fill ``out[r]`` with how often each of ``k`` clusters is drawn in resample ``first_draw + r``.

    Each resample draws k clusters with replacement from its own stream (a hash
    of seed and resample index), so results depend on neither chunking nor
    threads. Each 64-bit output gives two 32-bit Lemire draws (with rejection,
    so exactly uniform); ``k`` must be below 2**32.
    """
    kk = uint64(k)
    thr = (_TWO32 - kk) % kk
    for rr in nb.prange(out.shape[0]):
        state = _chunk_state(seed, first_draw + rr)
        n = 0
        while n < k:
            state, z = _next(state)
            m = (z & _LOW32) * kk
            if (m & _LOW32) >= thr:
                out[rr, np.int64(m >> uint64(32))] += 1
                n += 1
            if n < k:
                m = (z >> uint64(32)) * kk
                if (m & _LOW32) >= thr:
                    out[rr, np.int64(m >> uint64(32))] += 1
                    n += 1


def _bootstrap_sums_direct(values: np.ndarray, n_draws: int, seed: int) -> np.ndarray:
    """The resamples of :func:`bootstrap_counts`, summing ``values`` rows as clusters are drawn.

    The reference (and benchmark alternative) for the count-matrix × values
    product used by ``stats.bootstrap``: same streams, d additions per draw.
    """
    k, d = values.shape
    kk = np.uint64(k)
    thr = (_TWO32 - kk) % kk
    out = np.zeros((n_draws, d), np.float64)
    for r in nb.prange(n_draws):
        state = _chunk_state(seed, r)
        n = 0
        while n < k:
            state, z = _next(state)
            m = (z & _LOW32) * kk
            if (m & _LOW32) >= thr:
                i = np.int64(m >> uint64(32))
                for j in range(d):
                    out[r, j] += values[i, j]
                n += 1
            if n < k:
                m = (z >> uint64(32)) * kk
                if (m & _LOW32) >= thr:
                    i = np.int64(m >> uint64(32))
                    for j in range(d):
                        out[r, j] += values[i, j]
                    n += 1
    return out


bootstrap_sums_direct = nb.njit(parallel=True, **_JIT)(_bootstrap_sums_direct)
#: the same kernel without threads, for small problems where waking a thread pool costs more than the work
bootstrap_sums_direct_serial = nb.njit(**_JIT)(_bootstrap_sums_direct)
