"""Brute-force references: enumerate every arrangement with exact fractions."""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction


def _stat(xa: int, ta: int, hsum: int, nsum: int) -> Fraction:
    return Fraction(xa, ta) - Fraction(hsum - xa, nsum - ta)


def trial_level(cells):
    """cells: list of (cluster, arm, hits, n). Returns (p, floor) as Fractions."""
    clusters: dict = {}
    for c, a, h, n in cells:
        d = clusters.setdefault(c, [0, 0, 0])  # trials, hits, arm-A trials
        d[0] += n
        d[1] += h
        d[2] += n * a
    per = []
    for trials, hits, n_a in clusters.values():
        outcomes = [1] * hits + [0] * (trials - hits)
        cnt = Counter(sum(outcomes[i] for i in combo) for combo in itertools.combinations(range(trials), n_a))
        per.append(cnt)
    nsum = sum(v[0] for v in clusters.values())
    hsum = sum(v[1] for v in clusters.values())
    ta = sum(v[2] for v in clusters.values())
    xa = sum(h for _, a, h, _ in cells if a == 1)
    obs = abs(_stat(xa, ta, hsum, nsum))
    dist: Counter = Counter({0: 1})
    for cnt in per:
        new: Counter = Counter()
        for x, w in dist.items():
            for y, v in cnt.items():
                new[x + y] += w * v
        dist = new
    total = sum(dist.values())
    stats = {x: abs(_stat(x, ta, hsum, nsum)) for x in dist}
    p = Fraction(sum(w for x, w in dist.items() if stats[x] >= obs), total)
    best = max(stats.values())
    floor = Fraction(sum(w for x, w in dist.items() if stats[x] == best), total)
    return p, floor


def cell_level(cells):
    """Whole cells permuted within clusters; empty cells dropped. Returns (p, floor)."""
    cells = [c for c in cells if c[3] > 0]
    clusters: dict = {}
    for c, a, h, n in cells:
        clusters.setdefault(c, []).append((a, h, n))
    per = []
    for cl in clusters.values():
        m_a = sum(a for a, _, _ in cl)
        per.append([
            (sum(cl[i][1] for i in combo), sum(cl[i][2] for i in combo))
            for combo in itertools.combinations(range(len(cl)), m_a)
        ])
    nsum = sum(c[3] for c in cells)
    hsum = sum(c[2] for c in cells)
    xa = sum(c[2] for c in cells if c[1] == 1)
    ta = sum(c[3] for c in cells if c[1] == 1)
    obs = abs(_stat(xa, ta, hsum, nsum))
    values = []
    for arrangement in itertools.product(*per):
        x = sum(v[0] for v in arrangement)
        t = sum(v[1] for v in arrangement)
        values.append(abs(_stat(x, t, hsum, nsum)))
    p = Fraction(sum(v >= obs for v in values), len(values))
    best = max(values)
    floor = Fraction(sum(v == best for v in values), len(values))
    return p, floor
