"""Per-cell sums of an output's trials taken window by window, so a report's peak memory does not follow the output.

polars reads an output's Arrow parts through a memory map, and every page a query touches stays mapped, counted in
the process's resident memory, until that query ends. One per-cell sum over the reply columns of a 1M-trial output
held 265 MiB of file pages (the anonymous memory it used was 30 MiB); at 10M trials it would hold ten times that.
Summed over windows of ``WINDOW_ROWS`` rows (each window its own query, the partial sums then added), the same
sums touch one window's pages at a time: the peak follows the window, not the output.

Windows are slices of the output's plain scan, so they are taken only when the parts' records prove that every
trial is one row (``Output.unique``); an output whose newest rows must first be chosen is summed in one query.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from runner.config.cost import ModelPrice
    from runner.output.reader import Output

#: rows per window: at the quickstart's columns, ~25 MiB of file pages per window of the replies view. A report of
#: 1M trials peaks at 353 MiB with windows of 100,000 rows (398–404 with 250,000), about what one of 100k trials
#: (one window) takes, in the same time; 50,000 saves 17 MiB more for 0.3 s.
WINDOW_ROWS = 100_000
#: the viewer's windows: each of its counts and filters is a query a person waits for, and the server holds more
#: than one window's pages anyway (at 1M trials its filter columns took 1.5 s with these, 1.9 s with the report's)
VIEWER_WINDOW_ROWS = 250_000


def windows_of(output: Output, frame: pl.LazyFrame | None = None, unique: bool | None = None,
               rows: int | None = None) -> list[pl.LazyFrame]:
    """``frame`` (default ``output.scan()``, unfiltered) as consecutive row windows when ``output``'s records prove
    each trial is one row (``unique``, if given: the caller has proved it of ``frame``, e.g. the viewer of a live
    run, whose open part has no record), else ``[frame]``; windows of ``rows`` rows (default ``WINDOW_ROWS``).
    Filter each window, never ``frame`` before slicing it."""
    frame = output.scan() if frame is None else frame
    if (output.unique if unique is None else unique) is not True:
        return [frame]
    rows = WINDOW_ROWS if rows is None else rows
    total = int(frame.select(pl.len()).collect().item())
    if total <= rows:
        return [frame]
    return [frame.slice(start, rows) for start in range(0, total, rows)]


def summed(windows: Sequence[pl.LazyFrame], query: Callable[[pl.LazyFrame], pl.LazyFrame],
           keys: Sequence[str]) -> pl.DataFrame:
    """``query`` (a group-by on ``keys`` whose other columns are sums or counts) over every window, the windows'
    rows added per key: the same table one query over the whole frame gives, up to row order."""
    parts = [query(w).collect(engine="streaming") for w in windows]
    if len(parts) == 1:
        return parts[0]
    stacked = pl.concat(parts)
    return stacked.group_by(list(keys), maintain_order=True).agg(pl.exclude(*keys).sum())


def usage(output: Output, prices: Mapping[str, ModelPrice], windows: Sequence[pl.LazyFrame],
          probe: str | None = None) -> pl.DataFrame:
    """``Output.usage`` per model (of one ``probe``'s trials, or all), summed window by window; a model's cost is
    null when no window priced it, as ``Output.usage`` leaves an unpriced model's."""
    parts = [output.usage(prices, frame=w if probe is None else w.filter(pl.col("probe") == probe)) for w in windows]
    if len(parts) == 1:
        return parts[0]
    counts = [c for c in parts[0].columns if c not in ("model", "cost_usd", "cost_per_trial_usd")]
    return (pl.concat(parts).group_by("model", maintain_order=True)
            .agg(*(pl.col(c).sum() for c in counts),
                 pl.when(pl.col("cost_usd").count() > 0).then(pl.col("cost_usd").sum()).alias("cost_usd"))
            .with_columns((pl.col("cost_usd") / pl.col("trials")).alias("cost_per_trial_usd"))
            .select(parts[0].columns).sort("model"))
