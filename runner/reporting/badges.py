"""``trialgrid report OUT --badge DIR``: one SVG badge per model with its scorecard verdict.

Badges go into READMEs and model cards, so each is a small standalone SVG file in the
familiar flat two-part style, drawn here with no font files, no scripts and no
external service: text widths are estimated from a per-character table and pinned
with ``textLength``, so the badge lays out the same in any renderer whatever font it
falls back to. The verdict comes from ``runner.analysis.scorecard``; the ``<title>`` carries
the model, the retention and the reason, for screen readers and hover text.
"""

from __future__ import annotations

import hashlib
from html import escape
from pathlib import Path

import polars as pl

from runner.analysis.leaderboard import Summary
from runner.analysis.scorecard import KIND, scorecard_table
from runner.core.errors import UserError
from runner.core.safety import confined, safe_filename

COLORS = {"robust": "#2e7d32", "no effect": "#558b2f", "degraded": "#b58900", "brittle": "#d9631e",
          "collapse": "#c62828", "inconclusive": "#6e6e6e"}
_LABEL_COLOR = "#555"
FONT = "Verdana,Geneva,'DejaVu Sans',sans-serif"
_HEIGHT = 20
_PAD = 6

# approximate advance widths of Verdana at 11 px; anything else counts as a lowercase letter
_NARROW = dict.fromkeys("ijl.,:;!|'` ()[]", 3.8)
_MEDIUM = dict.fromkeys("frt-/", 4.9)
_WIDE = dict.fromkeys("mwMW%", 10.0)


def text_width(text: str) -> float:
    return sum(_NARROW.get(ch) or _MEDIUM.get(ch) or _WIDE.get(ch) or (7.6 if ch.isupper() or ch.isdigit() else 6.8)
               for ch in text)


def badge_svg(label: str, message: str, color: str, title: str) -> str:
    """A flat two-part badge: ``label`` on grey, ``message`` on ``color``."""
    lw, mw = round(text_width(label) + 2 * _PAD), round(text_width(message) + 2 * _PAD)
    width = lw + mw
    # a badge-specific clip id: several badges inlined in one HTML page must not share one
    clip = "tg-" + hashlib.sha256(f"{label}|{message}|{title}".encode()).hexdigest()[:10]
    text = (f'<g fill="#fff" text-anchor="middle" font-family="{FONT}" font-size="11">'
            f'<text x="{lw / 2:.1f}" y="14" textLength="{lw - 2 * _PAD}" lengthAdjust="spacingAndGlyphs">'
            f"{escape(label)}</text>"
            f'<text x="{lw + mw / 2:.1f}" y="14" textLength="{mw - 2 * _PAD}" lengthAdjust="spacingAndGlyphs">'
            f"{escape(message)}</text></g>")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{_HEIGHT}" '
            f'viewBox="0 0 {width} {_HEIGHT}" role="img" aria-label="{escape(label)}: {escape(message)}">'
            f"<title>{escape(title)}</title>"
            f'<clipPath id="{clip}"><rect width="{width}" height="{_HEIGHT}" rx="3"/></clipPath>'
            f'<g clip-path="url(#{clip})"><rect width="{lw}" height="{_HEIGHT}" fill="{_LABEL_COLOR}"/>'
            f'<rect x="{lw}" width="{mw}" height="{_HEIGHT}" fill="{color}"/></g>{text}</svg>\n')


def verdict_badge(model: str, verdict: str, retention: float | None, reason: str) -> str:
    message = verdict if retention is None else f"{verdict} · {retention:.0%} kept"
    return badge_svg("misselection", message, COLORS[verdict], f"{model}: misselection {verdict} — {reason}")


def write_badges(summary: Summary, directory: Path) -> list[Path]:
    """One ``<model>.svg`` per model (prefixed by run and probe when a model label repeats). Raises ``UserError``.

    File names come from labels through ``safe_filename``: a plain label is kept, any
    other is slugged and hashed, so ``team/model`` and ``team-model`` get two files.
    """
    card = scorecard_table(summary)
    if card.height == 0:
        raise UserError(f"no {KIND} probe in these runs: the scorecard, and so the badges, are defined for {KIND}",
                        hint="run a sweep with a misselection probe, or drop --badge")
    repeated = card.group_by("model").len().filter(pl.col("len") > 1)["model"].to_list()
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for r in card.iter_rows(named=True):
        stem = safe_filename(r["model"] if r["model"] not in repeated else f"{r['run']}-{r['probe']}-{r['model']}")
        path = confined(directory, f"{stem}.svg")
        path.write_text(verdict_badge(r["model"], r["verdict"], r["retention"], r["reason"]), encoding="utf-8")
        written.append(path)
    return written
