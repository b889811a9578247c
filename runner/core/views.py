"""A probe's own results as data: ``ProbeView`` tables every renderer draws the same way.

The generic report (rates by condition, contrasts, leaderboard) is the same for
every probe; what only one probe knows — a judge's kappas, propagation's hop rates,
phantom's field precision / recall — used to be printed straight to the console,
so it never reached the JSON, CSV or HTML outputs. Now a probe returns its views
(``Probe.views``) and the renderers in ``runner.reporting`` draw each one
generically, from the column metadata here: which columns are rates, differences,
p-values, scores or counts, and which pairs of columns are an interval.

A view's ``table`` holds raw numbers (proportions in [0, 1], NaN/null where a
number does not exist); formatting is the renderer's job. Imports nothing of
``runner``, so probes may build views without importing the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import polars as pl


class Format(StrEnum):
    """How a column's values read: the renderers map each to one formatter."""

    TEXT = "text"        # as is
    COUNT = "count"      # an integer, thousands separated
    RATE = "rate"        # a proportion shown as a percentage
    DIFF = "diff"        # a difference of proportions, in signed percentage points
    PVALUE = "pvalue"    # a p-value (a bound is shown as one)
    SCORE = "score"      # a statistic on its own scale: kappa, precision, F1


@dataclass(frozen=True)
class ViewColumn:
    """One displayed column: ``name`` in the table (None: an interval alone), its ``lo`` / ``hi`` interval columns."""

    name: str | None
    label: str
    format: Format = Format.TEXT
    lo: str | None = None
    hi: str | None = None

    @property
    def sources(self) -> tuple[str, ...]:
        """The table columns this display column reads."""
        return tuple(c for c in (self.name, self.lo, self.hi) if c is not None)


@dataclass(frozen=True)
class ProbeView:
    """One table of a probe's results for one run, with what a renderer needs to draw it.

    ``key`` is stable (a file name part, a JSON key, an HTML anchor); ``columns`` are
    what a human reads, in order — the table may hold more (e.g. counts behind a
    rate), and machine outputs (JSON, CSV) carry every column. ``notes`` are
    sentences that go with the view (a missing input, a file written beside it).
    A ``listing`` is one row per item rather than an aggregate (e.g. every audit
    where two scorers disagree): the terminal writes it to a JSONL file instead of
    printing it.
    """

    key: str
    title: str
    caption: str
    table: pl.DataFrame
    columns: tuple[ViewColumn, ...]
    notes: tuple[str, ...] = ()
    listing: bool = False

    def __post_init__(self) -> None:
        missing = [c for col in self.columns for c in col.sources if c not in self.table.columns]
        if missing and self.table.width:
            raise ValueError(f"view {self.key!r}: columns {missing} are not in its table")


#: the view whose rows are ``Summary.fields`` (field-level precision / recall, e.g. phantom's scorers)
FIELDS = "fields"
#: the view whose rows are ``Summary.stages`` (trials reaching each stage, e.g. propagation)
STAGES = "stages"

FIELD_SCHEMA = pl.Schema({"model": pl.String, "condition": pl.String, "scorer": pl.String, "trials": pl.Int64,
                "tp": pl.Int64, "fp": pl.Int64, "fn": pl.Int64, "precision": pl.Float64,
                "precision_lo": pl.Float64, "precision_hi": pl.Float64, "recall": pl.Float64,
                "recall_lo": pl.Float64, "recall_hi": pl.Float64, "f1": pl.Float64})
STAGE_SCHEMA = pl.Schema({"model": pl.String, "condition": pl.String, "stage": pl.String, "order": pl.Int64,
                "trials": pl.Int64, "reached": pl.Int64})


def view_of(views: tuple[ProbeView, ...] | list[ProbeView], key: str) -> ProbeView | None:
    """The view called ``key``, if the probe returned one."""
    return next((v for v in views if v.key == key), None)
