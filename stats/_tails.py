"""Tails of a sum of many independent small discrete variables, to a stated error bound.

Why this exists: the trial-level permutation null (and the cell-level one when
every arrangement gives arm A the same number of trials) is the distribution of
S = Σ_c J_c, a sum of independent per-cluster variables with small supports.
Convolving them one after another is exact but costs (running support) ×
(cluster support) per cluster — about 10^12 operations at 100,000 prompts —
and an FFT, which would be fast, only has absolute accuracy (~1e-16 of the
peak), which loses exactly the tiny tail probabilities a permutation p needs.

The method here keeps every arithmetic step a sum of non-negative terms (so each
entry carries a *relative* rounding error) and makes it cheap:

1. **Types.** Clusters with identical distributions (same trials, hits and arm
   sizes) are grouped; a type of multiplicity m is raised to its m-th
   convolution power by repeated squaring.
2. **Exponential tilting.** To get P(S ≥ s*) the variables are tilted,
   q_c(j) ∝ p_c(j)·e^{θj}, with θ ≥ 0 chosen so the tilted mean of S sits at
   s* (θ ≤ 0 for a lower tail). Then exactly
   P(S ≥ s*) = M(θ)·e^{−θs*} · Σ_{s ≥ s*} Q_θ(s)·e^{−θ(s − s*)},
   with M(θ) = Π_c E[e^{θJ_c}] and Q_θ the distribution of S under the tilt.
   The tail region is now the centre of Q_θ, where it is computed accurately
   whatever the size of p (down to the float range, ~1e-300).
3. **Pruning with an account.** After every convolution the outermost entries
   are dropped while their total mass stays below ``TRIM`` (1e-18); a balanced
   tree of convolutions (similar widths paired) keeps the cost near W² for a
   final width W of ±9 standard deviations.

Because computed entries never exceed the exact ones (only non-negative mass is
dropped), the dropped total D bounds the error of any event's probability under
the tilt; with the weights e^{−θ(s − s*)} ≤ 1 on the tail, the error of the
p-value is at most M(θ)e^{−θs*}·D plus the accumulated relative rounding error
(γ_n = n·u per convolution of length n, summed over the tree). Both are tracked
and returned as an absolute bound. The per-cluster input pmfs are taken as given
(the hypergeometric tables come from ``math.lgamma``, as for the exact method).
"""

from __future__ import annotations

import math
from typing import TypedDict

import numba as nb
import numpy as np
from numba.typed import List


class _JitOptions(TypedDict):
    cache: bool
    nogil: bool


_JIT: _JitOptions = {"cache": True, "nogil": True}

#: mass the pruning may drop after each convolution (per convolution, tilted scale)
TRIM = 1e-18
_U = 2.0**-53


@nb.njit(**_JIT)
def _conv_trim(a: np.ndarray, b: np.ndarray, tol: float) -> tuple[np.ndarray, int, float]:
    """Convolution of non-negative ``a`` and ``b``; drops outer entries of total mass <= ``tol``.

    Returns (kept entries, index of the first kept entry, dropped mass).
    """
    if a.size > b.size:
        a, b = b, a
    la = a.size
    lb = b.size
    c = np.zeros(la + lb - 1)
    for i in range(la):
        ai = a[i]
        if ai == 0.0:
            continue
        for j in range(lb):
            c[i + j] += ai * b[j]
    lo = 0
    hi = c.size
    acc = 0.0
    while hi - lo > 1:
        if c[lo] <= c[hi - 1]:
            if acc + c[lo] > tol:
                break
            acc += c[lo]
            lo += 1
        else:
            if acc + c[hi - 1] > tol:
                break
            acc += c[hi - 1]
            hi -= 1
    return c[lo:hi].copy(), lo, acc


@nb.njit(**_JIT)
def _power(q: np.ndarray, m: int, tol: float, rel0: float, def0: float = 0.0,
           off0: int = 0) -> tuple[np.ndarray, int, float, float]:
    """m-th convolution power of ``q`` by repeated squaring.

    ``q`` may itself be a trimmed table: ``def0`` is the mass already dropped from it and
    ``off0`` the index of its first kept entry. Returns (entries, offset, dropped-mass
    bound, relative rounding bound).
    """
    res = np.ones(1)
    roff = 0
    rdef = 0.0
    rrel = 0.0
    have = False
    base = q.copy()
    boff = off0
    bdef = def0
    brel = rel0
    while m > 0:
        if m & 1:
            if not have:
                res = base.copy()
                roff = boff
                rdef = bdef
                rrel = brel
                have = True
            else:
                n_add = min(res.size, base.size) + 1
                c, s, t = _conv_trim(res, base, tol)
                rrel = rrel + brel + n_add * _U
                rdef = rdef + bdef + t * 1.01
                roff = roff + boff + s
                res = c
        m >>= 1
        if m > 0:
            n_add = base.size + 1
            c, s, t = _conv_trim(base, base, tol)
            brel = 2.0 * brel + n_add * _U
            bdef = 2.0 * bdef + t * 1.01
            boff = 2 * boff + s
            base = c
    return res, roff, rdef, rrel


@nb.njit(**_JIT)
def _tilt_moments(offs: np.ndarray, logp: np.ndarray, mult: np.ndarray, theta: float) -> tuple[float, float]:
    """Σ m_t·E_θ[J_t] and Σ m_t·Var_θ[J_t] under the tilt e^{θj}."""
    mean = 0.0
    var = 0.0
    for t in range(offs.size - 1):
        s = offs[t]
        L = offs[t + 1] - s
        if L == 1:
            continue
        mx = -np.inf
        for j in range(L):
            v = logp[s + j] + theta * j
            if v > mx:
                mx = v
        w0 = 0.0
        w1 = 0.0
        w2 = 0.0
        for j in range(L):
            v = logp[s + j] + theta * j - mx
            if v < -60.0:  # below e^-60 of the largest term: no exp (huge tables are mostly this)
                continue
            e = math.exp(v)
            w0 += e
            w1 += e * j
            w2 += e * j * j
        mu = w1 / w0
        mean += mult[t] * mu
        var += mult[t] * max(w2 / w0 - mu * mu, 0.0)
    return mean, var


@nb.njit(**_JIT)
def tilted_sum(offs: np.ndarray, logp: np.ndarray, mult: np.ndarray, theta: float,
               tol: float) -> tuple[np.ndarray, int, float, float, float, float]:
    """Distribution of S = Σ_t Σ_{m_t copies} J_t under the tilt e^{θj}, pruned.

    ``offs``/``logp``: per-type log pmfs (normalised) over j = 0..L_t − 1 in CSR
    form; ``mult``: multiplicities. Returns (Q, offset, dropped-mass bound D,
    relative rounding bound, Σ m_t log M_t(θ), Σ m_t |log M_t(θ)|): Q[i] is the
    tilted probability of S = offset + i.
    """
    arrs = List()
    offsets = List()
    defs = List()
    rels = List()
    logm = 0.0
    logm_abs = 0.0
    for t in range(offs.size - 1):
        s = offs[t]
        L = offs[t + 1] - s
        if L == 1 or mult[t] == 0:
            continue
        mx = -np.inf
        for j in range(L):
            v = logp[s + j] + theta * j
            if v > mx:
                mx = v
        q = np.empty(L)
        tot = 0.0
        big = 0.0
        n_low = 0
        for j in range(L):
            v = logp[s + j] + theta * j - mx
            if v < -60.0:
                # below e^-60 of the largest entry: set to 0, its mass (< e^-60 each) goes to the
                # dropped-mass account below; saves the exp over most of a huge table
                q[j] = 0.0
                if v > -np.inf:
                    n_low += 1
                continue
            big = max(big, abs(v))
            q[j] = math.exp(v)
            tot += q[j]
        for j in range(L):
            q[j] /= tot
        lm = mx + math.log(tot)
        logm += mult[t] * lm
        logm_abs += mult[t] * (abs(lm) + 1.0)
        # exp of an argument of size |v| has relative error ~ |v|·u; normalising adds L·u.
        rel0 = (4.0 * big + L + 4.0) * _U
        # Trim the table itself to its non-negligible range before any convolution (the same
        # accounted pruning as after each convolution): a hypergeometric over 5e5 trials has
        # ~5e5 entries of which a few thousand carry all but 1e-18 of the tilted mass.
        a0 = 0
        b0 = L
        d0 = n_low * math.exp(-60.0) / tot
        while b0 - a0 > 1:
            if q[a0] <= q[b0 - 1]:
                if d0 + q[a0] > tol:
                    break
                d0 += q[a0]
                a0 += 1
            else:
                if d0 + q[b0 - 1] > tol:
                    break
                d0 += q[b0 - 1]
                b0 -= 1
        r, o, d, rl = _power(q[a0:b0].copy(), mult[t], tol, rel0, d0 * 1.01, a0)
        arrs.append(r)
        offsets.append(o)
        defs.append(d)
        rels.append(rl)
    if len(arrs) == 0:
        return np.ones(1), 0, 0.0, 0.0, logm, logm_abs
    while len(arrs) > 1:
        n = len(arrs)
        sizes = np.empty(n, np.int64)
        for i in range(n):
            sizes[i] = arrs[i].size
        order = np.argsort(sizes, kind="mergesort")
        na = List()
        no = List()
        nd = List()
        nr = List()
        for i in range(0, n - 1, 2):
            x = order[i]
            y = order[i + 1]
            n_add = min(arrs[x].size, arrs[y].size) + 1
            c, s, dropped = _conv_trim(arrs[x], arrs[y], tol)
            na.append(c)
            no.append(offsets[x] + offsets[y] + s)
            nd.append(defs[x] + defs[y] + dropped * 1.01)
            nr.append(rels[x] + rels[y] + n_add * _U)
        if n % 2 == 1:
            x = order[n - 1]
            na.append(arrs[x])
            no.append(offsets[x])
            nd.append(defs[x])
            nr.append(rels[x])
        arrs = na
        offsets = no
        defs = nd
        rels = nr
    return arrs[0], offsets[0], defs[0], rels[0], logm, logm_abs


def _solve_theta(offs: np.ndarray, logp: np.ndarray, mult: np.ndarray, target: float, sign: int) -> float:
    """θ with sign(θ) = sign and tilted mean ≈ target (precision only affects accuracy, not validity)."""
    f0, _ = _tilt_moments(offs, logp, mult, 0.0)
    if (target - f0) * sign <= 0:
        return 0.0
    a, b = 0.0, float(sign)
    for _ in range(60):
        fb, _ = _tilt_moments(offs, logp, mult, b)
        if (fb - target) * sign >= 0:
            break
        a, b = b, 2.0 * b
    theta = 0.5 * (a + b)
    lo, hi = min(a, b), max(a, b)
    for _ in range(100):
        f, v = _tilt_moments(offs, logp, mult, theta)
        g = f - target
        if abs(g) < 0.05:
            break
        if g > 0:
            hi = theta
        else:
            lo = theta
        step = theta - g / v if v > 0 else 0.5 * (lo + hi)
        theta = step if lo < step < hi else 0.5 * (lo + hi)
    return theta


class TailResult:
    """p-value of a tail event with its absolute error bound and log10 (which never underflows)."""

    __slots__ = ("error", "log10_p", "p")

    def __init__(self, p: float, error: float, log10_p: float) -> None:
        self.p, self.error, self.log10_p = p, error, log10_p


def _tail_sum(Q: np.ndarray, off: int, s_cut: float, theta: float, upper: bool) -> float:
    s = off + np.arange(Q.size, dtype=np.float64)
    mask = s >= s_cut if upper else s <= s_cut
    w = np.exp(-theta * (s[mask] - s_cut))
    return float(np.sum(Q[mask] * w))


def _combine(S: float, D: float, rel: float, logm: float, logm_abs: float, theta: float, s_cut: float,
             n_types: int) -> TailResult:
    """p = e^{logA}·S with its error bound, where logA = Σ m log M − θ s_cut."""
    log_a = logm - theta * s_cut
    # Rounding of log A itself: each of the summed logs and the product θ·s_cut.
    log_err = 4.0 * _U * (logm_abs + abs(theta * s_cut) + n_types + 1.0)
    if S <= 0.0:
        return TailResult(0.0, math.exp(min(log_a, 700.0)) * D, -math.inf)
    log10_p = (log_a + math.log(S)) / math.log(10.0)
    p = math.exp(log_a) * S if log_a > -745 else 0.0
    err = math.exp(log_a) * (1.01 * D + 1.01 * rel * S) + p * 2.0 * log_err if log_a > -745 else 0.0
    return TailResult(p, err, log10_p)


def two_sided_tail(offs: np.ndarray, logp: np.ndarray, mult: np.ndarray, base: int, big_n: int, big_k: int,
                   n_a: int, x_obs: int, tol: float = TRIM) -> TailResult:
    """P(|X·N − K·N_A| ≥ |x_obs·N − K·N_A|) for X = base + S, to a stated absolute bound.

    The event is X ≥ x_hi or X ≤ x_lo with integer cut points (exact integer
    arithmetic); each tail is computed under its own tilt. Returns the p-value,
    its absolute error bound and its log10 (finite even where p underflows).
    """
    offs = np.ascontiguousarray(offs, np.int64)
    logp = np.ascontiguousarray(logp, np.float64)
    mult = np.ascontiguousarray(mult, np.int64)
    d_obs = abs(int(x_obs) * int(big_n) - int(big_k) * int(n_a))
    if d_obs == 0:
        return TailResult(1.0, 0.0, 0.0)
    centre = int(big_k) * int(n_a)
    x_hi = -((-(centre + d_obs)) // int(big_n))   # smallest X with X·N − centre >= d_obs
    x_lo = (centre - d_obs) // int(big_n)          # largest X with centre − X·N >= d_obs
    widths = np.diff(offs) - 1
    s_max = int(np.sum(mult * widths))
    s_hi, s_lo = x_hi - int(base), x_lo - int(base)
    n_types = int(np.sum(widths > 0))
    th_hi = _solve_theta(offs, logp, mult, min(s_hi, s_max - 0.5), +1) if s_hi <= s_max else None
    th_lo = _solve_theta(offs, logp, mult, max(s_lo, 0.5), -1) if s_lo >= 0 else None
    parts = []
    if th_hi == 0.0 and th_lo == 0.0:  # both cut points near the centre: one untilted distribution
        Q, off, D, rel, logm, logm_abs = tilted_sum(offs, logp, mult, 0.0, tol)
        S = _tail_sum(Q, off, s_hi, 0.0, True) + _tail_sum(Q, off, s_lo, 0.0, False)
        return _combine(S, D, rel, logm, logm_abs, 0.0, 0.0, n_types)
    for theta, cut, upper in ((th_hi, s_hi, True), (th_lo, s_lo, False)):
        if theta is None:  # the cut point is outside the support: that tail is empty
            continue
        Q, off, D, rel, logm, logm_abs = tilted_sum(offs, logp, mult, theta, tol)
        parts.append(_combine(_tail_sum(Q, off, cut, theta, upper), D, rel, logm, logm_abs, theta, cut, n_types))
    if not parts:
        return TailResult(0.0, 0.0, -math.inf)
    p = sum(r.p for r in parts)
    err = sum(r.error for r in parts)
    log10_p = float(np.logaddexp.reduce([r.log10_p * math.log(10.0) for r in parts]) / math.log(10.0))
    return TailResult(min(p, 1.0), err, log10_p)
