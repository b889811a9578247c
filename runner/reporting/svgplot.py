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
_PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;font-size:11px"


#: model groups in the heat map: greys, so they never read as the condition colours of the plots above
_GROUP_SHADES = ("#444444", "#8a8a8a")
#: average width of a character of ``FONT`` in pixels, generous: labels are sized from it so none leaves its plot
_CHAR_W = 6.8


def color(i: int) -> str:
    return _PALETTE[i % len(_PALETTE)]


def text_width(s: str, bold: bool = False) -> float:
    """Estimated pixel width of ``s`` in ``FONT`` (bold a little wider)."""
    return len(s) * _CHAR_W * (1.08 if bold else 1.0)


def _finite(x: float | None) -> TypeGuard[float]:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _svg(width: float, height: float, body: list[str], label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="tg-plot" role="img" aria-label="{escape(label)}" '
            f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'style="{FONT};max-width:100%;height:auto">' + "".join(body) + "</svg>")


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
    # wide enough for every label: a header row's text may run over the plot area but never past the right edge
    label_width = max(label_width, int(max((text_width(r.label) + 24 for r in rows if not r.header), default=0)))
    note_width = max(note_width, int(max((text_width(n) + 8 for n in right_notes or []), default=0)))
    width = max(width, label_width + note_width + 240,
                int(max((text_width(r.label, bold=True) + 12 for r in rows if r.header), default=0)))
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


def _heat_color(rate: float | None) -> str:
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
    """Rows = prompts, one block of columns per model (its conditions); each cell shaded by hits / n, its % written in it.

    The model's name is written horizontally above its block (blocks are as wide as their names), in grey:
    the palette colours mean conditions elsewhere on the page. Condition names are slanted above the columns.
    """
    cell_w, cell_h = 30, 16
    label_w = int(min(max((text_width(r) for r in row_labels), default=40) + 12, 260))
    max_chars = int((label_w - 12) / _CHAR_W)
    cond_len = max((text_width(c) for _, cols in col_groups for c in cols), default=0)
    head_h = int(cond_len * 0.87 + 30)  # slanted at −60°: height ≈ length · sin 60°, plus the model line
    gap = 14
    blocks = []
    x = float(label_w)
    for group, cols in col_groups:
        w = max(len(cols) * cell_w, text_width(group, bold=True) + 6)
        blocks.append((x, w))
        x += w + gap
    width = x - gap + cond_len * 0.5 + 12
    height = head_h + cell_h * len(row_labels) + 8
    body = []
    col_x: list[float] = []
    for g, ((group, cols), (bx, _bw)) in enumerate(zip(col_groups, blocks, strict=True)):
        shade = _GROUP_SHADES[g % len(_GROUP_SHADES)]
        body.append(_text(bx, 10, group, weight="bold", fill=shade))
        body.append(f'<line x1="{bx:.1f}" y1="{head_h - 2}" x2="{bx + len(cols) * cell_w:.1f}" y2="{head_h - 2}" '
                    f'stroke="{shade}" stroke-width="2"/>')
        for k, c in enumerate(cols):
            cx = bx + k * cell_w
            col_x.append(cx)
            tx = cx + cell_w / 2
            body.append(f'<text x="{tx:.1f}" y="{head_h - 6}" transform="rotate(-60 {tx:.1f} {head_h - 6})" '
                        f'fill="#444">{escape(c)}</text>')
    for i, name in enumerate(row_labels):
        y = head_h + i * cell_h
        shown = name if len(name) <= max_chars else name[:max_chars - 1] + "…"
        body.append(f'<text x="{label_w - 6}" y="{y + cell_h / 2:.1f}" text-anchor="end" fill="#222" '
                    f'dominant-baseline="middle">{escape(shown)}<title>{escape(name)}</title></text>')
        for j, v in enumerate(values[i]):
            if v is None:
                fill, tip, txt = "#f6f6f6", f"{name}: no trials", ""
            else:
                hits, n = v
                rate = hits / n if n else None
                fill = _heat_color(rate)
                tip = f"{name}: {hits}/{n}" + (f" ({100 * rate:.0f}%)" if rate is not None else "")
                txt = f"{100 * rate:.0f}" if rate is not None else "–"
            dark = v is not None and v[1] and v[0] / v[1] >= 0.45
            body.append(f'<rect x="{col_x[j]:.1f}" y="{y:.1f}" width="{cell_w - 1}" height="{cell_h - 1}" '
                        f'fill="{fill}" stroke="#ddd" stroke-width="0.5"><title>{escape(tip)}</title></rect>')
            if txt:
                body.append(f'<text x="{col_x[j] + (cell_w - 1) / 2:.1f}" y="{y + (cell_h - 1) / 2:.1f}" '
                            f'text-anchor="middle" dominant-baseline="middle" font-size="9" '
                            f'fill="{"#fff" if dark else "#333"}">{txt}<title>{escape(tip)}</title></text>')
    return _svg(width, height, body, label)


def heat_legend() -> str:
    stops = "".join(f'<span class="tg-heat" style="background:{_heat_color(r)}"></span>' for r in
                    (0, 0.02, 0.1, 0.25, 0.5, 0.75, 1.0))
    return (f'<div class="tg-legend">0% {stops} 100% · numbers: % of ok trials · light grey: no trials · hover a '
            "cell for hits / trials</div>")


def funnel(groups: list[tuple[str, list[tuple[str, int, int]]]], label: str = "", width: int = 720) -> str:
    """Per group (model · condition): one bar per stage, the share of trials that reached it."""
    bar_h = 14
    label_w = int(max([220.0] + [text_width(st) + 16 for _, stages in groups for st, _, _ in stages]))
    width = max(width, int(max([0.0] + [text_width(name, bold=True) + 12 for name, _ in groups])), label_w + 300)
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
