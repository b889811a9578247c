"""Each trial's ending counted once: rows per (model, status, error kind), and each model's first error.

Two readers need these counts at the end of every run, the manifest's rows by status and
the verdict (error rows by kind, the models that never worked), and a resume that finds
nothing to do needs nothing else. So they are one pass over four narrow columns, cached
on the ``Output``: with Arrow alone when the parts' records prove each trial is one row
(no query engine imported), by the lazy scan's streaming aggregation when a retry
superseded rows (each trial's newest row counts). Memory follows models and kinds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

__all__ = ["TALLY_COLUMNS", "Tally", "tally_parts", "tally_scan"]

TALLY_COLUMNS = ("model", "status", "error_kind", "error")
_OPTIONAL = ("error_kind", "error")  # parts written without them (a hand-made or imported part) count as no error


@dataclass
class Tally:
    """``rows``: how many trials end in each (model, status, error kind); ``first_error``: each model's first
    row's error ("" when none), models in the order of their first rows (parts oldest first)."""

    rows: dict[tuple[str, str, str | None], int] = field(default_factory=dict)
    first_error: dict[str, str] = field(default_factory=dict)

    def add(self, model: str, status: str, kind: str | None, n: int) -> None:
        self.rows[model, status, kind] = self.rows.get((model, status, kind), 0) + n

    def by_status(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for (_, status, _), n in self.rows.items():
            found[status] = found.get(status, 0) + n
        return found


def tally_parts(parts: Sequence[Path]) -> Tally:
    """The tally of parts whose rows are each one trial, a batch of the four columns at a time."""
    import numpy as np

    from runner.output.columns import column_batches, dictionary_codes

    tally = Tally()
    for batch in column_batches(parts, TALLY_COLUMNS, optional=_OPTIONAL):
        # model, status, error kind: each as small codes and their values
        codes, values = zip(*(dictionary_codes(column) for column in batch.columns[:3]), strict=True)
        sizes = [len(v) for v in values]
        code = (codes[0] * sizes[1] + codes[1]) * sizes[2] + codes[2]
        counts = np.bincount(code, minlength=sizes[0] * sizes[1] * sizes[2])
        for slot in np.flatnonzero(counts).tolist():
            rest, k = divmod(slot, sizes[2])
            m, s = divmod(rest, sizes[1])
            tally.add(str(values[0][m] or ""), str(values[1][s] or ""), values[2][k], int(counts[slot]))
        _, first = np.unique(codes[0], return_index=True)
        errors = batch.column(3)
        for index in sorted(first.tolist()):  # models new to the tally, in the order of their first rows
            model = str(values[0][codes[0][index]] or "")
            if model not in tally.first_error:
                tally.first_error[model] = str(errors[index].as_py() or "")
    return tally


def tally_scan(frame: pl.LazyFrame) -> Tally:
    """The tally of a lazy frame of each trial's newest row, aggregated as it streams."""
    import polars as pl

    names = frame.collect_schema().names()
    picked = frame.select(pl.col(c) if c in names else pl.lit(None, dtype=pl.String).alias(c) for c in TALLY_COLUMNS)
    rows = picked.group_by("model", "status", "error_kind").len().collect(engine="streaming")
    firsts = picked.group_by("model", maintain_order=True).agg(pl.first("error")).collect(engine="streaming")
    tally = Tally()
    for model, error in firsts.iter_rows():
        tally.first_error[str(model or "")] = str(error or "")
    for model, status, kind, n in rows.iter_rows():
        tally.add(str(model or ""), str(status or ""), None if kind is None else str(kind), int(n))
    return tally
