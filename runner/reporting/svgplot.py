"""Small SVG charts written as strings, for the self-contained HTML report.

Why hand-written SVG instead of a plotting library: the page must open offline, from
one file, years later. Inline SVG needs no JavaScript, no CDN, no fonts and no
dependency (matplotlib would add ~40 MB and still need base64 PNGs or its SVG
backend's verbose output; plotly/bokeh/vega embed megabytes of JavaScript). The
report's plots are simple — dots with intervals, a heat map, bars — so a few
functions draw them as vectors that stay crisp when zoomed or printed, and each
mark carries a ``<title>`` so hovering shows the exact numbers without any script.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from itertools import pairwise
from typing import TypeGuard

# Okabe–Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;font-size:11px"


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _finite(x: float | None) -> TypeGuard[float]:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _svg(width: float, height: float, body: list[str], label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="tg-plot" role="img" aria-label="{escape(label)}" '
            f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'style="{FONT}">' + "".join(body) + "</svg>")


def _text(x: float, y: float, s: str, anchor: str = "start", weight: str = "normal", fill: str = "#222") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-weight="{weight}" fill="{fill}" '
            f'dominant-baseline="middle">{escape(s)}</text>')


@dataclass(frozen=True)
class Point:
    """One estimate with its interval, drawn as a dot on a line."""

    series: int          # colour index
    value: float | None
    lo: float | None
    hi: float | None
    tip: str             # hover text


@dataclass(frozen=True)
class Row:
    label: str
    points: tuple[Point, ...]
    header: bool = False  # a group heading row (bold label, no marks)


def _axis(x0: float, x1: float, y0: float, y1: float, lo: float, hi: float, pct: bool, zero: bool) -> list[str]:
    out = []
    span = hi - lo
    step = _nice_step(span / 5)
    t = math.ceil(lo / step) * step
    while t <= hi + 1e-12:
        x = x0 + (t - lo) / span * (x1 - x0)
        out.append(f'<line x1="{x:.1f}" y1="{y0:.1f}" x2="{x:.1f}" y2="{y1:.1f}" stroke="#e4e4e4"/>')
        out.append(_text(x, y1 + 10, f"{100 * t:.0f}{'%' if pct else ''}" if pct else f"{100 * t:+.0f}",
                         "middle", fill="#666"))
        t += step
    if zero and lo < 0 < hi:
        x = x0 + (0 - lo) / span * (x1 - x0)
        out.append(f'<line x1="{x:.1f}" y1="{y0:.1f}" x2="{x:.1f}" y2="{y1:.1f}" stroke="#444" stroke-width="1.2"/>')
    return out


def _nice_step(raw: float) -> float:
    if raw <= 0:
        return 0.1
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def dot_interval_plot(rows: list[Row], *, lo: float = 0.0, hi: float = 1.0, pct: bool = True,
                      zero_line: bool = False, right_notes: list[str] | None = None, label: str = "",
                      width: int = 720, label_width: int = 220, note_width: int = 0) -> str:
    """Rows of dots with horizontal interval whiskers on a shared axis (rates, or differences with ``zero_line``)."""
    row_h, top, bottom = 20, 6, 22
    height = top + row_h * max(len(rows), 1) + bottom
    x0, x1 = label_width, width - 24 - note_width
    y0, y1 = top, top + row_h * len(rows)
    span = hi - lo
    body = _axis(x0, x1, y0, y1, lo, hi, pct, zero_line)

    def sx(v: float) -> float:
        return x0 + (min(max(v, lo), hi) - lo) / span * (x1 - x0)

    for i, row in enumerate(rows):
        y = top + row_h * i + row_h / 2
        body.append(_text(6 if row.header else 16, y, row.label, weight="bold" if row.header else "normal"))
        if row.header:
            continue
        n = len(row.points)
        for j, p in enumerate(row.points):
            dy = (j - (n - 1) / 2) * min(4.5, 13.0 / max(n, 1))
            c = color(p.series)
            tip = f"<title>{escape(p.tip)}</title>"
            if _finite(p.lo) and _finite(p.hi):
                body.append(f'<line x1="{sx(p.lo):.1f}" y1="{y + dy:.1f}" x2="{sx(p.hi):.1f}" y2="{y + dy:.1f}" '
                            f'stroke="{c}" stroke-width="2" stroke-linecap="round">{tip}</line>')
            if _finite(p.value):
                body.append(f'<circle cx="{sx(p.value):.1f}" cy="{y + dy:.1f}" r="3.6" fill="{c}" '
                            f'stroke="#fff" stroke-width="0.8">{tip}</circle>')
        if right_notes is not None and i < len(right_notes) and right_notes[i]:
            body.append(_text(width - note_width, y, right_notes[i], fill="#444"))
    return _svg(width, height, body, label)


def legend(names: list[str]) -> str:
    """A one-line HTML legend for series colours."""
    items = "".join(f'<span class="tg-key"><span class="tg-swatch" style="background:{color(i)}"></span>'
                    f'{escape(n)}</span>' for i, n in enumerate(names))
    return f'<div class="tg-legend">{items}</div>'


def heat_color(rate: float | None) -> str:
    """White (0) through orange to dark red (1); grey for no data."""
    if not _finite(rate):
        return "#eeeeee"
    r = min(max(float(rate), 0.0), 1.0)
    stops = ((0.0, (255, 255, 255)), (0.05, (254, 232, 200)), (0.3, (253, 187, 132)), (0.6, (227, 74, 51)),
             (1.0, (127, 0, 0)))
    for (a, ca), (b, cb) in pairwise(stops):
        if r <= b:
            t = (r - a) / (b - a)
            rgb = tuple(round(ca[k] + t * (cb[k] - ca[k])) for k in range(3))
            return "#" + "".join(f"{c:02x}" for c in rgb)
    return "#7f0000"


def heatmap(row_labels: list[str], col_groups: list[tuple[str, list[str]]],
            values: list[list[tuple[int, int] | None]], label: str = "") -> str:
    """Rows = prompts, columns grouped (model → conditions); each cell hits / n shaded by the rate."""
    cell_w, cell_h, label_w = 22, 14, 180
    ncols = sum(len(cols) for _, cols in col_groups)
    gap = 10
    head_h = 96
    foot_h = 90  # model names, slanted under their column groups
    width = label_w + ncols * cell_w + gap * max(len(col_groups) - 1, 0) + 110
    height = head_h + cell_h * len(row_labels) + foot_h
    body = []
    x = label_w
    col_x: list[float] = []
    for g, (group, cols) in enumerate(col_groups):
        gx = x
        for c in cols:
            col_x.append(x)
            cx = x + cell_w / 2
            body.append(f'<text x="{cx:.1f}" y="{head_h - 4}" transform="rotate(-60 {cx:.1f} {head_h - 4})" '
                        f'fill="#444">{escape(c)}</text>')
            x += cell_w
        body.append(f'<line x1="{gx:.1f}" y1="{head_h - 1}" x2="{x:.1f}" y2="{head_h - 1}" stroke="{color(g)}" '
                    f'stroke-width="3"><title>{escape(group)}</title></line>')
        fy = head_h + cell_h * len(row_labels) + 6
        body.append(f'<line x1="{gx:.1f}" y1="{fy - 3}" x2="{x:.1f}" y2="{fy - 3}" stroke="{color(g)}" '
                    f'stroke-width="3"/>')
        body.append(f'<text x="{gx + 4:.1f}" y="{fy + 8}" transform="rotate(30 {gx + 4:.1f} {fy + 8})" '
                    f'font-weight="bold" fill="{color(g)}">{escape(group)}</text>')
        x += gap
    for i, name in enumerate(row_labels):
        y = head_h + i * cell_h
        body.append(_text(label_w - 6, y + cell_h / 2, name if len(name) <= 28 else name[:27] + "…", "end"))
        for j, v in enumerate(values[i]):
            if v is None:
                fill, tip = "#f6f6f6", f"{name}: no trials"
            else:
                hits, n = v
                rate = hits / n if n else None
                fill = heat_color(rate)
                tip = f"{name}: {hits}/{n}" + (f" ({100 * rate:.0f}%)" if rate is not None else "")
            body.append(f'<rect x="{col_x[j]:.1f}" y="{y:.1f}" width="{cell_w - 1}" height="{cell_h - 1}" '
                        f'fill="{fill}" stroke="#ddd" stroke-width="0.5"><title>{escape(tip)}</title></rect>')
    return _svg(width, height, body, label)


def heat_legend() -> str:
    stops = "".join(f'<span class="tg-heat" style="background:{heat_color(r)}"></span>' for r in
                    (0, 0.02, 0.1, 0.25, 0.5, 0.75, 1.0))
    return f'<div class="tg-legend">0% {stops} 100% · grey: no trials · hover a cell for hits / trials</div>'


def funnel(groups: list[tuple[str, list[tuple[str, int, int]]]], label: str = "", width: int = 720) -> str:
    """Per group (model · condition): one bar per stage, the share of trials that reached it."""
    bar_h, label_w = 14, 220
    rows = sum(len(stages) + 1 for _, stages in groups)
    height = rows * (bar_h + 2) + 8
    x0, x1 = label_w, width - 90
    body = []
    y = 4.0
    for name, stages in groups:
        body.append(_text(6, y + bar_h / 2, name, weight="bold"))
        y += bar_h + 2
        for k, (stage, reached, total) in enumerate(stages):
            share = reached / total if total else 0.0
            w = share * (x1 - x0)
            tip = f"{name} · {stage}: {reached}/{total} ({100 * share:.1f}%)"
            body.append(_text(label_w - 6, y + bar_h / 2, stage, "end"))
            body.append(f'<rect x="{x0}" y="{y:.1f}" width="{x1 - x0}" height="{bar_h}" fill="#f1f1f1"/>')
            body.append(f'<rect x="{x0}" y="{y:.1f}" width="{w:.1f}" height="{bar_h}" fill="{color(k)}">'
                        f'<title>{escape(tip)}</title></rect>')
            body.append(_text(x1 + 6, y + bar_h / 2, f"{reached}/{total} · {100 * share:.0f}%", fill="#444"))
            y += bar_h + 2
    return _svg(width, height, body, label)
