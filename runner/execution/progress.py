"""The progress display of a run: done / total, rate, ETA, errors and (with a cache) cache hits.

Shown with rich on a terminal; silent when stderr is not a TTY or with ``--quiet``,
so logs of an overnight sweep are not flooded with redraws.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichProgress
from rich.text import Text


class _Rate(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f} trials/s" if speed else "— trials/s", style="cyan")


class _Errors(ProgressColumn):
    def render(self, task: Task) -> Text:
        n = task.fields.get("errors", 0)
        return Text(f"{n:,} errors", style="red" if n else "dim")


class _CacheHits(ProgressColumn):
    def render(self, task: Task) -> Text:
        n = task.fields.get("cache_hits")
        return Text("" if n is None else f"{n:,} cached", style="green" if n else "dim")


class _Detail(ProgressColumn):
    def render(self, task: Task) -> Text:
        return Text(task.fields.get("detail") or "", style="dim")


class RunProgress:
    """Context manager implementing the engine's ``Progress`` protocol."""

    def __init__(self, total: int, *, already_done: int = 0, quiet: bool = False, console: Console | None = None,
                 cache_hits: Callable[[], int] | None = None, detail: Callable[[], str] | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.enabled = not quiet and self.console.is_terminal and sys.stderr.isatty()
        self._errors = 0
        self._bar: RichProgress | None = None
        self._task: Any = None
        self._total = total
        self._done = already_done
        self._cache_hits = cache_hits  # read at each advance: the cache counts, the engine does not know it
        self._detail = detail  # a backend's own summary (cluster mode: per-worker rates, spend), read at each advance

    def __enter__(self) -> RunProgress:
        if self.enabled:
            self._bar = RichProgress(
                TextColumn("[bold]trials"), BarColumn(), MofNCompleteColumn(), _Rate(), TimeElapsedColumn(),
                TextColumn("ETA"), TimeRemainingColumn(), _Errors(), _CacheHits(), _Detail(), console=self.console,
                transient=False,
                refresh_per_second=4,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task("run", total=self._total, completed=self._done, errors=0,
                                            cache_hits=0 if self._cache_hits else None)
        return self

    def advance(self, done: int, errors: int) -> None:
        self._errors += errors
        if self._bar is not None:
            hits = self._cache_hits() if self._cache_hits else None
            detail = self._detail() if self._detail else None
            self._bar.update(self._task, advance=done, errors=self._errors, cache_hits=hits, detail=detail)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
